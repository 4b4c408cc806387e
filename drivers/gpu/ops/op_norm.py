"""LayerNormFusion and FusedBatchNorm (inference) on the GPU, float32.

LayerNormFusion (reference `hdi/reference/ops/op_layer_norm.py`): x seen as rows [R, L], L
the product of the dimensions [beginNormAxis:]; per row the mean, then the biased variance
of x - mean (the reference's two-pass form), y = (x - mean) * (1 / sqrt(var + epsilon)),
then * gamma + beta when they are given (shape x.shape[beginParamsAxis:], indexed by the
element's flat index modulo their size, constant or run-time). One work-group of 256 per
row, three strided passes, the two sums finished by tree reductions in local memory
(`layer_norm` / `layer_norm_affine` in cl/norm.cl).

FusedBatchNorm (reference `op_batch_norm.py`): y = x * factor + shift per channel (the last
axis, or axis 1 of an NCHW-tagged input), factor = scale / sqrt(variance + epsilon),
shift = offset - mean * factor. With the four parameters constant, the reference's factor
and shift (computed in float64) are uploaded once at load() and the parameters themselves
never go to the device; run-time parameters are folded by a small kernel at each run (in
float32). The element-wise pass accepts the plan's epilogue (an activation or residual).

Refused: dtypes other than float32 and float16 (half storage, cl/common.cl).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pyopencl as cl
from nnrt.hdi.reference.kernel import Kernel
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import NodeSpec

from ..kernel import (
    WORK_GROUP,
    Builder,
    DeviceTensor,
    Epilogue,
    GpuOp,
    Launch,
    Preparer,
    register,
    require_dtypes,
)

NORM_WG = 256  # as in cl/norm.cl


@register(na.NODE_TYPE_LAYER_NORM_FUSION)
class LayerNorm(GpuOp):
    def __init__(self, node: NodeSpec, ref: Kernel) -> None:
        super().__init__(node, ref)
        require_dtypes(node)
        self.begin = ref.norm_axes[0]
        self.affine = bool(ref.affine)
        self.params_axis = int(ref.params_axis)
        self.epsilon = float(ref.epsilon)

    def build(self, b: Builder, inputs: Sequence[DeviceTensor | None],
              outputs: Sequence[DeviceTensor], post: Epilogue) -> list[Launch]:
        x, (out,) = inputs[0], outputs
        length = math.prod(x.shape[self.begin:])
        if out.size == 0:
            return []
        rows = out.size // length
        args = [x.buffer, out.buffer, np.int32(length), np.float32(self.epsilon)]
        name = "layer_norm"
        if self.affine:
            gamma, beta = inputs[1], inputs[2]
            args += [gamma.buffer, beta.buffer,
                     np.int32(math.prod(x.shape[self.params_axis:]))]
            name = "layer_norm_affine"
        return [b.launch(b.program("norm"), name, args, [rows * NORM_WG], [NORM_WG])]


@register(na.NODE_TYPE_FUSED_BATCH_NORM)
class BatchNorm(GpuOp):
    accepts_epilogue = True

    def __init__(self, node: NodeSpec, ref: Kernel) -> None:
        super().__init__(node, ref)
        require_dtypes(node)
        self.channel = int(ref.channel)
        self.epsilon = float(ref.epsilon)
        self.folded = ref.affine is not None  # (factor, shift) of constant parameters
        if self.folded:
            self.own_constants = frozenset({1, 2, 3, 4})
        self.fs: cl.Buffer | None = None

    def load(self, prep: Preparer) -> None:
        if self.folded:
            factor, shift = self.ref.affine
            fs = np.concatenate([np.ravel(factor), np.ravel(shift)]).astype(np.float32)
            self.fs = prep.upload(fs, f"batch norm {self.node.name!r} factor and shift")

    def build(self, b: Builder, inputs: Sequence[DeviceTensor | None],
              outputs: Sequence[DeviceTensor], post: Epilogue) -> list[Launch]:
        x, (out,) = inputs[0], outputs
        if out.size == 0:
            return []
        channels = x.shape[self.channel]
        inner = math.prod(x.shape[self.channel + 1:])
        program = b.program("norm")
        launches = []
        fs = self.fs
        if fs is None:
            fs = b.scratch(2 * channels * 4, "batch norm factor and shift")
            args = [*(t.buffer for t in inputs[1:5]), fs, np.int32(channels),
                    np.float32(self.epsilon)]
            launches.append(b.launch(program, "batch_norm_fold", args, [channels], [64]))
        args = [x.buffer, out.buffer, np.int32(out.size), fs, np.int32(channels),
                np.int32(inner), *post.args(b.dummy)]
        launches.append(b.launch(program, "batch_norm", args, [out.size], [WORK_GROUP]))
        return launches
