"""InstanceNorm: y = scale * (x - mean) / sqrt(var + epsilon) + bias, with mean and (biased)
variance per instance and channel over the spatial dimensions.

* Layout (semantics.md): NHWC, x [N, D1, ..., Dn, C] with n >= 1 spatial dimensions; an
  input tagged FORMAT_NCHW is [N, C, D1, ..., Dn] (hdi_ops.json's form). scale and bias are
  1-D [C]. Rank < 3 has no spatial dimension to take statistics over: invalid.
* epsilon is used as sent (the C API's default is 0.0; an all-constant slice then divides
  0 by 0 and gives NaN, as the formula says); negative or non-finite is invalid.
* Float dtypes, one for every input and the output; float16 is computed in float32.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from nnrt.drivers.cpu.kernel import Kernel, invalid, register
from nnrt.drivers.cpu.ops._common import (
    FLOAT_DTYPES,
    bad_shape,
    cast,
    check_declared_shapes,
    common_dtype,
    compute_dtype,
    require_unquantised,
    same_dim,
)
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from nnrt.server.graph import NodeSpec, Shape


@register(na.NODE_TYPE_INSTANCE_NORM)
class InstanceNorm(Kernel):
    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        self.expect_counts(3)
        require_unquantised(node)
        self.dtype = common_dtype(node, node.inputs, FLOAT_DTYPES, "inputs")
        self.work = compute_dtype(self.dtype)
        self.epsilon = float(node.attrs.epsilon)
        if not math.isfinite(self.epsilon) or self.epsilon < 0:
            raise invalid(node, f"epsilon {self.epsilon} must be finite and >= 0")
        self.rank = len(node.inputs[0].shape)
        if self.rank < 3:
            raise invalid(node, f"x must be [N, spatial..., C] (rank >= 3), has shape "
                                f"{list(node.inputs[0].shape)}")
        nchw = node.inputs[0].format == ht.FORMAT_NCHW
        self.channel = 1 if nchw else self.rank - 1
        self.spatial = tuple(range(2, self.rank)) if nchw else tuple(range(1, self.rank - 1))
        for name, spec in (("scale", node.inputs[1]), ("bias", node.inputs[2])):
            if len(spec.shape) != 1:
                raise invalid(node, f"{name} must be 1-D [C], has shape {list(spec.shape)}")
        check_declared_shapes(self)

    def infer_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        x = tuple(input_shapes[0])
        if len(x) != self.rank:
            raise bad_shape(self.node, f"input rank {len(x)}, the model has {self.rank}")
        c = x[self.channel]
        for name, shape in (("scale", input_shapes[1]), ("bias", input_shapes[2])):
            if len(shape) != 1:
                raise bad_shape(self.node, f"{name} must be 1-D, has shape {list(shape)}")
            c = same_dim(self.node, c, shape[0], f"{name} length vs channels")
        return [x]

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        self.infer_shapes([a.shape for a in inputs])
        x = inputs[0].astype(self.work, copy=False)
        shape = [1] * self.rank
        shape[self.channel] = -1
        scale = inputs[1].astype(self.work, copy=False).reshape(shape)
        bias = inputs[2].astype(self.work, copy=False).reshape(shape)
        with np.errstate(divide="ignore", invalid="ignore"):
            mean = x.mean(axis=self.spatial, keepdims=True)
            y = np.subtract(x, mean)  # fresh; x untouched
            var = np.mean(np.square(y), axis=self.spatial, keepdims=True)
            y *= scale / np.sqrt(var + self.work.type(self.epsilon))
            y += bias
        return [cast(y, self.dtype)]
