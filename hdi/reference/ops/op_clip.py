"""Clip: y = min(max(x, min), max) element-wise, same shape and dtype; the bounds are the
node's `min` and `max` float attributes (hdi_ops.json: one input, no bound inputs).

Decisions where the spec is silent:

* A missing bound is unbounded on that side (semantics.md). proto3 floats have no
  presence, so on the wire "missing" is -inf for `min` and +inf for `max`: the client's
  lowering writes those for an omitted OH_NN_CLIP_MIN / OH_NN_CLIP_MAX. A bound of 0 is
  a real bound of 0. A NaN bound and min > max are invalid nodes.
* Float and integer dtypes. Integer tensors are clamped to the integers inside [min, max]
  (ceil(min), floor(max), themselves limited to the dtype's range), computed exactly in
  the integer type; a range holding no integer of the dtype (min 0.2, max 0.8; int8 with
  min 200) is unsupported. Bool is unsupported.
* float16/32/64 compare against the bounds rounded to the tensor's type (a bound beyond
  its range becomes ±inf). NaN inputs stay NaN.
"""

from __future__ import annotations

import math

import numpy as np

from nnrt.hdi.reference.kernel import invalid, register, unsupported
from nnrt.hdi.reference.ops._common import cast
from nnrt.hdi.reference.ops.op_unary_math import NumericUnary
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import NodeSpec


@register(na.NODE_TYPE_CLIP)
class Clip(NumericUnary):
    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        low, high = float(node.attrs.min), float(node.attrs.max)
        if math.isnan(low) or math.isnan(high):
            raise invalid(node, f"Clip bounds min {low}, max {high} must not be NaN")
        if low > high:
            raise invalid(node, f"Clip min {low} > max {high}")
        if np.issubdtype(self.dtype, np.integer):
            info = np.iinfo(self.dtype)
            # ceil/floor of an infinite bound is undefined: the dtype's range stands for it
            lo = info.min if low == -math.inf else max(math.ceil(low), info.min)
            hi = info.max if high == math.inf else min(math.floor(high), info.max)
            if lo > hi:
                raise unsupported(node, f"Clip [{low}, {high}] holds no integer")
        else:
            lo, hi = cast(np.array([low, high]), self.dtype)
        self.low = self.dtype.type(lo)
        self.high = self.dtype.type(hi)

    def compute(self, x: np.ndarray) -> np.ndarray:
        r = np.maximum(x, self.low)  # a fresh array: x is never written
        return np.minimum(r, self.high, out=r) if r.ndim else np.minimum(r, self.high)
