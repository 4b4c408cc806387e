"""LeakyRelu: y = x if x >= 0 else negativeSlope * x, element-wise, same shape and dtype.

The computation is ACTIVATION_TYPE_LEAKY_RELU's (nnrt.hdi.reference.activations), the form
the reference framework emits instead of this node. Decisions: float dtypes only (a
fractional slope has no integer result; integers and bool are unsupported), computed in
the tensor's own dtype; a non-finite negativeSlope is invalid; any finite slope is allowed,
negative or above 1 included; NaN inputs stay NaN.
"""

from __future__ import annotations

import math

import numpy as np

from nnrt.hdi.reference.activations import apply_activation
from nnrt.hdi.reference.kernel import invalid, register
from nnrt.hdi.reference.ops.op_unary_math import Unary
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import NodeSpec


@register(na.NODE_TYPE_LEAKY_RELU)
class LeakyRelu(Unary):
    widen = False

    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        self.slope = float(node.attrs.negativeSlope)
        if not math.isfinite(self.slope):
            raise invalid(node, f"negativeSlope {self.slope} must be finite")

    def compute(self, x: np.ndarray) -> np.ndarray:
        return apply_activation(x, ht.ACTIVATION_TYPE_LEAKY_RELU, alpha=self.slope)
