"""The broadcasting binary operators without activation: Maximum / Minimum (ONNX Max / Min
propagate NaN, as ours), Mod (ONNX Mod with fmod 1: C's fmod, the sign of the dividend,
x mod 0 = NaN), RealDiv (Div), SquaredDifference ((x - y)·(x - y)); Eltwise PROD / SUM /
MAXIMUM (Mul / Add / Max); PowFusion ((scale·x + shift) ^ e with the exponent converted to
float32 first, as ours).

float32 only: integer division and remainder by zero would trap inside onnxruntime (ours
fails the run), integer wrap-around is not onnxruntime's promise, integer powers wrap in
64 bits in ours; float16 stays on numpy.
"""

from __future__ import annotations

from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.reference.kernel import Kernel
from ..lowering import F32, FLOAT32_ONLY, NodeEmitter, lowers

_OP = {na.NODE_TYPE_MAXIMUM: "Max", na.NODE_TYPE_MINIMUM: "Min", na.NODE_TYPE_REAL_DIV: "Div"}
_ELTWISE = {ht.ELTWISE_MODE_PROD: "Mul", ht.ELTWISE_MODE_SUM: "Add",
            ht.ELTWISE_MODE_MAXIMUM: "Max"}


@lowers(*_OP)
def binary(k: Kernel, e: NodeEmitter) -> None:
    e.require_float32()
    e.op(_OP[k.node.node_type], [e.input(0), e.input(1)], out=e.output())


@lowers(na.NODE_TYPE_MOD)
def mod(k: Kernel, e: NodeEmitter) -> None:
    e.require_float32()
    e.op("Mod", [e.input(0), e.input(1)], out=e.output(), fmod=1)


@lowers(na.NODE_TYPE_SQUARED_DIFFERENCE)
def squared_difference(k: Kernel, e: NodeEmitter) -> None:
    e.require_float32()
    d = e.op("Sub", [e.input(0), e.input(1)])
    e.op("Mul", [d, d], out=e.output())


@lowers(na.NODE_TYPE_ELTWISE)
def eltwise(k: Kernel, e: NodeEmitter) -> None:
    e.require_float32()
    e.op(_ELTWISE[int(k.node.attrs.mode)], [e.input(0), e.input(1)], out=e.output())


@lowers(na.NODE_TYPE_POW_FUSION)
def power(k: Kernel, e: NodeEmitter) -> None:
    e.require_dtypes(FLOAT32_ONLY, e.spec(0), e.node.outputs[0])
    base = e.input(0)
    if k.scale != 1.0:
        base = e.op("Mul", [base, e.const(k.scale, F32, "scale")])
    if k.shift != 0.0:
        base = e.op("Add", [base, e.const(k.shift, F32, "shift")])
    spec = e.spec(1)
    if spec.is_constant:
        exponent = e.const(spec.constant.astype(F32), F32, "exp")
    else:
        exponent = e.input(1)
        if spec.dtype != F32:
            exponent = e.op("Cast", [exponent], to=1)
    e.op("Pow", [base, exponent], out=e.output())
