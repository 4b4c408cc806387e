"""Stack and Unstack against outputs assembled and taken apart slice by slice with explicit
index tuples: every axis including negative ones, 2 and 3 inputs, rank 0, dtypes, DYNAMIC
dims, quantisation kept, errors."""

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
    readonly,
    run_node,
    run_op,
    tensor_spec,
)

STACK, UNSTACK = na.NODE_TYPE_STACK, na.NODE_TYPE_UNSTACK


def stacked(parts: list[np.ndarray], axis: int) -> np.ndarray:
    rank = parts[0].ndim + 1
    axis %= rank
    shape = list(parts[0].shape)
    shape.insert(axis, len(parts))
    out = np.empty(shape, parts[0].dtype)
    for k, p in enumerate(parts):
        out[(slice(None),) * axis + (k,)] = p
    return out


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -2, -3])
def test_stack_three(axis) -> None:
    parts = [np.arange(6, dtype=np.float32).reshape(2, 3) + 10 * k for k in range(3)]
    out = run_op(STACK, na.Stack(axis=axis), [parts[0], Const(parts[1]), parts[2]])
    np.testing.assert_array_equal(out, stacked(parts, axis))


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -3])
def test_unstack(axis) -> None:
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    n = x.shape[axis]
    node = make_node(UNSTACK, na.Unstack(axis=axis), [x], n_outputs=n)
    outs = run_node(node, [x])
    assert len(outs) == n
    for k, out in enumerate(outs):
        expected = x[(slice(None),) * (axis % 3) + (k,)]
        np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(stacked(outs, axis), x)


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint32, np.int64, np.float16])
def test_dtypes_and_scalars(dtype) -> None:
    a, b = np.array(1, dtype), np.array(0, dtype)
    out = run_op(STACK, na.Stack(axis=0), [a, b])
    assert out.dtype == dtype and out.shape == (2,) and out[0] == a and out[1] == b
    node = make_node(UNSTACK, na.Unstack(axis=0), [out], n_outputs=2)
    x, y = run_node(node, [out])
    assert x.shape == () and x.dtype == dtype and x == a and y == b


def test_dynamic_dimensions() -> None:
    a = np.zeros((2, 3), np.float32)
    node = make_node(STACK, na.Stack(axis=1), [Declared(a, (-1, 3)), Declared(a, (2, -1))])
    kernel = create_kernel(node)
    assert kernel.infer_shapes([(-1, 3), (2, -1)]) == [(2, 2, 3)]
    expect_error(NNRT_INVALID_SHAPE, lambda: kernel.execute([readonly(a), readonly(a[:, :2])]))
    node = make_node(UNSTACK, na.Unstack(axis=0), [Declared(a, (-1, 3))], n_outputs=2)
    kernel = create_kernel(node)
    assert kernel.infer_shapes([(-1, 3)]) == [(3,), (3,)]
    expect_error(NNRT_INVALID_SHAPE, lambda: kernel.execute([readonly(np.zeros((3, 3)))]))


def test_quantisation() -> None:
    q = (QuantParam(8, 1, 0.5),)
    specs = [tensor_spec(0, np.int8, (2,), quant=q), tensor_spec(1, np.int8, (2,), quant=q)]
    node = make_node(STACK, na.Stack(axis=0), specs, out_quant=q)
    (out,) = run_node(node, [np.array([1, 2], np.int8), np.array([3, 4], np.int8)])
    assert out.tolist() == [[1, 2], [3, 4]]
    other = [specs[0], tensor_spec(1, np.int8, (2,), quant=(QuantParam(8, 0, 0.5),))]
    expect_error(NNRT_UNSUPPORTED_OP,
                 lambda: create_kernel(make_node(STACK, na.Stack(), other, out_quant=q)))


def test_error_paths() -> None:
    a = np.zeros((2, 3), np.float32)
    expect_refused(NNRT_INVALID_NODE, STACK, na.Stack(axis=0), [a])
    expect_refused(NNRT_INVALID_NODE, STACK, na.Stack(axis=3), [a, a])
    expect_refused(NNRT_INVALID_NODE, STACK, na.Stack(axis=-4), [a, a])
    expect_refused(NNRT_INVALID_NODE, STACK, na.Stack(axis=0), [a, a[:, :2]])
    expect_refused(NNRT_INVALID_NODE, STACK, na.Stack(axis=0), [a, a[None]])
    expect_refused(NNRT_INVALID_NODE, STACK, na.Stack(axis=0), [a, a.astype(np.float64)])
    expect_refused(NNRT_INVALID_NODE, STACK, na.Stack(axis=0), [a, a], out_dtype=np.int32)
    expect_refused(NNRT_INVALID_NODE, STACK, na.Stack(axis=0), [a, a], n_outputs=2)
    expect_refused(NNRT_INVALID_NODE, UNSTACK, na.Unstack(axis=0), [a], n_outputs=3)
    expect_refused(NNRT_INVALID_NODE, UNSTACK, na.Unstack(axis=2), [a], n_outputs=2)
    expect_refused(NNRT_INVALID_NODE, UNSTACK, na.Unstack(axis=0), [a], n_outputs=0)
    expect_refused(NNRT_INVALID_NODE, UNSTACK, na.Unstack(axis=0), [a, a], n_outputs=2)
    expect_refused(NNRT_INVALID_NODE, UNSTACK, na.Unstack(axis=0), [np.array(1.0)],
                   n_outputs=1)
