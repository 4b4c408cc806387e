"""Abs, Neg, Square, Ceil, Floor, Round, Cos, Sin, Log, Reciprocal, Sqrt, Rsqrt, Erf.

References: onnx's reference evaluator (one-node ONNX models) where ONNX has the operator,
Python's math module element by element otherwise (Rsqrt, Square, Erf, integer wrap-around).
`onnx_reference` (tests.hdi.reference.util) runs the ONNX side."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from nnrt.hdi.reference.kernel import create_kernel
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from tests.hdi.reference.util import (
    NNRT_INVALID_NODE,
    NNRT_UNSUPPORTED_OP,
    Declared,
    expect_refused,
    int_wrapper,
    make_node,
    onnx_reference,
    randn,
    run_op,
)


ONNX_OPS = {  # HDI node type -> (attribute message, ONNX op type)
    na.NODE_TYPE_ABS: (na.Abs, "Abs"),
    na.NODE_TYPE_NEG: (na.Neg, "Neg"),
    na.NODE_TYPE_CEIL: (na.Ceil, "Ceil"),
    na.NODE_TYPE_FLOOR: (na.Floor, "Floor"),
    na.NODE_TYPE_ROUND: (na.Round, "Round"),
    na.NODE_TYPE_COS: (na.Cos, "Cos"),
    na.NODE_TYPE_SIN: (na.Sin, "Sin"),
    na.NODE_TYPE_LOG: (na.Log, "Log"),
    na.NODE_TYPE_RECIPROCAL: (na.Reciprocal, "Reciprocal"),
    na.NODE_TYPE_SQRT: (na.Sqrt, "Sqrt"),
}
FLOAT_ONLY = [na.NODE_TYPE_COS, na.NODE_TYPE_SIN, na.NODE_TYPE_LOG, na.NODE_TYPE_RECIPROCAL,
              na.NODE_TYPE_SQRT, na.NODE_TYPE_RSQRT, na.NODE_TYPE_ERF]
ATTRS = {**{k: v[0] for k, v in ONNX_OPS.items()},
         na.NODE_TYPE_SQUARE: na.Square, na.NODE_TYPE_RSQRT: na.Rsqrt, na.NODE_TYPE_ERF: na.Erf}
NAMES = {k: na.NodeType.Name(k)[10:].lower() for k in ATTRS}


def _sample(shape: tuple[int, ...], dtype: Any, positive: bool) -> np.ndarray:
    x = randn(*shape, dtype=np.float64, seed=7) * 3
    if positive:
        x = np.abs(x) + 0.1
    return x.astype(dtype)


@pytest.mark.parametrize("node_type", ONNX_OPS, ids=NAMES.get)
@pytest.mark.parametrize("shape", [(2, 3, 4), (), (1,), (5, 1)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_against_onnx(node_type: int, shape: tuple[int, ...], dtype: Any) -> None:
    attrs_cls, onnx_op = ONNX_OPS[node_type]
    x = _sample(shape, dtype, positive=node_type in (na.NODE_TYPE_LOG, na.NODE_TYPE_SQRT))
    out = run_op(node_type, attrs_cls(), [x], out_shape=shape)
    assert out.shape == shape
    if dtype == np.float16:
        # computed in float32 and rounded once: compare with float32 ONNX rounded to float16
        want = onnx_reference(onnx_op, [x.astype(np.float32)]).astype(np.float16)
        np.testing.assert_allclose(out.astype(np.float32), want.astype(np.float32),
                                   rtol=1e-3, atol=1e-3)
    else:
        want = onnx_reference(onnx_op, [x])
        tol = 1e-6 if dtype == np.float32 else 1e-14
        np.testing.assert_allclose(out, want, rtol=tol, atol=tol)


def test_round_half_to_even() -> None:
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4999, 2.5001, 3.5], np.float32)
    out = run_op(na.NODE_TYPE_ROUND, na.Round(), [x], out_shape=x.shape)
    assert out.tolist() == [0, 2, 2, -0, -2, -2, 2, 3, 4]
    np.testing.assert_array_equal(out, onnx_reference("Round", [x]))


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_rsqrt_and_square(dtype: Any) -> None:
    x = _sample((3, 4), dtype, positive=True)
    rsqrt = run_op(na.NODE_TYPE_RSQRT, na.Rsqrt(), [x], out_shape=x.shape)
    square = run_op(na.NODE_TYPE_SQUARE, na.Square(), [x], out_shape=x.shape)
    tol = {np.float16: 1e-3, np.float32: 1e-6, np.float64: 1e-14}[dtype]
    xs = x.astype(np.float64).reshape(-1)
    np.testing.assert_allclose(rsqrt.astype(np.float64).reshape(-1),
                               [1 / math.sqrt(v) for v in xs], rtol=tol)
    np.testing.assert_allclose(square.astype(np.float64).reshape(-1), [v * v for v in xs],
                               rtol=tol)


def test_ieee_specials() -> None:
    x = np.array([0.0, -0.0, -1.0, np.inf, np.nan], np.float32)
    with np.errstate(all="raise"):  # the kernels must not warn or raise
        log = run_op(na.NODE_TYPE_LOG, na.Log(), [x], out_shape=x.shape)
        rsqrt = run_op(na.NODE_TYPE_RSQRT, na.Rsqrt(), [x], out_shape=x.shape)
        recip = run_op(na.NODE_TYPE_RECIPROCAL, na.Reciprocal(), [x], out_shape=x.shape)
        sqrt = run_op(na.NODE_TYPE_SQRT, na.Sqrt(), [x], out_shape=x.shape)
    assert log[0] == -np.inf and log[1] == -np.inf and np.isnan(log[2]) and log[3] == np.inf
    assert rsqrt[0] == np.inf and rsqrt[3] == 0 and np.isnan(rsqrt[2])
    assert recip[0] == np.inf and recip[1] == -np.inf and recip[3] == 0
    assert np.isnan(sqrt[2]) and np.isnan(sqrt[4])


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint32])
def test_integer_abs_neg_square_wrap(dtype: Any) -> None:
    info = np.iinfo(dtype)
    x = np.array([info.min, info.min + 1, -3 if info.min < 0 else 3, 0, 7, info.max], dtype)
    wrap = int_wrapper(dtype)

    for node_type, fn in ((na.NODE_TYPE_ABS, abs), (na.NODE_TYPE_NEG, lambda v: -v),
                          (na.NODE_TYPE_SQUARE, lambda v: v * v)):
        out = run_op(node_type, ATTRS[node_type](), [x], out_shape=x.shape)
        assert out.dtype == dtype
        assert out.tolist() == [wrap(fn(int(v))) for v in x], NAMES[node_type]


@pytest.mark.parametrize("node_type", [na.NODE_TYPE_CEIL, na.NODE_TYPE_FLOOR,
                                       na.NODE_TYPE_ROUND], ids=NAMES.get)
def test_integers_are_integral(node_type: int) -> None:
    x = np.array([[-5, 0, 9]], np.int32)
    out = run_op(node_type, ATTRS[node_type](), [x], out_shape=x.shape)
    assert out.dtype == np.int32 and out.tolist() == [[-5, 0, 9]]


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
def test_erf_against_math(dtype: Any) -> None:
    grid = np.concatenate([np.linspace(-7, 7, 2001), [0.0, -0.0, 1e-30, -1e-8, 1.9999999,
                                                        2.0, 2.0000001, 5.8, 6.5, 40.0]])
    x = grid.astype(dtype)
    out = run_op(na.NODE_TYPE_ERF, na.Erf(), [x], out_shape=x.shape)
    want = np.array([math.erf(float(v)) for v in x])
    rtol = {np.float64: 2e-15, np.float32: 2e-7, np.float16: 1e-3}[dtype]
    np.testing.assert_allclose(out.astype(np.float64), want, rtol=rtol, atol=0)
    if dtype != np.float16:  # the exact answer rounded once to the dtype
        np.testing.assert_array_equal(out[np.abs(x) > 6], np.sign(x[np.abs(x) > 6]))
    specials = run_op(na.NODE_TYPE_ERF, na.Erf(),
                      [np.array([np.inf, -np.inf, np.nan], dtype)], out_shape=(3,))
    assert specials[0] == 1 and specials[1] == -1 and np.isnan(specials[2])


def test_erf_rank0_and_float32_rounding() -> None:
    x = np.array(0.3, np.float32)
    out = run_op(na.NODE_TYPE_ERF, na.Erf(), [x])
    assert out.shape == () and out == np.float32(math.erf(float(x)))


def test_dynamic_shapes_pass_through() -> None:
    x = np.ones((2, 3), np.float32)
    node = make_node(na.NODE_TYPE_SIN, na.Sin(), [Declared(x, (-1, 3))], out_shape=(-1, 3))
    kernel = create_kernel(node)
    assert kernel.infer_shapes([(-1, 3)]) == [(-1, 3)]
    assert kernel.infer_shapes([(4, 3)]) == [(4, 3)]


@pytest.mark.parametrize("node_type", FLOAT_ONLY, ids=NAMES.get)
def test_float_only_operators_refuse_integers(node_type: int) -> None:
    expect_refused(NNRT_UNSUPPORTED_OP, node_type, ATTRS[node_type](), [np.ones(3, np.int32)])


@pytest.mark.parametrize("node_type", list(ATTRS), ids=NAMES.get)
def test_error_paths(node_type: int) -> None:
    f32 = np.ones(3, np.float32)
    attrs = ATTRS[node_type]()
    expect_refused(NNRT_INVALID_NODE, node_type, attrs, [f32, f32])
    expect_refused(NNRT_INVALID_NODE, node_type, attrs, [], out_dtype=np.float32)
    expect_refused(NNRT_INVALID_NODE, node_type, attrs, [f32], n_outputs=2)
    expect_refused(NNRT_INVALID_NODE, node_type, attrs, [f32], out_dtype=np.float64)
    expect_refused(NNRT_UNSUPPORTED_OP, node_type, attrs, [np.ones(3, np.bool_)])
    expect_refused(NNRT_UNSUPPORTED_OP, node_type, attrs, [np.ones(3, np.int8)],
                   quant_type=ht.QUANT_TYPE_ALL)
