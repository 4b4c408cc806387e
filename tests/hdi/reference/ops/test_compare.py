"""Equal, NotEqual, Greater, GreaterEqual, Less, LessEqual: bool outputs, broadcasting, every
dtype, NaN. References: onnx's Equal/Greater/GreaterOrEqual/Less/LessOrEqual (NotEqual as
Python's != element by element)."""

from __future__ import annotations

import operator
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
    Const,
    Declared,
    expect_error,
    expect_refused,
    make_node,
    onnx_reference,
    rng,
    run_op,
)

OPS = {  # node type -> (attribute message, ONNX op, Python operator)
    na.NODE_TYPE_EQUAL: (na.Equal, "Equal", operator.eq),
    na.NODE_TYPE_NOT_EQUAL: (na.NotEqual, None, operator.ne),
    na.NODE_TYPE_GREATER: (na.Greater, "Greater", operator.gt),
    na.NODE_TYPE_GREATER_EQUAL: (na.GreaterEqual, "GreaterOrEqual", operator.ge),
    na.NODE_TYPE_LESS: (na.Less, "Less", operator.lt),
    na.NODE_TYPE_LESS_EQUAL: (na.LessEqual, "LessOrEqual", operator.le),
}
NAMES = {k: na.NodeType.Name(k)[10:].lower() for k in OPS}
DTYPES = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
          np.uint64, np.float16, np.float32, np.float64]


def _values(shape, dtype: Any, seed: int) -> np.ndarray:
    # small integers: plenty of equal pairs in every dtype
    return rng(seed).integers(0, 2 if dtype == np.bool_ else 4, shape).astype(dtype)


def _run(node_type: int, x: Any, y: Any, shape) -> np.ndarray:
    return run_op(node_type, OPS[node_type][0](), [x, y], out_dtype=np.bool_, out_shape=shape)


@pytest.mark.parametrize("node_type", OPS, ids=NAMES.get)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_every_dtype(node_type: int, dtype: Any) -> None:
    _, onnx_op, fn = OPS[node_type]
    x = _values((3, 4), dtype, 1)
    y = _values((4,), dtype, 2)
    out = _run(node_type, x, Const(y), (3, 4))
    assert out.dtype == np.bool_
    assert out.tolist() == [[fn(a, b) for a, b in zip(row, y.tolist())] for row in x.tolist()]
    if onnx_op and dtype != np.bool_:
        np.testing.assert_array_equal(out, onnx_reference(onnx_op, [x, y]))


@pytest.mark.parametrize("node_type", OPS, ids=NAMES.get)
@pytest.mark.parametrize("shapes", [((2, 1, 3), (4, 1)), ((), (2, 3)), ((3,), ()), ((), ())])
def test_broadcasting(node_type: int, shapes) -> None:
    _, _, fn = OPS[node_type]
    x = _values(shapes[0], np.float32, 3)
    y = _values(shapes[1], np.float32, 4)
    out_shape = np.broadcast_shapes(*shapes)
    out = _run(node_type, x, y, out_shape)
    bx, by = np.broadcast_to(x, out_shape), np.broadcast_to(y, out_shape)
    want = [fn(a, b) for a, b in zip(bx.reshape(-1).tolist(), by.reshape(-1).tolist())]
    assert out.shape == out_shape and out.reshape(-1).tolist() == want


@pytest.mark.parametrize("node_type", OPS, ids=NAMES.get)
def test_nan_and_signed_zero(node_type: int) -> None:
    fn = OPS[node_type][2]
    x = np.array([np.nan, 1.0, np.nan, 0.0, -np.inf], np.float64)
    y = np.array([1.0, np.nan, np.nan, -0.0, -np.inf], np.float64)
    with np.errstate(all="raise"):
        out = _run(node_type, x, y, (5,))
    assert out.tolist() == [fn(a, b) for a, b in zip(x.tolist(), y.tolist())]


def test_dynamic_shapes() -> None:
    x = np.ones((2, 3), np.int32)
    node = make_node(na.NODE_TYPE_LESS, na.Less(), [Declared(x, (-1, 3)), np.ones(3, np.int32)],
                     out_dtype=np.bool_, out_shape=(-1, 3))
    kernel = create_kernel(node)
    assert kernel.infer_shapes([(-1, 3), (3,)]) == [(-1, 3)]
    expect_error(NNRT_INVALID_SHAPE, lambda: kernel.infer_shapes([(2, 4), (3,)]))


@pytest.mark.parametrize("node_type", OPS, ids=NAMES.get)
def test_error_paths(node_type: int) -> None:
    attrs = OPS[node_type][0]()
    f32 = np.ones((2, 3), np.float32)
    kw = {"out_dtype": np.bool_}
    expect_refused(NNRT_INVALID_NODE, node_type, attrs, [f32], **kw)
    expect_refused(NNRT_INVALID_NODE, node_type, attrs, [f32, f32, f32], **kw)
    expect_refused(NNRT_INVALID_NODE, node_type, attrs, [f32, f32], n_outputs=2, **kw)
    expect_refused(NNRT_INVALID_NODE, node_type, attrs, [f32, f32], out_dtype=np.float32)
    expect_refused(NNRT_INVALID_NODE, node_type, attrs, [f32, np.ones(4, np.float32)], **kw)
    expect_refused(NNRT_UNSUPPORTED_OP, node_type, attrs, [f32, np.ones((2, 3), np.int32)], **kw)
    expect_refused(NNRT_UNSUPPORTED_OP, node_type, attrs, [np.ones(2, np.int8)] * 2,
                   quant_type=ht.QUANT_TYPE_ALL, **kw)
