"""LogSoftmax: y = x - max - log(sum(exp(x - max))) along `axis`, same shape and dtype.

`axis` counts from the end when negative; the attribute is used as sent (its proto3 default
0 is also upstream's default). Float dtypes only; float16 is computed in float32 and rounded
once. Subtracting the maximum keeps exp() from overflowing; a slice holding +inf gives NaN
there as the formula says, -inf entries give -inf.
"""

from __future__ import annotations

import numpy as np

from nnrt.drivers.cpu.kernel import register
from nnrt.drivers.cpu.ops._common import normalize_axis
from nnrt.drivers.cpu.ops._softmax import SoftmaxKernel
from nnrt.protos import node_attrs_pb2 as na
from nnrt.server.graph import NodeSpec


@register(na.NODE_TYPE_LOG_SOFTMAX)
class LogSoftmax(SoftmaxKernel):
    title = "LogSoftmax"

    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        self.axis = normalize_axis(node, int(node.attrs.axis), self.rank)

    def normalise(self, x: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", over="ignore", under="ignore", divide="ignore"):
            top = x.max(axis=self.axis, keepdims=True)
            top = np.where(np.isfinite(top), top, 0)  # all -inf / inf slices: no inf - inf
            shifted = np.subtract(x, top)  # fresh; x untouched
            total = np.exp(shifted).sum(axis=self.axis, keepdims=True)
            shifted -= np.log(total)
        return shifted
