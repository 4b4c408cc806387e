"""Maximum, Minimum, Mod (C fmod), RealDiv, SquaredDifference. References: onnx's Max, Min,
Mod (fmod = 1) and Div; Python arithmetic element by element (math.fmod, int division
truncated toward zero, (a - b) ** 2) with explicit broadcasting."""

from __future__ import annotations

import math
from typing import Any

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
    broadcast_apply,
    expect_error,
    expect_refused,
    int_wrapper,
    make_node,
    onnx_reference,
    randn,
    readonly,
    run_op,
)

OPS = {  # node type -> (attribute message, ONNX op, ONNX attributes)
    na.NODE_TYPE_MAXIMUM: (na.Maximum, "Max", {}),
    na.NODE_TYPE_MINIMUM: (na.Minimum, "Min", {}),
    na.NODE_TYPE_MOD: (na.Mod, "Mod", {"fmod": 1}),
    na.NODE_TYPE_REAL_DIV: (na.RealDiv, "Div", {}),
    na.NODE_TYPE_SQUARED_DIFFERENCE: (na.SquaredDifference, None, {}),
}
NAMES = {k: na.NodeType.Name(k)[10:].lower() for k in OPS}
SHAPES = [((2, 3, 4), (2, 3, 4)), ((2, 3, 1), (4,)), ((3, 1), (1, 5)), ((), (2, 3)),
          ((4,), ()), ((1, 2, 1, 3), (5, 1, 2, 1))]


def _run(node_type: int, x: Any, y: Any) -> np.ndarray:
    xa = x.array if isinstance(x, Const) else x
    ya = y.array if isinstance(y, Const) else y
    return run_op(node_type, OPS[node_type][0](), [x, y],
                  out_shape=np.broadcast_shapes(xa.shape, ya.shape))


@pytest.mark.parametrize("node_type", [k for k, v in OPS.items() if v[1]], ids=NAMES.get)
@pytest.mark.parametrize("shapes", SHAPES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_float_against_onnx(node_type: int, shapes, dtype: Any) -> None:
    _, onnx_op, onnx_attrs = OPS[node_type]
    x = randn(*shapes[0], dtype=dtype, seed=1) * 4
    y = randn(*shapes[1], dtype=dtype, seed=2) + dtype(3)  # divisors away from 0
    out = _run(node_type, x, y)
    want = onnx_reference(onnx_op, [x, y], **onnx_attrs)
    tol = 1e-6 if dtype == np.float32 else 1e-14
    np.testing.assert_allclose(out, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("shapes", SHAPES)
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_squared_difference(shapes, dtype: Any) -> None:
    x = randn(*shapes[0], dtype=dtype, seed=3)
    y = randn(*shapes[1], dtype=dtype, seed=4)
    out = _run(na.NODE_TYPE_SQUARED_DIFFERENCE, x, Const(y))
    want = broadcast_apply(lambda a, b: (a - b) ** 2, x, y)
    tol = {np.float16: 1e-3, np.float32: 1e-6, np.float64: 1e-14}[dtype]
    np.testing.assert_allclose(out.astype(np.float64).reshape(-1), want, rtol=tol, atol=tol)


@pytest.mark.parametrize("node_type", [na.NODE_TYPE_MAXIMUM, na.NODE_TYPE_MINIMUM,
                                       na.NODE_TYPE_MOD, na.NODE_TYPE_REAL_DIV],
                         ids=NAMES.get)
def test_float16(node_type: int) -> None:
    x = randn(3, 4, dtype=np.float16, seed=5) * np.float16(4)
    y = (randn(4, dtype=np.float16, seed=6) + np.float16(3)).astype(np.float16)
    fn = {na.NODE_TYPE_MAXIMUM: max, na.NODE_TYPE_MINIMUM: min, na.NODE_TYPE_MOD: math.fmod,
          na.NODE_TYPE_REAL_DIV: lambda a, b: a / b}[node_type]
    out = _run(node_type, x, y)
    np.testing.assert_allclose(out.astype(np.float64).reshape(-1),
                               broadcast_apply(fn, x.astype(np.float64), y.astype(np.float64)),
                               rtol=1e-3, atol=1e-3)


PAIRS = [(7, 2), (-7, 2), (7, -2), (-7, -2), (6, 3), (-6, 3), (0, -5), (1, 7), (-1, 7),
         (100, -1), (-100, 9)]


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64])
def test_integer_mod_is_fmod_and_realdiv_truncates(dtype: Any) -> None:
    x = np.array([a for a, _ in PAIRS], dtype)
    y = np.array([b for _, b in PAIRS], dtype)
    mod = _run(na.NODE_TYPE_MOD, x, y)
    div = _run(na.NODE_TYPE_REAL_DIV, x, y)
    assert mod.dtype == div.dtype == dtype
    assert mod.tolist() == [int(math.fmod(a, b)) for a, b in PAIRS]  # sign of the dividend
    assert div.tolist() == [int(a / b) for a, b in PAIRS]  # truncated toward zero
    np.testing.assert_array_equal(mod, onnx_reference("Mod", [x, y], fmod=1))


def test_float_mod_sign_and_zero() -> None:
    x = np.array([-7.5, 7.5, -7.5, 3.0], np.float32)
    y = np.array([2.0, -2.0, -2.0, 0.0], np.float32)
    with np.errstate(all="raise"):
        out = _run(na.NODE_TYPE_MOD, x, y)
    assert out[:3].tolist() == [-1.5, 1.5, -1.5] and np.isnan(out[3])


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint32])
def test_integer_max_min_squared_difference(dtype: Any) -> None:
    info = np.iinfo(dtype)
    values = [info.min, info.min + 1, 0, 3, 9, info.max]
    x = np.array([a for a in values for _ in values], dtype)
    y = np.array([b for _ in values for b in values], dtype)
    wrap = int_wrapper(dtype)

    pairs = list(zip(x.tolist(), y.tolist()))
    assert _run(na.NODE_TYPE_MAXIMUM, x, y).tolist() == [max(a, b) for a, b in pairs]
    assert _run(na.NODE_TYPE_MINIMUM, x, y).tolist() == [min(a, b) for a, b in pairs]
    assert _run(na.NODE_TYPE_SQUARED_DIFFERENCE, x, y).tolist() == \
        [wrap((a - b) ** 2) for a, b in pairs]


def test_max_min_propagate_nan() -> None:
    x = np.array([np.nan, 1.0, -np.inf], np.float32)
    y = np.array([1.0, np.nan, 2.0], np.float32)
    mx = _run(na.NODE_TYPE_MAXIMUM, x, y)
    mn = _run(na.NODE_TYPE_MINIMUM, x, y)
    assert np.isnan(mx[:2]).all() and np.isnan(mn[:2]).all()
    assert mx[2] == 2.0 and mn[2] == -np.inf


def test_realdiv_float_ieee() -> None:
    x = np.array([1.0, -1.0, 0.0], np.float64)
    with np.errstate(all="raise"):
        out = _run(na.NODE_TYPE_REAL_DIV, x, np.zeros(3))
    assert out[0] == np.inf and out[1] == -np.inf and np.isnan(out[2])


@pytest.mark.parametrize("node_type", [na.NODE_TYPE_MOD, na.NODE_TYPE_REAL_DIV], ids=NAMES.get)
def test_integer_zero_divisor(node_type: int) -> None:
    x = np.array([1, 2, 3], np.int32)
    expect_refused(NNRT_INVALID_NODE, node_type, OPS[node_type][0](),
                   [x, Const(np.array([1, 0, 1], np.int32))], out_shape=(3,))
    kernel = create_kernel(make_node(node_type, OPS[node_type][0](), [x, x], out_shape=(3,)))
    expect_error(NNRT_FAILED, lambda: kernel.execute([readonly(x),
                                                      readonly(np.array([1, 0, 2], np.int32))]))
    assert kernel.execute([readonly(x), readonly(np.array([2, 2, 2], np.int32))])[0].tolist() \
        == ([1, 0, 1] if node_type == na.NODE_TYPE_MOD else [0, 1, 1])


def test_dynamic_dimensions() -> None:
    x = np.ones((2, 3), np.float32)
    node = make_node(na.NODE_TYPE_MAXIMUM, na.Maximum(),
                     [Declared(x, (-1, 3)), np.ones((3,), np.float32)], out_shape=(-1, 3))
    kernel = create_kernel(node)
    assert kernel.infer_shapes([(-1, 3), (3,)]) == [(-1, 3)]
    assert kernel.infer_shapes([(5, 3), (1,)]) == [(5, 3)]
    expect_error(NNRT_INVALID_SHAPE, lambda: kernel.infer_shapes([(5, 4), (3,)]))


@pytest.mark.parametrize("node_type", OPS, ids=NAMES.get)
def test_error_paths(node_type: int) -> None:
    attrs = OPS[node_type][0]()
    f32 = np.ones((2, 3), np.float32)
    expect_refused(NNRT_INVALID_NODE, node_type, attrs, [f32])
    expect_refused(NNRT_INVALID_NODE, node_type, attrs, [f32, f32, f32])
    expect_refused(NNRT_INVALID_NODE, node_type, attrs, [f32, f32], n_outputs=2)
    expect_refused(NNRT_INVALID_NODE, node_type, attrs, [f32, f32], out_dtype=np.float16)
    expect_refused(NNRT_INVALID_NODE, node_type, attrs, [f32, np.ones((4,), np.float32)])
    expect_refused(NNRT_UNSUPPORTED_OP, node_type, attrs, [f32, np.ones((2, 3), np.float64)])
    expect_refused(NNRT_UNSUPPORTED_OP, node_type, attrs, [np.ones(2, np.bool_)] * 2)
    expect_refused(NNRT_UNSUPPORTED_OP, node_type, attrs, [np.ones(2, np.int8)] * 2,
                   quant_type=ht.QUANT_TYPE_ALL)
