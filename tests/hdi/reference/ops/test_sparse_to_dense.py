"""SparseToDense against dense tensors written entry by entry in a Python loop: 2-D and 1-D
outputs, scalar values, a default value, duplicates (last wins), dtypes, run-time shape,
out-of-range indices, errors."""

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
    readonly,
    run_node,
    run_op,
)

SPARSE_TO_DENSE = na.NODE_TYPE_SPARSE_TO_DENSE


def dense(indices, values, shape, default=0, dtype=np.float32) -> np.ndarray:
    out = np.full(shape, default, dtype)
    rows = np.asarray(indices).reshape(-1, len(shape))
    values = np.broadcast_to(values, (len(rows),))
    for row, value in zip(rows, values):
        out[tuple(row)] = value  # in order: a repeated position keeps its last value
    return out


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("const_shape", [True, False])
def test_two_d(index_dtype, const_shape) -> None:
    idx = np.array([[0, 1], [2, 3], [1, 0], [2, 2]], index_dtype)
    values = np.array([1.5, -2.0, 3.0, 4.0], np.float32)
    shape = np.array([3, 4], index_dtype)
    out = run_op(SPARSE_TO_DENSE, na.SparseToDense(),
                 [idx, values, Const(shape) if const_shape else shape], out_dtype=np.float32)
    np.testing.assert_array_equal(out, dense(idx, values, (3, 4)))


def test_one_d_scalar_values_default_and_duplicates() -> None:
    idx = np.array([4, 1, 4, 0], np.int64)
    values = np.array([1, 2, 3, 4], np.int32)
    out = run_op(SPARSE_TO_DENSE, na.SparseToDense(),
                 [idx, values, Const(np.array([6])), np.array(-1, np.int32)], out_dtype=np.int32)
    np.testing.assert_array_equal(out, dense(idx, values, (6,), -1, np.int32))
    assert out[4] == 3  # the last of the two values for position 4
    out = run_op(SPARSE_TO_DENSE, na.SparseToDense(),
                 [np.array([[1, 1], [0, 2]]), np.array(9, np.int32), Const(np.array([2, 3]))],
                 out_dtype=np.int32)
    np.testing.assert_array_equal(out, dense([[1, 1], [0, 2]], 9, (2, 3), 0, np.int32))
    out = run_op(SPARSE_TO_DENSE, na.SparseToDense(),
                 [np.array(2), np.array(5, np.int32), Const(np.array([3]))], out_dtype=np.int32)
    assert out.tolist() == [0, 0, 5]


def test_many_duplicates_last_wins() -> None:
    gen = np.random.default_rng(3)
    idx = gen.integers(0, 4, (200, 2))
    values = np.arange(200, dtype=np.float64)
    out = run_op(SPARSE_TO_DENSE, na.SparseToDense(), [idx, values, Const(np.array([4, 4]))],
                 out_dtype=np.float64)
    np.testing.assert_array_equal(out, dense(idx, values, (4, 4), 0, np.float64))


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint16, np.int64, np.float16])
def test_dtypes(dtype) -> None:
    values = np.array([1, 1], dtype)
    out = run_op(SPARSE_TO_DENSE, na.SparseToDense(),
                 [np.array([[0, 0], [1, 2]]), values, Const(np.array([2, 3]))], out_dtype=dtype)
    assert out.dtype == dtype
    np.testing.assert_array_equal(out, dense([[0, 0], [1, 2]], values, (2, 3), 0, dtype))


def test_run_time_errors_and_dynamic() -> None:
    idx, values = np.array([[0, 1]]), np.array([1.0], np.float32)
    node = make_node(SPARSE_TO_DENSE, na.SparseToDense(), [idx, values, np.array([2, 2])],
                     out_dtype=np.float32)
    kernel = create_kernel(node)
    assert kernel.infer_shapes([(1, 2), (1,), (2,)]) == [(-1, -1)]
    (out,) = run_node(node, [idx, values, np.array([1, 2])], kernel)
    assert out.tolist() == [[0.0, 1.0]]
    expect_error(NNRT_FAILED, lambda: kernel.execute(
        [readonly(idx), readonly(values), readonly(np.array([1, 1]))]))
    expect_error(NNRT_FAILED, lambda: kernel.execute(
        [readonly(np.array([[0, -1]])), readonly(values), readonly(np.array([2, 2]))]))
    expect_error(NNRT_INVALID_SHAPE, lambda: kernel.execute(
        [readonly(idx), readonly(values), readonly(np.array([2, -2]))]))
    expect_error(NNRT_INVALID_SHAPE, lambda: kernel.execute(
        [readonly(idx), readonly(np.ones(2, np.float32)), readonly(np.array([2, 2]))]))
    node = make_node(SPARSE_TO_DENSE, na.SparseToDense(),
                     [Declared(idx, (-1, 2)), Declared(values, (-1,)), Const(np.array([2, 2]))],
                     out_dtype=np.float32)
    assert create_kernel(node).infer_shapes([(-1, 2), (-1,), (2,)]) == [(2, 2)]


def test_error_paths() -> None:
    values = np.ones(2, np.float32)
    shape = Const(np.array([2, 3]))

    def refused(code, inputs, **kw):
        kw.setdefault("out_dtype", np.float32)
        expect_refused(code, SPARSE_TO_DENSE, na.SparseToDense(), inputs, **kw)

    refused(NNRT_INVALID_NODE, [Const(np.array([[0, 0], [2, 0]])), values, shape])
    refused(NNRT_INVALID_NODE, [Const(np.array([[0, 0], [0, -1]])), values, shape])
    refused(NNRT_INVALID_NODE, [np.zeros((2, 3), np.int32), values, shape])
    refused(NNRT_INVALID_NODE, [np.zeros((2, 2), np.int32), np.ones(3, np.float32), shape])
    refused(NNRT_INVALID_NODE, [np.zeros(2, np.int32), values, shape])  # 1-D for a 2-D output
    refused(NNRT_INVALID_NODE, [np.zeros((2, 2), np.int32), values, Const(np.array([2, -3]))])
    refused(NNRT_INVALID_NODE, [np.zeros((2, 2), np.int32), values,
                                Const(np.zeros(0, np.int32))])
    refused(NNRT_INVALID_NODE, [np.zeros((2, 2), np.int32), values, shape,
                                np.array(0, np.float64)])
    refused(NNRT_INVALID_NODE, [np.zeros((2, 2), np.int32), values])
    refused(NNRT_INVALID_NODE, [np.zeros((2, 2), np.int32), values, shape], out_dtype=np.int32)
    refused(NNRT_UNSUPPORTED_OP, [np.zeros((2, 2), np.float32), values, shape])
