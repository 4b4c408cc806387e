"""Element-wise cases: unary and binary math, comparisons, logic, activations, casts."""

from __future__ import annotations

import numpy as np

from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na

from .base import Case, Operand, _case, _const, _f32, _run, generates

_UNARY_DOMAIN = {  # inputs where the function is defined and well conditioned
    na.NODE_TYPE_LOG: (0.1, 4.0), na.NODE_TYPE_SQRT: (0.1, 4.0), na.NODE_TYPE_RSQRT: (0.1, 4.0),
    na.NODE_TYPE_RECIPROCAL: (0.5, 4.0),
}


@generates(na.NODE_TYPE_ABS, na.NODE_TYPE_CEIL, na.NODE_TYPE_COS, na.NODE_TYPE_ERF,
           na.NODE_TYPE_FLOOR, na.NODE_TYPE_LOG, na.NODE_TYPE_NEG, na.NODE_TYPE_RECIPROCAL,
           na.NODE_TYPE_ROUND, na.NODE_TYPE_RSQRT, na.NODE_TYPE_SIN, na.NODE_TYPE_SQRT,
           na.NODE_TYPE_SQUARE)
def _unary(rng: np.random.Generator, node_type: int) -> list[Case]:
    low, high = _UNARY_DOMAIN.get(node_type, (-3.0, 3.0))
    cases = [_case(node_type, "f32[2,3]", [_run(_f32(rng, 2, 3, low=low, high=high))]),
             _case(node_type, "f32[1,4,5,3]", [_run(_f32(rng, 1, 4, 5, 3, low=low, high=high))])]
    if node_type in (na.NODE_TYPE_CEIL, na.NODE_TYPE_FLOOR, na.NODE_TYPE_ROUND):
        # whole and half values: where rounding rules differ (round: ties to even)
        cases.append(_case(node_type, "halves", [_run(np.array(
            [-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.0, -3.0], np.float32))], float16=False))
    if node_type in (na.NODE_TYPE_ABS, na.NODE_TYPE_NEG, na.NODE_TYPE_SQUARE):
        cases.append(_case(node_type, "int32[4]", [_run(np.array([-3, 0, 2, 7], np.int32))],
                           float16=False))
    return cases


_BINARY_ATTRS = {
    na.NODE_TYPE_ADD_FUSION: na.AddFusion, na.NODE_TYPE_SUB_FUSION: na.SubFusion,
    na.NODE_TYPE_MUL_FUSION: na.MulFusion, na.NODE_TYPE_DIV_FUSION: na.DivFusion,
}


@generates(na.NODE_TYPE_ADD_FUSION, na.NODE_TYPE_SUB_FUSION, na.NODE_TYPE_MUL_FUSION,
           na.NODE_TYPE_DIV_FUSION, na.NODE_TYPE_MAXIMUM, na.NODE_TYPE_MINIMUM,
           na.NODE_TYPE_REAL_DIV, na.NODE_TYPE_SQUARED_DIFFERENCE, na.NODE_TYPE_MOD)
def _binary(rng: np.random.Generator, node_type: int) -> list[Case]:
    divides = node_type in (na.NODE_TYPE_DIV_FUSION, na.NODE_TYPE_REAL_DIV, na.NODE_TYPE_MOD)

    def rhs(*shape: int) -> np.ndarray:
        y = _f32(rng, *shape)
        return np.where(np.abs(y) < 0.5, np.float32(1.25), y).astype(np.float32) if divides else y

    attrs = _BINARY_ATTRS.get(node_type)
    cases = [
        _case(node_type, "f32[2,3]+f32[2,3]", [_run(_f32(rng, 2, 3)), _run(rhs(2, 3))]),
        _case(node_type, "broadcast f32[2,3,4]+const[4]", [_run(_f32(rng, 2, 3, 4)),
                                                        _const(rhs(4))]),
        _case(node_type, "broadcast f32[3,1]+f32[1,5]", [_run(_f32(rng, 3, 1)), _run(rhs(1, 5))]),
    ]
    if attrs is not None:
        cases.append(_case(node_type, "fused relu", [_run(_f32(rng, 4, 4)), _run(rhs(4, 4))],
                           attrs(activationType=ht.ACTIVATION_TYPE_RELU)))
    if node_type != na.NODE_TYPE_REAL_DIV and not divides:
        cases.append(_case(node_type, "int32", [_run(rng.integers(-9, 9, (2, 3), np.int32)),
                                                _run(rng.integers(-9, 9, (2, 3), np.int32))],
                           float16=False))
    if node_type == na.NODE_TYPE_ADD_FUSION:
        scale = 0.05
        x = rng.integers(-100, 100, (2, 8), np.int8)
        y = rng.integers(-100, 100, (2, 8), np.int8)
        q = ((8, 0, scale),)
        cases.append(_case(node_type, "int8 quantised", [Operand(x, quant=q), Operand(y, quant=q)],
                           quant_type=ht.QUANT_TYPE_ALL, out_quant=((8, 0, 0.1),),
                           float16=False))
    return cases


@generates(na.NODE_TYPE_POW_FUSION)
def _pow(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "x^y", [_run(_f32(rng, 2, 3, low=0.5, high=2.0)),
                                     _run(_f32(rng, 2, 3, low=-2.0, high=2.0))],
                  na.PowFusion(scale=1.0, shift=0.0)),
            _case(node_type, "scaled, const exponent", [_run(_f32(rng, 3, 4, low=0.5, high=2.0)),
                                                        _const(np.float32([2.0]))],
                  na.PowFusion(scale=0.5, shift=0.25))]


@generates(na.NODE_TYPE_EQUAL, na.NODE_TYPE_NOT_EQUAL, na.NODE_TYPE_GREATER,
           na.NODE_TYPE_GREATER_EQUAL, na.NODE_TYPE_LESS, na.NODE_TYPE_LESS_EQUAL)
def _compare(rng: np.random.Generator, node_type: int) -> list[Case]:
    x = np.round(_f32(rng, 3, 4))
    y = np.round(_f32(rng, 3, 4))  # rounded: some equal pairs
    return [_case(node_type, "f32[3,4]", [_run(x), _run(y)], out_dtype=np.bool_),
            _case(node_type, "broadcast int32", [_run(rng.integers(-3, 3, (2, 3), np.int32)),
                                                 _const(np.int32([1]))],
                  out_dtype=np.bool_, float16=False)]


@generates(na.NODE_TYPE_LOGICAL_AND, na.NODE_TYPE_LOGICAL_OR)
def _logical(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "bool[2,4]", [_run(rng.random((2, 4)) > 0.5),
                                           _run(rng.random((2, 4)) > 0.5)], float16=False)]


@generates(na.NODE_TYPE_LOGICAL_NOT)
def _logical_not(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "bool[2,4]", [_run(rng.random((2, 4)) > 0.5)], float16=False)]


@generates(na.NODE_TYPE_ELTWISE)
def _eltwise(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, f"mode {ht.EltwiseMode.Name(mode)}",
                  [_run(_f32(rng, 2, 5)), _run(_f32(rng, 2, 5))], na.Eltwise(mode=mode))
            for mode in (ht.ELTWISE_MODE_SUM, ht.ELTWISE_MODE_PROD, ht.ELTWISE_MODE_MAXIMUM)]


_ACTIVATIONS = (ht.ACTIVATION_TYPE_RELU, ht.ACTIVATION_TYPE_SIGMOID, ht.ACTIVATION_TYPE_TANH,
                ht.ACTIVATION_TYPE_RELU6, ht.ACTIVATION_TYPE_LEAKY_RELU, ht.ACTIVATION_TYPE_ELU,
                ht.ACTIVATION_TYPE_HSWISH, ht.ACTIVATION_TYPE_GELU, ht.ACTIVATION_TYPE_SOFTPLUS,
                ht.ACTIVATION_TYPE_HSIGMOID, ht.ACTIVATION_TYPE_SWISH)


@generates(na.NODE_TYPE_ACTIVATION)
def _activation(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, ht.ActivationType.Name(kind), [_run(_f32(rng, 2, 8, low=-4, high=4))],
                  na.Activation(activationType=kind, alpha=0.2))
            for kind in _ACTIVATIONS]


@generates(na.NODE_TYPE_LEAKY_RELU)
def _leaky_relu(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "slope 0.1", [_run(_f32(rng, 3, 5))], na.LeakyRelu(negativeSlope=0.1))]


@generates(na.NODE_TYPE_CLIP)
def _clip(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "[-1, 1]", [_run(_f32(rng, 3, 4))], na.Clip(min=-1.0, max=1.0))]


@generates(na.NODE_TYPE_EXPFUSION)
def _exp(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "e^x", [_run(_f32(rng, 2, 6))],
                  na.ExpFusion(base=-1.0, scale=1.0, shift=0.0)),
            _case(node_type, "2^(0.5x+0.1)", [_run(_f32(rng, 2, 6))],
                  na.ExpFusion(base=2.0, scale=0.5, shift=0.1))]


@generates(na.NODE_TYPE_PRELU_FUSION)
def _prelu(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "per channel", [_run(_f32(rng, 1, 2, 2, 3)),
                                             _const(_f32(rng, 3, low=0.0, high=0.5))],
                  na.PReLUFusion(channelShared=False))]


@generates(na.NODE_TYPE_BIAS_ADD)
def _bias_add(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "[2,3,4]+bias[4]", [_run(_f32(rng, 2, 3, 4)), _const(_f32(rng, 4))])]


@generates(na.NODE_TYPE_SELECT, na.NODE_TYPE_WHERE)
def _select(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "cond ? x : y", [_run(rng.random((2, 3)) > 0.5),
                                              _run(_f32(rng, 2, 3)), _run(_f32(rng, 2, 3))],
                  out_dtype=np.float32)]


@generates(na.NODE_TYPE_CAST)
def _cast(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "f32 -> int32", [_run(_f32(rng, 2, 4, low=-9, high=9)),
                                              _const(np.int32([ht.DATA_TYPE_INT32]))],
                  out_dtype=np.int32, float16=False),
            _case(node_type, "int32 -> f32", [_run(rng.integers(-9, 9, (3,), np.int32)),
                                              _const(np.int32([ht.DATA_TYPE_FLOAT32]))],
                  out_dtype=np.float32, float16=False)]


@generates(na.NODE_TYPE_SCALE_FUSION)
def _scale(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "axis -1, scale and offset",
                  [_run(_f32(rng, 2, 3, 4)), _const(_f32(rng, 4)), _const(_f32(rng, 4))],
                  na.ScaleFusion(axis=-1))]
