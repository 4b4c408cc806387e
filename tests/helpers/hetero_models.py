"""Models for the tests of a compilation over several devices (client/core/hetero.py)."""

from __future__ import annotations

import numpy as np

from nnrt.client import Model


def mlp(rng: np.random.Generator) -> tuple[Model, np.ndarray, np.ndarray]:
    """A model every device runs whole (fc+relu → fc → softmax, dynamic batch), an input of
    batch 4 and its result computed with numpy."""
    w1 = rng.standard_normal((32, 16)).astype(np.float32)
    w2 = rng.standard_normal((10, 32)).astype(np.float32)
    m = Model()
    x = m.input([None, 16])
    m.outputs(m.softmax(m.fully_connected(m.fully_connected(x, w1, activation="relu"), w2)))
    xs = rng.standard_normal((4, 16)).astype(np.float32)
    h = np.maximum(xs @ w1.T, 0) @ w2.T
    e = np.exp(h - h.max(axis=1, keepdims=True))
    return m, xs, e / e.sum(axis=1, keepdims=True)
