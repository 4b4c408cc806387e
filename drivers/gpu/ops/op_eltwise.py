"""Element-wise binaries (AddFusion, SubFusion, MulFusion, DivFusion, Eltwise, Maximum,
Minimum, SquaredDifference, RealDiv, Mod) with numpy broadcasting and the fused activation, and the
Activation operator; float32.

A binary accepts the plan's epilogue (an Activation after it, or a residual Add) and its
own activation is applied first, as the reference does. An Activation node is what the plan
fuses into its producer whenever it can; standing alone it is one pass.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..kernel import (
    WORK_GROUP,
    Act,
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
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import NodeSpec

OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_MAX, OP_MIN, OP_SQUARED_DIFFERENCE, OP_MOD = range(8)

_BINARY = {
    na.NODE_TYPE_ADD_FUSION: OP_ADD,
    na.NODE_TYPE_SUB_FUSION: OP_SUB,
    na.NODE_TYPE_MUL_FUSION: OP_MUL,
    na.NODE_TYPE_DIV_FUSION: OP_DIV,
    na.NODE_TYPE_MAXIMUM: OP_MAX,
    na.NODE_TYPE_MINIMUM: OP_MIN,
    na.NODE_TYPE_SQUARED_DIFFERENCE: OP_SQUARED_DIFFERENCE,
    na.NODE_TYPE_REAL_DIV: OP_DIV,  # DivFusion without an activation (floats: IEEE)
    na.NODE_TYPE_MOD: OP_MOD,  # C's fmod: exact, so float16 mode rounds nothing
}
_ELTWISE_MODES = {ht.ELTWISE_MODE_PROD: OP_MUL, ht.ELTWISE_MODE_SUM: OP_ADD,
                  ht.ELTWISE_MODE_MAXIMUM: OP_MAX}


@register(*_BINARY, na.NODE_TYPE_ELTWISE)
class Binary(GpuOp):
    accepts_epilogue = True

    def __init__(self, node: NodeSpec, ref: Kernel) -> None:
        super().__init__(node, ref)
        require_dtypes(node)
        self.code = (_ELTWISE_MODES[int(node.attrs.mode)] if node.node_type == na.NODE_TYPE_ELTWISE
                     else _BINARY[node.node_type])
        self.act = int(getattr(ref, "activation", ht.ACTIVATION_TYPE_NO_ACTIVATION))

    def build(self, b: Builder, inputs: Sequence[DeviceTensor | None],
              outputs: Sequence[DeviceTensor], post: Epilogue) -> list[Launch]:
        x, y = inputs
        (out,) = outputs
        if x.shape == y.shape == out.shape:
            table = [0]
        else:
            table = [len(out.shape), *out.shape, *broadcast_strides(x.shape, out.shape),
                     *broadcast_strides(y.shape, out.shape)]
        args = [x.buffer, y.buffer, out.buffer, np.int32(out.size), np.int32(self.code),
                b.ints(table), np.int32(self.act), *post.args(b.dummy)]
        return [b.launch(b.program("eltwise"), "binary", args, [out.size], [WORK_GROUP])]


@register(na.NODE_TYPE_ACTIVATION)
class Activation(GpuOp):
    def __init__(self, node: NodeSpec, ref: Kernel) -> None:
        super().__init__(node, ref)
        require_dtypes(node)
        self.act = Act(ref.kind, ref.alpha, ref.min_val, ref.max_val, ref.approximate)

    def fusable_activation(self) -> Act:
        return self.act

    def build(self, b: Builder, inputs: Sequence[DeviceTensor | None],
              outputs: Sequence[DeviceTensor], post: Epilogue) -> list[Launch]:
        (x,), (out,) = inputs, outputs
        args = [x.buffer, out.buffer, np.int32(out.size), *self.act.args()]
        return [b.launch(b.program("eltwise"), "activation", args, [out.size], [WORK_GROUP])]
