"""FusedBatchNorm (inference): y = (x - mean) / sqrt(variance + epsilon) * scale + offset,
per channel.

* Inputs: x [N, ..., C], then scale, offset, mean, variance, each 1-D [C]; one output of x's
  shape. The channel is the last axis (hdi_ops.json: channels last); an input tagged
  FORMAT_NCHW has its channel on axis 1, as the spatial operators it follows do.
* epsilon is used as sent (capi_ops.json's default 1e-4 is filled in by the client); a
  negative or non-finite epsilon is invalid.
* Every input and the output share one float dtype; float16 (semantics.md "Float16
  mode") is computed in float32 and each output value rounded once. The per-channel factor
  scale / sqrt(variance + epsilon) and shift offset - mean * factor are computed in
  float64 (at prepare time when all four parameter tensors are constant), then
  y = x * factor + shift.
* Training (computing batch statistics, the extra outputs of the training form) is not part
  of inference: exactly 5 inputs and 1 output.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from nnrt.hdi.reference.kernel import invalid, register
from nnrt.hdi.reference.ops._common import cast, check_declared_shapes
from nnrt.hdi.reference.ops._norm import ChannelNorm
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import NodeSpec


@register(na.NODE_TYPE_FUSED_BATCH_NORM)
class FusedBatchNorm(ChannelNorm):
    params = ("scale", "offset", "mean", "variance")

    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        self.nchw = self.nchw and self.rank >= 2
        if self.rank == 0:
            raise invalid(node, "x must have a channel dimension (rank >= 1)")
        self.check_params(1 if self.nchw else self.rank - 1)
        check_declared_shapes(self)
        self.affine = None
        if all(t.is_constant for t in node.inputs[1:]):
            self.affine = self._affine([t.constant for t in node.inputs[1:]])

    def _affine(self, params: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        scale, offset, mean, variance = (p.astype(np.float64) for p in params)
        with np.errstate(divide="ignore", invalid="ignore"):
            factor = scale / np.sqrt(variance + self.epsilon)
        shift = offset - mean * factor
        shape = self.param_shape()
        return (factor.astype(self.work).reshape(shape), shift.astype(self.work).reshape(shape))

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        self.infer_shapes([a.shape for a in inputs])
        factor, shift = self.affine if self.affine is not None else self._affine(inputs[1:])
        y = inputs[0].astype(self.work, copy=False) * factor
        y += shift
        return [cast(y, self.dtype)]
