"""PReLUFusion: y = x if x >= 0 else slope * x, the slope per channel (weight of length C) or
shared (weight of length 1); same shape and dtype as x.

Decisions where the spec is silent:

* The channel dimension is the last one (NHWC, hdi_ops.json: [Batch, ..., Channels]),
  except for an input of rank >= 3 tagged FORMAT_NCHW, where it is dimension 1 (as for
  BiasAdd). An input of rank < 2 has no channel dimension and takes one shared slope
  (capi_ops.json).
* The weight is 1-D (a rank-0 weight counts as one shared slope). Length 1 is shared
  whatever channelShared says (the reference framework always sends false);
  channelShared = true with a longer weight is invalid, as is any length other than 1
  or C.
* Float dtypes only, one dtype for x, weight and output (mixed, integer and bool are
  unsupported); computed in the tensor's dtype. NaN inputs stay NaN.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from nnrt.hdi.reference.kernel import Kernel, invalid, register
from nnrt.hdi.reference.ops._common import (
    FLOAT_DTYPES,
    bad_shape,
    check_declared_shapes,
    common_dtype,
    require_unquantised,
)
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import DYNAMIC, NodeSpec, Shape


@register(na.NODE_TYPE_PRELU_FUSION)
class PReLUFusion(Kernel):
    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        self.expect_counts(2)
        require_unquantised(node)
        self.dtype = common_dtype(node, node.inputs, FLOAT_DTYPES, "inputs")
        x, weight = node.inputs
        self.rank = len(x.shape)
        if len(weight.shape) > 1:
            raise invalid(node, f"weight must be 1-D, has shape {list(weight.shape)}")
        self.shared_attr = bool(node.attrs.channelShared)
        self.axis = None if self.rank < 2 else (
            1 if x.format == ht.FORMAT_NCHW and self.rank >= 3 else self.rank - 1)
        check_declared_shapes(self)

    def infer_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        x, weight = (tuple(s) for s in input_shapes)
        length = weight[0] if weight else 1
        if length not in (1, DYNAMIC):
            if self.shared_attr:
                raise bad_shape(self.node, f"channelShared weight has {length} slopes")
            if self.axis is None:
                raise bad_shape(self.node, f"input of rank {self.rank} takes 1 slope, "
                                           f"weight has {length}")
            channels = x[self.axis]
            if channels not in (length, DYNAMIC):
                raise bad_shape(self.node, f"weight has {length} slopes for {channels} "
                                           f"channels")
        return [x]

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        x, weight = inputs
        slope = weight.reshape(-1)
        if slope.size != 1:
            slope = slope.reshape((-1,) + (1,) * (self.rank - 1 - self.axis))
        elif x.ndim == 0:
            slope = slope.reshape(())
        with np.errstate(all="ignore"):
            return [np.asarray(np.where(x >= 0, x, x * slope), dtype=self.dtype)]
