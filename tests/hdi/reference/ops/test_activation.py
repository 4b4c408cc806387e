"""Activation operator: every ActivationType against closed forms on Python floats."""

from __future__ import annotations

import math

import numpy as np
import pytest

from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from tests.hdi.reference.util import (
    NNRT_INVALID_NODE,
    NNRT_UNSUPPORTED_OP,
    QuantParam,
    expect_refused,
    make_node,
    run_node,
    run_op,
)

A = ht  # ActivationType codes


def _sigmoid(v: float) -> float:
    return 1.0 / (1.0 + math.exp(-v))


# Closed forms of hdi.md 6.12 on Python floats: f(v, alpha, min_val, max_val).
REFERENCE = {
    A.ACTIVATION_TYPE_NO_ACTIVATION: lambda v, a, lo, hi: v,
    A.ACTIVATION_TYPE_LINEAR: lambda v, a, lo, hi: v,
    A.ACTIVATION_TYPE_RELU: lambda v, a, lo, hi: v if v > 0 else 0.0,
    A.ACTIVATION_TYPE_SIGMOID: lambda v, a, lo, hi: _sigmoid(v),
    A.ACTIVATION_TYPE_RELU6: lambda v, a, lo, hi: 0.0 if v < 0 else (6.0 if v > 6 else v),
    A.ACTIVATION_TYPE_ELU: lambda v, a, lo, hi: v if v >= 0 else a * (math.exp(v) - 1),
    A.ACTIVATION_TYPE_LEAKY_RELU: lambda v, a, lo, hi: v if v >= 0 else a * v,
    A.ACTIVATION_TYPE_ABS: lambda v, a, lo, hi: -v if v < 0 else v,
    A.ACTIVATION_TYPE_RELU1: lambda v, a, lo, hi: 0.0 if v < 0 else (1.0 if v > 1 else v),
    A.ACTIVATION_TYPE_SOFTSIGN: lambda v, a, lo, hi: v / (1 + abs(v)),
    A.ACTIVATION_TYPE_SOFTPLUS: lambda v, a, lo, hi: math.log(1 + math.exp(v)),
    A.ACTIVATION_TYPE_TANH: lambda v, a, lo, hi: math.tanh(v),
    A.ACTIVATION_TYPE_SELU: lambda v, a, lo, hi: 1.05070098 * (
        v if v >= 0 else 1.67326324 * (math.exp(v) - 1)),
    A.ACTIVATION_TYPE_HSWISH: lambda v, a, lo, hi: v * min(max(v + 3, 0.0), 6.0) / 6,
    A.ACTIVATION_TYPE_HSIGMOID: lambda v, a, lo, hi: max(0.0, min(1.0, (v + 3) / 6)),
    A.ACTIVATION_TYPE_THRESHOLDRELU: lambda v, a, lo, hi: min(max(0.0, v), a),
    A.ACTIVATION_TYPE_HARD_TANH: lambda v, a, lo, hi: lo if v < lo else (hi if v > hi else v),
    A.ACTIVATION_TYPE_SIGN: lambda v, a, lo, hi: (v > 0) - (v < 0),
    A.ACTIVATION_TYPE_SWISH: lambda v, a, lo, hi: v * _sigmoid(v),
    A.ACTIVATION_TYPE_GELU: lambda v, a, lo, hi: v * 0.5 * (1 + math.erf(v / math.sqrt(2))),
}
ALL_TYPES = sorted(REFERENCE)
assert ALL_TYPES == list(range(ht.ACTIVATION_TYPE_UNKNOWN))  # every defined type is covered

X = np.array([-8.0, -3.5, -3.0, -1.25, -0.5, -1e-3, 0.0, 1e-3, 0.4, 1.0, 2.5, 3.0, 5.9, 6.0,
              7.25, 9.0])
TOLERANCE = {np.float16: 3e-3, np.float32: 2e-6, np.float64: 1e-12}


def _attrs(kind: int, **kw) -> na.Activation:
    return na.Activation(activationType=kind, **kw)


def _expected(kind: int, x: np.ndarray, alpha=0.0, lo=0.0, hi=0.0) -> np.ndarray:
    return np.array([REFERENCE[kind](float(v), alpha, lo, hi) for v in x.ravel()],
                    dtype=np.float64).reshape(x.shape)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("kind", ALL_TYPES, ids=lambda k: ht.ActivationType.Name(k)[16:])
def test_every_type_matches_its_formula(kind: int, dtype) -> None:
    params = dict(alpha=0.25, minVal=-1.5, maxVal=2.0)  # exact in float32
    x = X.astype(dtype).reshape(2, 8)
    out = run_op(na.NODE_TYPE_ACTIVATION, _attrs(kind, **params), [x])
    want = _expected(kind, x.astype(np.float64), 0.25, -1.5, 2.0)
    np.testing.assert_allclose(out.astype(np.float64), want, rtol=TOLERANCE[dtype],
                               atol=TOLERANCE[dtype])


@pytest.mark.parametrize("alpha", [0.015625, 1.0, 2.5])  # exact in float32
def test_alpha_parameter(alpha: float) -> None:
    x = X.astype(np.float64)
    for kind in (A.ACTIVATION_TYPE_ELU, A.ACTIVATION_TYPE_LEAKY_RELU,
                 A.ACTIVATION_TYPE_THRESHOLDRELU):
        out = run_op(na.NODE_TYPE_ACTIVATION, _attrs(kind, alpha=alpha), [x])
        np.testing.assert_allclose(out, _expected(kind, x, alpha), rtol=1e-13, atol=1e-13)


def test_hard_tanh_bounds() -> None:
    x = X.astype(np.float32)
    out = run_op(na.NODE_TYPE_ACTIVATION,
                 _attrs(A.ACTIVATION_TYPE_HARD_TANH, minVal=0.5, maxVal=0.5), [x])
    assert np.all(out == np.float32(0.5))
    out = run_op(na.NODE_TYPE_ACTIVATION,
                 _attrs(A.ACTIVATION_TYPE_HARD_TANH, minVal=-2, maxVal=4), [x])
    assert out.min() == -2 and out.max() == 4


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gelu_approximate(dtype) -> None:
    x = X.astype(dtype)
    out = run_op(na.NODE_TYPE_ACTIVATION, _attrs(A.ACTIVATION_TYPE_GELU, approximate=True), [x])
    want = [0.5 * v * (1 + math.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3)))
            for v in X]
    np.testing.assert_allclose(out, want, rtol=TOLERANCE[dtype], atol=TOLERANCE[dtype])
    exact = run_op(na.NODE_TYPE_ACTIVATION, _attrs(A.ACTIVATION_TYPE_GELU), [x])
    assert not np.allclose(out, exact, rtol=0, atol=1e-7)  # the flag changes the formula


def test_gelu_exact_tails_and_erf_branches() -> None:
    # Both sides of the series/fraction switch (|x/sqrt2| = 2) and deep tails: x * Phi(x)
    # with Phi from math.erfc, which keeps its relative accuracy where 1 + erf cancels.
    x = np.array([-30.0, -12.0, -8.0, -2.83, -2.8284271247461903, -2.82, -1e-8, 0.0, 2.82,
                  2.8284271247461903, 2.83, 8.0, 40.0])
    out = run_op(na.NODE_TYPE_ACTIVATION, _attrs(A.ACTIVATION_TYPE_GELU), [x])
    want = [v * 0.5 * math.erfc(-v / math.sqrt(2)) for v in x]
    np.testing.assert_allclose(out, want, rtol=1e-12, atol=0)


def test_extreme_inputs_do_not_overflow() -> None:
    x = np.array([-1000.0, -80.0, 80.0, 1000.0], dtype=np.float32)
    with np.errstate(all="raise"):  # kernels must not leak floating-point warnings either
        sig = run_op(na.NODE_TYPE_ACTIVATION, _attrs(A.ACTIVATION_TYPE_SIGMOID), [x])
        soft = run_op(na.NODE_TYPE_ACTIVATION, _attrs(A.ACTIVATION_TYPE_SOFTPLUS), [x])
        elu = run_op(na.NODE_TYPE_ACTIVATION, _attrs(A.ACTIVATION_TYPE_ELU, alpha=1.0), [x])
        swish = run_op(na.NODE_TYPE_ACTIVATION, _attrs(A.ACTIVATION_TYPE_SWISH), [x])
    np.testing.assert_allclose(sig, [0.0, math.exp(-80), 1.0, 1.0], rtol=1e-6, atol=0)
    np.testing.assert_allclose(soft, [0.0, math.exp(-80), 80.0, 1000.0], rtol=1e-6, atol=0)
    np.testing.assert_allclose(elu, [-1.0, -1.0, 80.0, 1000.0], rtol=1e-6)
    np.testing.assert_allclose(swish, [0.0, -80 * math.exp(-80), 80.0, 1000.0], rtol=1e-6,
                               atol=0)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint8])
@pytest.mark.parametrize("kind", [A.ACTIVATION_TYPE_NO_ACTIVATION, A.ACTIVATION_TYPE_LINEAR,
                                  A.ACTIVATION_TYPE_RELU, A.ACTIVATION_TYPE_RELU6,
                                  A.ACTIVATION_TYPE_RELU1, A.ACTIVATION_TYPE_ABS,
                                  A.ACTIVATION_TYPE_SIGN])
def test_integer_types_are_exact(kind: int, dtype) -> None:
    values = [-9, -6, -1, 0, 1, 2, 5, 6, 7, 100]
    if np.dtype(dtype).kind == "u":
        values = [v for v in values if v >= 0]
    x = np.array(values, dtype=dtype)
    out = run_op(na.NODE_TYPE_ACTIVATION, _attrs(kind), [x])
    assert out.dtype == dtype
    assert out.tolist() == [int(REFERENCE[kind](v, 0, 0, 0)) for v in values]


def test_scalar_input() -> None:
    out = run_op(na.NODE_TYPE_ACTIVATION, _attrs(A.ACTIVATION_TYPE_SIGMOID),
                 [np.array(0.5, dtype=np.float32)])
    assert out.shape == () and abs(float(out) - _sigmoid(0.5)) < 1e-7


@pytest.mark.parametrize("kind", [A.ACTIVATION_TYPE_SIGMOID, A.ACTIVATION_TYPE_GELU,
                                  A.ACTIVATION_TYPE_LEAKY_RELU, A.ACTIVATION_TYPE_HARD_TANH])
def test_transcendental_or_parametric_on_integers_is_unsupported(kind: int) -> None:
    expect_refused(NNRT_UNSUPPORTED_OP, na.NODE_TYPE_ACTIVATION,
                   _attrs(kind, minVal=-1, maxVal=1), [np.zeros(3, np.int32)])


@pytest.mark.parametrize("kind", [A.ACTIVATION_TYPE_UNKNOWN, 99, -1])
def test_undefined_type_is_invalid(kind: int) -> None:
    expect_refused(NNRT_INVALID_NODE, na.NODE_TYPE_ACTIVATION, _attrs(kind),
                   [np.zeros(3, np.float32)])


def test_bad_parameters_and_counts() -> None:
    x = np.zeros(3, np.float32)
    expect_refused(NNRT_INVALID_NODE, na.NODE_TYPE_ACTIVATION,
                   _attrs(A.ACTIVATION_TYPE_HARD_TANH, minVal=2, maxVal=1), [x])
    expect_refused(NNRT_INVALID_NODE, na.NODE_TYPE_ACTIVATION,
                   _attrs(A.ACTIVATION_TYPE_ELU, alpha=math.nan), [x])
    expect_refused(NNRT_INVALID_NODE, na.NODE_TYPE_ACTIVATION,
                   _attrs(A.ACTIVATION_TYPE_RELU), [x, x])
    expect_refused(NNRT_INVALID_NODE, na.NODE_TYPE_ACTIVATION, _attrs(A.ACTIVATION_TYPE_RELU),
                   [x], n_outputs=2)
    expect_refused(NNRT_INVALID_NODE, na.NODE_TYPE_ACTIVATION, _attrs(A.ACTIVATION_TYPE_RELU),
                   [x], out_dtype=np.float16)
    expect_refused(NNRT_UNSUPPORTED_OP, na.NODE_TYPE_ACTIVATION, _attrs(A.ACTIVATION_TYPE_RELU),
                   [np.zeros(3, np.bool_)])


def test_identity_returns_input_view_and_never_writes() -> None:
    x = np.arange(6, dtype=np.float32)
    node = make_node(na.NODE_TYPE_ACTIVATION, _attrs(A.ACTIVATION_TYPE_LINEAR), [x])
    (out,) = run_node(node, [x])
    assert out.tolist() == x.tolist()
