"""Reshape: -1 and 0 entries, INT32/INT64 shape tensors, constant and run-time shapes,
DYNAMIC propagation, views instead of copies, error paths."""

from __future__ import annotations

import numpy as np
import pytest

from nnrt.hdi.reference.kernel import KERNELS, create_kernel
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from tests.hdi.reference.util import (
    NNRT_INVALID_NODE,
    NNRT_INVALID_SHAPE,
    NNRT_UNSUPPORTED_OP,
    Const,
    Declared,
    QuantParam,
    expect_error,
    expect_refused,
    make_node,
    readonly,
    run_node,
    run_op,
)

RESHAPE = na.NODE_TYPE_RESHAPE


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("target,expected", [
    ([6, 4], (6, 4)), ([-1], (24,)), ([2, -1, 3], (2, 4, 3)), ([0, -1], (2, 12)),
    ([0, 0, 4], (2, 3, 4)), ([4, 0, -1], (4, 3, 2)), ([1, 24, 1], (1, 24, 1)),
])
def test_constant_shape(index_dtype, target, expected) -> None:
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    out = run_op(RESHAPE, na.Reshape(), [x, Const(np.array(target, index_dtype))])
    assert out.shape == expected
    assert out.ravel().tolist() == list(range(24))  # row-major order kept


def test_result_is_a_view() -> None:
    x = readonly(np.arange(1 << 16, dtype=np.float32).reshape(16, 4096))
    node = make_node(RESHAPE, na.Reshape(), [x, Const(np.array([-1, 256], np.int64))])
    out = create_kernel(node).execute([x, node.inputs[1].constant])[0]
    assert out.shape == (256, 256) and np.shares_memory(out, x)


def test_run_time_shape() -> None:
    x = np.arange(12, dtype=np.int16).reshape(3, 4)
    node = make_node(RESHAPE, na.Reshape(), [x, np.array([2, 3, 2], np.int32)])
    kernel = create_kernel(node)
    assert kernel.infer_shapes([(3, 4), (3,)]) == [(-1, -1, -1)]
    (out,) = run_node(node, [x, np.array([0, 2, -1], np.int32)], kernel)
    assert out.shape == (3, 2, 2) and out.ravel().tolist() == list(range(12))
    expect_error(NNRT_INVALID_SHAPE,
                 lambda: kernel.execute([readonly(x), readonly(np.array([5, -1, 1], np.int32))]))
    expect_error(NNRT_INVALID_SHAPE,
                 lambda: kernel.execute([readonly(x), readonly(np.array([-1, -1, 1], np.int32))]))


def test_dynamic_input_dimensions() -> None:
    x = np.zeros((3, 4, 2), np.float32)
    node = make_node(RESHAPE, na.Reshape(),
                     [Declared(x, (-1, 4, 2)), Const(np.array([0, -1], np.int64))])
    kernel = create_kernel(node)
    assert kernel.infer_shapes([(-1, 4, 2), (2,)]) == [(-1, 8)]  # the copied dim cancels
    assert kernel.infer_shapes([(3, -1, 2), (2,)]) == [(3, -1)]
    node = make_node(RESHAPE, na.Reshape(),
                     [Declared(x, (-1, 4, 2)), Const(np.array([-1, 8], np.int64))])
    assert create_kernel(node).infer_shapes([(-1, 4, 2), (2,)]) == [(-1, 8)]
    (out,) = run_node(node, [x, np.array([-1, 8])])
    assert out.shape == (3, 8)


def test_scalar_and_quantised_and_bool() -> None:
    out = run_op(RESHAPE, na.Reshape(),
                 [np.array([7], np.int8), Const(np.zeros((0,), np.int32))])
    assert out.shape == () and int(out) == 7
    q = [QuantParam(8, 3, 0.5)]
    x = np.arange(8, dtype=np.int8)
    node = make_node(RESHAPE, na.Reshape(), [x, Const(np.array([2, 4], np.int32))],
                     quant_type=ht.QUANT_TYPE_ALL, out_quant=q)
    # create_kernel refuses every QUANT_TYPE_ALL node for now; the kernel itself moves the
    # quantised bytes unchanged once the framework lets such nodes through.
    (out,) = run_node(node, [x, np.array([2, 4], np.int32)], KERNELS[RESHAPE](node))
    assert out.tolist() == [[0, 1, 2, 3], [4, 5, 6, 7]]
    out = run_op(RESHAPE, na.Reshape(), [np.ones((2, 2), np.bool_),
                                         Const(np.array([4], np.int32))])
    assert out.dtype == np.bool_ and out.shape == (4,)


def test_error_paths() -> None:
    x = np.zeros((2, 3, 4), np.float32)

    def refused(code, shape_input, **kw):
        expect_refused(code, RESHAPE, na.Reshape(), [x, shape_input], **kw)

    refused(NNRT_INVALID_NODE, Const(np.array([5, 5], np.int32)))  # element count
    refused(NNRT_INVALID_NODE, Const(np.array([-1, -1], np.int32)))  # two -1
    refused(NNRT_INVALID_NODE, Const(np.array([-2, 12], np.int32)))  # other negative
    refused(NNRT_INVALID_NODE, Const(np.array([5, -1], np.int32)))  # 24 % 5
    refused(NNRT_INVALID_NODE, Const(np.array([24, 1, 1, 0], np.int32)))  # 0 past the rank
    refused(NNRT_INVALID_NODE, Const(np.array([0, -1], np.int32)), out_dtype=np.float16)
    refused(NNRT_INVALID_NODE, Const(np.array([24.0], np.float32)))  # not an index type
    refused(NNRT_INVALID_NODE, Const(np.array([[24]], np.int32)))  # not 1-D
    refused(NNRT_UNSUPPORTED_OP, Declared(np.array([24], np.int32), (-1,)))  # unknown rank
    expect_refused(NNRT_INVALID_NODE, RESHAPE, na.Reshape(), [x])
    refused(NNRT_INVALID_NODE, Const(np.array([0, 5, -1], np.int32)))  # 12 % 5 after the copy
