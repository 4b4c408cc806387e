"""Conv2dTransposeFusion: 2-D transposed convolution (deconvolution), ordinary or grouped,
with optional bias and fused activation, computed on NHWC (semantics.md "Layout").

Every input pixel x[n, r, c, :] scatters x · w[o, i, j, :] into output cell
(r*strideH + i*dilationH - padTop, c*strideW + j*dilationW - padLeft) of channel o.

* Input x [N, H, W, C] (an input tagged FORMAT_NCHW is [N, C, H, W], its output NCHW too);
  weight [outC, kH, kW, C/group] (hdi_ops.json, TFLite's OHWI: outC are the *output*
  channels); bias [outC]. 2 or 3 inputs. Grouped: output channels [g*outC/group, ...) come
  from input channels [g*C/group, ...). Float dtypes. float16
  (semantics.md "Float16 mode"): products and their scatter-add accumulate in float32, the
  bias and the activation apply to the float32 sums, each output value is rounded to
  float16 once, at the end.
* stride and dilation default to [1, 1]; kernelSize, when given, must match the weight;
  group 0 (proto3's unset) means 1; inChannel / outChannel, when non-zero, must match
  (inChannel may be C or C/group: the C API lowering sends the weight's last dimension).
* Output size per spatial axis, with k' = (k - 1) * dilation + 1 and full = (in - 1) *
  stride + k' (every cell a kernel tap reaches):
  - PAD: out = full - padBefore - padAfter + outputPadding; the output starts at padBefore.
  - SAME: out = in * stride + outputPadding (TensorFlow); the total padding max(full - in *
    stride, 0) is split as for the forward convolution, the odd cell after (bottom/right),
    and the output starts after the leading half.
  - VALID: out = full + outputPadding, nothing cropped.
  outputPaddings [h, w] (empty = [0, 0]) add cells after the last one reached by PAD/SAME
  cropping (zeros before bias and activation); each must be >= 0 and smaller than the
  stride or the dilation on its axis (PyTorch's rule, capi_ops.json), otherwise invalid.
  An output size below 1 is an invalid shape.

Computation: one GEMM per group gives every input pixel's contribution to every kernel tap,
[N, H, W, kH, kW, outC]; a loop over the kH*kW taps adds each tap's plane into a strided view
of the output canvas (col2im), then the canvas is cropped.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from nnrt.hdi.reference.kernel import invalid, register
from nnrt.hdi.reference.ops._common import bad_shape, check_declared_shapes, from_nhwc, to_nhwc
from nnrt.hdi.reference.ops._conv import ConvKernel
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import DYNAMIC, NodeSpec, Shape

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Span:
    """One spatial axis: the output size, where it starts on the canvas of every cell a
    tap reaches, and the canvas size (at least start + out)."""

    out: int
    start: int
    canvas: int


@register(na.NODE_TYPE_CONV2D_TRANSPOSE_FUSION)
class Conv2dTransposeFusion(ConvKernel):
    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        x, weight = self.read_operands()
        if min(self.kernel) < 1:
            raise invalid(node, f"weight shape {list(weight.shape)} has an empty kernel")
        self.read_geometry(node.attrs)
        self.out_pad = self._output_paddings(list(node.attrs.outputPaddings))
        self.check_channels(node.attrs, to_nhwc(x.shape, self.nchw)[3])
        self.check_bias()
        check_declared_shapes(self)
        self.weight = self._layout(weight.constant) if weight.is_constant else None
        self.bias = None
        if self.has_bias and node.inputs[2].is_constant:
            self.bias = node.inputs[2].constant.astype(self.work, copy=False)
        log.debug("Conv2dTransposeFusion node %d: kernel %s stride %s dilation %s group %d",
                  node.index, self.kernel, self.stride, self.dilation, self.group)

    def _output_paddings(self, values: list[int]) -> tuple[int, int]:
        if not values:
            return 0, 0
        if len(values) != 2:
            raise invalid(self.node, f"outputPaddings must have 2 values [h, w], has {values}")
        for v, s, d in zip(values, self.stride, self.dilation):
            if not 0 <= v < max(s, d):
                raise invalid(self.node, f"outputPaddings {values} must be >= 0 and smaller "
                                         f"than the stride or the dilation")
        return int(values[0]), int(values[1])

    def _layout(self, w: np.ndarray) -> np.ndarray:
        """[group, C/group, kH*kW*outC/group]: column (i, j, o) of group g is tap (i, j) of
        output channel g*outC/group + o."""
        kh, kw = self.kernel
        og = self.out_c // self.group
        w = w.astype(self.work, copy=False).reshape(self.group, og, kh, kw, self.group_c)
        return np.ascontiguousarray(w.transpose(0, 4, 2, 3, 1).reshape(self.group,
                                                                      self.group_c, -1))

    def _span(self, axis: int, size: int) -> Span:
        k_eff = (self.kernel[axis] - 1) * self.dilation[axis] + 1
        stride = self.stride[axis]
        full = (size - 1) * stride + k_eff
        extra = self.out_pad[axis]
        if self.pad_mode == ht.PAD_MODE_SAME:
            base = size * stride
            start = max(full - base, 0) // 2
        elif self.pad_mode == ht.PAD_MODE_VALID:
            base, start = full, 0
        else:
            before, after = self.pads[axis]
            base, start = full - before - after, before
        out = base + extra
        if out < 1:
            raise bad_shape(self.node, f"output size {out} along {'HW'[axis]} for input {size}")
        return Span(out, start, max(full, start + out))

    def infer_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        n, h, w = self.input_nhw(input_shapes)
        oh = DYNAMIC if h == DYNAMIC else self._span(0, h).out
        ow = DYNAMIC if w == DYNAMIC else self._span(1, w).out
        return [from_nhwc((n, oh, ow, self.out_c), self.nchw)]

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        x = inputs[0]
        self.infer_shapes([x.shape, inputs[1].shape])
        weight = self.weight if self.weight is not None else self._layout(inputs[1])
        if self.nchw:
            x = x.transpose(0, 2, 3, 1)
        x = x.astype(self.work, copy=False)
        n, h, w, _ = x.shape
        span_h, span_w = self._span(0, h), self._span(1, w)
        (kh, kw), (sh, sw), (dh, dw) = self.kernel, self.stride, self.dilation
        og = self.out_c // self.group
        # Every pixel's contribution to every tap: [N, H, W, kH, kW, outC].
        pixels = x.reshape(n * h * w, self.group, self.group_c).transpose(1, 0, 2)
        taps = np.matmul(pixels, weight)  # [group, N*H*W, kH*kW*og]
        taps = taps.reshape(self.group, n, h, w, kh, kw, og).transpose(1, 2, 3, 4, 5, 0, 6)
        taps = taps.reshape(n, h, w, kh, kw, self.out_c)
        canvas = np.zeros((n, span_h.canvas, span_w.canvas, self.out_c), dtype=self.work)
        for i in range(kh):  # loop over kernel taps; every pixel at once inside
            rows = slice(i * dh, i * dh + (h - 1) * sh + 1, sh)
            for j in range(kw):
                cols = slice(j * dw, j * dw + (w - 1) * sw + 1, sw)
                canvas[:, rows, cols, :] += taps[:, :, :, i, j, :]
        out = canvas[:, span_h.start:span_h.start + span_h.out,
                     span_w.start:span_w.start + span_w.out, :]
        if self.has_bias:
            bias = self.bias if self.bias is not None else inputs[2].astype(self.work, copy=False)
            out += bias
        return self.finish(out)
