"""FullConnection: y = x · Wᵀ + b with flattening with and without useAxis, against explicit
loops; hasBias / input-count consistency and weight-shape errors."""

from __future__ import annotations

import numpy as np
import pytest

from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from tests.hdi.reference.util import (
    NNRT_INVALID_NODE,
    NNRT_UNSUPPORTED_OP,
    Const,
    Declared,
    expect_refused,
    make_node,
    randn,
    run_node,
    run_op,
)


def _reference(rows: np.ndarray, w: np.ndarray, b: np.ndarray | None) -> np.ndarray:
    """rows [M, in] -> [M, out] by explicit dot products."""
    out = np.zeros((rows.shape[0], w.shape[0]))
    for m in range(rows.shape[0]):
        for o in range(w.shape[0]):
            out[m, o] = sum(float(rows[m, i]) * float(w[o, i]) for i in range(w.shape[1]))
            if b is not None:
                out[m, o] += float(b[o])
    return out


@pytest.mark.parametrize("has_bias", [False, True])
@pytest.mark.parametrize("constant", [False, True])
def test_two_dimensional(has_bias: bool, constant: bool) -> None:
    x, w, b = randn(4, 6, seed=1), randn(3, 6, seed=2), randn(3, seed=3)
    wrap = Const if constant else (lambda a: a)
    inputs = [x, wrap(w)] + ([wrap(b)] if has_bias else [])
    out = run_op(na.NODE_TYPE_FULL_CONNECTION, na.FullConnection(hasBias=has_bias), inputs)
    assert out.shape == (4, 3)
    np.testing.assert_allclose(out, _reference(x, w, b if has_bias else None), rtol=1e-5,
                               atol=1e-5)


def test_without_use_axis_flattens_to_rows_of_in() -> None:
    x, w, b = randn(2, 3, 4, seed=4), randn(5, 4, seed=5), randn(5, seed=6)
    out = run_op(na.NODE_TYPE_FULL_CONNECTION, na.FullConnection(hasBias=True),
                 [x, Const(w), Const(b)])
    assert out.shape == (6, 5)
    np.testing.assert_allclose(out, _reference(x.reshape(6, 4), w, b), rtol=1e-5, atol=1e-5)
    # An input whose trailing dims together make `in` ([2, 3, 4] with in = 12) -> [2, out].
    w12 = randn(5, 12, seed=7)
    out = run_op(na.NODE_TYPE_FULL_CONNECTION, na.FullConnection(), [x, Const(w12)])
    np.testing.assert_allclose(out, _reference(x.reshape(2, 12), w12, None), rtol=1e-5,
                               atol=1e-5)
    # A 1-D input is one row.
    out = run_op(na.NODE_TYPE_FULL_CONNECTION, na.FullConnection(), [x[0, 0], Const(w)])
    assert out.shape == (1, 5)


@pytest.mark.parametrize("axis,inner", [(1, 12), (2, 4), (-1, 4), (-2, 12), (0, 24)])
def test_use_axis(axis: int, inner: int) -> None:
    x = randn(2, 3, 4, seed=8)
    w, b = randn(5, inner, seed=9), randn(5, seed=10)
    out = run_op(na.NODE_TYPE_FULL_CONNECTION,
                 na.FullConnection(hasBias=True, useAxis=True, axis=axis), [x, Const(w), Const(b)])
    lead = x.shape[:axis % 3]
    assert out.shape == lead + (5,)
    want = _reference(x.reshape(-1, inner), w, b).reshape(lead + (5,))
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def test_fused_activation_and_float16() -> None:
    x, w, b = randn(3, 8, seed=11), randn(4, 8, seed=12), randn(4, seed=13)
    out = run_op(na.NODE_TYPE_FULL_CONNECTION,
                 na.FullConnection(hasBias=True, activationType=ht.ACTIVATION_TYPE_RELU),
                 [x, Const(w), Const(b)])
    np.testing.assert_allclose(out, np.maximum(_reference(x, w, b), 0), rtol=1e-5, atol=1e-5)
    h = [a.astype(np.float16) for a in (x, w, b)]
    out = run_op(na.NODE_TYPE_FULL_CONNECTION,
                 na.FullConnection(hasBias=True, activationType=ht.ACTIVATION_TYPE_TANH),
                 [h[0], Const(h[1]), Const(h[2])])
    assert out.dtype == np.float16
    np.testing.assert_allclose(out.astype(np.float64), np.tanh(_reference(*h)), rtol=3e-3,
                               atol=3e-3)
    expect_refused(NNRT_UNSUPPORTED_OP, na.NODE_TYPE_FULL_CONNECTION,
                   na.FullConnection(activationType=ht.ACTIVATION_TYPE_ELU), [x, Const(w)])


def test_dynamic_batch() -> None:
    x, w = randn(3, 8, seed=14), randn(4, 8, seed=15)
    node = make_node(na.NODE_TYPE_FULL_CONNECTION, na.FullConnection(),
                     [Declared(x, (-1, 8)), Const(w)])
    (out,) = run_node(node, [x, w])
    np.testing.assert_allclose(out, _reference(x, w, None), rtol=1e-5, atol=1e-5)


def test_error_paths() -> None:
    x, w, b = np.ones((2, 4), np.float32), np.ones((3, 4), np.float32), np.ones(3, np.float32)
    fc = na.NODE_TYPE_FULL_CONNECTION
    # hasBias and the input count disagree
    expect_refused(NNRT_INVALID_NODE, fc, na.FullConnection(hasBias=True), [x, Const(w)])
    expect_refused(NNRT_INVALID_NODE, fc, na.FullConnection(), [x, Const(w), Const(b)])
    expect_refused(NNRT_INVALID_NODE, fc, na.FullConnection(), [x])
    # inconsistent weight / bias / input shapes
    expect_refused(NNRT_INVALID_NODE, fc, na.FullConnection(), [x, Const(np.ones((3, 4, 1),
                                                                                 np.float32))])
    expect_refused(NNRT_INVALID_NODE, fc, na.FullConnection(), [x, Const(np.ones((3, 5),
                                                                                 np.float32))])
    expect_refused(NNRT_INVALID_NODE, fc, na.FullConnection(hasBias=True),
                   [x, Const(w), Const(np.ones(4, np.float32))])
    expect_refused(NNRT_INVALID_NODE, fc, na.FullConnection(useAxis=True, axis=1),
                   [np.ones((2, 3, 4), np.float32), Const(w)])
    expect_refused(NNRT_INVALID_NODE, fc, na.FullConnection(useAxis=True, axis=3),
                   [np.ones((2, 3, 4), np.float32), Const(w)])
    # dtypes
    expect_refused(NNRT_UNSUPPORTED_OP, fc, na.FullConnection(),
                   [np.ones((2, 4), np.int32), Const(np.ones((3, 4), np.int32))])
    expect_refused(NNRT_UNSUPPORTED_OP, fc, na.FullConnection(),
                   [x, Const(np.ones((3, 4), np.float64))])
