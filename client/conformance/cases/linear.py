"""Linear-algebra cases: MatMul, FullConnection, convolutions, LSTM."""

from __future__ import annotations

from typing import Any

import numpy as np

from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na

from .base import NHWC, Case, Operand, _case, _const, _f32, _run, generates

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
