"""Softmax against exp/sum on Python floats along several axes; stability, dtypes, errors."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from tests.hdi.reference.util import (
    NNRT_INVALID_NODE,
    NNRT_UNSUPPORTED_OP,
    expect_refused,
    randn,
    run_op,
)

SOFTMAX = na.NODE_TYPE_SOFTMAX


def _reference(x: np.ndarray, axis: int) -> np.ndarray:
    axis %= x.ndim
    out = np.empty(x.shape)
    others = [range(d) if i != axis else [slice(None)] for i, d in enumerate(x.shape)]
    for idx in itertools.product(*others):
        values = [float(v) for v in x[idx]]
        top = max(values)
        exps = [math.exp(v - top) for v in values]
        total = math.fsum(exps)
        out[idx] = [e / total for e in exps]
    return out


@pytest.mark.parametrize("axis_attr,axis", [([], -1), ([0], 0), ([1], 1), ([2], 2), ([-1], -1),
                                            ([-3], 0), ([1, -2], 1)])
def test_axes(axis_attr, axis) -> None:
    x = randn(2, 3, 4, seed=1) * np.float32(3)
    out = run_op(SOFTMAX, na.Softmax(axis=axis_attr), [x])
    np.testing.assert_allclose(out, _reference(x, axis), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(out.sum(axis=axis), 1.0, rtol=1e-5)


def test_large_values_are_stable() -> None:
    x = np.array([[1000.0, 1001.0, 999.0], [-1000.0, -1000.0, -1e4]], dtype=np.float32)
    with np.errstate(all="raise"):
        out = run_op(SOFTMAX, na.Softmax(), [x])
    np.testing.assert_allclose(out, _reference(x, -1), rtol=1e-6, atol=1e-30)


@pytest.mark.parametrize("dtype,tol", [(np.float16, 2e-3), (np.float64, 1e-14)])
def test_dtypes(dtype, tol) -> None:
    x = randn(3, 5, dtype=dtype, seed=2)
    out = run_op(SOFTMAX, na.Softmax(axis=[0]), [x])
    assert out.dtype == dtype
    np.testing.assert_allclose(out.astype(np.float64), _reference(x, 0), rtol=tol, atol=tol)


def test_one_dimensional_and_empty() -> None:
    out = run_op(SOFTMAX, na.Softmax(), [np.array([0.0, math.log(3.0)])])
    np.testing.assert_allclose(out, [0.25, 0.75], rtol=1e-15)
    out = run_op(SOFTMAX, na.Softmax(), [np.zeros((0, 3), np.float32)])
    assert out.shape == (0, 3)


def test_error_paths() -> None:
    x = np.zeros((2, 3), np.float32)
    expect_refused(NNRT_UNSUPPORTED_OP, SOFTMAX, na.Softmax(axis=[0, 1]), [x])
    expect_refused(NNRT_INVALID_NODE, SOFTMAX, na.Softmax(axis=[2]), [x])
    expect_refused(NNRT_INVALID_NODE, SOFTMAX, na.Softmax(axis=[-3]), [x])
    expect_refused(NNRT_INVALID_NODE, SOFTMAX, na.Softmax(), [np.array(1.0, np.float32)])
    expect_refused(NNRT_UNSUPPORTED_OP, SOFTMAX, na.Softmax(), [np.zeros((2, 3), np.int32)])
    expect_refused(NNRT_INVALID_NODE, SOFTMAX, na.Softmax(), [x, x])
    expect_refused(NNRT_INVALID_NODE, SOFTMAX, na.Softmax(), [x], out_dtype=np.float16)
    expect_refused(NNRT_UNSUPPORTED_OP, SOFTMAX, na.Softmax(), [np.zeros(2, np.int8)],
                   quant_type=ht.QUANT_TYPE_ALL)


def _softmax_kernel_runs(x: np.ndarray) -> np.ndarray:
    with np.errstate(all="raise"):  # the kernel handles its own floating-point cases
        return run_op(SOFTMAX, na.Softmax(), [x])


@pytest.mark.parametrize("rows", [1, 4, 5, 64])
@pytest.mark.parametrize("length", [1, 7, 64, 1500])
def test_row_shapes(rows: int, length: int) -> None:
    """Along the last axis: few rows (maxima by reduction) and many (by argmax), rows
    summed by a matrix product or (beyond 1024 values) by numpy's sum."""
    x = randn(rows, length, seed=rows + length) * np.float32(3)
    out = _softmax_kernel_runs(x)
    np.testing.assert_allclose(out, _reference(x, -1), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("dtype,bound", [(np.float32, 64.0), (np.float64, 512.0)])
@pytest.mark.parametrize("beyond", [False, True])
def test_range_where_the_maximum_is_not_subtracted(dtype, bound: float, beyond: bool) -> None:
    """Values up to +-bound take exp(x) directly, beyond it the maxima are subtracted:
    both give the softmax (a row near +bound, one near -bound, mixed rows). Twice the
    bound is past exp's range: exp(x) alone would overflow or underflow there."""
    top = bound * 2 if beyond else bound
    x = np.array([[top, top - 1, top - 3, top - 40],
                  [-top, -top + 1, -top + 2, -top],
                  [top, 0.0, -top, 1.0],
                  [1.0, 2.0, 3.0, 4.0],
                  [0.5, 0.25, -0.5, 0.0],
                  [-top, -top, -top, -top]], dtype=dtype)
    rtol = 1e-5 if dtype == np.float32 else 1e-13
    # All rows, then without those holding +top (the range is checked on the whole input).
    for rows in (x, x[[1, 3, 4, 5, 1]]):
        out = _softmax_kernel_runs(rows)
        np.testing.assert_allclose(out, _reference(rows, -1), rtol=rtol, atol=1e-30)


def test_special_values_per_row() -> None:
    """NaN or +inf in a row, or a row of -inf only, gives NaN across that row (the formula
    has no value there); -inf entries give 0; the other rows are unaffected."""
    x = randn(6, 5, seed=3)
    x[0, 2] = np.nan
    x[1, 4] = np.inf
    x[2, :] = -np.inf
    x[3, 1] = x[3, 3] = -np.inf
    out = _softmax_kernel_runs(x)
    assert np.isnan(out[:3]).all()
    assert out[3, 1] == 0 and out[3, 3] == 0
    finite = x[3][np.isfinite(x[3])]
    np.testing.assert_allclose(out[3, [0, 2, 4]], _reference(finite[None], -1)[0], rtol=1e-6)
    np.testing.assert_allclose(out[4:], _reference(x[4:], -1), rtol=1e-6)


def test_float16_rows_and_arena_runs() -> None:
    from nnrt.hdi.reference import arena
    from nnrt.hdi.reference.kernel import create_kernel
    from tests.hdi.reference.util import make_node, run_node

    x = randn(8, 16, dtype=np.float16, seed=4)
    out = run_op(SOFTMAX, na.Softmax(), [x])
    assert out.dtype == np.float16
    np.testing.assert_allclose(out.astype(np.float64), _reference(x, -1), rtol=2e-3, atol=2e-4)
    node = make_node(SOFTMAX, na.Softmax(), [randn(8, 16)])
    kernel = create_kernel(node)
    pool = arena.ArenaPool(frozenset())
    for seed in (5, 6):  # the second run reuses the first one's output buffer
        x = randn(8, 16, seed=seed) * np.float32(seed)
        with pool.use():
            (out,) = run_node(node, [x], kernel)
            np.testing.assert_allclose(out, _reference(x, -1), rtol=1e-5, atol=1e-7)
