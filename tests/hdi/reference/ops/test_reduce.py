"""ReduceFusion against onnx's reference evaluator (ReduceMean/Max/Min/Prod/Sum/SumSquare/
L1/L2) and closed forms: every mode, axes (negative, empty, reduceToEnd, run-time), keepDims,
coeff (0.0 read as 1.0), dtypes, empty reductions and error paths."""

from __future__ import annotations

import numpy as np
import pytest

from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from tests.hdi.reference.util import (
    NNRT_INVALID_NODE,
    NNRT_INVALID_SHAPE,
    NNRT_UNSUPPORTED_OP,
    Const,
    Declared,
    expect_error,
    expect_refused,
    make_node,
    onnx_outputs,
    randn,
    run_node,
    run_op,
)

REDUCE = na.NODE_TYPE_REDUCE_FUSION
ONNX_OP = {
    ht.REDUCE_MODE_MEAN: "ReduceMean", ht.REDUCE_MODE_MAX: "ReduceMax",
    ht.REDUCE_MODE_MIN: "ReduceMin", ht.REDUCE_MODE_PROD: "ReduceProd",
    ht.REDUCE_MODE_SUM: "ReduceSum", ht.REDUCE_MODE_SUM_SQUARE: "ReduceSumSquare",
    ht.REDUCE_MODE_ASUM: "ReduceL1", ht.REDUCE_MODE_L2: "ReduceL2",
}


def onnx_reduce(op: str, x: np.ndarray, axes: list[int], keep: bool) -> np.ndarray:
    (y,) = onnx_outputs(op, [x, np.array(axes, np.int64)], opset=18, keepdims=int(keep))
    return y


def reduce_op(x, axes, mode, keep=False, coeff=0.0, to_end=False, axes_dtype=np.int64, **kw):
    attrs = na.ReduceFusion(mode=mode, keepDims=keep, coeff=coeff, reduceToEnd=to_end)
    return run_op(REDUCE, attrs, [x, Const(np.array(axes, axes_dtype))], **kw)


@pytest.mark.parametrize("mode", sorted(ONNX_OP))
@pytest.mark.parametrize("axes", [[0], [-1], [1, 2], [0, 2], [-3, -2, -1]])
@pytest.mark.parametrize("keep", [False, True])
def test_modes_against_onnx(mode: int, axes: list[int], keep: bool) -> None:
    x = randn(2, 3, 4, seed=1) + np.float32(0.5)
    out = reduce_op(x, axes, mode, keep)
    want = onnx_reduce(ONNX_OP[mode], x, axes, keep)
    assert out.shape == want.shape
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", sorted(ONNX_OP))
def test_empty_axes_reduce_everything(mode: int) -> None:
    x = randn(2, 3, seed=2)
    out = reduce_op(x, [], mode)
    assert out.shape == ()
    want = onnx_reduce(ONNX_OP[mode], x, [0, 1], False)
    np.testing.assert_allclose(out, want, rtol=1e-5)
    # A node without the axes input reduces everything too; keepDims keeps the rank.
    out = run_op(REDUCE, na.ReduceFusion(mode=mode, keepDims=True), [x])
    np.testing.assert_allclose(out, onnx_reduce(ONNX_OP[mode], x, [0, 1], True), rtol=1e-5)


def test_all_mode() -> None:
    x = np.array([[True, True, False], [True, True, True]])
    out = reduce_op(x, [1], ht.REDUCE_MODE_ALL)
    np.testing.assert_array_equal(out, [False, True])
    out = reduce_op(x, [0], ht.REDUCE_MODE_ALL, keep=True)
    np.testing.assert_array_equal(out, [[True, True, False]])
    # On numbers: 1 where every entry is non-zero.
    xi = np.array([[1, 2, 0], [3, -1, 5]], np.int32)
    np.testing.assert_array_equal(reduce_op(xi, [-1], ht.REDUCE_MODE_ALL), [0, 1])
    xf = np.array([[0.5, np.nan], [0.0, 1.0]], np.float32)
    np.testing.assert_array_equal(reduce_op(xf, [1], ht.REDUCE_MODE_ALL), [1.0, 0.0])
    # Bool MAX is "any", MIN is "all".
    np.testing.assert_array_equal(reduce_op(x, [1], ht.REDUCE_MODE_MAX), [True, True])
    np.testing.assert_array_equal(reduce_op(x, [1], ht.REDUCE_MODE_MIN), [False, True])


@pytest.mark.parametrize("coeff,factor", [(0.0, 1.0), (1.0, 1.0), (2.5, 2.5), (-0.5, -0.5)])
def test_coeff(coeff: float, factor: float) -> None:
    x = randn(3, 4, seed=3)
    for mode in (ht.REDUCE_MODE_SUM, ht.REDUCE_MODE_MEAN, ht.REDUCE_MODE_L2):
        out = reduce_op(x, [1], mode, coeff=coeff)
        want = onnx_reduce(ONNX_OP[mode], x, [1], False) * factor
        np.testing.assert_allclose(out, want, rtol=1e-5)


@pytest.mark.parametrize("axis,keep,shape", [(1, False, (2,)), (-2, True, (2, 3, 1, 1)),
                                             (0, False, ())])
def test_reduce_to_end(axis: int, keep: bool, shape) -> None:
    x = randn(2, 3, 4, 5, seed=4)
    out = reduce_op(x, [axis], ht.REDUCE_MODE_SUM, keep=keep, to_end=True)
    first = axis % 4
    assert out.shape == shape
    np.testing.assert_allclose(out.reshape(-1), x.reshape(*x.shape[:first], -1).sum(-1).reshape(-1),
                               rtol=1e-5)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint8, np.uint16])
def test_integers(dtype) -> None:
    rng = np.random.default_rng(5)
    lo = 0 if np.dtype(dtype).kind == "u" else -9
    x = rng.integers(lo, 10, size=(3, 5)).astype(dtype)
    for mode in (ht.REDUCE_MODE_MAX, ht.REDUCE_MODE_MIN, ht.REDUCE_MODE_SUM,
                 ht.REDUCE_MODE_PROD, ht.REDUCE_MODE_SUM_SQUARE, ht.REDUCE_MODE_ASUM):
        out = reduce_op(x, [1], mode)
        assert out.dtype == dtype
        want = onnx_reduce(ONNX_OP[mode], x.astype(np.int64), [1], False)
        np.testing.assert_array_equal(out, want.astype(dtype))
    # MEAN truncates toward zero, row by row with Python integers.
    out = reduce_op(x, [1], ht.REDUCE_MODE_MEAN)
    for r in range(3):
        total = sum(int(v) for v in x[r])
        want = abs(total) // 5 * (1 if total >= 0 else -1)
        assert int(out[r]) == want


def test_integer_wraps_and_mean_of_negative() -> None:
    x = np.array([100, 100, 100], np.int8)
    assert reduce_op(x, [0], ht.REDUCE_MODE_SUM)[()] == np.int8(300 - 256)
    assert reduce_op(np.array([-7, 0], np.int32), [0], ht.REDUCE_MODE_MEAN)[()] == -3


@pytest.mark.parametrize("dtype,tol", [(np.float16, 2e-3), (np.float64, 1e-12)])
def test_float_dtypes(dtype, tol) -> None:
    x = randn(4, 6, dtype=dtype, seed=6)
    for mode in (ht.REDUCE_MODE_MEAN, ht.REDUCE_MODE_L2, ht.REDUCE_MODE_SUM_SQUARE):
        out = reduce_op(x, [0], mode, axes_dtype=np.int32)
        assert out.dtype == dtype
        want = onnx_reduce(ONNX_OP[mode], x.astype(np.float64), [0], False)
        np.testing.assert_allclose(out.astype(np.float64), want, rtol=tol, atol=tol)


def test_rank0_size1_and_empty() -> None:
    s = np.array(3.5, np.float32)
    assert reduce_op(s, [], ht.REDUCE_MODE_MEAN)[()] == 3.5
    x = randn(1, 4, 1, seed=7)
    np.testing.assert_allclose(reduce_op(x, [0, 2], ht.REDUCE_MODE_MAX), x[0, :, 0])
    e = np.zeros((2, 0), np.float32)
    np.testing.assert_array_equal(reduce_op(e, [1], ht.REDUCE_MODE_SUM), [0, 0])
    np.testing.assert_array_equal(reduce_op(e, [1], ht.REDUCE_MODE_PROD), [1, 1])
    np.testing.assert_array_equal(reduce_op(e, [1], ht.REDUCE_MODE_MAX), [-np.inf, -np.inf])
    assert np.isnan(reduce_op(e, [1], ht.REDUCE_MODE_MEAN)).all()
    ei = np.zeros((2, 0), np.int16)
    np.testing.assert_array_equal(reduce_op(ei, [1], ht.REDUCE_MODE_MIN), [32767, 32767])
    np.testing.assert_array_equal(reduce_op(ei, [1], ht.REDUCE_MODE_MEAN), [0, 0])


def test_dynamic_input_and_runtime_axes() -> None:
    x = randn(2, 3, 4, seed=8)
    attrs = na.ReduceFusion(mode=ht.REDUCE_MODE_SUM)
    node = make_node(REDUCE, attrs, [Declared(x, (-1, 3, -1)), Const(np.array([1], np.int32))])
    from nnrt.hdi.reference.kernel import create_kernel
    kernel = create_kernel(node)
    assert kernel.infer_shapes([(-1, 3, -1), (1,)]) == [(-1, -1)]
    (out,) = run_node(node, [x, np.array([1], np.int32)], kernel)
    np.testing.assert_allclose(out, x.sum(1), rtol=1e-5)
    # Run-time axes: DYNAMIC dims, the axes read at each run.
    axes = np.array([-1, 0], np.int64)
    node = make_node(REDUCE, attrs, [x, axes])
    kernel = create_kernel(node)
    assert kernel.infer_shapes([x.shape, (2,)]) == [(-1,)]
    (out,) = run_node(node, [x, axes], kernel)
    np.testing.assert_allclose(out, x.sum((0, 2)), rtol=1e-5)
    keep = make_node(REDUCE, na.ReduceFusion(mode=ht.REDUCE_MODE_MAX, keepDims=True,
                                             reduceToEnd=True), [x, np.array([1], np.int32)])
    (out,) = run_node(keep, [x, np.array([1], np.int32)])
    np.testing.assert_allclose(out, x.max((1, 2), keepdims=True))
    bad = make_node(REDUCE, attrs, [x, np.array([3], np.int32)])
    expect_error(NNRT_INVALID_SHAPE, lambda: run_node(bad, [x, np.array([3], np.int32)]))


def test_error_paths() -> None:
    x = np.zeros((2, 3), np.float32)
    axes = Const(np.array([0], np.int64))
    sum_ = na.ReduceFusion(mode=ht.REDUCE_MODE_SUM)
    expect_refused(NNRT_INVALID_NODE, REDUCE, sum_, [x, axes, axes])
    expect_refused(NNRT_INVALID_NODE, REDUCE, sum_, [x, axes], n_outputs=2)
    expect_refused(NNRT_INVALID_NODE, REDUCE, na.ReduceFusion(mode=9), [x, axes])
    expect_refused(NNRT_INVALID_NODE, REDUCE, sum_, [x, Const(np.array([2], np.int64))])
    expect_refused(NNRT_INVALID_NODE, REDUCE, sum_, [x, Const(np.array([-3], np.int64))])
    expect_refused(NNRT_INVALID_NODE, REDUCE, sum_, [x, Const(np.array([1, -1], np.int64))])
    expect_refused(NNRT_INVALID_NODE, REDUCE, sum_, [x, Const(np.array([0.0], np.float32))])
    expect_refused(NNRT_INVALID_NODE, REDUCE,
                   na.ReduceFusion(mode=ht.REDUCE_MODE_SUM, reduceToEnd=True),
                   [x, Const(np.array([0, 1], np.int64))])
    expect_refused(NNRT_INVALID_NODE, REDUCE, na.ReduceFusion(mode=ht.REDUCE_MODE_SUM,
                                                              coeff=float("nan")), [x, axes])
    expect_refused(NNRT_INVALID_NODE, REDUCE, na.ReduceFusion(mode=ht.REDUCE_MODE_ALL, coeff=2),
                   [x, axes])
    expect_refused(NNRT_INVALID_NODE, REDUCE, sum_, [x, axes], out_dtype=np.float64)
    xi = np.zeros((2, 3), np.int32)
    expect_refused(NNRT_UNSUPPORTED_OP, REDUCE, na.ReduceFusion(mode=ht.REDUCE_MODE_L2),
                   [xi, axes])
    expect_refused(NNRT_UNSUPPORTED_OP, REDUCE, na.ReduceFusion(mode=ht.REDUCE_MODE_SUM,
                                                                coeff=2.0), [xi, axes])
    expect_refused(NNRT_UNSUPPORTED_OP, REDUCE, sum_, [np.zeros(2, bool), axes])
    expect_refused(NNRT_UNSUPPORTED_OP, REDUCE, sum_,
                   [x, Declared(np.array([0], np.int64), (-1,))])
    expect_refused(NNRT_UNSUPPORTED_OP, REDUCE, sum_, [np.zeros(2, np.int8), axes],
                   quant_type=ht.QUANT_TYPE_ALL)
