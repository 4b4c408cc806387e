"""Fill and ConstantOfShape against ONNX ConstantOfShape (onnx.reference) and closed forms:
constant and run-time shapes, scalar shapes, dataType codes, value conversion, dtypes,
errors."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import numpy_helper

from nnrt.hdi.reference.kernel import create_kernel
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
    onnx_reference,
    readonly,
    run_node,
    run_op,
)

FILL, CONSTANT_OF_SHAPE = na.NODE_TYPE_FILL, na.NODE_TYPE_CONSTANT_OF_SHAPE


@pytest.mark.parametrize("shape", [(2, 3), (4,), (), (1, 0, 2)])
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_constant_of_shape_against_onnx(shape, index_dtype) -> None:
    dims = np.array(shape, index_dtype)
    value = np.array([2.5], np.float32)
    expected = onnx_reference("ConstantOfShape", [dims.astype(np.int64)],
                              value=numpy_helper.from_array(value))
    for shape_input in (Const(dims), dims):
        out = run_op(CONSTANT_OF_SHAPE, na.ConstantOfShape(value=[2.5]), [shape_input],
                     out_dtype=np.float32)
        assert out.shape == expected.shape
        np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("dtype,code,value,expected", [
    (np.float32, 0, [], 0.0), (np.float16, ht.DATA_TYPE_FLOAT16, [1.5], 1.5),
    (np.int32, ht.DATA_TYPE_INT32, [-2.7], -2), (np.uint8, 0, [255.0], 255),
    (np.bool_, ht.DATA_TYPE_BOOL, [3.0], True), (np.int64, ht.DATA_TYPE_INT64, [7.0], 7),
    (np.float64, 0, [0.25], 0.25),
])
def test_constant_of_shape_types(dtype, code, value, expected) -> None:
    out = run_op(CONSTANT_OF_SHAPE, na.ConstantOfShape(dataType=code, value=value),
                 [Const(np.array([2, 2], np.int64))], out_dtype=dtype)
    assert out.dtype == dtype and out.shape == (2, 2)
    assert (out == np.array(expected, dtype)).all()


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint64, np.int32, np.float16,
                                   np.float64])
def test_fill(dtype) -> None:
    value = np.array(1, dtype)
    out = run_op(FILL, na.Fill(), [value, Const(np.array([3, 2], np.int32))])
    assert out.dtype == dtype and out.shape == (3, 2) and (out == value).all()
    out = run_op(FILL, na.Fill(), [np.array([0], dtype), np.array([2], np.int64)])
    assert out.shape == (2,) and not out.any()
    out = run_op(FILL, na.Fill(), [value, Const(np.zeros(0, np.int64))])
    assert out.shape == () and out == value


def test_run_time_shape_and_errors() -> None:
    node = make_node(FILL, na.Fill(), [np.float32(1.0), np.array([2, 2], np.int32)])
    kernel = create_kernel(node)
    assert kernel.infer_shapes([(), (2,)]) == [(-1, -1)]
    (out,) = run_node(node, [np.array(4.0, np.float32), np.array([1, 3], np.int32)], kernel)
    assert out.tolist() == [[4.0, 4.0, 4.0]]
    expect_error(NNRT_INVALID_SHAPE, lambda: kernel.execute(
        [readonly(np.array(4.0, np.float32)), readonly(np.array([1, -3], np.int32))]))
    expect_error(NNRT_INVALID_SHAPE, lambda: kernel.execute(
        [readonly(np.array(4.0, np.float32)), readonly(np.array([1, 3, 1], np.int32))]))
    expect_error(NNRT_INVALID_SHAPE, lambda: kernel.execute(
        [readonly(np.ones(2, np.float32)), readonly(np.array([1, 3], np.int32))]))
    node = make_node(CONSTANT_OF_SHAPE, na.ConstantOfShape(value=[1.0]),
                     [np.array([2], np.int64)], out_dtype=np.float32)
    kernel = create_kernel(node)
    assert kernel.infer_shapes([(1,)]) == [(-1,)]
    expect_error(NNRT_INVALID_SHAPE, lambda: kernel.execute([readonly(np.array([-1]))]))


def test_error_paths() -> None:
    shape = Const(np.array([2, 2], np.int32))
    f = np.array(1.0, np.float32)
    expect_refused(NNRT_INVALID_NODE, FILL, na.Fill(), [f, Const(np.array([2, -1]))])
    expect_refused(NNRT_INVALID_NODE, FILL, na.Fill(), [f, Const(np.array([2.0, 1.0]))])
    expect_refused(NNRT_INVALID_NODE, FILL, na.Fill(), [np.ones(2, np.float32), shape])
    expect_refused(NNRT_INVALID_NODE, FILL, na.Fill(), [f, shape], out_dtype=np.float64)
    expect_refused(NNRT_INVALID_NODE, FILL, na.Fill(), [f])
    expect_refused(NNRT_UNSUPPORTED_OP, FILL, na.Fill(),
                   [f, Declared(np.array([2, 2], np.int32), (-1,))])

    def refused_cos(code, attrs, dtype=np.float32, inputs=(shape,)):
        expect_refused(code, CONSTANT_OF_SHAPE, attrs, list(inputs), out_dtype=dtype)

    refused_cos(NNRT_INVALID_NODE, na.ConstantOfShape(value=[1.0, 2.0]))
    refused_cos(NNRT_INVALID_NODE, na.ConstantOfShape(dataType=ht.DATA_TYPE_INT32))
    refused_cos(NNRT_INVALID_NODE, na.ConstantOfShape(dataType=99))
    refused_cos(NNRT_INVALID_NODE, na.ConstantOfShape(value=[300.0]), np.int8)
    refused_cos(NNRT_INVALID_NODE, na.ConstantOfShape(value=[-1.0]), np.uint8)
    refused_cos(NNRT_INVALID_NODE, na.ConstantOfShape(value=[float("inf")]), np.int32)
    refused_cos(NNRT_INVALID_NODE, na.ConstantOfShape(), inputs=(shape, shape))
    refused_cos(NNRT_INVALID_NODE, na.ConstantOfShape(), inputs=(Const(np.array([[2]])),))
