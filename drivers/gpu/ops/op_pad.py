"""PadFusion with constant paddings (the attribute or a constant input, as the reference
resolves them), any dtype, in all three modes: CONSTANT (the reference's constantValue
converted to x's dtype, quantised fill included, written as raw bits), REFLECT and
SYMMETRIC (one mirror: the reference bounds the amounts by the size - 1 / the size). One
work-item per output element.

Refused: a run-time paddings tensor (the output shape would depend on its values); element
sizes other than 1, 2, 4, 8 bytes; tensors of 2**31 elements or more.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..kernel import WORK_GROUP, Builder, DeviceTensor, Epilogue, GpuOp, Launch, register
from .op_transpose import check_indexable, contiguous_strides, movement, require_movable
from nnrt.hdi.reference.kernel import Kernel, unsupported
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import NodeSpec

_MODES = {"constant": 0, "reflect": 1, "symmetric": 2}  # PAD_* in cl/movement.cl
_UINTS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


@register(na.NODE_TYPE_PAD_FUSION)
class PadFusion(GpuOp):
    def __init__(self, node: NodeSpec, ref: Kernel) -> None:
        super().__init__(node, ref)
        require_movable(node)
        if ref.pads is None:
            raise unsupported(node, "run-time paddings (the output shape depends on their "
                                    "values)")
        self.pads: tuple[tuple[int, int], ...] = ref.pads
        self.mode = _MODES[ref.mode]
        dtype = node.inputs[0].dtype
        fill = 0
        if ref.fill is not None:
            fill = int(np.asarray(ref.fill, dtype).view(_UINTS[dtype.itemsize]))
        self.fill_bits = np.uint64(fill)
        self.own_constants = frozenset(range(1, len(node.inputs)))

    def build(self, b: Builder, inputs: Sequence[DeviceTensor | None],
              outputs: Sequence[DeviceTensor], post: Epilogue) -> list[Launch]:
        x, (out,) = inputs[0], outputs
        check_indexable(self.node, x, out)
        if out.size == 0:
            return []
        rank = len(x.shape)
        table = [rank, *out.shape, *x.shape, *(before for before, _ in self.pads),
                 *contiguous_strides(x.shape)]
        args = [x.buffer, out.buffer, np.int32(out.size), b.ints(table), np.int32(self.mode),
                self.fill_bits]
        return [b.launch(movement(b, x.dtype), "pad", args, [out.size], [WORK_GROUP])]
