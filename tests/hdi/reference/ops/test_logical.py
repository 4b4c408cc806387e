"""LogicalAnd, LogicalOr, LogicalNot: bool or implicitly converted (non-zero) operands,
broadcasting. References: onnx's And/Or/Not on bool tensors, Python's bool() element by
element for converted operands."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from nnrt.hdi.reference.kernel import create_kernel
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from tests.hdi.reference.util import (
    NNRT_INVALID_NODE,
    NNRT_INVALID_SHAPE,
    NNRT_UNSUPPORTED_OP,
    Declared,
    expect_error,
    expect_refused,
    make_node,
    onnx_reference,
    rng,
    run_op,
)

AND, OR, NOT = na.NODE_TYPE_LOGICAL_AND, na.NODE_TYPE_LOGICAL_OR, na.NODE_TYPE_LOGICAL_NOT
BINARY = {AND: (na.LogicalAnd, "And", lambda a, b: a and b),
          OR: (na.LogicalOr, "Or", lambda a, b: a or b)}


@pytest.mark.parametrize("node_type", BINARY, ids=["and", "or"])
@pytest.mark.parametrize("shapes", [((2, 3), (2, 3)), ((2, 1, 3), (4, 1)), ((), (3,)),
                                    ((), ())])
def test_bool_matches_onnx(node_type: int, shapes) -> None:
    attrs_cls, onnx_op, _ = BINARY[node_type]
    x = rng(1).integers(0, 2, shapes[0]).astype(np.bool_)
    y = rng(2).integers(0, 2, shapes[1]).astype(np.bool_)
    out = run_op(node_type, attrs_cls(), [x, y], out_shape=np.broadcast_shapes(*shapes))
    np.testing.assert_array_equal(out, onnx_reference(onnx_op, [x, y]))


@pytest.mark.parametrize("shape", [(2, 3), (), (1,)])
def test_not_matches_onnx(shape) -> None:
    x = rng(3).integers(0, 2, shape).astype(np.bool_)
    out = run_op(NOT, na.LogicalNot(), [x], out_shape=shape)
    np.testing.assert_array_equal(out, onnx_reference("Not", [x]))


@pytest.mark.parametrize("dtype", [np.int8, np.uint16, np.int64, np.float16, np.float32])
def test_implicit_conversion(dtype: Any) -> None:
    values = [0, 1, -1, 2, 0] if np.dtype(dtype).kind != "u" else [0, 1, 255, 2, 0]
    x = np.array(values, dtype)
    if np.dtype(dtype).kind == "f":
        x[3] = np.nan  # NaN is non-zero: true
    y = np.array([True, True, False, False, False])
    truth = [bool(v) for v in x.tolist()]
    for node_type, (attrs_cls, _, fn) in BINARY.items():
        out = run_op(node_type, attrs_cls(), [x, y], out_dtype=np.bool_, out_shape=(5,))
        assert out.tolist() == [fn(a, b) for a, b in zip(truth, y.tolist())]
    out = run_op(NOT, na.LogicalNot(), [x], out_dtype=np.bool_, out_shape=(5,))
    assert out.tolist() == [not a for a in truth]


def test_mixed_operand_dtypes() -> None:
    x = np.array([0, 3], np.int32)
    y = np.array([0.5, 0.5], np.float64)
    out = run_op(AND, na.LogicalAnd(), [x, y], out_dtype=np.bool_, out_shape=(2,))
    assert out.tolist() == [False, True]


def test_dynamic_shapes() -> None:
    x = np.ones((2, 3), np.bool_)
    node = make_node(OR, na.LogicalOr(), [Declared(x, (-1, 3)), np.ones(3, np.bool_)],
                     out_shape=(-1, 3))
    kernel = create_kernel(node)
    assert kernel.infer_shapes([(-1, 3), (3,)]) == [(-1, 3)]
    expect_error(NNRT_INVALID_SHAPE, lambda: kernel.infer_shapes([(2, 4), (3,)]))


def test_error_paths() -> None:
    b = np.ones((2, 3), np.bool_)
    expect_refused(NNRT_INVALID_NODE, AND, na.LogicalAnd(), [b])
    expect_refused(NNRT_INVALID_NODE, OR, na.LogicalOr(), [b, b, b])
    expect_refused(NNRT_INVALID_NODE, NOT, na.LogicalNot(), [b, b])
    expect_refused(NNRT_INVALID_NODE, AND, na.LogicalAnd(), [b, b], out_dtype=np.int8)
    expect_refused(NNRT_INVALID_NODE, NOT, na.LogicalNot(), [b], out_dtype=np.float32)
    expect_refused(NNRT_INVALID_NODE, AND, na.LogicalAnd(), [b, np.ones(4, np.bool_)])
    expect_refused(NNRT_UNSUPPORTED_OP, NOT, na.LogicalNot(), [np.ones(2, np.int8)],
                   out_dtype=np.bool_, quant_type=ht.QUANT_TYPE_ALL)
