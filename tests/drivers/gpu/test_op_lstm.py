"""GPU LSTM against the CPU reference on the same inputs: odd sizes (seq 5, batch 3, input 7,
hidden 11), forward and bidirectional, one and two layers, bias on/off, zero / random /
constant initial states, zoneout, hidden sizes over one tile, an empty sequence; refusals."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from nnrt.drivers.gpu.kernel import create_op
from nnrt.protos import node_attrs_pb2 as na
from tests.drivers.gpu.util import assert_close, node_graph, run_cpu, run_gpu
from tests.hdi.reference.util import NNRT_UNSUPPORTED_OP, Const, expect_error, make_node, randn

LSTM = na.NODE_TYPE_LSTM


def lstm_inputs(seq: int, batch: int, inp: int, hidden: int, dirs: int = 1, layers: int = 1,
                dtype=np.float32, seed: int = 0) -> list[np.ndarray]:
    k = dirs * layers
    scale = dtype(0.5)
    return [randn(seq, batch, inp, dtype=dtype, seed=seed),
            randn(k, 4 * hidden, inp, dtype=dtype, seed=seed + 1) * scale,
            randn(k, 4 * hidden, hidden, dtype=dtype, seed=seed + 2) * scale,
            randn(k, 8 * hidden, dtype=dtype, seed=seed + 3) * scale,
            randn(k, batch, hidden, dtype=dtype, seed=seed + 4),
            randn(k, batch, hidden, dtype=dtype, seed=seed + 5)]


def compare(arrays: list[np.ndarray], const_states: bool = False, **attrs) -> None:
    items = [arrays[0]] + [Const(a) if i < 4 or const_states else a
                           for i, a in enumerate(arrays[1:], 1)]
    node = make_node(LSTM, na.LSTM(**attrs), items, n_outputs=3)
    seq, batch, _ = arrays[0].shape
    states, hidden = arrays[4].shape, arrays[4].shape[2]
    dirs = 2 if attrs.get("bidirectional") else 1
    shapes = [(seq, batch, dirs * hidden), states, states]
    node = dataclasses.replace(node, outputs=tuple(
        dataclasses.replace(t, shape=tuple(s)) for t, s in zip(node.outputs, shapes)))
    graph = node_graph(node)
    runtime = [a for a in items if not isinstance(a, Const)]
    assert_close(run_gpu(graph, runtime), run_cpu(graph, runtime), atol=1e-5)


@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("states", ["random", "zero", "constant"])
def test_odd_sizes(bidirectional: bool, states: str) -> None:
    arrays = lstm_inputs(5, 3, 7, 11, dirs=2 if bidirectional else 1)
    if states == "zero":
        arrays[4] = np.zeros_like(arrays[4])
        arrays[5] = np.zeros_like(arrays[5])
    compare(arrays, const_states=states == "constant", bidirectional=bidirectional,
            hasBias=True)


@pytest.mark.parametrize("bidirectional", [False, True])
def test_two_layers_no_bias(bidirectional: bool) -> None:
    dirs = 2 if bidirectional else 1
    arrays = lstm_inputs(4, 3, dirs * 6, 6, dirs=dirs, layers=2, seed=3)
    compare(arrays, bidirectional=bidirectional, numLayers=2, hasBias=False)


def test_zoneout() -> None:
    compare(lstm_inputs(5, 3, 7, 11, dirs=2, seed=5), bidirectional=True, hasBias=True,
            zoneoutCell=0.3, zoneoutHidden=0.6)


def test_several_tiles() -> None:
    """hidden 37 (3 step tiles, dirs*4H = 296 columns: 5 projection tiles), batch 10 (2
    batch tiles), input 20 (2 projection depth tiles)."""
    compare(lstm_inputs(3, 10, 20, 37, dirs=2, seed=7), bidirectional=True, hasBias=True)


def test_single_step_and_empty_sequence() -> None:
    compare(lstm_inputs(1, 2, 3, 4, dirs=2, seed=9), bidirectional=True, hasBias=True)
    compare(lstm_inputs(0, 2, 3, 4, dirs=2, seed=9), bidirectional=True, hasBias=True)


def test_refused() -> None:
    arrays = lstm_inputs(2, 2, 3, 4)
    node = make_node(LSTM, na.LSTM(hasBias=True), arrays, n_outputs=3)  # run-time weights
    expect_error(NNRT_UNSUPPORTED_OP, lambda: create_op(node))
    wide = [a.astype(np.float64) for a in arrays]
    node = make_node(LSTM, na.LSTM(hasBias=True), [wide[0]] + [Const(a) for a in wide[1:4]]
                     + wide[4:], n_outputs=3)
    expect_error(NNRT_UNSUPPORTED_OP, lambda: create_op(node))
