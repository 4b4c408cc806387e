"""ExpFusion: y = base^(shift + scale * x) element-wise, same shape and dtype; base -1 means e.

Decisions where the spec is silent:

* The attributes are used as they arrive. proto3 floats carry no presence, so a missing
  attribute reads 0: the client's lowering must always send base, scale and shift (the C
  API defaults are base -1, scale 1, shift 0; hdi_ops.json's IDL default shift = 1 is
  the slip it says it is). A base that is neither -1 nor > 0 (0 included) and any
  non-finite attribute make the node invalid.
* Float dtypes only (an integer power would have to invent a rounding); integers and bool
  are unsupported. float16 is computed in float32 and rounded once.
* base -1 is computed as exp(); any other base as numpy's power(base, z), which is exact
  for exact results (10^2 = 100) where exp(z ln base) is not. Overflow gives +inf,
  underflow 0 (IEEE, no error).
"""

from __future__ import annotations

import math

import numpy as np

from nnrt.hdi.reference.kernel import invalid, register
from nnrt.hdi.reference.ops.op_unary_math import Unary
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import NodeSpec

NATURAL = -1.0  # the base value that selects e


@register(na.NODE_TYPE_EXPFUSION)
class ExpFusion(Unary):
    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        attrs = node.attrs
        self.base = float(attrs.base)
        self.scale = float(attrs.scale)
        self.shift = float(attrs.shift)
        if not all(math.isfinite(v) for v in (self.base, self.scale, self.shift)):
            raise invalid(node, f"base {self.base}, scale {self.scale} and shift {self.shift} "
                                f"must be finite")
        if self.base != NATURAL and self.base <= 0:
            raise invalid(node, f"base {self.base} must be -1 (e) or > 0")

    def compute(self, x: np.ndarray) -> np.ndarray:
        t = self.work.type
        z = x
        if self.scale != 1.0:
            z = np.multiply(z, t(self.scale))  # a fresh array: x is never written
        if self.shift != 0.0:
            z = np.add(z, t(self.shift))
        if self.base == NATURAL:
            return np.exp(z)
        return np.power(t(self.base), z)
