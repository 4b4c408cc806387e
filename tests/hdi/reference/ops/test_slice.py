"""SliceFusion against ONNX Slice (onnx.reference; starts = begin, ends = begin + size, or
the end for size -1): with and without axes, negative axes, size -1 and 0, dtypes, run-time
begin/size, DYNAMIC dims, errors."""

from __future__ import annotations

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
    onnx_reference,
    readonly,
    run_node,
    run_op,
)

SLICE = na.NODE_TYPE_SLICE_FUSION
BIG = np.iinfo(np.int64).max


def onnx_slice(x: np.ndarray, begin: list[int], size: list[int], axes: list[int]) -> np.ndarray:
    axes = axes or list(range(len(begin)))
    ends = [BIG if s == -1 else b + s for b, s in zip(begin, size)]
    return onnx_reference("Slice", [x, np.array(begin, np.int64), np.array(ends, np.int64),
                                    np.array(axes, np.int64)])


X = np.arange(3 * 4 * 5, dtype=np.float32).reshape(3, 4, 5)


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("begin,size,axes", [
    ([1, 0, 2], [2, 4, 3], []), ([0, 1], [3, 2], []), ([1], [2], [2]), ([2, 1], [-1, 2], [2, 0]),
    ([0, 3], [-1, 1], [-1, -2]), ([1, 1, 1], [-1, -1, -1], []), ([2], [0], [1]),
    ([0, 0, 0], [3, 4, 5], [0, 1, 2]),
])
def test_against_onnx_slice(index_dtype, begin, size, axes) -> None:
    expected = onnx_slice(X, begin, size, axes)
    out = run_op(SLICE, na.SliceFusion(axes=axes),
                 [X, Const(np.array(begin, index_dtype)), Const(np.array(size, index_dtype))])
    assert out.shape == expected.shape
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint32, np.int64, np.float16])
def test_dtypes_and_rank1(dtype) -> None:
    x = (np.arange(7) % 4).astype(dtype)
    out = run_op(SLICE, na.SliceFusion(), [x, Const(np.array([2])), Const(np.array([3]))])
    assert out.dtype == dtype
    np.testing.assert_array_equal(out, x[2:5])


def test_run_time_begin_size_and_dynamic_dims() -> None:
    node = make_node(SLICE, na.SliceFusion(axes=[1, 2]),
                     [X, np.array([0, 0], np.int32), Const(np.array([2, -1], np.int32))])
    kernel = create_kernel(node)
    assert kernel.infer_shapes([X.shape, (2,), (2,)]) == [(3, 2, -1)]
    (out,) = run_node(node, [X, np.array([1, 3], np.int32), np.array([2, -1], np.int32)],
                      kernel)
    np.testing.assert_array_equal(out, onnx_slice(X, [1, 3], [2, -1], [1, 2]))
    expect_error(NNRT_INVALID_SHAPE, lambda: kernel.execute(
        [readonly(X), readonly(np.array([3, 0], np.int32)), readonly(np.array([2, -1]))]))
    expect_error(NNRT_INVALID_SHAPE, lambda: kernel.execute(
        [readonly(X), readonly(np.array([-1, 0], np.int32)), readonly(np.array([2, -1]))]))
    node = make_node(SLICE, na.SliceFusion(),
                     [X, Const(np.array([1, 1], np.int32)), np.array([1, 1], np.int32)])
    assert create_kernel(node).infer_shapes([X.shape, (2,), (2,)]) == [(-1, -1, 5)]
    node = make_node(SLICE, na.SliceFusion(), [Declared(X, (-1, 4, -1)),
                                               Const(np.array([1, 1, 1])),
                                               Const(np.array([1, -1, -1]))])
    kernel = create_kernel(node)
    assert kernel.infer_shapes([(-1, 4, -1), (3,), (3,)]) == [(1, 3, -1)]
    assert kernel.infer_shapes([(3, 4, 5), (3,), (3,)]) == [(1, 3, 4)]
    expect_error(NNRT_INVALID_SHAPE, lambda: kernel.infer_shapes([(1, 4, 5), (3,), (3,)]))


def test_error_paths() -> None:
    def refused(begin, size, axes=(), code=NNRT_INVALID_NODE, **kw):
        expect_refused(code, SLICE, na.SliceFusion(axes=list(axes)),
                       [X, Const(np.array(begin)), Const(np.array(size))], **kw)

    refused([1, 1], [1])  # lengths differ
    refused([1], [1], axes=[0, 1])
    refused([1], [1], axes=[3])
    refused([1, 1], [1, 1], axes=[1, -2])  # repeated
    refused([0, 0, 0, 0], [1, 1, 1, 1])  # more than the rank
    refused([-1], [1])
    refused([1], [-2])
    refused([2], [2])  # 2 + 2 > 3
    refused([4], [-1])  # begin past the dimension
    refused([1], [1], out_dtype=np.float64)
    expect_refused(NNRT_INVALID_NODE, SLICE, na.SliceFusion(), [X, Const(np.array([1]))])
    expect_refused(NNRT_INVALID_NODE, SLICE, na.SliceFusion(),
                   [X, Const(np.array([1.0])), Const(np.array([1]))])
    expect_refused(NNRT_UNSUPPORTED_OP, SLICE, na.SliceFusion(),
                   [X, Declared(np.array([1], np.int32), (-1,)),
                    Declared(np.array([1], np.int32), (-1,))])
