"""Element-wise unary math and small per-element operators, float32, in one program
(cl/unary.cl), each finishing with the plan's fused epilogue:

* `unary` kernel, one op code each: Abs, Neg, Square, Ceil, Floor, Round (rint: half to
  even), Cos, Sin, Log, Sqrt, Reciprocal, Rsqrt (1/sqrt, so that -0 gives -inf), Erf;
  ExpFusion (e^z or base^z with z = x * scale + shift, each step only where the reference
  applies it, rounded twice: FP_CONTRACT is off); Clip (the reference's float32 bounds,
  NaN stays NaN); LeakyRelu (x >= 0 ? x : slope * x).
* `channel` kernel: PReLUFusion (one shared slope or one per channel, along the reference's
  channel axis, the weight constant or not), BiasAdd (along the reference's axis) and
  ScaleFusion (x * scale [+ bias] along the dimensions from `axis`, then its fused
  activation).
* `power` kernel: PowFusion, (scale * x + shift) ^ e with numpy broadcasting, OpenCL's
  pow (C99's special values, as numpy's float32 power).

IEEE specials follow the OpenCL built-ins, which have C99's (= numpy's) results: log(0) =
-inf, log / sqrt of a negative number NaN, 1/±0 = ±inf, NaN in NaN out.

Refused: every dtype but float32 and float16 (integer Abs / Neg / ... and an integer exponent
included), quantised nodes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..kernel import (
    WORK_GROUP,
    Builder,
    DeviceTensor,
    Epilogue,
    GpuOp,
    Launch,
    broadcast_strides,
    register,
    require_dtypes,
)
from nnrt.hdi.reference.kernel import Kernel
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import NodeSpec

(U_ABS, U_NEG, U_SQUARE, U_CEIL, U_FLOOR, U_ROUND, U_COS, U_SIN, U_LOG, U_SQRT, U_RECIPROCAL,
 U_RSQRT, U_ERF, U_EXP, U_EXP_BASE, U_CLIP, U_LEAKY_RELU) = range(17)
C_PRELU, C_BIAS_ADD, C_SCALE = range(3)

_MATH = {
    na.NODE_TYPE_ABS: U_ABS,
    na.NODE_TYPE_NEG: U_NEG,
    na.NODE_TYPE_SQUARE: U_SQUARE,
    na.NODE_TYPE_CEIL: U_CEIL,
    na.NODE_TYPE_FLOOR: U_FLOOR,
    na.NODE_TYPE_ROUND: U_ROUND,
    na.NODE_TYPE_COS: U_COS,
    na.NODE_TYPE_SIN: U_SIN,
    na.NODE_TYPE_LOG: U_LOG,
    na.NODE_TYPE_SQRT: U_SQRT,
    na.NODE_TYPE_RECIPROCAL: U_RECIPROCAL,
    na.NODE_TYPE_RSQRT: U_RSQRT,
    na.NODE_TYPE_ERF: U_ERF,
}
NATURAL = -1.0  # ExpFusion's base for e


def _size(shape: Sequence[int]) -> int:
    return int(np.prod(shape, dtype=np.int64))


@register(*_MATH, na.NODE_TYPE_EXPFUSION, na.NODE_TYPE_CLIP, na.NODE_TYPE_LEAKY_RELU)
class UnaryMath(GpuOp):
    accepts_epilogue = True

    def __init__(self, node: NodeSpec, ref: Kernel) -> None:
        super().__init__(node, ref)
        require_dtypes(node)
        params = (0.0, 0.0, 0.0)
        if node.node_type == na.NODE_TYPE_EXPFUSION:
            natural = ref.base == NATURAL
            self.code = U_EXP if natural else U_EXP_BASE
            params = (ref.scale, ref.shift, 0.0 if natural else ref.base)
        elif node.node_type == na.NODE_TYPE_CLIP:
            self.code = U_CLIP
            params = (float(ref.low), float(ref.high), 0.0)
        elif node.node_type == na.NODE_TYPE_LEAKY_RELU:
            self.code = U_LEAKY_RELU
            params = (ref.slope, 0.0, 0.0)
        else:
            self.code = _MATH[node.node_type]
        self.params = [np.float32(p) for p in params]

    def build(self, b: Builder, inputs: Sequence[DeviceTensor | None],
              outputs: Sequence[DeviceTensor], post: Epilogue) -> list[Launch]:
        (x,), (out,) = inputs, outputs
        args = [x.buffer, out.buffer, np.int32(out.size), np.int32(self.code), *self.params,
                *post.args(b.dummy)]
        return [b.launch(b.program("unary"), "unary", args, [out.size], [WORK_GROUP])]


@register(na.NODE_TYPE_PRELU_FUSION, na.NODE_TYPE_BIAS_ADD, na.NODE_TYPE_SCALE_FUSION)
class PerChannel(GpuOp):
    """x with one value per channel (PReLU's slope, BiasAdd's bias, Scale's scale and bias)."""

    accepts_epilogue = True

    def __init__(self, node: NodeSpec, ref: Kernel) -> None:
        super().__init__(node, ref)
        require_dtypes(node)
        self.act = 0
        if node.node_type == na.NODE_TYPE_PRELU_FUSION:
            self.code = C_PRELU
        elif node.node_type == na.NODE_TYPE_BIAS_ADD:
            self.code = C_BIAS_ADD
        else:
            self.code = C_SCALE
            self.act = int(ref.activation)

    def _layout(self, x: DeviceTensor, w: DeviceTensor) -> tuple[int, int]:
        """(inner, channels): element i is in channel (i // inner) % channels."""
        shape = tuple(x.shape)
        channels = _size(w.shape)
        if self.code == C_SCALE:
            # scale covers x's dimensions [axis, axis + scale rank)
            return _size(shape[self.ref.axis + len(w.shape):]), channels
        if channels == 1 or self.ref.axis is None:
            return 1, 1
        return _size(shape[self.ref.axis + 1:]), channels

    def build(self, b: Builder, inputs: Sequence[DeviceTensor | None],
              outputs: Sequence[DeviceTensor], post: Epilogue) -> list[Launch]:
        x, w = inputs[0], inputs[1]
        bias = inputs[2] if len(inputs) > 2 else None
        (out,) = outputs
        inner, channels = self._layout(x, w)
        args = [x.buffer, w.buffer, b.dummy if bias is None else bias.buffer, out.buffer,
                np.int32(out.size), np.int32(self.code), np.int32(max(inner, 1)),
                np.int32(max(channels, 1)), np.int32(bias is not None), np.int32(self.act),
                *post.args(b.dummy)]
        return [b.launch(b.program("unary"), "channel", args, [out.size], [WORK_GROUP])]


@register(na.NODE_TYPE_POW_FUSION)
class Power(GpuOp):
    accepts_epilogue = True

    def __init__(self, node: NodeSpec, ref: Kernel) -> None:
        super().__init__(node, ref)
        require_dtypes(node)  # the exponent too: an integer exponent is refused
        self.scale = np.float32(ref.scale)
        self.shift = np.float32(ref.shift)

    def build(self, b: Builder, inputs: Sequence[DeviceTensor | None],
              outputs: Sequence[DeviceTensor], post: Epilogue) -> list[Launch]:
        x, e = inputs
        (out,) = outputs
        if x.shape == e.shape == out.shape:
            table = [0]
        else:
            table = [len(out.shape), *out.shape, *broadcast_strides(x.shape, out.shape),
                     *broadcast_strides(e.shape, out.shape)]
        args = [x.buffer, e.buffer, out.buffer, np.int32(out.size), b.ints(table), self.scale,
                self.shift, *post.args(b.dummy)]
        return [b.launch(b.program("unary"), "power", args, [out.size], [WORK_GROUP])]
