"""BroadcastTo against ONNX Expand (onnx.reference, the same bidirectional rule): attribute
and input targets, -1 entries, rank growth, dtypes, DYNAMIC dims, errors."""

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
    QuantParam,
    expect_error,
    expect_refused,
    make_node,
    onnx_reference,
    readonly,
    run_node,
    run_op,
    tensor_spec,
)

BROADCAST_TO = na.NODE_TYPE_BROADCAST_TO


@pytest.mark.parametrize("x_shape,target", [
    ((3,), (2, 3)), ((2, 1), (2, 4)), ((2, 1), (1, 3)), ((1,), (2, 3, 4)), ((), (3, 2)),
    ((4, 1, 2), (4, 3, 1)), ((2, 3), (2, 3)), ((1, 3), (5, 1, 3)),
])
def test_against_onnx_expand(x_shape, target) -> None:
    x = np.arange(int(np.prod(x_shape)), dtype=np.float32).reshape(x_shape)
    expected = onnx_reference("Expand", [x, np.array(target, np.int64)])
    out = run_op(BROADCAST_TO, na.BroadcastTo(shape=list(target)), [x])
    np.testing.assert_array_equal(out, expected)
    for index_dtype in (np.int32, np.int64):  # the target as a constant input instead
        out = run_op(BROADCAST_TO, na.BroadcastTo(), [x, Const(np.array(target, index_dtype))])
        np.testing.assert_array_equal(out, expected)


def test_keep_entries() -> None:
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    out = run_op(BROADCAST_TO, na.BroadcastTo(shape=[4, -1, 3]), [x])
    assert out.shape == (4, 2, 3)  # -1 keeps x's right-aligned dimension 0
    for i in range(4):
        np.testing.assert_array_equal(out[i], x)
    x3 = np.arange(6, dtype=np.int32).reshape(2, 1, 3)
    out = run_op(BROADCAST_TO, na.BroadcastTo(shape=[-1, 5, -1]), [x3])
    assert out.shape == (2, 5, 3)
    for i in range(5):
        np.testing.assert_array_equal(out[:, i, :], x3[:, 0, :])


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint16, np.int64, np.float16,
                                   np.float64])
def test_dtypes(dtype) -> None:
    x = (np.arange(3) % 2).astype(dtype)
    out = run_op(BROADCAST_TO, na.BroadcastTo(shape=[2, 3]), [x])
    assert out.dtype == dtype
    np.testing.assert_array_equal(out, np.stack([x, x]))


def test_run_time_target_and_dynamic_dims() -> None:
    x = np.arange(3, dtype=np.float32).reshape(3, 1)
    node = make_node(BROADCAST_TO, na.BroadcastTo(), [x, np.array([3, 4], np.int64)])
    kernel = create_kernel(node)
    assert kernel.infer_shapes([(3, 1), (2,)]) == [(-1, -1)]
    (out,) = run_node(node, [x, np.array([1, 4], np.int64)], kernel)
    np.testing.assert_array_equal(out, np.repeat(x, 4, axis=1))
    expect_error(NNRT_INVALID_SHAPE, lambda: kernel.execute(
        [readonly(x), readonly(np.array([2, 4], np.int64))]))
    expect_error(NNRT_INVALID_SHAPE, lambda: kernel.execute(
        [readonly(x), readonly(np.array([-2, 4], np.int64))]))
    node = make_node(BROADCAST_TO, na.BroadcastTo(shape=[2, 3, 4]), [Declared(x, (-1, 1))])
    kernel = create_kernel(node)
    assert kernel.infer_shapes([(-1, 1)]) == [(2, 3, 4)]
    node = make_node(BROADCAST_TO, na.BroadcastTo(shape=[1, 4]), [Declared(x, (-1, 1))])
    assert create_kernel(node).infer_shapes([(-1, 1)]) == [(-1, 4)]


def test_quantised_kept() -> None:
    q = (QuantParam(8, 2, 0.5),)
    node = make_node(BROADCAST_TO, na.BroadcastTo(shape=[2, 2]),
                     [tensor_spec(0, np.int8, (2,), quant=q)], out_quant=q)
    (out,) = run_node(node, [np.array([1, 2], np.int8)])
    assert out.tolist() == [[1, 2], [1, 2]]
    node = make_node(BROADCAST_TO, na.BroadcastTo(shape=[2, 2]),
                     [tensor_spec(0, np.int8, (2,), quant=q)])
    expect_error(NNRT_UNSUPPORTED_OP, lambda: create_kernel(node))


def test_error_paths() -> None:
    x = np.zeros((2, 3), np.float32)
    expect_refused(NNRT_INVALID_NODE, BROADCAST_TO, na.BroadcastTo(shape=[4, 3]), [x])
    expect_refused(NNRT_INVALID_NODE, BROADCAST_TO, na.BroadcastTo(shape=[2, -2]), [x])
    expect_refused(NNRT_INVALID_NODE, BROADCAST_TO, na.BroadcastTo(shape=[-1, 2, 3]), [x])
    expect_refused(NNRT_INVALID_NODE, BROADCAST_TO, na.BroadcastTo(shape=[2, 3]), [x],
                   out_dtype=np.float16)
    expect_refused(NNRT_INVALID_NODE, BROADCAST_TO, na.BroadcastTo(shape=[2, 3]), [x],
                   n_outputs=2)
    expect_refused(NNRT_INVALID_NODE, BROADCAST_TO, na.BroadcastTo(shape=[2, 3]),
                   [x, Const(np.array([2, 3], np.int32))])  # attribute and input
    expect_refused(NNRT_INVALID_NODE, BROADCAST_TO, na.BroadcastTo(),
                   [x, Const(np.array([2.0, 3.0], np.float32))])
    expect_refused(NNRT_INVALID_NODE, BROADCAST_TO, na.BroadcastTo(), [x, x, x])
    expect_refused(NNRT_UNSUPPORTED_OP, BROADCAST_TO, na.BroadcastTo(),
                   [x, Declared(np.array([2, 3], np.int32), (-1,))])
