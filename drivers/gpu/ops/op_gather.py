"""Gather (x, indices, axis) with constant INT32/INT64 indices and a constant axis, any
dtype for x: x viewed as [outer, size, inner], out[o, j, r] = x[o, indices[j], r], one
work-item per output element.

The reference rejects an index outside [-size, size) (an invalid node at prepare when the
size is known, a failed run otherwise) and never wraps or clamps. The GPU kernel cannot
fail a run, so the indices are checked and normalised (negative + size) on the host, by
the reference's own check, whenever a shape is specialised: the same error, before any
launch.

Refused: run-time indices (an out-of-range index would have to fail the run, which a kernel
cannot report); element sizes other than 1, 2, 4, 8 bytes; tensors of 2**31 elements or
more. GatherNd has no GPU kernel.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..kernel import WORK_GROUP, Builder, DeviceTensor, Epilogue, GpuOp, Launch, register
from .op_transpose import check_indexable, movement, require_movable
from nnrt.drivers.cpu.kernel import Kernel, unsupported
from nnrt.protos import node_attrs_pb2 as na
from nnrt.server.graph import NodeSpec


@register(na.NODE_TYPE_GATHER)
class Gather(GpuOp):
    own_constants = frozenset({1, 2})

    def __init__(self, node: NodeSpec, ref: Kernel) -> None:
        super().__init__(node, ref)
        require_movable(node)
        if not node.inputs[1].is_constant:
            raise unsupported(node, "run-time indices (an index out of range must fail the "
                                    "run, which the GPU kernel cannot report)")
        self.indices: np.ndarray = node.inputs[1].constant
        self.axis: int = ref.axis

    def build(self, b: Builder, inputs: Sequence[DeviceTensor | None],
              outputs: Sequence[DeviceTensor], post: Epilogue) -> list[Launch]:
        x, (out,) = inputs[0], outputs
        check_indexable(self.node, x, out)
        size = int(x.shape[self.axis])
        indices = self.ref._checked(self.indices, size, False)  # the reference's error
        if out.size == 0:
            return []
        inner = int(np.prod(x.shape[self.axis + 1:], dtype=np.int64))
        args = [x.buffer, out.buffer, np.int32(out.size), np.int32(size), np.int32(inner),
                np.int32(indices.size), b.ints(indices.ravel().tolist(), "gather indices")]
        return [b.launch(movement(b, x.dtype), "gather_axis", args, [out.size], [WORK_GROUP])]
