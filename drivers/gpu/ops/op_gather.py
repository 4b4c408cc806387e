"""Gather (x, indices, axis) with INT32/INT64 indices and a constant axis, any dtype for x:
x viewed as [outer, size, inner], out[o, j, r] = x[o, indices[j], r], one work-item per
output element.

The reference rejects an index outside [-size, size) (an invalid node at prepare when the
size is known, a failed run otherwise) and never wraps or clamps. Constant indices are
checked and normalised (negative + size) on the host, by the reference's own check,
whenever a shape is specialised: the same error, before any launch. Run-time indices (an
embedding lookup by token ids) are checked by the kernel (cl/gather.cl): an index out of
range sets the op's run check, and the run fails with NNRT_FAILED before any output is
written, as on the CPU.

Refused: element sizes other than 1, 2, 4, 8 bytes; tensors of 2**31 elements or more.
GatherNd has no GPU kernel.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..kernel import WORK_GROUP, Builder, DeviceTensor, Epilogue, GpuOp, Launch, register
from .op_transpose import ELEMENT_TYPES, check_indexable, movement, require_movable
from nnrt.hdi.reference.kernel import Kernel
from nnrt.hdi.reference.ops._common import run_failure
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import NodeSpec


@register(na.NODE_TYPE_GATHER)
class Gather(GpuOp):
    own_constants = frozenset({1, 2})

    def __init__(self, node: NodeSpec, ref: Kernel) -> None:
        super().__init__(node, ref)
        require_movable(node)
        self.indices: np.ndarray | None = node.inputs[1].constant
        self.axis: int = ref.axis
        if self.indices is None:
            self.own_constants = frozenset({2})

    def build(self, b: Builder, inputs: Sequence[DeviceTensor | None],
              outputs: Sequence[DeviceTensor], post: Epilogue) -> list[Launch]:
        x, (out,) = inputs[0], outputs
        check_indexable(self.node, x, out)
        size = int(x.shape[self.axis])
        inner = int(np.prod(x.shape[self.axis + 1:], dtype=np.int64))
        if self.indices is None:
            return self._gather_checked(b, x, inputs[1], out, size, inner)
        indices = self.ref._checked(self.indices, size, False)  # the reference's error
        if out.size == 0:
            return []
        args = [x.buffer, out.buffer, np.int32(out.size), np.int32(size), np.int32(inner),
                np.int32(indices.size), b.ints(indices.ravel().tolist(), "gather indices")]
        return [b.launch(movement(b, x.dtype), "gather_axis", args, [out.size], [WORK_GROUP])]

    def _gather_checked(self, b: Builder, x: DeviceTensor, indices: DeviceTensor,
                        out: DeviceTensor, size: int, inner: int) -> list[Launch]:
        bad = b.run_check(run_failure(self.node, f"an index falls outside [{-size}, {size}) "
                                                 f"of dimension {self.axis}"))
        if out.size == 0:
            return []
        index_type = "long" if indices.dtype.itemsize == 8 else "int"
        program = b.program("gather", [f"-DT={ELEMENT_TYPES[x.dtype.itemsize]}",
                                       f"-DIDX={index_type}"])
        args = [x.buffer, out.buffer, np.int32(out.size), np.int32(size), np.int32(inner),
                np.int32(indices.size), indices.buffer, bad]
        return [b.launch(program, "gather_checked", args, [out.size], [WORK_GROUP])]
