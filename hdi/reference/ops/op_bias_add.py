"""BiasAdd: y = x + bias, the 1-D bias added along x's channel dimension; same shape and
dtype as x.

Decisions where the spec is silent:

* The channel dimension is the last one (NHWC, hdi_ops.json / capi_ops.json), except for an
  input of rank >= 3 tagged FORMAT_NCHW, where it is dimension 1 (the tag is the input's
  real layout, as for the spatial operators in semantics.md).
* x needs rank >= 1 (the C API says 2 to 5; ranks 1 and > 5 are computed too); the bias
  must be 1-D with exactly the channel count (a length-1 bias is not broadcast: invalid).
* x, bias and the output share one dtype, any integer or float type; integer sums wrap.
  Mixed dtypes and bool are unsupported.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from nnrt.hdi.reference.kernel import Kernel, invalid, register
from nnrt.hdi.reference.ops._common import (
    NUMERIC_DTYPES,
    bad_shape,
    check_declared_shapes,
    common_dtype,
    require_unquantised,
    same_dim,
)
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import NodeSpec, Shape


@register(na.NODE_TYPE_BIAS_ADD)
class BiasAdd(Kernel):
    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        self.expect_counts(2)
        require_unquantised(node)
        self.dtype = common_dtype(node, node.inputs, NUMERIC_DTYPES, "inputs")
        x, bias = node.inputs
        self.rank = len(x.shape)
        if self.rank < 1:
            raise invalid(node, "BiasAdd needs an input of rank >= 1")
        if len(bias.shape) != 1:
            raise invalid(node, f"bias must be 1-D, has shape {list(bias.shape)}")
        self.axis = 1 if x.format == ht.FORMAT_NCHW and self.rank >= 3 else self.rank - 1
        check_declared_shapes(self)

    def infer_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        x, bias = (tuple(s) for s in input_shapes)
        if len(x) != self.rank or len(bias) != 1:
            raise bad_shape(self.node, f"input ranks changed: {list(x)}, {list(bias)}")
        out = list(x)
        out[self.axis] = same_dim(self.node, x[self.axis], bias[0],
                                  f"bias length vs channel dimension {self.axis}")
        return [tuple(out)]

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        x, bias = inputs
        b = bias.reshape((-1,) + (1,) * (self.rank - 1 - self.axis))
        with np.errstate(all="ignore"):  # integer wrap-around is the semantics
            return [np.asarray(np.add(x, b))]
