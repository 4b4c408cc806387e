"""Crop against windows copied element by element (explicit loops on tiny shapes): sizes for
the cropped dimensions only or for every dimension, one offset or one per dimension, the
reference-tensor form, run-time sizes, DYNAMIC dims, errors."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from nnrt.hdi.reference.kernel import create_kernel
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
    readonly,
    run_node,
    run_op,
)

CROP = na.NODE_TYPE_CROP


def window(x: np.ndarray, starts: list[int], sizes: list[int]) -> np.ndarray:
    out = np.empty(sizes, x.dtype)
    for pos in itertools.product(*(range(s) for s in sizes)):
        out[pos] = x[tuple(p + s for p, s in zip(pos, starts))]
    return out


X = np.arange(2 * 5 * 6, dtype=np.float32).reshape(2, 5, 6)


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("axis,offset,size,starts,sizes", [
    (1, [1, 2], [3, 4], [0, 1, 2], [2, 3, 4]),  # cropped dims only, one offset each
    (1, [1], [3, 4], [0, 1, 1], [2, 3, 4]),  # one offset for all
    (2, [3], [2], [0, 0, 3], [2, 5, 2]),
    (-1, [], [6], [0, 0, 0], [2, 5, 6]),  # no offset
    (0, [1, 0, 2], [1, 5, 4], [1, 0, 2], [1, 5, 4]),
    (1, [2, 1], [1, 2, 3], [0, 2, 1], [1, 2, 3]),  # a size for every dimension
])
def test_windows(index_dtype, axis, offset, size, starts, sizes) -> None:
    out = run_op(CROP, na.Crop(axis=axis, offset=offset), [X, Const(np.array(size, index_dtype))])
    np.testing.assert_array_equal(out, window(X, starts, sizes))


def test_reference_tensor_form() -> None:
    ref = np.zeros((2, 3, 3), np.int8)  # only its shape counts
    out = run_op(CROP, na.Crop(axis=1, offset=[2, 3]), [X, ref])
    np.testing.assert_array_equal(out, window(X, [0, 2, 3], [2, 3, 3]))


@pytest.mark.parametrize("dtype", [np.bool_, np.uint8, np.int32, np.float16, np.float64])
def test_dtypes(dtype) -> None:
    x = (np.arange(12) % 5).astype(dtype).reshape(3, 4)
    out = run_op(CROP, na.Crop(axis=0, offset=[1, 1]), [x, Const(np.array([2, 2], np.int32))])
    assert out.dtype == dtype
    np.testing.assert_array_equal(out, window(x, [1, 1], [2, 2]))


def test_run_time_sizes_and_dynamic_dims() -> None:
    node = make_node(CROP, na.Crop(axis=1, offset=[1]), [X, np.array([2, 2], np.int32)])
    kernel = create_kernel(node)
    assert kernel.infer_shapes([X.shape, (2,)]) == [(-1, -1, -1)]
    (out,) = run_node(node, [X, np.array([4, 5], np.int32)], kernel)
    np.testing.assert_array_equal(out, window(X, [0, 1, 1], [2, 4, 5]))
    expect_error(NNRT_INVALID_SHAPE, lambda: kernel.execute(
        [readonly(X), readonly(np.array([5, 2], np.int32))]))  # 1 + 5 > 5
    expect_error(NNRT_INVALID_SHAPE, lambda: kernel.execute(
        [readonly(X), readonly(np.array([1, 2, 2, 2], np.int32))]))
    node = make_node(CROP, na.Crop(axis=2, offset=[1]),
                     [Declared(X, (-1, 5, -1)), Const(np.array([3], np.int32))])
    kernel = create_kernel(node)
    assert kernel.infer_shapes([(-1, 5, -1), (1,)]) == [(-1, 5, 3)]
    expect_error(NNRT_INVALID_SHAPE, lambda: kernel.infer_shapes([(2, 5, 3), (1,)]))


def test_error_paths() -> None:
    size = Const(np.array([2, 2], np.int32))
    expect_refused(NNRT_INVALID_NODE, CROP, na.Crop(axis=3), [X, size])
    expect_refused(NNRT_INVALID_NODE, CROP, na.Crop(axis=1, offset=[1, 2, 3]), [X, size])
    expect_refused(NNRT_INVALID_NODE, CROP, na.Crop(axis=1, offset=[-1]), [X, size])
    expect_refused(NNRT_INVALID_NODE, CROP, na.Crop(axis=1, offset=[4]), [X, size])  # 4+2 > 5
    expect_refused(NNRT_INVALID_NODE, CROP, na.Crop(axis=1), [X, Const(np.array([2, 2, 2, 2]))])
    expect_refused(NNRT_INVALID_NODE, CROP, na.Crop(axis=1), [X, Const(np.array([2, -2]))])
    expect_refused(NNRT_INVALID_NODE, CROP, na.Crop(axis=1), [X, Const(np.array([2.0, 2.0]))])
    expect_refused(NNRT_INVALID_NODE, CROP, na.Crop(axis=1), [X, np.zeros((2, 2))])  # rank 2
    expect_refused(NNRT_INVALID_NODE, CROP, na.Crop(axis=1), [X])
    expect_refused(NNRT_INVALID_NODE, CROP, na.Crop(axis=1), [X, size], out_dtype=np.int8)
    expect_refused(NNRT_INVALID_NODE, CROP, na.Crop(axis=0), [np.array(1.0), size])
    expect_refused(NNRT_UNSUPPORTED_OP, CROP, na.Crop(axis=1),
                   [X, Declared(np.array([2, 2], np.int32), (-1,))])
