"""LogSoftmax: y = x - max - log(sum(exp(x - max))) along `axis`, same shape and dtype.

`axis` counts from the end when negative; the attribute is used as sent (its proto3 default
0 is also upstream's default). Float dtypes only; float16 is computed in float32 and rounded
once. Subtracting the maximum keeps exp() from overflowing; a slice holding +inf gives NaN
there as the formula says, -inf entries give -inf.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from nnrt.drivers.cpu.kernel import Kernel, invalid, register
from nnrt.drivers.cpu.ops._common import (
    FLOAT_DTYPES,
    cast,
    common_dtype,
    compute_dtype,
    normalize_axis,
    require_unquantised,
)
from nnrt.protos import node_attrs_pb2 as na
from nnrt.server.graph import NodeSpec, Shape


@register(na.NODE_TYPE_LOG_SOFTMAX)
class LogSoftmax(Kernel):
    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        self.expect_counts(1)
        require_unquantised(node)
        self.dtype = common_dtype(node, node.inputs, FLOAT_DTYPES, "input")
        self.work = compute_dtype(self.dtype)
        rank = len(node.inputs[0].shape)
        if rank == 0:
            raise invalid(node, "LogSoftmax needs an input of rank >= 1")
        self.axis = normalize_axis(node, int(node.attrs.axis), rank)

    def infer_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        return [tuple(input_shapes[0])]

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        x = inputs[0].astype(self.work, copy=False)
        if x.size == 0:
            return [np.empty(x.shape, dtype=self.dtype)]
        with np.errstate(invalid="ignore", over="ignore", under="ignore", divide="ignore"):
            top = x.max(axis=self.axis, keepdims=True)
            top = np.where(np.isfinite(top), top, 0)  # all -inf / inf slices: no inf - inf
            shifted = np.subtract(x, top)  # fresh; x untouched
            total = np.exp(shifted).sum(axis=self.axis, keepdims=True)
            shifted -= np.log(total)
        return [cast(shifted, self.dtype)]
