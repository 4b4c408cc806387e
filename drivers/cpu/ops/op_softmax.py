"""Softmax: y = exp(x - max) / sum(exp(x - max)) along one axis, same shape and dtype.

The `axis` list is empty for the last axis (semantics.md) or names the axis, negative
counting from the end; several entries must name the same axis (a softmax over several
axes at once is not implemented: unsupported). Float dtypes only; float16 is computed in
float32 and rounded once. Subtracting the maximum keeps exp() from overflowing.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from nnrt.drivers.cpu import arena
from nnrt.drivers.cpu.kernel import Kernel, invalid, register, unsupported
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


@register(na.NODE_TYPE_SOFTMAX)
class Softmax(Kernel):
    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        self.expect_counts(1)
        require_unquantised(node)
        self.dtype = common_dtype(node, node.inputs, FLOAT_DTYPES, "input")
        self.work = compute_dtype(self.dtype)
        rank = len(node.inputs[0].shape)
        if rank == 0:
            raise invalid(node, "softmax needs an input of rank >= 1")
        axes = {normalize_axis(node, int(a), rank) for a in (node.attrs.axis or [-1])}
        if len(axes) != 1:
            raise unsupported(node, f"softmax over several axes {list(node.attrs.axis)}")
        (self.axis,) = axes

    def infer_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        return [tuple(input_shapes[0])]

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        x = inputs[0].astype(self.work, copy=False)
        if x.size == 0:
            return [np.empty(x.shape, dtype=self.dtype)]
        with np.errstate(invalid="ignore", over="ignore", under="ignore"):
            e = np.subtract(x, x.max(axis=self.axis, keepdims=True),
                            out=arena.output(self, 0, x.shape, self.work))  # x untouched
            np.exp(e, out=e)
            e /= e.sum(axis=self.axis, keepdims=True)
        return [cast(e, self.dtype)]
