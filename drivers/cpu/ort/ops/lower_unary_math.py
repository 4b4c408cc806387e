"""The element-wise unary family as ONNX nodes: Abs, Neg, Square (Mul x·x), Ceil, Floor,
Round (ONNX Round is half to even, as ours), Cos, Sin, Log, Sqrt, Reciprocal, Rsqrt
(Reciprocal of Sqrt, as ours), Erf; ExpFusion (Exp, or Pow of a constant base, after
ours' scale and shift); LeakyRelu (the activation's lowering); Clip (ONNX Clip with the
bounds rounded to float32 as ours, ±inf for a missing one; NaN stays NaN in both).

float32 only: integer Abs / Neg / Square wrap in ours (|INT_MIN|, -INT_MIN), which is not
onnxruntime's promise, Ceil / Floor / Round are the identity there, integer Clip clamps
to the integers inside the bounds; float16 stays on numpy. IEEE specials (log 0, sqrt of a
negative, 1/±0) are onnxruntime's as well as ours.
"""

from __future__ import annotations

import numpy as np

from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.reference.kernel import Kernel
from nnrt.hdi.reference.ops.op_exp import NATURAL
from ..activation import emit_activation
from ..lowering import F32, NodeEmitter, lowers

_PLAIN = {na.NODE_TYPE_ABS: "Abs", na.NODE_TYPE_NEG: "Neg", na.NODE_TYPE_CEIL: "Ceil",
          na.NODE_TYPE_FLOOR: "Floor", na.NODE_TYPE_ROUND: "Round", na.NODE_TYPE_COS: "Cos",
          na.NODE_TYPE_SIN: "Sin", na.NODE_TYPE_LOG: "Log", na.NODE_TYPE_SQRT: "Sqrt",
          na.NODE_TYPE_RECIPROCAL: "Reciprocal", na.NODE_TYPE_ERF: "Erf"}


@lowers(*_PLAIN)
def plain(k: Kernel, e: NodeEmitter) -> None:
    e.require_float32()
    e.op(_PLAIN[k.node.node_type], [e.input(0)], out=e.output())


@lowers(na.NODE_TYPE_SQUARE)
def square(k: Kernel, e: NodeEmitter) -> None:
    e.require_float32()
    x = e.input(0)
    e.op("Mul", [x, x], out=e.output())


@lowers(na.NODE_TYPE_RSQRT)
def rsqrt(k: Kernel, e: NodeEmitter) -> None:
    e.require_float32()
    e.op("Reciprocal", [e.op("Sqrt", [e.input(0)])], out=e.output())


@lowers(na.NODE_TYPE_EXPFUSION)
def exp(k: Kernel, e: NodeEmitter) -> None:
    e.require_float32()
    z = e.input(0)
    if k.scale != 1.0:
        z = e.op("Mul", [z, e.const(k.scale, F32, "scale")])
    if k.shift != 0.0:
        z = e.op("Add", [z, e.const(k.shift, F32, "shift")])
    if k.base == NATURAL:
        e.op("Exp", [z], out=e.output())
    else:
        e.op("Pow", [e.const(k.base, F32, "base"), z], out=e.output())


@lowers(na.NODE_TYPE_LEAKY_RELU)
def leaky_relu(k: Kernel, e: NodeEmitter) -> None:
    e.require_float32()
    emit_activation(e, e.input(0), ht.ACTIVATION_TYPE_LEAKY_RELU, out=e.output(),
                    alpha=k.slope)


@lowers(na.NODE_TYPE_CLIP)
def clip(k: Kernel, e: NodeEmitter) -> None:
    e.require_float32()
    e.op("Clip", [e.input(0), e.const(k.low, F32, "lo"), e.const(k.high, F32, "hi")],
         out=e.output())
