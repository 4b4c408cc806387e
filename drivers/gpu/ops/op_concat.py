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
        return join_slabs(b, self.node, inputs, outputs[0], self.axis, False, "concat")


def join_slabs(b: Builder, node: NodeSpec, inputs: Sequence[DeviceTensor], out: DeviceTensor,
               axis: int, new_axis: bool, label: str) -> list[Launch]:
    """Each input copied into its slab of `out` along `axis`, in order: slabs as thick as
    the input's own `axis` (Concat), or one index thick when the inputs lack that axis
    (`new_axis`: Stack)."""
    check_indexable(node, out)
    out_strides = contiguous_strides(out.shape)
    # an input without the axis steps over it: out's strides without that axis
    dst = out_strides[:axis] + out_strides[axis + 1:] if new_axis else out_strides
    launches: list[Launch] = []
    at = 0
    for x in inputs:
        launches += strided_copy(b, x, out, x.shape, contiguous_strides(x.shape), dst,
                                 0, at * out_strides[axis], label)
        at += 1 if new_axis else x.shape[axis]
    return launches
