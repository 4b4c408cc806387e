"""OneHot against ONNX OneHot (onnx.reference) for indices >= 0 (ONNX counts negative ones
from the end, TensorFlow and this driver give them a row of offValue: checked with an
explicit loop), every axis, hdi_ops.json's shape example, dtypes, run-time depth and values,
errors."""

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
    expect_error,
    expect_refused,
    make_node,
    onnx_reference,
    readonly,
    run_node,
    run_op,
)

ONE_HOT = na.NODE_TYPE_ONE_HOT


def one_hot(indices, depth, on, off, axis=-1, depth_dtype=np.int32, const_depth=True):
    on, off = np.asarray(on), np.asarray(off)
    d = np.array(depth, depth_dtype)
    return run_op(ONE_HOT, na.OneHot(axis=axis),
                  [np.asarray(indices), Const(d) if const_depth else d, on, off],
                  out_dtype=on.dtype)


IDX = np.array([[0, 3, 1], [2, 5, 4]], np.int64)  # 5 is out of range for depth 5


@pytest.mark.parametrize("axis", [-3, -2, -1, 0, 1, 2])
@pytest.mark.parametrize("depth_dtype", [np.int32, np.int64])
def test_against_onnx(axis, depth_dtype) -> None:
    on, off = np.float32(2.5), np.float32(-1.0)
    expected = onnx_reference("OneHot", [IDX, np.array(5, np.int64), np.array([off, on])],
                              axis=axis)
    out = one_hot(IDX, 5, on, off, axis, depth_dtype)
    assert out.shape == expected.shape
    np.testing.assert_array_equal(out, expected)
    out = one_hot(IDX, [5], on, off, axis, depth_dtype, const_depth=False)
    np.testing.assert_array_equal(out, expected)


def test_shape_example_and_negative_indices() -> None:
    n, c, d = 2, 3, 4
    idx = np.array([[0, -1, 3], [4, 2, -4]], np.int32)
    for axis, shape in ((0, (d, n, c)), (1, (n, d, c)), (-1, (n, c, d))):
        out = one_hot(idx, d, np.int8(7), np.int8(0), axis)
        assert out.shape == shape
        moved = np.moveaxis(out, axis, -1)
        for i, j, k in itertools.product(range(n), range(c), range(d)):
            assert moved[i, j, k] == (7 if idx[i, j] == k else 0)


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint32, np.int64, np.float16,
                                   np.float64])
@pytest.mark.parametrize("index_dtype", [np.uint8, np.int16, np.int32, np.uint64])
def test_dtypes(dtype, index_dtype) -> None:
    idx = np.array([1, 0, 2], index_dtype)
    out = one_hot(idx, 3, np.array(1, dtype), np.array(0, dtype))
    assert out.dtype == dtype
    np.testing.assert_array_equal(out, np.eye(3, dtype=dtype)[[1, 0, 2]])


def test_scalar_indices_and_one_element_values() -> None:
    out = one_hot(np.array(2, np.int32), 4, np.array([1.0], np.float32),
                  np.array([0.5], np.float32))
    assert out.tolist() == [0.5, 0.5, 1.0, 0.5]


def test_run_time_depth() -> None:
    idx = np.array([0, 2], np.int32)
    args = [idx, np.array(3, np.int32), np.float32(1), np.float32(0)]
    node = make_node(ONE_HOT, na.OneHot(axis=0), [np.asarray(a) for a in args],
                     out_dtype=np.float32)
    kernel = create_kernel(node)
    assert kernel.infer_shapes([(2,), (), (), ()]) == [(-1, 2)]
    (out,) = run_node(node, [np.asarray(a) for a in args], kernel)
    assert out.shape == (3, 2)
    expect_error(NNRT_INVALID_SHAPE, lambda: kernel.execute(
        [readonly(idx), readonly(np.array(0, np.int32)), readonly(np.float32(1)),
         readonly(np.float32(0))]))
    expect_error(NNRT_INVALID_SHAPE, lambda: kernel.execute(
        [readonly(idx), readonly(np.array(3, np.int32)), readonly(np.ones(2, np.float32)),
         readonly(np.float32(0))]))


def test_error_paths() -> None:
    idx = np.array([0, 1], np.int32)
    f1, f0 = np.array(1, np.float32), np.array(0, np.float32)

    def refused(code, inputs, axis=-1, **kw):
        expect_refused(code, ONE_HOT, na.OneHot(axis=axis), inputs, out_dtype=np.float32, **kw)

    refused(NNRT_INVALID_NODE, [idx, Const(np.array(0, np.int32)), f1, f0])
    refused(NNRT_INVALID_NODE, [idx, Const(np.array([2, 2], np.int32)), f1, f0])
    refused(NNRT_INVALID_NODE, [idx, Const(np.array(2.0, np.float32)), f1, f0])
    refused(NNRT_INVALID_NODE, [idx, Const(np.array(2, np.int32)), f1, f0], axis=2)
    refused(NNRT_INVALID_NODE, [idx, Const(np.array(2, np.int32)), f1, f0], axis=-3)
    refused(NNRT_INVALID_NODE, [idx, Const(np.array(2, np.int32)), f1, f0.astype(np.float64)])
    refused(NNRT_INVALID_NODE, [idx, Const(np.array(2, np.int32)), np.ones(2, np.float32), f0])
    refused(NNRT_INVALID_NODE, [idx, Const(np.array(2, np.int32)), f1])
    refused(NNRT_UNSUPPORTED_OP, [idx.astype(np.float32), Const(np.array(2, np.int32)), f1, f0])
    expect_refused(NNRT_INVALID_NODE, ONE_HOT, na.OneHot(),
                   [idx, Const(np.array(2, np.int32)), f1, f0], out_dtype=np.float16)
