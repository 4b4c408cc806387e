"""Softmax: y = exp(x - max) / sum(exp(x - max)) along one axis, same shape and dtype.

The `axis` list is empty for the last axis (semantics.md) or names the axis, negative
counting from the end; several entries must name the same axis (a softmax over several
axes at once is not implemented: unsupported). Float dtypes only; float16 (semantics.md
"Float16 mode"): the exponentials, their float32 sum and the division in float32, each
output value rounded to float16 once. Subtracting the maximum keeps exp() from overflowing.

Computation (see _softmax): x - max into the output's buffer, exp in place, then one
division by the sums. Along the last axis of more than 4 rows whose values all lie within
[-64, 64] (float32; [-512, 512] for float64), exp(x) is normal and finite and the shift
changes nothing but rounding: exp(x) is taken directly, the two whole-array reductions
checking the range costing less than the rows' maxima.
"""

from __future__ import annotations

import numpy as np

from nnrt.hdi.reference.kernel import register, unsupported
from nnrt.hdi.reference.ops._common import normalize_axis, row_sum
from nnrt.hdi.reference.ops._softmax import SoftmaxKernel, row_max
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import NodeSpec


# Inputs within [-bound, bound]: exp(x) is normal and finite, and so is a sum of up to
# 10**10 of them, so exp(x) / sum(exp(x)) needs no subtraction of the maxima.
_NO_SHIFT = {np.dtype(np.float32): 64.0, np.dtype(np.float64): 512.0}


@register(na.NODE_TYPE_SOFTMAX)
class Softmax(SoftmaxKernel):
    title = "softmax"

    def node_axis(self, node: NodeSpec) -> int:
        axes = {normalize_axis(node, int(a), self.rank) for a in (node.attrs.axis or [-1])}
        if len(axes) != 1:
            raise unsupported(node, f"softmax over several axes {list(node.attrs.axis)}")
        (axis,) = axes
        return axis

    def rows(self, x: np.ndarray, out: np.ndarray) -> None:
        bound = _NO_SHIFT[self.work]
        if x.shape[0] > 4 and -bound <= x.min() and x.max() <= bound:  # False with a NaN
            np.exp(x, out=out)  # no overflow nor subnormal: the shift changes nothing
        else:
            np.subtract(x, row_max(x), out=out)
            np.exp(out, out=out)
        out /= row_sum(out, self.ones)

    def general(self, x: np.ndarray, out: np.ndarray) -> None:
        np.subtract(x, x.max(axis=self.axis, keepdims=True), out=out)
        np.exp(out, out=out)
        out /= out.sum(axis=self.axis, keepdims=True)
