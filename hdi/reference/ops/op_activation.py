"""Activation (NODE_TYPE_ACTIVATION): y = activation(x), element-wise, same shape and dtype.

Every ActivationType of hdi.md 6.12 except UNKNOWN (invalid); the parameters come from the
node's Activation struct: alpha (ELU, LEAKY_RELU, THRESHOLDRELU's upper bound t), minVal and
maxVal (HARD_TANH, which needs minVal <= maxVal), approximate (GELU). Formulas and dtype
rules are those of `nnrt.hdi.reference.activations`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from nnrt.hdi.reference.activations import apply_activation, check_activation
from nnrt.hdi.reference.kernel import Kernel, invalid, register
from nnrt.hdi.reference.ops._common import NUMERIC_DTYPES, common_dtype, require_unquantised
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import NodeSpec, Shape


@register(na.NODE_TYPE_ACTIVATION)
class Activation(Kernel):
    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        self.expect_counts(1)
        require_unquantised(node)
        dtype = common_dtype(node, node.inputs, NUMERIC_DTYPES, "input")
        attrs = node.attrs
        self.kind = int(attrs.activationType)
        check_activation(node, self.kind, fused=False, dtype=dtype)
        self.alpha = float(attrs.alpha)
        self.min_val = float(attrs.minVal)
        self.max_val = float(attrs.maxVal)
        self.approximate = bool(attrs.approximate)
        uses = {ht.ACTIVATION_TYPE_ELU: (self.alpha,),
                ht.ACTIVATION_TYPE_LEAKY_RELU: (self.alpha,),
                ht.ACTIVATION_TYPE_THRESHOLDRELU: (self.alpha,),
                ht.ACTIVATION_TYPE_HARD_TANH: (self.min_val, self.max_val)}.get(self.kind, ())
        if not all(math.isfinite(v) for v in uses):
            raise invalid(node, f"activation parameters {uses} must be finite")
        if self.kind == ht.ACTIVATION_TYPE_HARD_TANH and self.min_val > self.max_val:
            raise invalid(node, f"HARD_TANH minVal {self.min_val} > maxVal {self.max_val}")

    def infer_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        return [tuple(input_shapes[0])]

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        return [apply_activation(inputs[0], self.kind, alpha=self.alpha, min_val=self.min_val,
                                 max_val=self.max_val, approximate=self.approximate)]
