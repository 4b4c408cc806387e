"""Softmax and LogSoftmax on the GPU, float32, along any one axis (the reference's `axis`:
Softmax's axis list naming one axis, LogSoftmax's axis attribute).

softmax: exp(x - max) / sum(exp(x - max)); LogSoftmax: (x - max) - log(sum(exp(x - max))),
the maximum replaced by 0 where it is infinite, as the reference does. NaN propagates
through the maximum as numpy's does.

Computation (cl/softmax.cl): x seen as [outer, L, inner] (L along the axis); one work-group
of 128 work-items per row (o, i), whose L values are `inner` apart: a strided pass with a
local-memory tree reduction for the maximum, another for the sum of exps, then the writing
pass. The last axis (inner = 1) reads each row contiguously. Softmax and LogSoftmax are two
kernels of one program (PoCL miscompiled one kernel branching on the mode between
barriers).

Refused: dtypes other than float32 and float16 (half storage, cl/common.cl).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from nnrt.hdi.reference.kernel import Kernel
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import NodeSpec

from ..kernel import (
    Builder,
    DeviceTensor,
    Epilogue,
    GpuOp,
    Launch,
    register,
    require_dtypes,
)

SOFTMAX_WG = 128  # as in cl/softmax.cl


@register(na.NODE_TYPE_SOFTMAX, na.NODE_TYPE_LOG_SOFTMAX)
class Softmax(GpuOp):
    def __init__(self, node: NodeSpec, ref: Kernel) -> None:
        super().__init__(node, ref)
        require_dtypes(node)
        self.log = node.node_type == na.NODE_TYPE_LOG_SOFTMAX
        self.axis = int(ref.axis)

    def build(self, b: Builder, inputs: Sequence[DeviceTensor | None],
              outputs: Sequence[DeviceTensor], post: Epilogue) -> list[Launch]:
        (x,), (out,) = inputs, outputs
        if out.size == 0:
            return []
        length = x.shape[self.axis]
        inner = math.prod(x.shape[self.axis + 1:])
        rows = out.size // length
        args = [x.buffer, out.buffer, np.int32(length), np.int32(inner)]
        name = "log_softmax" if self.log else "softmax"
        return [b.launch(b.program("softmax"), name, args, [rows * SOFTMAX_WG], [SOFTMAX_WG])]
