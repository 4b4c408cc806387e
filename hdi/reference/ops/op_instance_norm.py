"""InstanceNorm: y = scale * (x - mean) / sqrt(var + epsilon) + bias, with mean and (biased)
variance per instance and channel over the spatial dimensions.

* Layout (semantics.md): NHWC, x [N, D1, ..., Dn, C] with n >= 1 spatial dimensions; an
  input tagged FORMAT_NCHW is [N, C, D1, ..., Dn] (hdi_ops.json's form). scale and bias are
  1-D [C]. Rank < 3 has no spatial dimension to take statistics over: invalid.
* epsilon is used as sent (the C API's default is 0.0; an all-constant slice then divides
  0 by 0 and gives NaN, as the formula says); negative or non-finite is invalid.
* Float dtypes, one for every input and the output. float16 (semantics.md "Float16
  mode"): the statistics, the normalisation, scale and bias in float32, each output value
  rounded to float16 once.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from nnrt.hdi.reference.kernel import invalid, register
from nnrt.hdi.reference.ops._common import cast, check_declared_shapes
from nnrt.hdi.reference.ops._norm import ChannelNorm
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import NodeSpec


@register(na.NODE_TYPE_INSTANCE_NORM)
class InstanceNorm(ChannelNorm):
    params = ("scale", "bias")

    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        if self.rank < 3:
            raise invalid(node, f"x must be [N, spatial..., C] (rank >= 3), has shape "
                                f"{list(node.inputs[0].shape)}")
        self.spatial = (tuple(range(2, self.rank)) if self.nchw
                        else tuple(range(1, self.rank - 1)))
        self.check_params(1 if self.nchw else self.rank - 1)
        check_declared_shapes(self)

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        self.infer_shapes([a.shape for a in inputs])
        x = inputs[0].astype(self.work, copy=False)
        shape = self.param_shape()
        scale = inputs[1].astype(self.work, copy=False).reshape(shape)
        bias = inputs[2].astype(self.work, copy=False).reshape(shape)
        with np.errstate(divide="ignore", invalid="ignore"):
            mean = x.mean(axis=self.spatial, keepdims=True)
            y = np.subtract(x, mean)  # fresh; x untouched
            var = np.mean(np.square(y), axis=self.spatial, keepdims=True)
            y *= scale / np.sqrt(var + self.work.type(self.epsilon))
            y += bias
        return [cast(y, self.dtype)]
