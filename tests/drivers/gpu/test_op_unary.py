"""GPU unary math, ExpFusion, Clip, LeakyRelu, PReLUFusion, BiasAdd, ScaleFusion and
PowFusion against the CPU reference on the same inputs, special values (±0, ±inf, NaN,
halves, negatives) included; fused epilogues; refused dtypes."""

from __future__ import annotations

import math

import numpy as np
import pytest

from nnrt.common.hdi_model import HdiModelBuilder
from nnrt.drivers.gpu.kernel import create_op
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from tests.drivers.gpu.util import assert_close, graph_of, node_graph, run_cpu, run_gpu
from tests.hdi.reference.util import NNRT_UNSUPPORTED_OP, Const, expect_error, make_node, randn

SPECIALS = np.array([0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, 3.5, 1e-30, -1e-30,
                     1e30, -1e30, 100.0, -100.0, 88.0, 3.14159265, math.inf, -math.inf,
                     math.nan], np.float32)


def _values(n: int = 203, seed: int = 0) -> np.ndarray:
    """Random values of every magnitude with the specials in front: n elements, odd."""
    r = randn(n, seed=seed) * np.float32(3.0)
    k = min(n, SPECIALS.size)
    r[:k] = SPECIALS[:k]
    return r


def _compare(node_type: int, attrs, inputs, out_shape, fmt: int = ht.FORMAT_NHWC) -> None:
    node = make_node(node_type, attrs, inputs, out_shape=out_shape, fmt=fmt)
    graph = node_graph(node)
    arrays = [a for a in inputs if not isinstance(a, Const)]
    assert_close(run_gpu(graph, arrays), run_cpu(graph, arrays))


MATH = {
    "abs": (na.NODE_TYPE_ABS, na.Abs), "neg": (na.NODE_TYPE_NEG, na.Neg),
    "square": (na.NODE_TYPE_SQUARE, na.Square), "ceil": (na.NODE_TYPE_CEIL, na.Ceil),
    "floor": (na.NODE_TYPE_FLOOR, na.Floor), "round": (na.NODE_TYPE_ROUND, na.Round),
    "cos": (na.NODE_TYPE_COS, na.Cos), "sin": (na.NODE_TYPE_SIN, na.Sin),
    "log": (na.NODE_TYPE_LOG, na.Log), "sqrt": (na.NODE_TYPE_SQRT, na.Sqrt),
    "reciprocal": (na.NODE_TYPE_RECIPROCAL, na.Reciprocal),
    "rsqrt": (na.NODE_TYPE_RSQRT, na.Rsqrt), "erf": (na.NODE_TYPE_ERF, na.Erf),
}


@pytest.mark.parametrize("name", sorted(MATH))
def test_math(name: str) -> None:
    node_type, attrs = MATH[name]
    x = _values().reshape(7, 29)
    _compare(node_type, attrs(), [x], x.shape)


def test_round_half_to_even_and_rank0() -> None:
    x = np.array([-3.5, -2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 4.5, 2.4999998], np.float32)
    _compare(na.NODE_TYPE_ROUND, na.Round(), [x], x.shape)
    _compare(na.NODE_TYPE_SQRT, na.Sqrt(), [np.array(2.0, np.float32)], ())


@pytest.mark.parametrize("base,scale,shift", [(-1.0, 1.0, 0.0), (-1.0, 0.5, -1.25),
                                              (2.0, 1.0, 0.0), (10.0, -0.3, 1.0),
                                              (0.5, 2.0, 0.0), (1.0, 1.0, 0.0)])
def test_exp_fusion(base: float, scale: float, shift: float) -> None:
    x = _values()
    _compare(na.NODE_TYPE_EXPFUSION, na.ExpFusion(base=base, scale=scale, shift=shift), [x],
             x.shape)


@pytest.mark.parametrize("low,high", [(-1.0, 2.0), (-math.inf, 0.5), (0.0, math.inf),
                                      (1.0, 1.0), (-1e40, 1e40)])
def test_clip(low: float, high: float) -> None:
    x = _values()
    _compare(na.NODE_TYPE_CLIP, na.Clip(min=low, max=high), [x], x.shape)


@pytest.mark.parametrize("slope", [0.1, 0.0, -0.5, 2.0])
def test_leaky_relu(slope: float) -> None:
    x = _values()
    _compare(na.NODE_TYPE_LEAKY_RELU, na.LeakyRelu(negativeSlope=slope), [x], x.shape)


@pytest.mark.parametrize("shape,slopes,fmt,const", [
    ((3, 5, 7), 7, ht.FORMAT_NHWC, True), ((3, 5, 7), 1, ht.FORMAT_NHWC, True),
    ((2, 5, 3, 3), 5, ht.FORMAT_NCHW, False), ((9,), 1, ht.FORMAT_NHWC, False),
])
def test_prelu(shape, slopes: int, fmt: int, const: bool) -> None:
    x = _values(int(np.prod(shape))).reshape(shape)
    w = randn(slopes, seed=3)
    _compare(na.NODE_TYPE_PRELU_FUSION, na.PReLUFusion(), [x, Const(w) if const else w],
             shape, fmt)


@pytest.mark.parametrize("shape,fmt", [((3, 5, 7), ht.FORMAT_NHWC),
                                       ((2, 5, 3, 3), ht.FORMAT_NCHW), ((11,), ht.FORMAT_NHWC)])
def test_bias_add(shape, fmt: int) -> None:
    x = _values(int(np.prod(shape))).reshape(shape)
    channels = shape[1] if fmt == ht.FORMAT_NCHW else shape[-1]
    _compare(na.NODE_TYPE_BIAS_ADD, na.BiasAdd(), [x, Const(randn(channels, seed=4))], shape,
             fmt)


@pytest.mark.parametrize("x_shape,axis,scale_shape,bias,act", [
    ((2, 3, 4, 5), 3, (5,), True, ht.ACTIVATION_TYPE_NO_ACTIVATION),
    ((2, 3, 4, 5), 1, (3, 4), False, ht.ACTIVATION_TYPE_RELU),
    ((2, 3, 4, 5), -3, (3, 4, 5), True, ht.ACTIVATION_TYPE_SIGMOID),
    ((2, 3), 1, (), True, ht.ACTIVATION_TYPE_NO_ACTIVATION),
    ((), 0, (), True, ht.ACTIVATION_TYPE_RELU6),
])
def test_scale(x_shape, axis: int, scale_shape, bias: bool, act: int) -> None:
    x = randn(*x_shape, seed=1)
    inputs = [x, Const(randn(*scale_shape, seed=2))]
    if bias:
        inputs.append(Const(randn(*scale_shape, seed=3)))
    _compare(na.NODE_TYPE_SCALE_FUSION, na.ScaleFusion(axis=axis, activationType=act), inputs,
             x_shape)


@pytest.mark.parametrize("scale,shift", [(1.0, 0.0), (0.5, 0.25), (-2.0, 1.0)])
def test_pow_specials(scale: float, shift: float) -> None:
    # every pair of special values (negative bases with integral and fractional exponents,
    # 0 ^ negative, ±inf, NaN)
    vals = np.array([0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 3.0, -3.0, 2.5, math.inf,
                     -math.inf, math.nan], np.float32)
    x, e = np.meshgrid(vals, vals, indexing="ij")
    _compare(na.NODE_TYPE_POW_FUSION, na.PowFusion(scale=scale, shift=shift),
             [np.ascontiguousarray(x), np.ascontiguousarray(e)], x.shape)


@pytest.mark.parametrize("x_shape,e_shape,const", [((3, 1, 5), (4, 1), False),
                                                  ((2, 7), (), True), ((6,), (6,), False)])
def test_pow_broadcast(x_shape, e_shape, const: bool) -> None:
    x = np.abs(randn(*x_shape, seed=5)) + np.float32(0.1)
    e = randn(*e_shape, seed=6)
    out_shape = np.broadcast_shapes(x_shape, e_shape)
    _compare(na.NODE_TYPE_POW_FUSION, na.PowFusion(scale=1.0, shift=0.0),
             [x, Const(e) if const else e], out_shape)


def test_fused_epilogue() -> None:
    """Sqrt with an Activation (RELU6) fused after it, Neg with a residual Add."""
    b = HdiModelBuilder()
    x = b.input("x", np.float32, [5, 13])
    r = b.input("r", np.float32, [5, 13])
    s = b.tensor("s", np.float32, [5, 13])
    a = b.tensor("a", np.float32, [5, 13])
    n = b.tensor("n", np.float32, [5, 13])
    y = b.tensor("y", np.float32, [5, 13])
    b.node(na.NODE_TYPE_SQRT, [x], [s])
    b.node(na.NODE_TYPE_ACTIVATION, [s], [a],
           na.Activation(activationType=ht.ACTIVATION_TYPE_RELU6))
    b.node(na.NODE_TYPE_NEG, [a], [n])
    b.node(na.NODE_TYPE_ADD_FUSION, [n, r], [y], na.AddFusion())
    b.mark_outputs(y)
    graph = graph_of(b)
    arrays = [np.abs(randn(5, 13, seed=7)) * np.float32(20.0), randn(5, 13, seed=8)]
    assert_close(run_gpu(graph, arrays), run_cpu(graph, arrays))


@pytest.mark.parametrize("node_type,attrs,inputs", [
    (na.NODE_TYPE_ABS, na.Abs(), [np.arange(5, dtype=np.int32)]),
    (na.NODE_TYPE_SQRT, na.Sqrt(), [np.ones(5, np.float64)]),
    (na.NODE_TYPE_CLIP, na.Clip(min=0.0, max=3.0), [np.arange(5, dtype=np.int8)]),
    (na.NODE_TYPE_POW_FUSION, na.PowFusion(scale=1.0), [np.ones(5, np.float32),
                                                        np.ones(5, np.int32)]),
    (na.NODE_TYPE_BIAS_ADD, na.BiasAdd(), [np.ones((2, 3), np.int32), np.ones(3, np.int32)]),
])
def test_refused(node_type: int, attrs, inputs) -> None:
    node = make_node(node_type, attrs, inputs, out_shape=inputs[0].shape)
    expect_error(NNRT_UNSUPPORTED_OP, lambda: create_op(node))
