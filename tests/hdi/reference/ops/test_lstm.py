"""LSTM against an explicit per-step, per-unit loop with scalar gate math (math.exp/tanh) and
against onnx's reference LSTM with the gate blocks permuted (ONNX: i, o, f, c): directions,
layers, bias on/off, initial states, zoneout, dtypes, dynamic dims, errors."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from nnrt.hdi.reference.kernel import create_kernel
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from tests.hdi.reference.util import (
    NNRT_INVALID_NODE,
    NNRT_INVALID_SHAPE,
    NNRT_UNSUPPORTED_OP,
    Const,
    Declared,
    arrays_of,
    expect_error,
    make_node,
    onnx_outputs,
    randn,
    run_node,
)

LSTM = na.NODE_TYPE_LSTM


def lstm_inputs(seq, batch, inp, hidden, dirs=1, layers=1, dtype=np.float32, seed=0):
    k = dirs * layers
    scale = dtype(0.5)
    return [randn(seq, batch, inp, dtype=dtype, seed=seed),
            randn(k, 4 * hidden, inp, dtype=dtype, seed=seed + 1) * scale,
            randn(k, 4 * hidden, hidden, dtype=dtype, seed=seed + 2) * scale,
            randn(k, 8 * hidden, dtype=dtype, seed=seed + 3) * scale,
            randn(k, batch, hidden, dtype=dtype, seed=seed + 4),
            randn(k, batch, hidden, dtype=dtype, seed=seed + 5)]


def run_lstm(inputs, const_weights=True, **attrs):
    items = [inputs[0]] + [Const(a) if const_weights and i < 4 else a
                           for i, a in enumerate(inputs[1:], 1)]
    node = make_node(LSTM, na.LSTM(**attrs), items, n_outputs=3)
    return run_node(node, arrays_of(items))


def loop_reference(x, w_ih, w_hh, bias, h0, c0, dirs, layers, has_bias=True, zc=0.0, zh=0.0):
    """Python floats, one hidden unit at a time."""
    seq, batch, _ = x.shape
    hidden = w_hh.shape[2]
    sig = lambda v: 1.0 / (1.0 + math.exp(-v))  # noqa: E731
    h_n, c_n = h0.astype(np.float64).copy(), c0.astype(np.float64).copy()
    layer_in = x.astype(np.float64)
    for layer in range(layers):
        y = np.zeros((seq, batch, dirs * hidden))
        for d in range(dirs):
            k = layer * dirs + d
            h, c = h_n[k].copy(), c_n[k].copy()
            for t in (range(seq) if d == 0 else reversed(range(seq))):
                new_h, new_c = np.zeros_like(h), np.zeros_like(c)
                for b in range(batch):
                    for u in range(hidden):
                        pre = []
                        for gate in range(4):
                            row = gate * hidden + u
                            v = sum(float(w_ih[k, row, j]) * layer_in[t, b, j]
                                    for j in range(layer_in.shape[2]))
                            v += sum(float(w_hh[k, row, j]) * h[b, j] for j in range(hidden))
                            if has_bias:
                                v += float(bias[k, row]) + float(bias[k, 4 * hidden + row])
                            pre.append(v)
                        i, f, g, o = sig(pre[0]), sig(pre[1]), math.tanh(pre[2]), sig(pre[3])
                        cell = f * c[b, u] + i * g
                        out = o * math.tanh(cell)
                        new_c[b, u] = zc * c[b, u] + (1 - zc) * cell
                        new_h[b, u] = zh * h[b, u] + (1 - zh) * out
                h, c = new_h, new_c
                y[t, :, d * hidden:(d + 1) * hidden] = h
            h_n[k], c_n[k] = h, c
        layer_in = y
    return layer_in, h_n, c_n


PERM = [0, 3, 1, 2]  # ONNX block q takes our block PERM[q]: i, o, f, c <- i, f, g, o


def onnx_lstm(x, w_ih, w_hh, bias, h0, c0, dirs):
    """One layer through onnx's reference; our blocks re-ordered to ONNX's."""
    hidden = w_hh.shape[2]

    def reorder(a, blocks_axis):
        parts = np.split(a, 4, axis=blocks_axis)
        return np.concatenate([parts[p] for p in PERM], axis=blocks_axis)

    b = np.concatenate([reorder(bias[:, :4 * hidden], 1), reorder(bias[:, 4 * hidden:], 1)], 1)
    # inputs X, W, R, B, sequence_lens (left out), initial_h, initial_c
    y, y_h, y_c = onnx_outputs("LSTM", [x, reorder(w_ih, 1), reorder(w_hh, 1), b, None, h0, c0],
                               3, opset=14, hidden_size=hidden,
                               direction="bidirectional" if dirs == 2 else "forward")
    seq, _, batch, _ = y.shape
    return y.transpose(0, 2, 1, 3).reshape(seq, batch, dirs * hidden), y_h, y_c


@pytest.mark.parametrize("dirs", [1, 2])
@pytest.mark.parametrize("seq,batch", [(5, 3), (1, 1)])
def test_single_layer_against_onnx(dirs: int, seq: int, batch: int) -> None:
    inputs = lstm_inputs(seq, batch, 4, 3, dirs=dirs, seed=1)
    outs = run_lstm(inputs, bidirectional=dirs == 2, hasBias=True, hiddenSize=3, inputSize=4,
                    numLayers=1, numDirections=dirs)
    for out, want in zip(outs, onnx_lstm(*inputs, dirs)):
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dirs,layers", [(1, 1), (2, 1), (1, 3), (2, 2)])
def test_against_scalar_loops(dirs: int, layers: int) -> None:
    hidden = 2
    inputs = lstm_inputs(4, 2, dirs * hidden, hidden, dirs=dirs, layers=layers, seed=2)
    outs = run_lstm(inputs, bidirectional=dirs == 2, hasBias=True, numLayers=layers)
    for out, want in zip(outs, loop_reference(*inputs, dirs, layers)):
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def test_no_bias_runtime_weights_and_zoneout() -> None:
    inputs = lstm_inputs(3, 2, 3, 2, dirs=2, seed=3)
    outs = run_lstm(inputs, const_weights=False, bidirectional=True)  # hasBias unset: no bias
    for out, want in zip(outs, loop_reference(*inputs, 2, 1, has_bias=False)):
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
    outs = run_lstm(inputs, bidirectional=True, hasBias=True, zoneoutCell=0.25,
                    zoneoutHidden=0.5, dropout=0.3)  # dropout: ignored at inference
    want = loop_reference(*inputs, 2, 1, zc=0.25, zh=0.5)
    for out, w in zip(outs, want):
        np.testing.assert_allclose(out, w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype,tol", [(np.float16, 5e-3), (np.float64, 1e-12)])
def test_dtypes(dtype, tol) -> None:
    inputs = lstm_inputs(3, 2, 3, 2, dtype=dtype, seed=4)
    outs = run_lstm(inputs, hasBias=True)
    for out, want in zip(outs, loop_reference(*inputs, 1, 1)):
        assert out.dtype == dtype
        np.testing.assert_allclose(out.astype(np.float64), want, rtol=tol, atol=tol)


def test_dynamic_seq_and_batch() -> None:
    inputs = lstm_inputs(4, 3, 2, 2, seed=5)
    items = [Declared(inputs[0], (-1, -1, 2))] + [Const(a) for a in inputs[1:4]] + [
        Declared(inputs[4], (1, -1, 2)), Declared(inputs[5], (1, -1, 2))]
    node = make_node(LSTM, na.LSTM(hasBias=True), items, n_outputs=3)
    kernel = create_kernel(node)
    shapes = [(-1, -1, 2), *(a.shape for a in inputs[1:4]), (1, -1, 2), (1, -1, 2)]
    assert kernel.infer_shapes(shapes) == [(-1, -1, 2), (1, -1, 2), (1, -1, 2)]
    outs = run_node(node, inputs, kernel)
    for out, want in zip(outs, loop_reference(*inputs, 1, 1)):
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
    empty = [inputs[0][:0]] + inputs[1:]
    y, h, c = run_node(node, empty, kernel)
    assert y.shape == (0, 3, 2)
    np.testing.assert_array_equal(h, inputs[4])
    np.testing.assert_array_equal(c, inputs[5])
    bad = [inputs[0], *inputs[1:4], inputs[4][:, :2], inputs[5]]
    expect_error(NNRT_INVALID_SHAPE, lambda: run_node(node, bad, kernel))


def test_error_paths() -> None:
    inputs = lstm_inputs(2, 1, 3, 2)

    def refused(code, items=None, n_outputs=3, **attrs):
        items = [Const(a) if 0 < i < 4 else a for i, a in enumerate(items or inputs)]
        node = make_node(LSTM, na.LSTM(**attrs), items, n_outputs=n_outputs)
        expect_error(code, lambda: create_kernel(node))

    refused(NNRT_INVALID_NODE, inputs[:5])
    refused(NNRT_INVALID_NODE, n_outputs=2)
    refused(NNRT_INVALID_NODE, numDirections=2)
    refused(NNRT_INVALID_NODE, bidirectional=True)  # weights hold one direction
    refused(NNRT_INVALID_NODE, numLayers=-1)
    refused(NNRT_INVALID_NODE, numLayers=2)  # and inputSize 3 != hidden 2
    refused(NNRT_INVALID_NODE, hiddenSize=3)
    refused(NNRT_INVALID_NODE, inputSize=4)
    refused(NNRT_INVALID_NODE, dropout=1.5)
    refused(NNRT_INVALID_NODE, zoneoutCell=-0.1)
    refused(NNRT_INVALID_NODE, projSize=-1)
    refused(NNRT_UNSUPPORTED_OP, projSize=2)
    refused(NNRT_INVALID_NODE, [inputs[0][..., :2]] + inputs[1:])
    refused(NNRT_INVALID_NODE, inputs[:3] + [inputs[3][:, :8]] + inputs[4:])
    refused(NNRT_INVALID_NODE, inputs[:2] + [inputs[2][..., :1]] + inputs[3:])
    refused(NNRT_INVALID_NODE, inputs[:4] + [inputs[4][0]] + inputs[5:])
    refused(NNRT_UNSUPPORTED_OP, [a.astype(np.int32) for a in inputs])
    refused(NNRT_UNSUPPORTED_OP, [inputs[0].astype(np.float64)] + inputs[1:])
    node = make_node(LSTM, na.LSTM(), [inputs[0]] + [Const(a) for a in inputs[1:4]]
                     + inputs[4:], n_outputs=3)
    bad = dataclasses.replace(node, outputs=node.outputs[:2] + (
        dataclasses.replace(node.outputs[2], dtype=np.dtype(np.float64)),))
    expect_error(NNRT_INVALID_NODE, lambda: create_kernel(bad))
    items = [inputs[0]] + [Declared(a, (-1,) + a.shape[1:]) for a in inputs[1:4]] + inputs[4:]
    node = make_node(LSTM, na.LSTM(), items, n_outputs=3)
    expect_error(NNRT_UNSUPPORTED_OP, lambda: create_kernel(node))
    node = make_node(LSTM, na.LSTM(), [np.zeros((2, 1, 3), np.int8)] * 6, n_outputs=3,
                     quant_type=ht.QUANT_TYPE_ALL)
    expect_error(NNRT_UNSUPPORTED_OP, lambda: create_kernel(node))
