"""Softmax: y = exp(x - max) / sum(exp(x - max)) along one axis, same shape and dtype.

The `axis` list is empty for the last axis (semantics.md) or names the axis, negative
counting from the end; several entries must name the same axis (a softmax over several
axes at once is not implemented: unsupported). Float dtypes only; float16 is computed in
float32 and rounded once. Subtracting the maximum keeps exp() from overflowing.
"""

from __future__ import annotations

import numpy as np

from nnrt.drivers.cpu import arena
from nnrt.drivers.cpu.kernel import register, unsupported
from nnrt.drivers.cpu.ops._common import normalize_axis
from nnrt.drivers.cpu.ops._softmax import SoftmaxKernel
from nnrt.protos import node_attrs_pb2 as na
from nnrt.server.graph import NodeSpec


@register(na.NODE_TYPE_SOFTMAX)
class Softmax(SoftmaxKernel):
    title = "softmax"

    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        axes = {normalize_axis(node, int(a), self.rank) for a in (node.attrs.axis or [-1])}
        if len(axes) != 1:
            raise unsupported(node, f"softmax over several axes {list(node.attrs.axis)}")
        (self.axis,) = axes

    def normalise(self, x: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", over="ignore", under="ignore"):
            e = np.subtract(x, x.max(axis=self.axis, keepdims=True),
                            out=arena.output(self, 0, x.shape, self.work))  # x untouched
            np.exp(e, out=e)
            e /= e.sum(axis=self.axis, keepdims=True)
        return e
