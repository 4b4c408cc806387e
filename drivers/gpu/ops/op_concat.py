"""Concat along a (negative-normalised) axis, any dtype: one strided copy per non-empty
input into its slab of the output (the reference validates ranks, dims and dtypes).

Refused: element sizes other than 1, 2, 4, 8 bytes; tensors of 2**31 elements or more.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..kernel import Builder, DeviceTensor, Epilogue, GpuOp, Launch, register
from .op_transpose import check_indexable, contiguous_strides, require_movable, strided_copy
from nnrt.hdi.reference.kernel import Kernel
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import NodeSpec


@register(na.NODE_TYPE_CONCAT)
class Concat(GpuOp):
    def __init__(self, node: NodeSpec, ref: Kernel) -> None:
        super().__init__(node, ref)
        require_movable(node, range(len(node.inputs)))
        self.axis: int = ref.axis

    def build(self, b: Builder, inputs: Sequence[DeviceTensor | None],
              outputs: Sequence[DeviceTensor], post: Epilogue) -> list[Launch]:
        (out,) = outputs
        check_indexable(self.node, out)
        out_strides = contiguous_strides(out.shape)
        launches: list[Launch] = []
        at = 0
        for x in inputs:
            launches += strided_copy(b, x, out, x.shape, contiguous_strides(x.shape),
                                     out_strides, 0, at * out_strides[self.axis], "concat")
            at += x.shape[self.axis]
        return launches
