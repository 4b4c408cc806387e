"""Per-channel and aligned parameters: BiasAdd (Add of the bias along the channel axis),
ScaleFusion (x · scale + bias with scale / bias given trailing size-1 dimensions, then the
fused activation), PReLUFusion (ONNX PRelu: x < 0 ? slope·x : x, which is ours' x >= 0 ?
x : slope·x for every value, NaN and -0 included; the slope on the channel axis, or one
shared slope as a scalar). float32 only (integer BiasAdd / Scale wrap in ours; float16
stays on numpy).
"""

from __future__ import annotations

from collections.abc import Sequence

from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.reference.kernel import Kernel
from ..activation import emit_activation
from ..lowering import F32, NodeEmitter, lowers


def _shaped(e: NodeEmitter, i: int, shape: Sequence[int]) -> str:
    """Input i reshaped to `shape` (0: that dimension kept, -1: the rest)."""
    spec = e.spec(i)
    if spec.is_constant:
        return e.const(spec.constant.reshape(shape), F32, "p")
    return e.op("Reshape", [e.input(i), e.int64s(shape)])


@lowers(na.NODE_TYPE_BIAS_ADD)
def bias_add(k: Kernel, e: NodeEmitter) -> None:
    e.require_float32()
    bias = _shaped(e, 1, [-1] + [1] * (k.rank - 1 - k.axis)) if k.axis != k.rank - 1 \
        else e.input(1)
    e.op("Add", [e.input(0), bias], out=e.output())


@lowers(na.NODE_TYPE_SCALE_FUSION)
def scale(k: Kernel, e: NodeEmitter) -> None:
    e.require_float32()
    shape = [0] * k.scale_rank + list(k.trailing)
    if e.spec(1).is_constant:
        shape = list(e.spec(1).shape) + list(k.trailing)
    y = e.op("Mul", [e.input(0), _shaped(e, 1, shape) if k.trailing else e.input(1)])
    if len(e.node.inputs) == 3:
        y = e.op("Add", [y, _shaped(e, 2, shape) if k.trailing else e.input(2)])
    emit_activation(e, y, k.activation, out=e.output())


@lowers(na.NODE_TYPE_PRELU_FUSION)
def prelu(k: Kernel, e: NodeEmitter) -> None:
    e.require_float32()
    weight = e.spec(1)
    length = weight.shape[0] if weight.shape else 1
    if length == 1 or k.axis is None:  # one shared slope
        slope = _shaped(e, 1, [])
    else:
        slope = _shaped(e, 1, [-1] + [1] * (k.rank - 1 - k.axis))
    e.op("PRelu", [e.input(0), slope], out=e.output())
