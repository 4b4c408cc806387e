"""SliceFusion and StridedSlice with constant begin/size (begin/end/strides), any dtype:
one strided copy whose source offset and strides come from the reference's resolved slice
(SliceFusion's `bounds`: start and size per dimension, axes and size -1 applied;
StridedSlice's `_slices`: TensorFlow's canonical start/count/step per dimension with every
mask applied, shrunk dimensions as a fixed index; negative steps give negative strides).
New axes of a StridedSlice are size-1 dimensions of the contiguous output.

Refused: run-time begin/size/end/strides tensors (the output shape would depend on their
values); element sizes other than 1, 2, 4, 8 bytes; tensors of 2**31 elements or more.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..kernel import Builder, DeviceTensor, Epilogue, GpuOp, Launch, register
from .op_transpose import (
    check_indexable,
    constant_positions,
    contiguous_strides,
    require_movable,
    strided_copy,
)
from nnrt.hdi.reference.kernel import Kernel, unsupported
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import NodeSpec


@register(na.NODE_TYPE_SLICE_FUSION)
class SliceFusion(GpuOp):
    def __init__(self, node: NodeSpec, ref: Kernel) -> None:
        super().__init__(node, ref)
        require_movable(node)
        if ref.begin is None or ref.size is None:
            raise unsupported(node, "run-time begin/size (the output shape depends on "
                                    "their values)")
        self.own_constants = constant_positions(node, (1, 2))

    def build(self, b: Builder, inputs: Sequence[DeviceTensor | None],
              outputs: Sequence[DeviceTensor], post: Epilogue) -> list[Launch]:
        x, (out,) = inputs[0], outputs
        check_indexable(self.node, x)
        strides = contiguous_strides(x.shape)
        bounds = self.ref.bounds(x.shape, self.ref.begin, self.ref.size)
        offset = sum(start * s for (start, _), s in zip(bounds, strides))
        return strided_copy(b, x, out, out.shape, strides, contiguous_strides(out.shape),
                            offset, 0, "slice")


@register(na.NODE_TYPE_STRIDED_SLICE)
class StridedSlice(GpuOp):
    def __init__(self, node: NodeSpec, ref: Kernel) -> None:
        super().__init__(node, ref)
        require_movable(node)
        if any(v is None for v in ref.values):
            raise unsupported(node, "run-time begin/end/strides (the output shape depends "
                                    "on their values)")
        self.own_constants = constant_positions(node, (1, 2, 3))

    def build(self, b: Builder, inputs: Sequence[DeviceTensor | None],
              outputs: Sequence[DeviceTensor], post: Epilogue) -> list[Launch]:
        x, (out,) = inputs[0], outputs
        check_indexable(self.node, x)
        strides = contiguous_strides(x.shape)
        offset, dims, src = 0, [], []
        for s, stride in zip(self.ref._slices(x.shape, self.ref.values), strides):
            if isinstance(s, int):  # a shrunk dimension: one fixed index
                offset += s * stride
            else:
                start, count, step = s
                offset += start * stride
                dims.append(count)
                src.append(step * stride)
        return strided_copy(b, x, out, dims, src, contiguous_strides(dims), offset, 0,
                            "strided_slice")
