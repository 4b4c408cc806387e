"""AddFusion / SubFusion / MulFusion / DivFusion: broadcasting, dtypes, integer division,
fused activations, error paths. References are element-by-element Python arithmetic."""

from __future__ import annotations

import itertools
import math
import operator

import numpy as np
import pytest

from nnrt.hdi.reference.kernel import create_kernel
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from tests.hdi.reference.util import (
    NNRT_FAILED,
    NNRT_INVALID_NODE,
    NNRT_INVALID_SHAPE,
    NNRT_UNSUPPORTED_OP,
    Const,
    Declared,
    expect_error,
    expect_refused,
    int_wrapper,
    make_node,
    randn,
    readonly,
    run_op,
)

OPS = {
    na.NODE_TYPE_ADD_FUSION: (na.AddFusion, operator.add),
    na.NODE_TYPE_SUB_FUSION: (na.SubFusion, operator.sub),
    na.NODE_TYPE_MUL_FUSION: (na.MulFusion, operator.mul),
    na.NODE_TYPE_DIV_FUSION: (na.DivFusion, operator.truediv),
}
OP_IDS = {na.NODE_TYPE_ADD_FUSION: "add", na.NODE_TYPE_SUB_FUSION: "sub",
          na.NODE_TYPE_MUL_FUSION: "mul", na.NODE_TYPE_DIV_FUSION: "div"}


def _broadcast_reference(fn, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Broadcasting by hand: right-aligned dimensions, size-1 dimensions repeat."""
    rank = max(x.ndim, y.ndim)
    xs = (1,) * (rank - x.ndim) + x.shape
    ys = (1,) * (rank - y.ndim) + y.shape
    out_shape = tuple(max(a, b) for a, b in zip(xs, ys))
    xr, yr = x.reshape(xs), y.reshape(ys)
    out = np.empty(out_shape, dtype=np.float64)
    for idx in itertools.product(*(range(d) for d in out_shape)):
        xi = tuple(i if d > 1 else 0 for i, d in zip(idx, xs))
        yi = tuple(i if d > 1 else 0 for i, d in zip(idx, ys))
        out[idx] = fn(float(xr[xi]), float(yr[yi]))
    return out


@pytest.mark.parametrize("node_type", OPS, ids=OP_IDS.get)
@pytest.mark.parametrize("shapes", [((2, 3, 4), (2, 3, 4)), ((2, 3, 1), (4,)), ((3, 1), (1, 5)),
                                    ((), (2, 3)), ((4,), ()), ((1, 2, 1, 3), (5, 1, 2, 1))])
def test_broadcasting_float32(node_type: int, shapes) -> None:
    attrs_cls, fn = OPS[node_type]
    x = randn(*shapes[0], seed=1)
    y = randn(*shapes[1], seed=2) + np.float32(3.0)  # keep divisors away from 0
    out = run_op(node_type, attrs_cls(), [x, y])
    np.testing.assert_allclose(out, _broadcast_reference(fn, x, y), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("node_type", OPS, ids=OP_IDS.get)
@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_other_float_dtypes(node_type: int, dtype) -> None:
    attrs_cls, fn = OPS[node_type]
    x = randn(3, 4, dtype=dtype, seed=3)
    y = (randn(4, dtype=dtype, seed=4) + dtype(2.5)).astype(dtype)
    out = run_op(node_type, attrs_cls(), [x, Const(y)])
    tol = 2e-3 if dtype == np.float16 else 1e-14
    np.testing.assert_allclose(out.astype(np.float64), _broadcast_reference(fn, x, y),
                               rtol=tol, atol=tol)


@pytest.mark.parametrize("node_type", OPS, ids=OP_IDS.get)
def test_fused_relu6(node_type: int) -> None:
    attrs_cls, fn = OPS[node_type]
    x = np.array([[-9.0, -1.0, 0.5, 2.0, 7.0, 30.0]], dtype=np.float32)
    y = np.array([[2.0], [0.5]], dtype=np.float32)
    out = run_op(node_type, attrs_cls(activationType=ht.ACTIVATION_TYPE_RELU6), [x, y])
    want = np.vectorize(lambda v: min(max(v, 0.0), 6.0))(_broadcast_reference(fn, x, y))
    np.testing.assert_allclose(out, want, rtol=1e-6)


@pytest.mark.parametrize("kind", [ht.ACTIVATION_TYPE_SIGMOID, ht.ACTIVATION_TYPE_GELU,
                                  ht.ACTIVATION_TYPE_TANH, ht.ACTIVATION_TYPE_HSWISH])
def test_fused_parameter_free_types(kind: int) -> None:
    x = np.linspace(-3, 3, 7, dtype=np.float64)
    y = np.float64(0.5) * np.ones(7)
    out = run_op(na.NODE_TYPE_ADD_FUSION, na.AddFusion(activationType=kind), [x, y])
    f = {ht.ACTIVATION_TYPE_SIGMOID: lambda v: 1 / (1 + math.exp(-v)),
         ht.ACTIVATION_TYPE_GELU: lambda v: v * 0.5 * (1 + math.erf(v / math.sqrt(2))),
         ht.ACTIVATION_TYPE_TANH: math.tanh,
         ht.ACTIVATION_TYPE_HSWISH: lambda v: v * min(max(v + 3, 0), 6) / 6}[kind]
    np.testing.assert_allclose(out, [f(a + 0.5) for a in x], rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("node_type", OPS, ids=OP_IDS.get)
@pytest.mark.parametrize("kind", [ht.ACTIVATION_TYPE_LEAKY_RELU, ht.ACTIVATION_TYPE_ELU,
                                  ht.ACTIVATION_TYPE_HARD_TANH, ht.ACTIVATION_TYPE_THRESHOLDRELU])
def test_fused_parameterised_types_are_unsupported(node_type: int, kind: int) -> None:
    x = np.ones(3, np.float32)
    expect_refused(NNRT_UNSUPPORTED_OP, node_type, OPS[node_type][0](activationType=kind), [x, x])


def test_undefined_activation_is_invalid() -> None:
    x = np.ones(3, np.float32)
    expect_refused(NNRT_INVALID_NODE, na.NODE_TYPE_ADD_FUSION, na.AddFusion(activationType=99),
                   [x, x])


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint8, np.uint16])
def test_integer_add_sub_mul_wrap(dtype) -> None:
    info = np.iinfo(dtype)
    x = np.array([info.max, info.min, 3, 0], dtype=dtype)
    y = np.array([1, 1, 2, 5], dtype=dtype)
    wrap = int_wrapper(dtype)

    for node_type, (attrs_cls, fn) in list(OPS.items())[:3]:
        out = run_op(node_type, attrs_cls(), [x, y])
        assert out.dtype == dtype
        assert out.tolist() == [wrap(fn(int(a), int(b))) for a, b in zip(x, y)]


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64])
def test_integer_division_truncates_toward_zero(dtype) -> None:
    pairs = [(7, 2), (-7, 2), (7, -2), (-7, -2), (6, 3), (-6, 3), (0, -5), (1, 7), (-1, 7),
             (100, -1), (-100, 9)]
    x = np.array([a for a, _ in pairs], dtype=dtype)
    y = np.array([b for _, b in pairs], dtype=dtype)
    out = run_op(na.NODE_TYPE_DIV_FUSION, na.DivFusion(), [x, y])
    assert out.dtype == dtype
    assert out.tolist() == [int(a / b) for a, b in pairs]  # C's truncating division


def test_integer_division_broadcast_and_fused_relu() -> None:
    x = np.array([[-9, 9], [5, -5]], dtype=np.int32)
    y = np.array([2], dtype=np.int32)
    out = run_op(na.NODE_TYPE_DIV_FUSION, na.DivFusion(activationType=ht.ACTIVATION_TYPE_RELU),
                 [x, Const(y)])
    assert out.tolist() == [[0, 4], [2, 0]]


def test_unsigned_division() -> None:
    x = np.array([250, 7, 0], dtype=np.uint8)
    y = np.array([7, 250, 3], dtype=np.uint8)
    assert run_op(na.NODE_TYPE_DIV_FUSION, na.DivFusion(), [x, y]).tolist() == [35, 0, 0]


def test_integer_division_by_zero() -> None:
    x = np.array([1, 2, 3], dtype=np.int32)
    # A constant zero divisor: the node is refused at prepare time.
    expect_refused(NNRT_INVALID_NODE, na.NODE_TYPE_DIV_FUSION, na.DivFusion(),
                   [x, Const(np.array([1, 0, 1], np.int32))])
    # A run-time zero divisor fails that run, nothing else.
    node = make_node(na.NODE_TYPE_DIV_FUSION, na.DivFusion(), [x, x])
    kernel = create_kernel(node)
    expect_error(NNRT_FAILED, lambda: kernel.execute([readonly(x),
                                                      readonly(np.array([1, 0, 2], np.int32))]))
    assert kernel.execute([readonly(x), readonly(x)])[0].tolist() == [1, 1, 1]


def test_float_division_by_zero_is_ieee() -> None:
    x = np.array([1.0, -1.0, 0.0], dtype=np.float32)
    y = np.zeros(3, np.float32)
    with np.errstate(all="raise"):
        out = run_op(na.NODE_TYPE_DIV_FUSION, na.DivFusion(), [x, y])
    assert out[0] == np.inf and out[1] == -np.inf and np.isnan(out[2])


def test_dynamic_dimensions_broadcast() -> None:
    x = np.ones((2, 3), np.float32)
    y = np.ones((3,), np.float32)
    node = make_node(na.NODE_TYPE_MUL_FUSION, na.MulFusion(), [Declared(x, (-1, 3)), y])
    kernel = create_kernel(node)
    assert kernel.infer_shapes([(-1, 3), (3,)]) == [(-1, 3)]
    assert kernel.infer_shapes([(5, 3), (3,)]) == [(5, 3)]
    expect_error(NNRT_INVALID_SHAPE, lambda: kernel.infer_shapes([(5, 4), (3,)]))


def test_error_paths() -> None:
    f32 = np.ones((2, 3), np.float32)
    expect_refused(NNRT_INVALID_NODE, na.NODE_TYPE_ADD_FUSION, na.AddFusion(), [f32])
    expect_refused(NNRT_INVALID_NODE, na.NODE_TYPE_ADD_FUSION, na.AddFusion(), [f32, f32, f32])
    expect_refused(NNRT_UNSUPPORTED_OP, na.NODE_TYPE_ADD_FUSION, na.AddFusion(),
                   [f32, np.ones((2, 3), np.float64)])
    expect_refused(NNRT_UNSUPPORTED_OP, na.NODE_TYPE_SUB_FUSION, na.SubFusion(),
                   [np.ones(2, np.bool_), np.ones(2, np.bool_)])
    expect_refused(NNRT_INVALID_NODE, na.NODE_TYPE_ADD_FUSION, na.AddFusion(), [f32, f32],
                   out_dtype=np.float16)
    expect_refused(NNRT_INVALID_NODE, na.NODE_TYPE_MUL_FUSION, na.MulFusion(),
                   [f32, np.ones((4,), np.float32)])
    expect_refused(NNRT_UNSUPPORTED_OP, na.NODE_TYPE_MUL_FUSION, na.MulFusion(),
                   [np.ones(2, np.int8), np.ones(2, np.int8)], quant_type=ht.QUANT_TYPE_ALL)
    expect_refused(NNRT_UNSUPPORTED_OP, na.NODE_TYPE_MUL_FUSION,
                   na.MulFusion(activationType=ht.ACTIVATION_TYPE_SIGMOID),
                   [np.ones(2, np.int32), np.ones(2, np.int32)])
