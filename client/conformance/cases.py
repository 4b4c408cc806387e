"""Generated one-node cases, per node type: small inputs, attributes and constants that the
reference engine accepts, as the kernel tests (tests/kernels) build them.

A `Case` is one node with its operands: run-time inputs (fed at Run) and constants (sent in
the model). Each generator takes a seeded `numpy.random.Generator` and returns its cases,
the most ordinary first (`--quick` runs the first few). A node type without a generator
here is reported as skipped by the operators section, never as passed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na

NHWC = ht.FORMAT_NHWC


@dataclass(frozen=True)
class Operand:
    """One input of the node: `constant` ones travel in the model, the others at Run;
    `quant`: (numBits, zeroPoint, scale) per channel, empty when not quantised."""

    array: np.ndarray
    constant: bool = False
    quant: tuple[tuple[int, int, float], ...] = ()


@dataclass(frozen=True)
class Case:
    """One node type's node, its operands and what its outputs are."""

    name: str
    node_type: int
    operands: tuple[Operand, ...]
    attrs: Any = None
    outputs: int = 1
    out_dtype: Any = None  # default: the first operand's
    out_quant: tuple[tuple[int, int, float], ...] = ()
    fmt: int = ht.FORMAT_NONE
    quant_type: int = ht.QUANT_TYPE_NONE
    # Whether float16 mode applies (float32 operands; the node is not integer-only).
    float16: bool = True
    notes: dict[str, Any] = field(default_factory=dict)

    @property
    def type_name(self) -> str:
        return na.NodeType.Name(self.node_type)


Generator = Callable[[np.random.Generator], list[Case]]
GENERATORS: dict[int, Generator] = {}


def _f32(rng: np.random.Generator, *shape: int, low: float = -2.0, high: float = 2.0) -> np.ndarray:
    return rng.uniform(low, high, shape).astype(np.float32)


def _run(array: np.ndarray) -> Operand:
    return Operand(np.asarray(array))


def _const(array: Any, dtype: Any = None) -> Operand:
    return Operand(np.asarray(array, dtype=dtype), constant=True)


def generates(*node_types: int) -> Callable[[Generator], Generator]:
    def register(function: Generator) -> Generator:
        for node_type in node_types:
            GENERATORS[node_type] = _bind(function, node_type)
        return function
    return register


def _bind(function: Callable[..., list[Case]], node_type: int) -> Generator:
    return lambda rng: function(rng, node_type)


def _case(node_type: int, name: str, operands: list[Operand], attrs: Any = None,
          **kw: Any) -> Case:
    return Case(name=name, node_type=node_type, operands=tuple(operands), attrs=attrs, **kw)


# -- element-wise -------------------------------------------------------------------------

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


# -- linear algebra -------------------------------------------------------------------------

@generates(na.NODE_TYPE_MATMUL_FUSION)
def _matmul(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "[3,4]x[4,5]", [_run(_f32(rng, 3, 4)), _const(_f32(rng, 4, 5))]),
            _case(node_type, "batched, transposeB", [_run(_f32(rng, 2, 3, 4)),
                                                     _run(_f32(rng, 2, 5, 4))],
                  na.MatMulFusion(transposeB=True)),
            _case(node_type, "transposeA, relu", [_run(_f32(rng, 4, 3)), _run(_f32(rng, 4, 6))],
                  na.MatMulFusion(transposeA=True, activationType=ht.ACTIVATION_TYPE_RELU))]


@generates(na.NODE_TYPE_FULL_CONNECTION)
def _full_connection(rng: np.random.Generator, node_type: int) -> list[Case]:
    cases = [_case(node_type, "[2,8] W[5,8] b[5]", [_run(_f32(rng, 2, 8)), _const(_f32(rng, 5, 8)),
                                                    _const(_f32(rng, 5))],
                   na.FullConnection(hasBias=True)),
             _case(node_type, "no bias, relu", [_run(_f32(rng, 3, 6)), _const(_f32(rng, 4, 6))],
                   na.FullConnection(activationType=ht.ACTIVATION_TYPE_RELU))]
    x = rng.integers(-100, 100, (2, 16), np.int8)
    w = rng.integers(-100, 100, (4, 16), np.int8)
    cases.append(_case(node_type, "int8 quantised",
                       [Operand(x, quant=((8, 3, 0.02),)),
                        Operand(w, constant=True, quant=((8, 0, 0.01),))],
                       na.FullConnection(), quant_type=ht.QUANT_TYPE_ALL,
                       out_quant=((8, -5, 0.25),), float16=False))
    return cases


def _conv_weights(rng: np.random.Generator, out_c: int, k: int, in_c: int) -> np.ndarray:
    return _f32(rng, out_c, k, k, in_c, low=-0.5, high=0.5)


@generates(na.NODE_TYPE_CONV2D_FUSION)
def _conv2d(rng: np.random.Generator, node_type: int) -> list[Case]:
    def conv(name: str, x: np.ndarray, out_c: int, k: int, group: int = 1, **attrs: Any) -> Case:
        in_c = x.shape[-1]
        w = _conv_weights(rng, out_c, k, in_c // group)
        return _case(node_type, name, [_run(x), _const(w), _const(_f32(rng, out_c))],
                     na.Conv2DFusion(kernelSize=[k, k], group=group, inChannel=in_c,
                                     outChannel=out_c, **attrs), fmt=NHWC)
    return [conv("3x3 valid", _f32(rng, 1, 5, 5, 2), 3, 3, stride=[1, 1], dilation=[1, 1],
                 padMode=ht.PAD_MODE_VALID),
            conv("3x3 same stride 2", _f32(rng, 1, 6, 6, 3), 4, 3, stride=[2, 2],
                 dilation=[1, 1], padMode=ht.PAD_MODE_SAME),
            conv("depthwise pad relu6", _f32(rng, 1, 4, 4, 4), 4, 3, group=4, stride=[1, 1],
                 dilation=[1, 1], padMode=ht.PAD_MODE_PAD, padList=[1, 1, 1, 1],
                 activationType=ht.ACTIVATION_TYPE_RELU6)]


@generates(na.NODE_TYPE_CONV2D_TRANSPOSE_FUSION)
def _conv2d_transpose(rng: np.random.Generator, node_type: int) -> list[Case]:
    x = _f32(rng, 1, 3, 3, 2)
    w = _conv_weights(rng, 3, 3, 2)
    return [_case(node_type, "3x3 stride 2", [_run(x), _const(w), _const(_f32(rng, 3))],
                  na.Conv2dTransposeFusion(kernelSize=[3, 3], stride=[2, 2], dilation=[1, 1],
                                           padMode=ht.PAD_MODE_PAD, padList=[0, 0, 0, 0],
                                           group=1, inChannel=2, outChannel=3,
                                           outputPaddings=[0, 0]), fmt=NHWC)]


@generates(na.NODE_TYPE_LSTM)
def _lstm(rng: np.random.Generator, node_type: int) -> list[Case]:
    seq, batch, size, hidden = 3, 2, 4, 5
    operands = [_run(_f32(rng, seq, batch, size, low=-1, high=1)),
                _const(_f32(rng, 1, 4 * hidden, size, low=-0.5, high=0.5)),
                _const(_f32(rng, 1, 4 * hidden, hidden, low=-0.5, high=0.5)),
                _const(_f32(rng, 1, 8 * hidden, low=-0.5, high=0.5)),
                _run(_f32(rng, 1, batch, hidden, low=-1, high=1)),
                _run(_f32(rng, 1, batch, hidden, low=-1, high=1))]
    return [_case(node_type, "one layer", operands,
                  na.LSTM(bidirectional=False, hasBias=True, inputSize=size, hiddenSize=hidden,
                          numLayers=1, numDirections=1), outputs=3)]


# -- normalisation, pooling, reductions -----------------------------------------------------

@generates(na.NODE_TYPE_SOFTMAX, na.NODE_TYPE_LOG_SOFTMAX)
def _softmax(rng: np.random.Generator, node_type: int) -> list[Case]:
    attrs = na.Softmax if node_type == na.NODE_TYPE_SOFTMAX else na.LogSoftmax
    last = attrs(axis=[-1]) if node_type == na.NODE_TYPE_SOFTMAX else attrs(axis=-1)
    first = attrs(axis=[1]) if node_type == na.NODE_TYPE_SOFTMAX else attrs(axis=1)
    return [_case(node_type, "last axis", [_run(_f32(rng, 3, 7, low=-5, high=5))], last),
            _case(node_type, "axis 1", [_run(_f32(rng, 2, 4, 3, low=-5, high=5))], first)]


@generates(na.NODE_TYPE_LAYER_NORM_FUSION)
def _layer_norm(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "last axis, affine",
                  [_run(_f32(rng, 2, 3, 8)), _const(_f32(rng, 8)), _const(_f32(rng, 8))],
                  na.LayerNormFusion(beginNormAxis=-1, beginParamsAxis=-1, epsilon=1e-5,
                                     elementwiseAffine=True))]


@generates(na.NODE_TYPE_FUSED_BATCH_NORM)
def _batch_norm(rng: np.random.Generator, node_type: int) -> list[Case]:
    c = 3
    return [_case(node_type, "NHWC", [_run(_f32(rng, 1, 2, 2, c)), _const(_f32(rng, c)),
                                      _const(_f32(rng, c)), _const(_f32(rng, c)),
                                      _const(_f32(rng, c, low=0.5, high=2.0))],
                  na.FusedBatchNorm(epsilon=1e-3), fmt=NHWC)]


@generates(na.NODE_TYPE_INSTANCE_NORM)
def _instance_norm(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "NHWC", [_run(_f32(rng, 1, 3, 3, 2)), _const(_f32(rng, 2)),
                                      _const(_f32(rng, 2))],
                  na.InstanceNorm(epsilon=1e-5), fmt=NHWC)]


@generates(na.NODE_TYPE_L2_NORMALIZE_FUSION)
def _l2_normalize(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "last axis", [_run(_f32(rng, 3, 4))],
                  na.L2NormalizeFusion(axis=[-1], epsilon=1e-6))]


@generates(na.NODE_TYPE_LRN)
def _lrn(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "radius 2", [_run(_f32(rng, 1, 2, 2, 6))],
                  na.LRN(depthRadius=2, bias=1.0, alpha=1e-3, beta=0.75,
                         normRegion="ACROSS_CHANNELS"), fmt=NHWC)]


@generates(na.NODE_TYPE_AVGPOOL_FUSION, na.NODE_TYPE_MAX_POOL_FUSION)
def _pool(rng: np.random.Generator, node_type: int) -> list[Case]:
    attrs = na.AvgPoolFusion if node_type == na.NODE_TYPE_AVGPOOL_FUSION else na.MaxPoolFusion
    return [_case(node_type, "2x2 stride 2", [_run(_f32(rng, 1, 4, 4, 3))],
                  attrs(kernelSize=[2, 2], strides=[2, 2], pad=[0, 0, 0, 0],
                        padMode=ht.PAD_MODE_VALID, format=NHWC), fmt=NHWC),
            _case(node_type, "3x3 same", [_run(_f32(rng, 1, 5, 5, 2))],
                  attrs(kernelSize=[3, 3], strides=[1, 1], pad=[0, 0, 0, 0],
                        padMode=ht.PAD_MODE_SAME, format=NHWC), fmt=NHWC),
            _case(node_type, "global", [_run(_f32(rng, 1, 3, 3, 4))],
                  attrs(kernelSize=[3, 3], strides=[1, 1], pad=[0, 0, 0, 0],
                        padMode=ht.PAD_MODE_VALID, format=NHWC, **{"global": True}), fmt=NHWC)]


@generates(na.NODE_TYPE_REDUCE_FUSION)
def _reduce(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, f"{ht.ReduceMode.Name(mode)} axis 1",
                  [_run(_f32(rng, 2, 3, 4, low=0.5, high=1.5)), _const(np.int32([1]))],
                  na.ReduceFusion(keepDims=keep, mode=mode, coeff=1.0))
            for mode, keep in ((ht.REDUCE_MODE_SUM, False), (ht.REDUCE_MODE_MEAN, True),
                               (ht.REDUCE_MODE_MAX, False), (ht.REDUCE_MODE_MIN, False),
                               (ht.REDUCE_MODE_PROD, False), (ht.REDUCE_MODE_L2, False))]


@generates(na.NODE_TYPE_ARGMAX_FUSION)
def _argmax(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "axis 1", [_run(_f32(rng, 3, 5))],
                  na.ArgMaxFusion(axis=1, topK=1, keepDims=False, outMaxValue=False),
                  out_dtype=np.int32, float16=False)]


@generates(na.NODE_TYPE_TOPK_FUSION)
def _topk(rng: np.random.Generator, node_type: int) -> list[Case]:
    x = rng.permutation(24).astype(np.float32).reshape(4, 6)  # distinct: one right order
    return [_case(node_type, "k=3 last axis", [_run(x), _const(np.int32([3]))],
                  na.TopKFusion(sorted=True, axis=-1), outputs=2, notes={"dtypes": (
                      np.float32, np.int32)}, float16=False)]


@generates(na.NODE_TYPE_ALL)
def _all(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "axis 1", [_run(rng.random((3, 4)) > 0.2), _const(np.int32([1]))],
                  na.All(keepDims=0), float16=False)]


# -- moving data ----------------------------------------------------------------------------

@generates(na.NODE_TYPE_RESHAPE)
def _reshape(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "[2,6] -> [3,4]", [_run(_f32(rng, 2, 6)), _const(np.int64([3, 4]))]),
            _case(node_type, "-1", [_run(_f32(rng, 2, 3, 4)), _const(np.int32([-1, 4]))])]


@generates(na.NODE_TYPE_TRANSPOSE)
def _transpose(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "perm 0 2 1", [_run(_f32(rng, 2, 3, 4)), _const(np.int32([0, 2, 1]))]),
            _case(node_type, "NHWC -> NCHW", [_run(_f32(rng, 1, 3, 4, 2)),
                                              _const(np.int64([0, 3, 1, 2]))])]


@generates(na.NODE_TYPE_CONCAT)
def _concat(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "axis 1", [_run(_f32(rng, 2, 3)), _run(_f32(rng, 2, 2)),
                                        _const(_f32(rng, 2, 1))], na.Concat(axis=1))]


@generates(na.NODE_TYPE_SPLIT)
def _split(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "3 equal parts", [_run(_f32(rng, 2, 6))],
                  na.Split(outputNum=3, axis=1), outputs=3),
            _case(node_type, "sizes 1,3", [_run(_f32(rng, 4, 2))],
                  na.Split(outputNum=2, sizeSplits=[1, 3], axis=0), outputs=2)]


@generates(na.NODE_TYPE_STACK)
def _stack(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "axis 0", [_run(_f32(rng, 2, 3)), _run(_f32(rng, 2, 3))],
                  na.Stack(axis=0))]


@generates(na.NODE_TYPE_UNSTACK)
def _unstack(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "axis 0", [_run(_f32(rng, 3, 4))], na.Unstack(axis=0), outputs=3)]


@generates(na.NODE_TYPE_SQUEEZE)
def _squeeze(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "axis 1", [_run(_f32(rng, 2, 1, 3))], na.Squeeze(axis=[1]))]


@generates(na.NODE_TYPE_UNSQUEEZE)
def _unsqueeze(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "axis 0", [_run(_f32(rng, 2, 3))], na.Unsqueeze(axis=[0]))]


@generates(na.NODE_TYPE_EXPAND_DIMS)
def _expand_dims(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "axis 1", [_run(_f32(rng, 2, 3)), _const(np.int32([1]))])]


@generates(na.NODE_TYPE_FLATTEN)
def _flatten(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "axis 1", [_run(_f32(rng, 2, 3, 4))], na.Flatten(axis=1))]


@generates(na.NODE_TYPE_SLICE_FUSION)
def _slice(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "begin 0,1 size 2,2", [_run(_f32(rng, 3, 4)), _const(np.int32([0, 1])),
                                                    _const(np.int32([2, 2]))],
                  na.SliceFusion(axes=[0, 1]))]


@generates(na.NODE_TYPE_STRIDED_SLICE)
def _strided_slice(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "stride 2", [_run(_f32(rng, 4, 6)), _const(np.int32([0, 1])),
                                          _const(np.int32([4, 6])), _const(np.int32([2, 2]))],
                  na.StridedSlice())]


@generates(na.NODE_TYPE_TILE_FUSION)
def _tile(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "2x3", [_run(_f32(rng, 2, 2)), _const(np.int32([2, 3]))],
                  na.TileFusion())]


@generates(na.NODE_TYPE_BROADCAST_TO)
def _broadcast_to(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "[3,1] -> [2,3,4]", [_run(_f32(rng, 3, 1))],
                  na.BroadcastTo(shape=[2, 3, 4]))]


@generates(na.NODE_TYPE_GATHER)
def _gather(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "axis 0", [_run(_f32(rng, 5, 3)), _const(np.int32([4, 0, 2])),
                                        _const(np.int32([0]))])]


@generates(na.NODE_TYPE_GATHER_ND)
def _gather_nd(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "pairs", [_run(_f32(rng, 3, 4)), _const(np.int32([[0, 1], [2, 3]]))])]


@generates(na.NODE_TYPE_SCATTER_ND)
def _scatter_nd(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "rows", [_const(np.int32([[0], [2]])), _run(_f32(rng, 2, 3)),
                                      _const(np.int32([4, 3]))], out_dtype=np.float32)]


@generates(na.NODE_TYPE_PAD_FUSION)
def _pad(rng: np.random.Generator, node_type: int) -> list[Case]:
    paddings = np.int32([[1, 0], [2, 1]])
    return [_case(node_type, f"{ht.PaddingMode.Name(mode)}", [_run(_f32(rng, 3, 4)),
                                                              _const(paddings)],
                  na.PadFusion(paddingMode=mode, constantValue=0.5))
            for mode in (ht.PADDING_MODE_CONSTANT, ht.PADDING_MODE_REFLECT,
                         ht.PADDING_MODE_SYMMETRIC)]


@generates(na.NODE_TYPE_DEPTH_TO_SPACE)
def _depth_to_space(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "block 2", [_run(_f32(rng, 1, 2, 2, 8))],
                  na.DepthToSpace(blockSize=2, format=NHWC, mode="DCR"), fmt=NHWC)]


@generates(na.NODE_TYPE_SPACE_TO_DEPTH)
def _space_to_depth(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "block 2", [_run(_f32(rng, 1, 4, 4, 2))],
                  na.SpaceToDepth(blockSize=2, format=NHWC), fmt=NHWC)]


def _int64_arrays(rows: list[list[int]]) -> list[ht.Int64Array]:
    return [ht.Int64Array(values=row) for row in rows]


@generates(na.NODE_TYPE_SPACE_TO_BATCH_ND)
def _space_to_batch(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "block 2x2", [_run(_f32(rng, 1, 4, 4, 1))],
                  na.SpaceToBatchND(blockShape=[2, 2], paddings=_int64_arrays([[0, 0], [0, 0]])),
                  fmt=NHWC)]


@generates(na.NODE_TYPE_BATCH_TO_SPACE_ND)
def _batch_to_space(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "block 2x2", [_run(_f32(rng, 4, 2, 2, 1))],
                  na.BatchToSpaceND(blockShape=[2, 2], crops=_int64_arrays([[0, 0], [0, 0]])),
                  fmt=NHWC)]


@generates(na.NODE_TYPE_CROP)
def _crop(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "axis 1", [_run(_f32(rng, 2, 5, 4)), _run(_f32(rng, 2, 3, 2))],
                  na.Crop(axis=1, offset=[1, 2]))]


@generates(na.NODE_TYPE_RESIZE)
def _resize(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, f"{ht.ResizeMethod.Name(method)} x2", [_run(_f32(rng, 1, 3, 3, 2))],
                  na.Resize(method=method, newHeight=6, newWidth=6,
                            coordinateTransformMode=ht.COORDINATE_TRANSFORM_MODE_HALF_PIXEL,
                            nearestMode=ht.NEAREST_MODE_ROUND_HALF_DOWN), fmt=NHWC)
            for method in (ht.RESIZE_METHOD_LINEAR, ht.RESIZE_METHOD_NEAREST)]


@generates(na.NODE_TYPE_ONE_HOT)
def _one_hot(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "depth 4", [_run(np.int32([0, 3, 1])), _const(np.int32([4])),
                                         _const(np.float32([1.0])), _const(np.float32([0.0]))],
                  na.OneHot(axis=-1), out_dtype=np.float32)]


# -- shapes and values ---------------------------------------------------------------------

@generates(na.NODE_TYPE_SHAPE)
def _shape(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "rank 3", [_run(_f32(rng, 2, 3, 4))], out_dtype=np.int32,
                  float16=False)]


@generates(na.NODE_TYPE_RANK)
def _rank(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "rank 3", [_run(_f32(rng, 2, 3, 4))], out_dtype=np.int32,
                  float16=False)]


@generates(na.NODE_TYPE_FILL)
def _fill(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "[2,3] of 1.5", [_run(np.float32([1.5])), _const(np.int32([2, 3]))],
                  float16=False)]


@generates(na.NODE_TYPE_CONSTANT_OF_SHAPE)
def _constant_of_shape(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "[3,2] of 2", [_run(np.int32([3, 2]))],
                  na.ConstantOfShape(dataType=ht.DATA_TYPE_FLOAT32, value=[2.0]),
                  out_dtype=np.float32, float16=False)]


@generates(na.NODE_TYPE_RANGE)
def _range(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "0..10 step 3", [_run(np.int32([0])), _const(np.int32([10])),
                                              _const(np.int32([3]))],
                  na.Range(dataType=ht.DATA_TYPE_INT32, start=0, limit=10, delta=3),
                  out_dtype=np.int32, float16=False)]


@generates(na.NODE_TYPE_SPARSE_TO_DENSE)
def _sparse_to_dense(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "2 values in [3,4]", [_const(np.int32([[0, 1], [2, 3]])),
                                                   _run(_f32(rng, 2)), _const(np.int32([3, 4])),
                                                   _const(np.float32([0.0]))],
                  out_dtype=np.float32)]


@generates(na.NODE_TYPE_QUANT_DTYPE_CAST, na.NODE_TYPE_QUANT_DTYPE_CAST_V2)
def _quant_dtype_cast(rng: np.random.Generator, node_type: int) -> list[Case]:
    attrs = na.QuantDTypeCast if node_type == na.NODE_TYPE_QUANT_DTYPE_CAST else na.QuantDTypeCastV2
    q = ((8, 2, 0.05),)
    x = _f32(rng, 2, 6)
    return [_case(node_type, "f32 -> int8", [_run(x)],
                  attrs(srcT=ht.DATA_TYPE_FLOAT32, dstT=ht.DATA_TYPE_INT8), out_dtype=np.int8,
                  out_quant=q, float16=False),
            _case(node_type, "int8 -> f32", [Operand(rng.integers(-128, 127, (2, 6), np.int8),
                                                     quant=q)],
                  attrs(srcT=ht.DATA_TYPE_INT8, dstT=ht.DATA_TYPE_FLOAT32),
                  out_dtype=np.float32, float16=False)]


@generates(na.NODE_TYPE_DETECTION_POST_PROCESS)
def _detection_post_process(rng: np.random.Generator, node_type: int) -> list[Case]:
    boxes, classes = 6, 2
    anchors = np.concatenate([rng.uniform(0.2, 0.8, (boxes, 2)),
                              rng.uniform(0.1, 0.3, (boxes, 2))], axis=1).astype(np.float32)
    return [_case(node_type, "6 anchors 2 classes",
                  [_run(_f32(rng, 1, boxes, 4, low=-0.5, high=0.5)),
                   _run(rng.uniform(0, 1, (1, boxes, classes + 1)).astype(np.float32)),
                   _const(anchors)],
                  na.DetectionPostProcess(format=ht.FORMAT_NHWC, inputSize=300,
                                          scale=[10.0, 10.0, 5.0, 5.0], nmsIoUThreshold=0.5,
                                          nmsScoreThreshold=0.3, maxDetections=3,
                                          detectionsPerClass=3, maxClassesPerDetection=1,
                                          numClasses=classes, useRegularNms=False,
                                          outQuantized=False),
                  outputs=4, notes={"dtypes": (np.float32, np.float32, np.float32, np.int32)},
                  float16=False)]


@generates(na.NODE_TYPE_ASSERT)
def _assert(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "true condition", [_run(np.ones((2,), np.bool_)),
                                                _run(_f32(rng, 2))],
                  na.Assert(summarize=3), out_dtype=np.bool_, float16=False)]


def cases_for(node_type: int, seed: int = 2024) -> list[Case]:
    """The cases of one node type (empty when there is no generator for it)."""
    generator = GENERATORS.get(node_type)
    if generator is None:
        return []
    return generator(np.random.default_rng(seed * 1000 + node_type))
