"""FusedBatchNorm (inference): y = (x - mean) / sqrt(variance + epsilon) * scale + offset,
per channel.

* Inputs: x [N, ..., C], then scale, offset, mean, variance, each 1-D [C]; one output of x's
  shape. The channel is the last axis (hdi_ops.json: channels last); an input tagged
  FORMAT_NCHW has its channel on axis 1, as the spatial operators it follows do.
* epsilon is used as sent (capi_ops.json's default 1e-4 is filled in by the client); a
  negative or non-finite epsilon is invalid.
* Every input and the output share one float dtype; float16 is computed in float32 and
  rounded once. The per-channel factor scale / sqrt(variance + epsilon) and shift
  offset - mean * factor are computed in float64 (at prepare time when all four parameter
  tensors are constant), then y = x * factor + shift.
* Training (computing batch statistics, the extra outputs of the training form) is not part
  of inference: exactly 5 inputs and 1 output.
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

_PARAMS = ("scale", "offset", "mean", "variance")


@register(na.NODE_TYPE_FUSED_BATCH_NORM)
class FusedBatchNorm(Kernel):
    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        self.expect_counts(5)
        require_unquantised(node)
        self.dtype = common_dtype(node, node.inputs, FLOAT_DTYPES, "inputs")
        self.work = compute_dtype(self.dtype)
        self.epsilon = float(node.attrs.epsilon)
        if not math.isfinite(self.epsilon) or self.epsilon < 0:
            raise invalid(node, f"epsilon {self.epsilon} must be finite and >= 0")
        self.rank = len(node.inputs[0].shape)
        self.nchw = node.inputs[0].format == ht.FORMAT_NCHW and self.rank >= 2
        if self.rank == 0:
            raise invalid(node, "x must have a channel dimension (rank >= 1)")
        self.axis = 1 if self.nchw else self.rank - 1
        for name, spec in zip(_PARAMS, node.inputs[1:]):
            if len(spec.shape) != 1:
                raise invalid(node, f"{name} must be 1-D [C], has shape {list(spec.shape)}")
        check_declared_shapes(self)
        self.affine = None
        if all(t.is_constant for t in node.inputs[1:]):
            self.affine = self._affine([t.constant for t in node.inputs[1:]])

    def _affine(self, params: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        scale, offset, mean, variance = (p.astype(np.float64) for p in params)
        with np.errstate(divide="ignore", invalid="ignore"):
            factor = scale / np.sqrt(variance + self.epsilon)
        shift = offset - mean * factor
        shape = [1] * self.rank
        shape[self.axis] = -1
        return (factor.astype(self.work).reshape(shape), shift.astype(self.work).reshape(shape))

    def infer_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        x = tuple(input_shapes[0])
        if len(x) != self.rank:
            raise bad_shape(self.node, f"input rank {len(x)}, the model has {self.rank}")
        c = x[self.axis]
        for name, shape in zip(_PARAMS, input_shapes[1:]):
            if len(shape) != 1:
                raise bad_shape(self.node, f"{name} must be 1-D, has shape {list(shape)}")
            c = same_dim(self.node, c, shape[0], f"{name} length vs channels")
        return [x]

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        self.infer_shapes([a.shape for a in inputs])
        factor, shift = self.affine if self.affine is not None else self._affine(inputs[1:])
        y = inputs[0].astype(self.work, copy=False) * factor
        y += shift
        return [cast(y, self.dtype)]
