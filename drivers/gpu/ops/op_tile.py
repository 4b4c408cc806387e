"""TileFusion with constant multiples and BroadcastTo with a constant target shape, any
dtype: both repeat the input, so each is one strided copy (program `movement`), bit-exact.
Tile reads the output as [r0, d0, r1, d1, ...] (repeat, then the input's coordinate): the
input's strides along the d axes, 0 along the r axes; BroadcastTo reads the input with
stride 0 along its broadcast axes.

Refused: run-time multiples or target shape (the output shape would depend on their
values); element sizes other than 1, 2, 4, 8 bytes; tensors of 2**31 elements or more.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..kernel import (
    Builder,
    DeviceTensor,
    Epilogue,
    GpuOp,
    Launch,
    broadcast_strides,
    register,
)
from .op_transpose import check_indexable, contiguous_strides, require_movable, strided_copy
from nnrt.hdi.reference.kernel import Kernel, unsupported
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import NodeSpec


@register(na.NODE_TYPE_TILE_FUSION)
class Tile(GpuOp):
    own_constants = frozenset({1})

    def __init__(self, node: NodeSpec, ref: Kernel) -> None:
        super().__init__(node, ref)
        require_movable(node)
        if ref.multiples is None:
            raise unsupported(node, "run-time multiples (the output shape depends on their "
                                    "values)")
        self.reps: tuple[int, ...] = ref.reps(ref.multiples)

    def build(self, b: Builder, inputs: Sequence[DeviceTensor | None],
              outputs: Sequence[DeviceTensor], post: Epilogue) -> list[Launch]:
        x, (out,) = inputs[0], outputs
        check_indexable(self.node, x, out)
        padded = (1,) * (len(self.reps) - len(x.shape)) + tuple(x.shape)
        in_strides = contiguous_strides(padded)
        out_strides = contiguous_strides(out.shape)
        dims: list[int] = []
        src: list[int] = []
        dst: list[int] = []
        for rep, size, s, t in zip(self.reps, padded, in_strides, out_strides):
            dims += [rep, size]
            src += [0, s]
            dst += [size * t, t]
        return strided_copy(b, x, out, dims, src, dst, label="tile")


@register(na.NODE_TYPE_BROADCAST_TO)
class BroadcastTo(GpuOp):
    own_constants = frozenset({1})

    def __init__(self, node: NodeSpec, ref: Kernel) -> None:
        super().__init__(node, ref)
        require_movable(node)
        if ref.target is None:
            raise unsupported(node, "a run-time target shape (the output shape depends on "
                                    "its values)")

    def build(self, b: Builder, inputs: Sequence[DeviceTensor | None],
              outputs: Sequence[DeviceTensor], post: Epilogue) -> list[Launch]:
        x, (out,) = inputs[0], outputs
        check_indexable(self.node, x, out)
        return strided_copy(b, x, out, out.shape, broadcast_strides(x.shape, out.shape),
                            contiguous_strides(out.shape), label="broadcast_to")
