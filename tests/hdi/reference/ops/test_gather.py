"""Gather and GatherNd against ONNX Gather / GatherND (onnx.reference): every axis, index
ranks 0-2, negative indices, INT32/INT64 indices, dtypes, run-time indices out of range,
DYNAMIC dims, errors."""

from __future__ import annotations

import numpy as np
import pytest

from nnrt.hdi.reference.kernel import create_kernel
from nnrt.protos import node_attrs_pb2 as na
from tests.hdi.reference.util import (
    NNRT_FAILED,
    NNRT_INVALID_NODE,
    NNRT_INVALID_SHAPE,
    NNRT_UNSUPPORTED_OP,
    Const,
    Declared,
    expect_error,
    expect_refused,
    make_node,
    onnx_reference,
    readonly,
    run_node,
    run_op,
)

GATHER, GATHER_ND = na.NODE_TYPE_GATHER, na.NODE_TYPE_GATHER_ND


X = np.arange(3 * 4 * 5, dtype=np.float32).reshape(3, 4, 5)


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -3])
@pytest.mark.parametrize("indices", [[[0, 2], [1, 1]], [2, 0, 1], 1, [-1, 0]])
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_gather_against_onnx(axis, indices, index_dtype) -> None:
    idx = np.array(indices, index_dtype)
    expected = onnx_reference("Gather", [X, idx], axis=axis)
    axis_in = Const(np.array([axis], np.int32))
    out = run_op(GATHER, na.Gather(), [X, Const(idx), axis_in])  # constant indices
    assert out.shape == expected.shape
    np.testing.assert_array_equal(out, expected)
    out = run_op(GATHER, na.Gather(), [X, idx, axis_in])  # run-time indices
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("indices", [
    [[0, 1], [2, 3]], [[1], [0]], [[0, 1, 2]], [[[1, 2, 3], [0, 0, 0]]], [2, 3], [[-1, -2]],
    [[0, 0, -1], [2, -4, 4]],
])
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_gather_nd_against_onnx(indices, index_dtype) -> None:
    idx = np.array(indices, index_dtype)
    positive = np.where(idx < 0, idx + np.array(X.shape[:idx.shape[-1]]), idx)
    expected = onnx_reference("GatherND", [X, positive.astype(np.int64)])
    out = run_op(GATHER_ND, na.GatherNd(), [X, Const(idx)])
    assert out.shape == expected.shape
    np.testing.assert_array_equal(out, expected)
    out = run_op(GATHER_ND, na.GatherNd(), [X, idx])
    np.testing.assert_array_equal(out, expected)


def test_gather_nd_whole_x_rows() -> None:
    out = run_op(GATHER_ND, na.GatherNd(), [X, np.zeros((2, 0), np.int64)])
    assert out.shape == (2, 3, 4, 5)
    np.testing.assert_array_equal(out[1], X)


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint16, np.int64, np.float16,
                                   np.float64])
def test_dtypes(dtype) -> None:
    x = (np.arange(6) % 4).astype(dtype).reshape(2, 3)
    out = run_op(GATHER, na.Gather(), [x, np.array([2, 0]), Const(np.array([1], np.int64))])
    assert out.dtype == dtype
    np.testing.assert_array_equal(out, x[:, [2, 0]])
    out = run_op(GATHER_ND, na.GatherNd(), [x, np.array([[1, 2]], np.int32)])
    assert out.dtype == dtype and out.tolist() == [x[1, 2]]
    out = run_op(GATHER, na.Gather(), [x[0], np.array(1), Const(np.array([0], np.int64))])
    assert out.shape == () and out == x[0, 1]  # a 0-D result is an array, not a scalar


def test_run_time_out_of_range_and_dynamic_dims() -> None:
    axis_in = Const(np.array([1], np.int32))
    node = make_node(GATHER, na.Gather(), [Declared(X, (-1, 4, 5)), np.array([0, 1]), axis_in])
    kernel = create_kernel(node)
    assert kernel.infer_shapes([(-1, 4, 5), (2,)]) == [(-1, 2, 5)]
    assert kernel.infer_shapes([(3, 4, 5), (-1,)]) == [(3, -1, 5)]
    run_node(node, [X, np.array([3, -4])], kernel)
    for bad in ([4], [-5]):
        expect_error(NNRT_FAILED, lambda: kernel.execute(
            [readonly(X), readonly(np.array(bad)), node.inputs[2].constant]))
    node = make_node(GATHER_ND, na.GatherNd(), [Declared(X, (3, -1, 5)),
                                                Const(np.array([[2, 5]]))])
    kernel = create_kernel(node)  # 5 is only known to be out of range at run time
    assert kernel.infer_shapes([(3, -1, 5), (1, 2)]) == [(1, 5)]
    expect_error(NNRT_FAILED, lambda: kernel.execute([readonly(X), node.inputs[1].constant]))
    expect_error(NNRT_INVALID_SHAPE, lambda: kernel.infer_shapes([(3, 4, 5), (1, 3)]))


def test_error_paths() -> None:
    axis_in = Const(np.array([0], np.int32))
    expect_refused(NNRT_INVALID_NODE, GATHER, na.Gather(), [X, np.array([0])])
    expect_refused(NNRT_INVALID_NODE, GATHER, na.Gather(), [X, Const(np.array([3])), axis_in])
    expect_refused(NNRT_INVALID_NODE, GATHER, na.Gather(), [X, Const(np.array([-4])), axis_in])
    expect_refused(NNRT_INVALID_NODE, GATHER, na.Gather(),
                   [X, np.array([0]), Const(np.array([3], np.int32))])
    expect_refused(NNRT_INVALID_NODE, GATHER, na.Gather(),
                   [X, np.array([0]), Const(np.array([0, 1], np.int32))])
    expect_refused(NNRT_INVALID_NODE, GATHER, na.Gather(), [X, np.array([0]), axis_in],
                   out_dtype=np.int32)
    expect_refused(NNRT_UNSUPPORTED_OP, GATHER, na.Gather(),
                   [X, np.array([0]), np.array([0], np.int32)])  # run-time axis
    expect_refused(NNRT_UNSUPPORTED_OP, GATHER, na.Gather(),
                   [X, np.array([0], np.int16), axis_in])
    expect_refused(NNRT_UNSUPPORTED_OP, GATHER, na.Gather(),
                   [X, np.array([0.0], np.float32), axis_in])
    expect_refused(NNRT_INVALID_NODE, GATHER_ND, na.GatherNd(), [X, np.array(0)])
    expect_refused(NNRT_INVALID_NODE, GATHER_ND, na.GatherNd(), [X, np.zeros((1, 4), np.int32)])
    expect_refused(NNRT_INVALID_NODE, GATHER_ND, na.GatherNd(),
                   [X, Const(np.array([[0, 4]], np.int32))])
    expect_refused(NNRT_INVALID_NODE, GATHER_ND, na.GatherNd(), [X])
    expect_refused(NNRT_UNSUPPORTED_OP, GATHER_ND, na.GatherNd(),
                   [X, Declared(np.zeros((1, 2), np.int32), (1, -1))])
    expect_refused(NNRT_UNSUPPORTED_OP, GATHER_ND, na.GatherNd(), [X, np.zeros((1, 2), np.uint8)])
