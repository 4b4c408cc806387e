"""L2NormalizeFusion: y = x / max(||x||_2, epsilon) over `axis`, then the fused activation.

* The norm is taken over the listed axes together (each in [-rank, rank), -1 the last; a
  repeated axis is invalid). An empty list normalises over **every** axis (MindSpore Lite's
  L2Norm; the client sends [0] when the application sets nothing, honouring the header).
* The formula is the one of capi_ops.json, x / max(||x||, epsilon). (TensorFlow and
  MindSpore Lite bound the squared sum instead, x / sqrt(max(sum x², epsilon)); the two agree
  wherever the norm exceeds max(epsilon, sqrt(epsilon)).) epsilon is used as sent: 0 makes
  an all-zero slice 0/0 = NaN; negative or non-finite is invalid.
* Fused activation: the parameter-free types (activations.py). Float dtypes only; float16
  (semantics.md "Float16 mode"): the sum of squares accumulates in float32, the norm, the
  division and the activation in float32, each output value rounded to float16 once.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from nnrt.hdi.reference.activations import apply_activation, fused_activation
from nnrt.hdi.reference.kernel import Kernel, invalid, register
from nnrt.hdi.reference.ops._common import (
    FLOAT_DTYPES,
    cast,
    computed_dtypes,
    epsilon_attr,
    normalize_axis,
)
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import NodeSpec, Shape


@register(na.NODE_TYPE_L2_NORMALIZE_FUSION)
class L2NormalizeFusion(Kernel):
    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        self.expect_counts(1)
        self.dtype, self.work = computed_dtypes(node, FLOAT_DTYPES, "input")
        self.activation = fused_activation(node, self.dtype)
        self.epsilon = epsilon_attr(node)
        rank = len(node.inputs[0].shape)
        axes = [normalize_axis(node, int(a), rank) for a in node.attrs.axis]
        if len(set(axes)) != len(axes):
            raise invalid(node, f"axis {list(node.attrs.axis)} names a dimension twice")
        self.axes = tuple(sorted(axes)) if axes else tuple(range(rank))

    def infer_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        return [tuple(input_shapes[0])]

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        x = inputs[0].astype(self.work, copy=False)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            norm = np.sqrt(np.sum(np.square(x), axis=self.axes, keepdims=True))
            y = np.asarray(x / np.maximum(norm, self.work.type(self.epsilon)))  # 0-d stays
        y = apply_activation(y, self.activation, inplace=True)
        return [cast(y, self.dtype)]
