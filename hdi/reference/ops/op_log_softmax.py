"""LogSoftmax: y = x - max - log(sum(exp(x - max))) along `axis`, same shape and dtype.

`axis` counts from the end when negative; the attribute is used as sent (its proto3 default
0 is also upstream's default). Float dtypes only; float16 (semantics.md "Float16
mode"): the exponentials, their float32 sum, its log and the subtraction in float32, each
output value rounded to float16 once. Subtracting the maximum keeps exp() from
overflowing; a slice holding +inf gives NaN there as the formula says, -inf entries give
-inf.

Computation (see _softmax): x - max into the output's buffer, its exp in the run's shared
workspace, then one subtraction of the logs of the sums.
"""

from __future__ import annotations

import numpy as np

from nnrt.hdi.reference import arena
from nnrt.hdi.reference.kernel import register
from nnrt.hdi.reference.ops._common import normalize_axis, row_sum
from nnrt.hdi.reference.ops._softmax import SoftmaxKernel, row_max
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import NodeSpec


def _finite(top: np.ndarray) -> np.ndarray:
    """The maxima, 0 in place of an infinite one (all -inf / +inf slices: no inf - inf)."""
    if np.isfinite(top).all():
        return top
    return np.where(np.isfinite(top), top, 0)


@register(na.NODE_TYPE_LOG_SOFTMAX)
class LogSoftmax(SoftmaxKernel):
    title = "LogSoftmax"

    def node_axis(self, node: NodeSpec) -> int:
        return normalize_axis(node, int(node.attrs.axis), self.rank)

    def rows(self, x: np.ndarray, out: np.ndarray) -> None:
        shifted = np.subtract(x, _finite(row_max(x)), out=out)
        exps = np.exp(shifted, out=arena.workspace("softmax", shifted.shape, shifted.dtype))
        total = row_sum(exps, self.ones)
        shifted -= np.log(total, out=total)

    def general(self, x: np.ndarray, out: np.ndarray) -> None:
        top = _finite(x.max(axis=self.axis, keepdims=True))
        shifted = np.subtract(x, top, out=out)
        exps = np.exp(shifted, out=arena.workspace("softmax", shifted.shape, shifted.dtype))
        total = exps.sum(axis=self.axis, keepdims=True)
        shifted -= np.log(total, out=total)
