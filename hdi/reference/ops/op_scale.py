"""ScaleFusion: y = activation(x * scale + bias), scale and bias aligned with x's dimensions
from `axis` on (MindSpore Lite's Scale): scale's shape must equal
x.shape[axis : axis + scale.ndim] and it repeats over the dimensions before and after.

Decisions where the spec is silent:

* `axis` may be negative (counting from x's end); it must lie in [-rank, rank) (axis 0
  on a rank-0 x with a rank-0 scale is allowed) and the scale must fit from it.
* The bias is optional (2 or 3 inputs; the C API always sends it); when present its shape
  is scale's.
* x, scale, bias and the output share one dtype, any integer or float type (integers
  wrap); mixed dtypes and bool are unsupported. float16 is computed in float32 and rounded
  once, so x * scale + bias is rounded once.
* The fused activation follows AddFusion's rules (nnrt.hdi.reference.activations):
  parameter-free types only, integer tensors only the integer-exact types.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from nnrt.hdi.reference.activations import apply_activation, fused_activation
from nnrt.hdi.reference.kernel import Kernel, invalid, register
from nnrt.hdi.reference.ops._common import (
    NUMERIC_DTYPES,
    bad_shape,
    cast,
    check_declared_shapes,
    computed_dtypes,
    normalize_axis,
    same_dim,
)
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import NodeSpec, Shape


@register(na.NODE_TYPE_SCALE_FUSION)
class ScaleFusion(Kernel):
    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        self.expect_counts(range(2, 4))
        self.dtype, self.work = computed_dtypes(node, NUMERIC_DTYPES, "inputs")
        self.activation = fused_activation(node, self.dtype)
        self.rank = len(node.inputs[0].shape)
        self.scale_rank = len(node.inputs[1].shape)
        self.axis = normalize_axis(node, int(node.attrs.axis), max(self.rank, 1))
        if self.axis + self.scale_rank > self.rank:
            raise invalid(node, f"scale of rank {self.scale_rank} does not fit x of rank "
                                f"{self.rank} from axis {self.axis}")
        if len(node.inputs) == 3 and len(node.inputs[2].shape) != self.scale_rank:
            raise invalid(node, f"bias rank {len(node.inputs[2].shape)} differs from scale "
                                f"rank {self.scale_rank}")
        # scale/bias reshaped to broadcast against x: trailing dimensions of size 1
        self.trailing = (1,) * (self.rank - self.axis - self.scale_rank)
        check_declared_shapes(self)

    def infer_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        x = list(input_shapes[0])
        if len(x) != self.rank or any(len(s) != self.scale_rank for s in input_shapes[1:]):
            raise bad_shape(self.node, f"input ranks changed: {[list(s) for s in input_shapes]}")
        for s in input_shapes[1:]:
            for k, d in enumerate(s):
                x[self.axis + k] = same_dim(self.node, x[self.axis + k], d,
                                            f"scale/bias dimension {k} vs x dimension "
                                            f"{self.axis + k}")
        return [tuple(x)]

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        x = inputs[0].astype(self.work, copy=False)
        scale = inputs[1].astype(self.work, copy=False)
        with np.errstate(all="ignore"):  # integer wrap-around and IEEE specials
            r = np.multiply(x, scale.reshape(scale.shape + self.trailing))  # fresh array
            if len(inputs) == 3:
                bias = inputs[2].astype(self.work, copy=False)
                r = np.add(r, bias.reshape(bias.shape + self.trailing), out=r) if r.ndim \
                    else np.add(r, bias)
            r = cast(np.asarray(r), self.dtype)
            return [apply_activation(r, self.activation, inplace=True)]
