"""Stack (inputs joined along a new axis) and Unstack (one output per index of an axis),
any dtype: one strided copy per input / output (program `movement`), bit-exact.

Refused: element sizes other than 1, 2, 4, 8 bytes; tensors of 2**31 elements or more.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..kernel import Builder, DeviceTensor, Epilogue, GpuOp, Launch, register
from .op_transpose import check_indexable, contiguous_strides, require_movable, strided_copy
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
        (out,) = outputs
        check_indexable(self.node, out)
        out_strides = contiguous_strides(out.shape)
        # input k is the slab out[..., k, ...]: out's strides without the stacked axis
        dst = out_strides[:self.axis] + out_strides[self.axis + 1:]
        launches: list[Launch] = []
        for k, x in enumerate(inputs):
            launches += strided_copy(b, x, out, x.shape, contiguous_strides(x.shape), dst,
                                     0, k * out_strides[self.axis], "stack")
        return launches


@register(na.NODE_TYPE_UNSTACK)
class Unstack(GpuOp):
    def __init__(self, node: NodeSpec, ref: Kernel) -> None:
        super().__init__(node, ref)
        require_movable(node)
        self.axis: int = ref.axis

    def build(self, b: Builder, inputs: Sequence[DeviceTensor | None],
              outputs: Sequence[DeviceTensor], post: Epilogue) -> list[Launch]:
        x = inputs[0]
        check_indexable(self.node, x)
        in_strides = contiguous_strides(x.shape)
        src = in_strides[:self.axis] + in_strides[self.axis + 1:]
        launches: list[Launch] = []
        for k, out in enumerate(outputs):
            launches += strided_copy(b, x, out, out.shape, src, contiguous_strides(out.shape),
                                     k * in_strides[self.axis], 0, "unstack")
        return launches
