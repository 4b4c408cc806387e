"""Models built with the Pythonic API (nnrt.client.Model)."""

from __future__ import annotations

from nnrt.client import Model


def mlp_model(w1, b1, w2):
    """x -> fully connected + ReLU -> fully connected -> softmax (the recovery tests' too)."""
    m = Model()
    x = m.input([None, w1.shape[1]], name="x")
    h = m.fully_connected(x, w1, b1, activation="relu")
    m.outputs(m.softmax(m.fully_connected(h, w2)))
    return m
