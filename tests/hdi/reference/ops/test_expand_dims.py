"""ExpandDims against ONNX Unsqueeze with one axis (onnx.reference; both count a negative
axis from the end of the output): every position, both index dtypes, scalar and
one-element axis tensors, run-time axis, DYNAMIC dims, errors."""

from __future__ import annotations

import numpy as np
import pytest

from nnrt.hdi.reference.kernel import create_kernel
from nnrt.protos import node_attrs_pb2 as na
from tests.hdi.reference.util import (
    NNRT_INVALID_NODE,
    NNRT_INVALID_SHAPE,
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

EXPAND_DIMS = na.NODE_TYPE_EXPAND_DIMS


@pytest.mark.parametrize("axis", [-3, -2, -1, 0, 1, 2])
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_against_onnx_unsqueeze(axis, index_dtype) -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    expected = onnx_reference("Unsqueeze", [x, np.array([axis], np.int64)])
    for axis_input in (np.array(axis, index_dtype), np.array([axis], index_dtype)):
        out = run_op(EXPAND_DIMS, na.ExpandDims(), [x, Const(axis_input)])
        assert out.shape == expected.shape
        np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint32, np.float16])
def test_dtypes_and_scalar(dtype) -> None:
    out = run_op(EXPAND_DIMS, na.ExpandDims(), [np.array(1, dtype), Const(np.array(0, np.int32))])
    assert out.shape == (1,) and out.dtype == dtype
    out = run_op(EXPAND_DIMS, na.ExpandDims(), [np.array(1, dtype), Const(np.array(-1, np.int32))])
    assert out.shape == (1,)


def test_run_time_axis_and_dynamic_dims() -> None:
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    node = make_node(EXPAND_DIMS, na.ExpandDims(), [x, np.array([0], np.int32)])
    kernel = create_kernel(node)
    assert kernel.infer_shapes([(2, 3), (1,)]) == [(-1, -1, -1)]
    (out,) = run_node(node, [x, np.array([1], np.int32)], kernel)
    assert out.shape == (2, 1, 3)
    expect_error(NNRT_INVALID_SHAPE, lambda: kernel.execute(
        [readonly(x), readonly(np.array([3], np.int32))]))
    expect_error(NNRT_INVALID_SHAPE, lambda: kernel.execute(
        [readonly(x), readonly(np.array([], np.int32))]))
    node = make_node(EXPAND_DIMS, na.ExpandDims(), [Declared(x, (-1, 3)),
                                                     Const(np.array(-1, np.int32))])
    assert create_kernel(node).infer_shapes([(-1, 3), ()]) == [(-1, 3, 1)]


def test_error_paths() -> None:
    x = np.zeros((2, 3), np.float32)
    expect_refused(NNRT_INVALID_NODE, EXPAND_DIMS, na.ExpandDims(), [x])
    expect_refused(NNRT_INVALID_NODE, EXPAND_DIMS, na.ExpandDims(), [x, Const(np.array(3))])
    expect_refused(NNRT_INVALID_NODE, EXPAND_DIMS, na.ExpandDims(), [x, Const(np.array(-4))])
    expect_refused(NNRT_INVALID_NODE, EXPAND_DIMS, na.ExpandDims(),
                   [x, Const(np.array([0, 1], np.int32))])
    expect_refused(NNRT_INVALID_NODE, EXPAND_DIMS, na.ExpandDims(),
                   [x, Const(np.array(0.0, np.float32))])
    expect_refused(NNRT_INVALID_NODE, EXPAND_DIMS, na.ExpandDims(),
                   [x, Const(np.array(0, np.int32))], out_dtype=np.float64)
