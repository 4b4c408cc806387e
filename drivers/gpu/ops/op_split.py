"""Split along a (negative-normalised) axis into the pieces the reference sizes
(outputNum, sizeSplits with one -1 or equal pieces), any dtype: one strided copy per
non-empty output from its slab of the input.

Refused: element sizes other than 1, 2, 4, 8 bytes; tensors of 2**31 elements or more.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..kernel import Builder, DeviceTensor, Epilogue, GpuOp, Launch, register
from .op_transpose import check_indexable, contiguous_strides, require_movable, strided_copy
from nnrt.hdi.reference.kernel import Kernel
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import NodeSpec


@register(na.NODE_TYPE_SPLIT)
class Split(GpuOp):
    def __init__(self, node: NodeSpec, ref: Kernel) -> None:
        super().__init__(node, ref)
        require_movable(node)
        self.axis: int = ref.axis

    def build(self, b: Builder, inputs: Sequence[DeviceTensor | None],
              outputs: Sequence[DeviceTensor], post: Epilogue) -> list[Launch]:
        return split_slabs(b, self.node, inputs[0], outputs, self.axis, False, "split")


def split_slabs(b: Builder, node: NodeSpec, x: DeviceTensor, outputs: Sequence[DeviceTensor],
                axis: int, drop_axis: bool, label: str) -> list[Launch]:
    """Each output copied from its slab of `x` along `axis`, in order: slabs as thick as the
    output's own `axis` (Split), or one index thick when the outputs lack that axis
    (`drop_axis`: Unstack)."""
    check_indexable(node, x)
    in_strides = contiguous_strides(x.shape)
    # an output without the axis steps over it: x's strides without that axis
    src = in_strides[:axis] + in_strides[axis + 1:] if drop_axis else in_strides
    launches: list[Launch] = []
    at = 0
    for out in outputs:
        launches += strided_copy(b, x, out, out.shape, src, contiguous_strides(out.shape),
                                 at * in_strides[axis], 0, label)
        at += 1 if drop_axis else out.shape[axis]
    return launches
