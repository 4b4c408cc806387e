"""ReduceFusion on the GPU, float32: MEAN, MAX, MIN, PROD, SUM, SUM_SQUARE, ASUM, ALL (1.0
where every value is nonzero, else 0.0) and L2 over the reference's axes (a constant axes
input, or none: every axis; reduceToEnd resolved by the reference), times coeff, keepDims
as the reference infers. NaN propagates through MAX / MIN as numpy's reductions let it;
empty reductions give the identity (MEAN: NaN), as the reference does.

Computation (cl/reduce.cl): the input's dimensions of size 1 dropped and adjacent kept /
reduced dimensions merged, so that each output is a base offset (its kept coordinates) plus
the offsets of R reduced cells (a mixed-radix table). Reductions of at least 64 cells run
one work-group of 256 per output, work-items striding over the cells, finished by a tree
reduction in local memory; when few outputs share long reductions each output's cells are
split into chunks reduced by several groups into a scratch buffer, then one more group
pass combines the chunks. Shorter reductions run one work-item per output.

Refused: dtypes other than float32 and float16; a run-time axes tensor.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from nnrt.hdi.reference.kernel import Kernel, unsupported
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import NodeSpec

from ..kernel import (
    WORK_GROUP,
    Builder,
    DeviceTensor,
    Epilogue,
    GpuOp,
    Launch,
    register,
    require_dtypes,
)

RED_WG = 256  # as in cl/reduce.cl
SHORT = 64  # reductions of fewer cells: one work-item per output
CHUNK = 4096  # cells per work-group at least, when long reductions are split
TARGET_GROUPS = 1024  # work-groups worth filling a device with

PRE_NONE, PRE_SQUARE, PRE_ABS, PRE_NONZERO = range(4)
POST_NONE, POST_MEAN, POST_SQRT = range(3)

# mode -> (kernel family, pre-transform, post-transform)
_MODES = {
    ht.REDUCE_MODE_MEAN: ("reduce_sum", PRE_NONE, POST_MEAN),
    ht.REDUCE_MODE_MAX: ("reduce_max", PRE_NONE, POST_NONE),
    ht.REDUCE_MODE_MIN: ("reduce_min", PRE_NONE, POST_NONE),
    ht.REDUCE_MODE_PROD: ("reduce_prod", PRE_NONE, POST_NONE),
    ht.REDUCE_MODE_SUM: ("reduce_sum", PRE_NONE, POST_NONE),
    ht.REDUCE_MODE_SUM_SQUARE: ("reduce_sum", PRE_SQUARE, POST_NONE),
    ht.REDUCE_MODE_ASUM: ("reduce_sum", PRE_ABS, POST_NONE),
    ht.REDUCE_MODE_ALL: ("reduce_prod", PRE_NONZERO, POST_NONE),
    ht.REDUCE_MODE_L2: ("reduce_sum", PRE_SQUARE, POST_SQRT),
}


def split_dims(shape: Sequence[int], axes: Sequence[int]) -> tuple[list[tuple[int, int]],
                                                                     list[tuple[int, int]]]:
    """(kept, reduced): (dim, element stride) lists of a dense tensor of `shape`, in order,
    size-1 dimensions dropped and adjacent dimensions of one kind merged."""
    strides, step = [0] * len(shape), 1
    for axis in range(len(shape) - 1, -1, -1):
        strides[axis] = step
        step *= shape[axis]
    kept: list[tuple[int, int]] = []
    reduced: list[tuple[int, int]] = []
    last = None
    for axis, (dim, stride) in enumerate(zip(shape, strides)):
        if dim == 1:
            continue
        target = reduced if axis in axes else kept
        if last is target and target[-1][1] == dim * stride:
            target[-1] = (target[-1][0] * dim, stride)
        else:
            target.append((dim, stride))
        last = target
    return kept, reduced


@register(na.NODE_TYPE_REDUCE_FUSION)
class Reduce(GpuOp):
    def __init__(self, node: NodeSpec, ref: Kernel) -> None:
        super().__init__(node, ref)
        require_dtypes(node, positions=[0])
        if ref.axes is None:
            raise unsupported(node, "the GPU driver reduces over constant axes only, not a "
                                    "run-time axes tensor")
        self.axes = tuple(ref.axes)
        self.family, self.pre, self.post = _MODES[ref.mode]
        self.coeff = float(ref.coeff)
        if len(node.inputs) == 2:
            self.own_constants = frozenset({1})  # the axes: read on the host

    def build(self, b: Builder, inputs: Sequence[DeviceTensor | None],
              outputs: Sequence[DeviceTensor], post: Epilogue) -> list[Launch]:
        x, (out,) = inputs[0], outputs
        if out.size == 0:
            return []
        count = math.prod(x.shape[a] for a in self.axes)
        kept, reduced = split_dims(x.shape, self.axes) if count else ([], [])
        table = [len(kept), len(reduced), *(d for d, _ in kept), *(s for _, s in kept),
                 *(d for d, _ in reduced), *(s for _, s in reduced)]
        program = b.program("reduce")
        outs = out.size
        tail = [np.int32(self.pre), np.int32(self.post), np.float32(count),
                np.float32(self.coeff)]
        if count < SHORT:
            args = [x.buffer, out.buffer, b.ints(table, "reduce table"), np.int32(outs),
                    np.int32(count), *tail]
            return [b.launch(program, f"{self.family}_thread", args, [outs], [WORK_GROUP])]
        chunks = max(1, min(count // CHUNK, TARGET_GROUPS // outs))
        if chunks == 1:
            args = [x.buffer, out.buffer, b.ints(table, "reduce table"), np.int32(count),
                    np.int32(1), *tail]
            return [b.launch(program, f"{self.family}_group", args, [outs * RED_WG], [RED_WG])]
        # Partial results of each chunk [outs, chunks], then one group per output over them.
        partial = b.scratch(outs * chunks * 4, "reduce partial results")
        args = [x.buffer, partial, b.ints(table, "reduce table"), np.int32(count),
                np.int32(chunks), np.int32(self.pre), np.int32(POST_NONE), np.float32(count),
                np.float32(1.0)]
        # the partial results are float whatever the tensors' storage (cl/reduce.cl)
        first = b.launch(b.program("reduce", ["-DSCRATCH_OUT"]), f"{self.family}_group", args,
                         [outs * chunks * RED_WG], [RED_WG], label=f"{self.family}_chunks")
        combine = [1, 1, outs, chunks, chunks, 1]
        args = [partial, out.buffer, b.ints(combine, "reduce table"), np.int32(chunks),
                np.int32(1), np.int32(PRE_NONE), *tail[1:]]
        second = b.launch(b.program("reduce", ["-DSCRATCH_IN"]), f"{self.family}_group", args,
                          [outs * RED_WG], [RED_WG])
        return [first, second]
