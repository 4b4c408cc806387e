"""Select and three-input Where: y = condition ? x1 : x2 with numpy broadcasting (Select's
1-D condition over the first dimension of higher-rank values included, as the reference
decides: hdi/reference/ops/op_where.py), any dtype: the values are moved as raw 1/2/4/8-byte
elements, so every dtype is bit-exact.

Refused: one-input Where (the coordinates of the true elements: the output's shape depends
on the condition's values); tensors of 2**31 elements or more.
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
)
from .op_transpose import ELEMENT_TYPES, check_indexable, require_movable
from nnrt.hdi.reference.kernel import Kernel, unsupported
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import NodeSpec


@register(na.NODE_TYPE_SELECT, na.NODE_TYPE_WHERE)
class Select(GpuOp):
    def __init__(self, node: NodeSpec, ref: Kernel) -> None:
        super().__init__(node, ref)
        if ref.coordinates:
            raise unsupported(node, "one-input Where (its output's shape depends on the "
                                    "condition's values)")
        require_movable(node, (1, 2))

    def build(self, b: Builder, inputs: Sequence[DeviceTensor | None],
              outputs: Sequence[DeviceTensor], post: Epilogue) -> list[Launch]:
        cond, x1, x2 = inputs
        (out,) = outputs
        check_indexable(self.node, cond, x1, x2, out)
        if out.size == 0:
            return []
        cond_shape = tuple(cond.shape) + (self.ref.pad if self.ref.by_rows else ())
        if cond_shape == x1.shape == x2.shape == out.shape:
            table = [0]
        else:
            table = [len(out.shape), *out.shape, *broadcast_strides(cond_shape, out.shape),
                     *broadcast_strides(x1.shape, out.shape),
                     *broadcast_strides(x2.shape, out.shape)]
        program = b.program("compare", [f"-DT={ELEMENT_TYPES[np.dtype(out.dtype).itemsize]}"])
        args = [cond.buffer, x1.buffer, x2.buffer, out.buffer, np.int32(out.size),
                b.ints(table)]
        return [b.launch(program, "select_values", args, [out.size], [WORK_GROUP])]
