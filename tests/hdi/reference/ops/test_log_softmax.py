"""LogSoftmax against onnx's reference LogSoftmax and math.log of Python sums: axes, large
values, dtypes, edge shapes and error paths."""

from __future__ import annotations

import math

import numpy as np
import pytest

from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from tests.hdi.reference.util import (
    NNRT_INVALID_NODE,
    NNRT_UNSUPPORTED_OP,
    expect_refused,
    onnx_reference,
    randn,
    run_op,
)

LOG_SOFTMAX = na.NODE_TYPE_LOG_SOFTMAX


def onnx_log_softmax(x: np.ndarray, axis: int) -> np.ndarray:
    return onnx_reference("LogSoftmax", [x], opset=13, axis=axis)


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -3])
def test_against_onnx(axis: int) -> None:
    x = randn(2, 3, 4, seed=1) * np.float32(4)
    out = run_op(LOG_SOFTMAX, na.LogSoftmax(axis=axis), [x])
    np.testing.assert_allclose(out, onnx_log_softmax(x, axis), rtol=1e-5, atol=1e-5)


def test_large_values_and_python_reference() -> None:
    x = np.array([[1000.0, 1001.0, 999.0], [-1e4, 0.0, -1e4]], np.float32)
    with np.errstate(all="raise"):
        out = run_op(LOG_SOFTMAX, na.LogSoftmax(axis=1), [x])
    for r in range(2):
        top = max(float(v) for v in x[r])
        lse = top + math.log(math.fsum(math.exp(float(v) - top) for v in x[r]))
        np.testing.assert_allclose(out[r], [float(v) - lse for v in x[r]], rtol=1e-6)
    out = run_op(LOG_SOFTMAX, na.LogSoftmax(axis=0), [np.array([-np.inf, 0.0], np.float32)])
    np.testing.assert_array_equal(out, [-np.inf, 0.0])


@pytest.mark.parametrize("dtype,tol", [(np.float16, 3e-3), (np.float64, 1e-13)])
def test_dtypes(dtype, tol) -> None:
    x = randn(3, 5, dtype=dtype, seed=2)
    out = run_op(LOG_SOFTMAX, na.LogSoftmax(axis=-1), [x])
    assert out.dtype == dtype
    want = onnx_log_softmax(x.astype(np.float64), -1)
    np.testing.assert_allclose(out.astype(np.float64), want, rtol=tol, atol=tol)


def test_edge_shapes() -> None:
    out = run_op(LOG_SOFTMAX, na.LogSoftmax(), [np.array([2.0], np.float32)])
    np.testing.assert_array_equal(out, [0.0])
    out = run_op(LOG_SOFTMAX, na.LogSoftmax(axis=1), [np.zeros((0, 3), np.float32)])
    assert out.shape == (0, 3)


def test_error_paths() -> None:
    x = np.zeros((2, 3), np.float32)
    expect_refused(NNRT_INVALID_NODE, LOG_SOFTMAX, na.LogSoftmax(axis=2), [x])
    expect_refused(NNRT_INVALID_NODE, LOG_SOFTMAX, na.LogSoftmax(axis=-3), [x])
    expect_refused(NNRT_INVALID_NODE, LOG_SOFTMAX, na.LogSoftmax(), [np.array(1.0, np.float32)])
    expect_refused(NNRT_INVALID_NODE, LOG_SOFTMAX, na.LogSoftmax(), [x, x])
    expect_refused(NNRT_INVALID_NODE, LOG_SOFTMAX, na.LogSoftmax(), [x], n_outputs=2)
    expect_refused(NNRT_INVALID_NODE, LOG_SOFTMAX, na.LogSoftmax(), [x], out_dtype=np.float16)
    expect_refused(NNRT_UNSUPPORTED_OP, LOG_SOFTMAX, na.LogSoftmax(), [np.zeros(3, np.int32)])
    expect_refused(NNRT_UNSUPPORTED_OP, LOG_SOFTMAX, na.LogSoftmax(), [np.zeros(3, np.int8)],
                   quant_type=ht.QUANT_TYPE_ALL)


def _python_log_softmax(x: np.ndarray) -> np.ndarray:
    """Along the last axis, on Python floats."""
    out = np.empty(x.shape)
    for idx in np.ndindex(*x.shape[:-1]):
        values = [float(v) for v in x[idx]]
        top = max(values)
        lse = top + math.log(math.fsum(math.exp(v - top) for v in values))
        out[idx] = [v - lse for v in values]
    return out


@pytest.mark.parametrize("rows", [1, 4, 5, 64])
@pytest.mark.parametrize("length", [1, 7, 64, 1500])
def test_row_shapes(rows: int, length: int) -> None:
    """Along the last axis: few rows (maxima by reduction) and many (by argmax), rows
    summed by a matrix product or (beyond 1024 values) by numpy's sum."""
    x = randn(rows, length, seed=rows + length) * np.float32(4)
    with np.errstate(all="raise"):
        out = run_op(LOG_SOFTMAX, na.LogSoftmax(axis=-1), [x])
    np.testing.assert_allclose(out, _python_log_softmax(x), rtol=1e-5, atol=1e-5)


def test_special_values_per_row() -> None:
    """Many rows (maxima by argmax): -inf entries stay -inf, a row of -inf only or one
    holding NaN gives NaN, +inf gives NaN there and -inf elsewhere in its row (inf - inf,
    finite - inf); the other rows are unaffected."""
    x = randn(6, 5, seed=3) * np.float32(100)
    x[0, 2] = np.nan
    x[1, 4] = np.inf
    x[2, :] = -np.inf
    x[3, 1] = x[3, 3] = -np.inf
    with np.errstate(all="raise"):
        out = run_op(LOG_SOFTMAX, na.LogSoftmax(axis=1), [x])
    assert np.isnan(out[[0, 2]]).all()
    assert np.isnan(out[1, 4]) and (out[1, :4] == -np.inf).all()
    assert out[3, 1] == -np.inf and out[3, 3] == -np.inf
    finite = x[3, [0, 2, 4]]
    np.testing.assert_allclose(out[3, [0, 2, 4]], _python_log_softmax(finite[None])[0],
                               rtol=1e-6)
    np.testing.assert_allclose(out[4:], _python_log_softmax(x[4:]), rtol=1e-6, atol=1e-6)
