"""Conv2DFusion on the GPU: ordinary, grouped and depthwise 2-D convolution with optional
bias, the node's fused activation and the plan's epilogue (+ residual, activation); float32.

The reference kernel (`nnrt.hdi.reference.ops.op_conv2d.Conv2DFusion`) has validated the node
and gives the geometry: stride, dilation, group, the layout (`nchw`: input and output
[N, C, H, W], otherwise NHWC) and, per concrete input size, each axis' output size and
leading padding (its `_axis`, i.e. `window_axis`: SAME / VALID / PAD as the reference
computes them). The kernels address tensors through (n, h, w, c) element strides, so NHWC
and NCHW take the same code.

* Ordinary and grouped convolution (cl/conv.cl `conv_gemm`): an implicit GEMM per group,
  output pixels (N*OH*OW) x the group's output channels over K = kH*kW*C/group, no im2col
  buffer: 32 x 32 tiles staged 8 deep in local memory, 4 pixels x 4 channels per work-item.
  The weight [outC, kH, kW, C/group] is uploaded once as [group, K, outC/group], padded with
  zeros to whole tiles.
* Depthwise (group == C, one input channel per group), with any channel multiplier m
  (output channel c*m + k reads input channel c): NHWC with m == 1 and C % 4 == 0 runs
  `depthwise4` (float4 across channels, two adjacent output pixels per work-item); other
  cases run the scalar `depthwise`. The weight is uploaded as [kH, kW, outC].

Refused (unsupported): tensors other than float32 or float16 (half storage, cl/common.cl),
a weight that is not a constant. A bias that is not constant is read as it is.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from nnrt.hdi.reference.kernel import Kernel, unsupported
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import NodeSpec

from ..kernel import (
    Builder,
    DeviceTensor,
    Epilogue,
    GpuOp,
    Launch,
    Preparer,
    register,
    require_dtypes,
)

TM, TN, TK = 32, 32, 8  # conv_gemm's tile: pixels x channels x depth (cl/conv.cl defaults)
GEMM_LOCAL = (TN // 4, TM // 4, 1)
DEPTHWISE_LOCAL = 64


def _strides(shape: Sequence[int], nchw: bool) -> list[int]:
    """Element strides (n, h, w, c) of a dense 4-D tensor of `shape` in its layout."""
    if nchw:
        _, c, h, w = shape
        return [c * h * w, w, 1, h * w]
    _, h, w, c = shape
    return [h * w * c, w * c, c, 1]


@register(na.NODE_TYPE_CONV2D_FUSION)
class Conv2D(GpuOp):
    accepts_epilogue = True

    def __init__(self, node: NodeSpec, ref: Kernel) -> None:
        super().__init__(node, ref)
        require_dtypes(node)
        if not node.inputs[1].is_constant:
            raise unsupported(node, "the GPU driver computes Conv2DFusion with a constant "
                                    "weight only")
        self.depthwise = bool(ref.depthwise)
        self.constant_bias = ref.has_bias and node.inputs[2].is_constant
        self.own_constants = frozenset({1, 2} if self.constant_bias else {1})
        self.weight: DeviceTensor | None = None
        self.bias: DeviceTensor | None = None

    def load(self, prep: Preparer) -> None:
        ref = self.ref
        w = np.asarray(self.node.inputs[1].constant, dtype=np.float32)
        out_c, kh, kw, gc = w.shape
        if self.depthwise:  # [kH, kW, outC]
            packed = np.ascontiguousarray(w[..., 0].transpose(1, 2, 0))
        else:  # [group, Kp, ogp], zero-padded to whole tiles
            group, og, k = ref.group, out_c // ref.group, kh * kw * gc
            kp, ogp = -(-k // TK) * TK, -(-og // TN) * TN
            packed = np.zeros((group, kp, ogp), self.storage)
            packed[:, :k, :og] = w.reshape(group, og, k).transpose(0, 2, 1)
        packed = packed.astype(self.storage, copy=False)
        self.weight = DeviceTensor(prep.upload(packed, f"{self.node.name} weight"),
                                   packed.shape, packed.dtype)
        if self.constant_bias:
            bias = np.ascontiguousarray(self.node.inputs[2].constant, dtype=self.storage)
            self.bias = DeviceTensor(prep.upload(bias, f"{self.node.name} bias"), bias.shape,
                                     bias.dtype)

    def build(self, b: Builder, inputs: Sequence[DeviceTensor | None],
              outputs: Sequence[DeviceTensor], post: Epilogue) -> list[Launch]:
        ref = self.ref
        x = inputs[0]
        (out,) = outputs
        assert self.weight is not None
        bias = self.bias if self.constant_bias else (inputs[2] if ref.has_bias else None)
        bias_buf = b.dummy if bias is None else bias.buffer
        nchw = bool(ref.nchw)
        if nchw:
            n, c, h, w = x.shape
        else:
            n, h, w, c = x.shape
        ax_h, ax_w = ref._axis(0, h), ref._axis(1, w)  # the reference's geometry
        oh, ow = ax_h.out, ax_w.out
        if n * oh * ow == 0:
            return []
        kh, kw = ref.kernel
        (sh, sw), (dh, dw) = ref.stride, ref.dilation
        xs, os_ = _strides(x.shape, nchw), _strides(out.shape, nchw)
        i32 = np.int32
        geometry = [i32(sh), i32(sw), i32(dh), i32(dw), i32(ax_h.pad_before),
                    i32(ax_w.pad_before)]
        tail = [i32(bias is not None), i32(ref.activation), *post.args(b.dummy)]
        program = b.program("conv")
        if self.depthwise:
            out_c = ref.out_c
            if not nchw and out_c == c and c % 4 == 0:
                ow2 = -(-ow // 2)
                total = n * oh * ow2 * (c // 4)
                args = [x.buffer, self.weight.buffer, bias_buf, out.buffer,
                        *map(i32, (total, c // 4, ow2, oh, ow, h, w, kh, kw)), *geometry, *tail]
                return [b.launch(program, "depthwise4", args, [total], [DEPTHWISE_LOCAL],
                                 label=f"{self.node.name} depthwise4")]
            total = n * oh * ow * out_c
            args = [x.buffer, self.weight.buffer, bias_buf, out.buffer,
                    *map(i32, (total, out_c, out_c // c, oh, ow, h, w, kh, kw)), *geometry,
                    *map(i32, xs), *map(i32, os_), *tail]
            return [b.launch(program, "depthwise", args, [total], [DEPTHWISE_LOCAL],
                             label=f"{self.node.name} depthwise")]
        group, gc = ref.group, ref.group_c
        og = ref.out_c // group
        _, kp, ogp = self.weight.shape
        m = n * oh * ow
        args = [x.buffer, self.weight.buffer, bias_buf, out.buffer,
                *map(i32, (m, oh, ow, h, w, gc, og, kh * kw * gc, kp, ogp, kw)), *geometry,
                *map(i32, xs), *map(i32, os_), *tail]
        global_size = [ogp // TN * GEMM_LOCAL[0], -(-m // TM) * GEMM_LOCAL[1], group]
        return [b.launch(program, "conv_gemm", args, global_size, GEMM_LOCAL,
                         label=f"{self.node.name} conv_gemm")]
