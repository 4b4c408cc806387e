"""ScatterNd against ONNX ScatterND onto zeros (onnx.reference) for distinct indices, and
against an explicit accumulation loop for duplicates (TensorFlow's sum): element and slice
updates, negative indices, dtypes, run-time shape, out-of-range indices, errors."""

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

SCATTER_ND = na.NODE_TYPE_SCATTER_ND


def scatter(indices, updates, shape, index_dtype=np.int64, run_time_shape=False):
    shape_in = np.array(shape, index_dtype)
    return run_op(SCATTER_ND, na.ScatterNd(),
                  [np.array(indices, index_dtype), updates,
                   shape_in if run_time_shape else Const(shape_in)], out_dtype=updates.dtype)


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("indices,shape", [
    ([[0], [2]], (4, 3)), ([[1, 2], [3, 0], [0, 0]], (4, 3)), ([[[1], [3]], [[0], [2]]], (4, 3)),
    ([[0, 1, 2]], (2, 3, 4)), ([[1, 1]], (2, 3, 4)),
])
def test_distinct_against_onnx(index_dtype, indices, shape) -> None:
    idx = np.array(indices, np.int64)
    updates_shape = idx.shape[:-1] + shape[idx.shape[-1]:]
    updates = np.arange(1, 1 + int(np.prod(updates_shape)), dtype=np.float32).reshape(
        updates_shape)
    expected = onnx_reference("ScatterND", [np.zeros(shape, np.float32), idx, updates])
    for run_time_shape in (False, True):
        out = scatter(indices, updates, shape, index_dtype, run_time_shape)
        np.testing.assert_array_equal(out, expected)


def test_duplicates_accumulate_and_negative_indices() -> None:
    indices = np.array([[1], [3], [1], [-3], [0]])
    updates = np.array([[1, 2], [3, 4], [5, 6], [7, 8], [9, 10]], np.int32)
    expected = np.zeros((4, 2), np.int32)
    for row, value in zip(indices[:, 0], updates):
        expected[row % 4] += value  # -3 is row 1
    out = scatter(indices, updates, (4, 2))
    np.testing.assert_array_equal(out, expected)


def test_whole_output_rows() -> None:
    updates = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = scatter(np.zeros((2, 0), np.int64), updates, (3,))
    np.testing.assert_array_equal(out, updates[0] + updates[1])


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint16, np.int64, np.float16,
                                   np.float64])
def test_dtypes(dtype) -> None:
    updates = np.array([1, 1, 0], dtype)
    out = scatter([[0], [2], [3]], updates, (4,))
    assert out.dtype == dtype
    np.testing.assert_array_equal(out, np.array([1, 0, 1, 0], dtype))


def test_run_time_errors_and_dynamic() -> None:
    idx, upd = np.array([[0], [1]]), np.ones((2, 3), np.float32)
    node = make_node(SCATTER_ND, na.ScatterNd(), [idx, upd, np.array([4, 3])],
                     out_dtype=np.float32)
    kernel = create_kernel(node)
    assert kernel.infer_shapes([(2, 1), (2, 3), (2,)]) == [(-1, -1)]
    (out,) = run_node(node, [idx, upd, np.array([2, 3])], kernel)
    assert out.shape == (2, 3) and out.sum() == 6
    expect_error(NNRT_FAILED, lambda: kernel.execute(
        [readonly(np.array([[0], [2]])), readonly(upd), readonly(np.array([2, 3]))]))
    expect_error(NNRT_INVALID_SHAPE, lambda: kernel.execute(
        [readonly(idx), readonly(upd), readonly(np.array([2, 4]))]))  # updates' shape
    expect_error(NNRT_INVALID_SHAPE, lambda: kernel.execute(
        [readonly(idx), readonly(upd), readonly(np.array([-2, 3]))]))
    node = make_node(SCATTER_ND, na.ScatterNd(),
                     [Declared(idx, (-1, 1)), Declared(upd, (-1, 3)), Const(np.array([4, 3]))],
                     out_dtype=np.float32)
    assert create_kernel(node).infer_shapes([(-1, 1), (-1, 3), (2,)]) == [(4, 3)]


def test_error_paths() -> None:
    upd = np.ones((2, 3), np.float32)
    shape = Const(np.array([4, 3]))

    def refused(code, inputs, **kw):
        expect_refused(code, SCATTER_ND, na.ScatterNd(), inputs, out_dtype=np.float32, **kw)

    refused(NNRT_INVALID_NODE, [Const(np.array([[0], [4]])), upd, shape])
    refused(NNRT_INVALID_NODE, [Const(np.array([[0], [-5]])), upd, shape])
    refused(NNRT_INVALID_NODE, [np.array([[0], [1]]), np.ones((2, 4), np.float32), shape])
    refused(NNRT_INVALID_NODE, [np.array([[0, 0, 0]]), np.ones((1,), np.float32), shape])
    refused(NNRT_INVALID_NODE, [np.array(0), np.ones((), np.float32), shape])
    refused(NNRT_INVALID_NODE, [np.array([[0], [1]]), upd, Const(np.array([-4, 3]))])
    refused(NNRT_INVALID_NODE, [np.array([[0], [1]]), upd])
    refused(NNRT_UNSUPPORTED_OP, [np.array([[0], [1]], np.int16), upd, shape])
    refused(NNRT_UNSUPPORTED_OP, [Declared(np.array([[0], [1]]), (2, -1)), upd, shape])
    refused(NNRT_UNSUPPORTED_OP, [np.array([[0], [1]]), upd,
                                  Declared(np.array([4, 3]), (-1,))])
    expect_refused(NNRT_INVALID_NODE, SCATTER_ND, na.ScatterNd(),
                   [np.array([[0], [1]]), upd, shape], out_dtype=np.float64)
