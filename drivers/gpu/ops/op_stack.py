"""Stack (inputs joined along a new axis) and Unstack (one output per index of an axis),
any dtype: Concat's and Split's slab copies with slabs one index thick, bit-exact.

Refused: element sizes other than 1, 2, 4, 8 bytes; tensors of 2**31 elements or more.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..kernel import Builder, DeviceTensor, Epilogue, GpuOp, Launch, register
from .op_concat import join_slabs
from .op_split import split_slabs
from .op_transpose import require_movable
from nnrt.hdi.reference.kernel import Kernel
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import NodeSpec


@register(na.NODE_TYPE_STACK)
class Stack(GpuOp):
    def __init__(self, node: NodeSpec, ref: Kernel) -> None:
        super().__init__(node, ref)
        require_movable(node, range(len(node.inputs)))
        self.axis: int = ref.axis

    def build(self, b: Builder, inputs: Sequence[DeviceTensor | None],
              outputs: Sequence[DeviceTensor], post: Epilogue) -> list[Launch]:
        return join_slabs(b, self.node, inputs, outputs[0], self.axis, True, "stack")


@register(na.NODE_TYPE_UNSTACK)
class Unstack(GpuOp):
    def __init__(self, node: NodeSpec, ref: Kernel) -> None:
        super().__init__(node, ref)
        require_movable(node)
        self.axis: int = ref.axis

    def build(self, b: Builder, inputs: Sequence[DeviceTensor | None],
              outputs: Sequence[DeviceTensor], post: Epilogue) -> list[Launch]:
        return split_slabs(b, self.node, inputs[0], outputs, self.axis, True, "unstack")
