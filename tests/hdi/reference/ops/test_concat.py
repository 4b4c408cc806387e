"""Concat: 2 and 3 inputs, every axis including negative ones, dtypes, DYNAMIC dims, and the
error paths; the reference assembles the output by explicit slice placement."""

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
    run_op,
    tensor_spec,
)

CONCAT = na.NODE_TYPE_CONCAT


def _reference(parts: list[np.ndarray], axis: int) -> np.ndarray:
    axis %= parts[0].ndim
    shape = list(parts[0].shape)
    shape[axis] = sum(p.shape[axis] for p in parts)
    out = np.empty(shape, dtype=parts[0].dtype)
    offset = 0
    for p in parts:
        index = [slice(None)] * len(shape)
        index[axis] = slice(offset, offset + p.shape[axis])
        out[tuple(index)] = p
        offset += p.shape[axis]
    return out


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -2, -3])
def test_three_inputs(axis: int) -> None:
    sizes = [1, 2, 3]
    parts = []
    for i, k in enumerate(sizes):
        shape = [2, 3, 4]
        shape[axis % 3] = k
        parts.append(np.full(shape, i, np.float32) + np.arange(np.prod(shape)).reshape(shape))
    out = run_op(CONCAT, na.Concat(axis=axis), [parts[0], Const(parts[1]), parts[2]])
    np.testing.assert_array_equal(out, _reference(parts, axis))


@pytest.mark.parametrize("dtype", [np.int8, np.int64, np.float16, np.bool_])
def test_dtypes(dtype) -> None:
    a = (np.arange(6).reshape(2, 3) % 2).astype(dtype)
    b = np.ones((2, 1), dtype)
    out = run_op(CONCAT, na.Concat(axis=1), [a, b])
    assert out.dtype == dtype
    np.testing.assert_array_equal(out, _reference([a, b], 1))


def test_dynamic_dimensions() -> None:
    a, b = np.zeros((2, 3), np.float32), np.zeros((2, 5), np.float32)
    node = make_node(CONCAT, na.Concat(axis=1), [Declared(a, (-1, 3)), Declared(b, (2, -1))])
    kernel = create_kernel(node)
    assert kernel.infer_shapes([(-1, 3), (2, -1)]) == [(2, -1)]
    assert kernel.infer_shapes([(2, 3), (2, 5)]) == [(2, 8)]
    expect_error(NNRT_INVALID_SHAPE, lambda: kernel.infer_shapes([(2, 3), (4, 5)]))


def test_quantised_inputs() -> None:
    q = (QuantParam(8, 1, 0.5),)
    a, b = np.zeros((2, 2), np.int8), np.ones((2, 2), np.int8)
    same = [tensor_spec(0, np.int8, (2, 2), quant=q), tensor_spec(1, np.int8, (2, 2), quant=q)]
    node = make_node(CONCAT, na.Concat(axis=0), same, out_quant=q, quant_type=ht.QUANT_TYPE_ALL)
    # create_kernel refuses every QUANT_TYPE_ALL node for now; the kernel itself joins
    # identically quantised tensors as they are.
    out = KERNELS[CONCAT](node).execute([a, b])[0]
    assert out.tolist() == [[0, 0], [0, 0], [1, 1], [1, 1]]
    other = [same[0], tensor_spec(1, np.int8, (2, 2), quant=(QuantParam(8, 0, 0.25),))]
    node = make_node(CONCAT, na.Concat(axis=0), other, out_quant=q)
    expect_error(NNRT_UNSUPPORTED_OP, lambda: create_kernel(node))


def test_error_paths() -> None:
    a = np.zeros((2, 3), np.float32)
    expect_refused(NNRT_INVALID_NODE, CONCAT, na.Concat(axis=0), [a])
    expect_refused(NNRT_INVALID_NODE, CONCAT, na.Concat(axis=2), [a, a])
    expect_refused(NNRT_INVALID_NODE, CONCAT, na.Concat(axis=-3), [a, a])
    expect_refused(NNRT_INVALID_NODE, CONCAT, na.Concat(axis=0), [a, np.zeros((2, 4), np.float32)])
    expect_refused(NNRT_INVALID_NODE, CONCAT, na.Concat(axis=0), [a, np.zeros((2, 3, 1),
                                                                               np.float32)])
    expect_refused(NNRT_INVALID_NODE, CONCAT, na.Concat(axis=0), [a, a.astype(np.float64)])
    expect_refused(NNRT_INVALID_NODE, CONCAT, na.Concat(axis=0), [a, a], out_dtype=np.float16)
    expect_refused(NNRT_INVALID_NODE, CONCAT, na.Concat(axis=0), [a, a], n_outputs=2)
