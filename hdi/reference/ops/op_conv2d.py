"""Conv2DFusion: 2-D convolution (ordinary, grouped, depthwise with channel multiplier) with
optional bias and fused activation, computed on NHWC (semantics.md "Layout").

* Input x [N, H, W, C]; an input tensor tagged FORMAT_NCHW is [N, C, H, W] and its output is
  NCHW too (transposed views in and out). Weight [outC, kH, kW, C/group] whatever the input
  layout; bias [outC]. 2 or 3 inputs.
* stride and dilation default to [1, 1]; kernelSize, when given, must match the weight;
  group 0 (the proto3 default of an unset field) means 1. inChannel / outChannel, when
  non-zero, must match: inChannel may be C or C/group (upstream's Conv2D lowering sends the
  weight's last dimension).
* Padding (hdi.md 6.15): PAD takes padList [top, bottom, left, right]; SAME gives
  out = ceil(in / stride) with the total padding split and the odd cell at the bottom/right
  (TensorFlow); VALID pads nothing.
* Depthwise (group == C): output channel c*m + k comes from input channel c (TensorFlow
  order) — the grouped layout with one input channel per group.
* Float dtypes only. float16 (semantics.md "Float16 mode"), ordinary, grouped and
  depthwise alike: the taps accumulate in float32 (the input widened once into the padded
  float32 buffer), the bias and the activation apply to the float32 sum, and each output
  value is rounded to float16 once, at the end.

Computation: ordinary and grouped convolutions with a row stride of 1 and large enough
images are a sum of GEMMs over the kernel's rows: the padded input rows are copied once,
each output pixel's kW taps side by side ([rows*OW, kW*C/group], a kH-th of an im2col
matrix), and kernel row i is one GEMM of the rows from i*dH on with that row's
[kW*C/group, outC/group] weight, accumulated into the output (`blas.gemm`, BLAS's beta = 1).
Others copy whole windows (im2col) for one GEMM. Blocks of output rows keep the copies
under _COPY_BLOCK_BYTES (one workspace buffer reused from block to block and run to run).
A 1x1 convolution with stride 1 and no padding is one GEMM over the pixels. The
padded input is a buffer of the run's arena whose border is written once. Depthwise
convolution is one `einsum` over the kH*kW taps: with stride 1 along W each tap reads whole
contiguous rows (W*C values) of the padded input against the weight tiled along the row,
otherwise it reads the window view. The weight is laid out for that (one [kH*kW*C/group,
outC/group] matrix per group, or [kH, kW, C, m] and its row tiling for depthwise) at prepare
time when it is constant, at each run otherwise; the window geometry of the declared input
shape is worked out at prepare time too.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from nnrt.hdi.reference import arena, blas
from nnrt.hdi.reference.kernel import invalid, register
from nnrt.hdi.reference.ops._common import (
    Axis1D,
    add_bias,
    check_declared_shapes,
    from_nhwc,
    padded_nhwc,
    tiled_bias,
    to_nhwc,
    window_axis,
    windows_nhwc,
)
from nnrt.hdi.reference.ops._conv import ConvKernel
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import DYNAMIC, NodeSpec, Shape

log = logging.getLogger(__name__)

_COPY_BLOCK_BYTES = 16 << 20  # bound on the copied rows of one block (memory, cache)
# Where one GEMM per kernel row beats im2col (measured in benchmarks/models.py's ResNet:
# faster from 32x32 outputs of 64 channels; slower at 8x8, with 3 input channels, and with
# a row stride of 2, which is left to im2col): output pixels per image, kW*C/group.
_ROW_GEMM_MIN_PIXELS = 256
_ROW_GEMM_MIN_DEPTH = 32
_TILED_WEIGHT_BYTES = 8 << 20  # bound on a depthwise weight tiled along an output row


def _blocks(n: int, rows: int, halo: int, row_bytes: int) -> list[tuple[slice, int, int]]:
    """(images, first output row, output rows) blocks whose copied input rows (the output
    rows and the `halo` rows below them) stay under _COPY_BLOCK_BYTES: several whole images
    at once where they fit and need no halo, else rows of one image."""
    per_block = max(1, _COPY_BLOCK_BYTES // max(row_bytes, 1) - halo)
    if per_block >= rows and halo == 0:
        images = max(1, per_block // max(rows, 1))
        return [(slice(i, min(i + images, n)), 0, rows) for i in range(0, n, images)]
    return [(slice(i, i + 1), r, min(per_block, rows - r))
            for i in range(n) for r in range(0, rows, per_block)]


@register(na.NODE_TYPE_CONV2D_FUSION)
class Conv2DFusion(ConvKernel):
    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        x, weight = self.read_operands()
        if min(weight.shape) < 1:
            raise invalid(node, f"weight shape {list(weight.shape)} has an empty dimension")
        self.read_geometry(node.attrs)
        self.check_channels(node.attrs, to_nhwc(x.shape, self.nchw)[3])
        self.check_bias()
        self.depthwise = self.group > 1 and self.group_c == 1
        check_declared_shapes(self)
        self.weight = self._layout(weight.constant) if weight.is_constant else None
        self.bias = self.bias_rows = None
        if self.has_bias and node.inputs[2].is_constant:
            self.bias = node.inputs[2].constant.astype(self.work, copy=False)
            self.bias_rows = tiled_bias(self.bias)
        # The geometry of the declared input shape (and the depthwise weight tiled for it),
        # so that a run with that shape only looks it up.
        self.static = None
        if DYNAMIC not in x.shape:
            _, h, w, _ = to_nhwc(x.shape, self.nchw)
            ax_h, ax_w = self._axis(0, h), self._axis(1, w)
            tiled = None
            if self.depthwise and self.weight is not None:
                tiled = self._tiled(self.weight, ax_w.out)
            self.static = (tuple(x.shape), ax_h, ax_w, tiled)
        log.debug("Conv2DFusion node %d: %s kernel %s stride %s dilation %s group %d%s",
                  node.index, "NCHW" if self.nchw else "NHWC", self.kernel, self.stride,
                  self.dilation, self.group, " (depthwise)" if self.depthwise else "")

    def _layout(self, w: np.ndarray) -> np.ndarray:
        """Depthwise: [kH, kW, C, m]; otherwise [group, kH*kW*C/group, outC/group]."""
        kh, kw = self.kernel
        w = w.astype(self.work, copy=False)
        if self.depthwise:
            m = self.out_c // self.group
            return np.ascontiguousarray(w[..., 0].reshape(self.group, m, kh, kw)
                                        .transpose(2, 3, 0, 1))
        og = self.out_c // self.group
        grouped = w.reshape(self.group, og, kh * kw * self.group_c)
        return np.ascontiguousarray(grouped.transpose(0, 2, 1))

    def _axis(self, dim: int, size: int) -> Axis1D:
        """Window geometry along H (dim 0) or W (dim 1) for an input of that size."""
        return window_axis(self.node, size, self.kernel[dim], self.stride[dim],
                           self.dilation[dim], self.pad_mode, self.pads[dim])

    def infer_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        n, h, w = self.input_nhw(input_shapes)
        oh, ow = (DYNAMIC if size == DYNAMIC else self._axis(dim, size).out
                  for dim, size in ((0, h), (1, w)))
        return [from_nhwc((n, oh, ow, self.out_c), self.nchw)]

    def _tiled(self, weight: np.ndarray, ow: int) -> np.ndarray | None:
        """Depthwise weight [kH, kW, C, m] repeated along an output row: [kH, kW, OW*C, m]
        (None when a row of taps is read through the window view instead)."""
        kh, kw, c, m = weight.shape
        if self.stride[1] != 1 or kh * kw * ow * c * m * weight.itemsize > _TILED_WEIGHT_BYTES:
            return None
        tiled = np.broadcast_to(weight[:, :, None], (kh, kw, ow, c, m))
        return np.ascontiguousarray(tiled).reshape(kh, kw, ow * c, m)

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        x = inputs[0]
        weight = self.weight
        static = self.static
        if static is not None and x.shape == static[0] and weight is not None:
            _, ax_h, ax_w, tiled = static
        else:
            self.infer_shapes([x.shape, inputs[1].shape])
            if weight is None:
                weight = self._layout(inputs[1])
            _, h, w, _ = to_nhwc(x.shape, self.nchw)
            ax_h, ax_w = self._axis(0, h), self._axis(1, w)
            tiled = self._tiled(weight, ax_w.out) if self.depthwise else None
        if self.nchw:
            x = x.transpose(0, 2, 3, 1)
        n, h, w, _ = x.shape
        out = arena.output(self, 0, (n, ax_h.out, ax_w.out, self.out_c), self.work)
        pointwise = (self.kernel == (1, 1) and self.stride == (1, 1) and self.group == 1
                     and ax_h.pad_before == ax_h.pad_after == ax_w.pad_before == ax_w.pad_after
                     == 0)
        if pointwise:  # 1x1: no windows at all, one GEMM over every pixel
            flat = x.astype(self.work, copy=False).reshape(-1, self.in_c)
            np.matmul(flat, weight[0], out=out.reshape(-1, self.out_c))
        else:
            xp = padded_nhwc(self, x, ax_h, ax_w, 0, self.work)
            if self.depthwise:
                self._depthwise(xp, ax_h, ax_w, weight, tiled, out)
            else:
                self._kernel_rows(xp, ax_h, ax_w, weight, out)
        if self.has_bias:
            if self.bias is not None:
                add_bias(out, self.bias, self.bias_rows)
            else:
                out += inputs[2].astype(self.work, copy=False)
        return self.finish(out)

    def _kernel_rows(self, xp: np.ndarray, ax_h: Axis1D, ax_w: Axis1D, weight: np.ndarray,
                     out: np.ndarray) -> None:
        """Ordinary and grouped convolution of padded xp [N, Hp, Wp, C] into out [N, OH, OW,
        outC] (see the module's docstring): one GEMM per kernel row, or one over all of them
        (im2col) where that is faster."""
        n, oh, ow, _ = out.shape
        kh, kw = self.kernel
        (sh, sw), (dh, dw) = self.stride, self.dilation
        gc, og = self.group_c, self.out_c // self.group
        if (sh == 1 and kh > 1 and oh * ow >= _ROW_GEMM_MIN_PIXELS
                and kw * gc >= _ROW_GEMM_MIN_DEPTH):
            # Kernel row i of output row r reads input row r + i*dh: the rows are copied once
            # (each with its kW taps) and kernel row i multiplies them from row i*dh on.
            depth, halo, shifts = 1, (kh - 1) * dh, [i * dh for i in range(kh)]
            # windows one row high over every input row read: [N, OH + halo, OW, 1, kW, C]
            windows = windows_nhwc(xp, replace(ax_h, out=oh + halo), ax_w, (1, kw), (1, sw),
                                   (1, dw))
        else:  # every kernel row side by side: im2col, one GEMM
            depth, halo, shifts = kh, 0, [0]
            windows = windows_nhwc(xp, ax_h, ax_w, self.kernel, self.stride, self.dilation)
        k_copy = depth * kw * gc
        w_taps = weight.reshape(self.group, kh // depth, k_copy, og)
        blocks = _blocks(n, oh, halo, ow * k_copy * xp.itemsize)
        most = max((b[0].stop - b[0].start) * (b[2] + halo) for b in blocks) * ow
        buffer = arena.workspace("im2col", (most, k_copy), self.work)
        for images, r0, rows in blocks:
            nb, count = images.stop - images.start, rows + halo
            copied = buffer[:nb * count * ow]
            # contiguous: whole images, or rows of one image
            target = out[images, r0:r0 + rows].reshape(nb * rows * ow, self.out_c)
            for g in range(self.group):
                np.copyto(copied.reshape(nb, count, ow, depth, kw, gc),
                          windows[images, r0:r0 + count, ..., g * gc:(g + 1) * gc])
                block_out = target[:, g * og:(g + 1) * og]
                for i, shift in enumerate(shifts):  # several shifts: one image (a halo)
                    blas.gemm(copied[shift * ow:shift * ow + nb * rows * ow], w_taps[g, i],
                              block_out, accumulate=i > 0)

    def _depthwise(self, xp: np.ndarray, ax_h: Axis1D, ax_w: Axis1D, weight: np.ndarray,
                   tiled: np.ndarray | None, out: np.ndarray) -> None:
        n, oh, ow, _ = out.shape
        kh, kw, c, m = weight.shape
        if tiled is not None and xp.strides[3] == xp.itemsize \
                and xp.strides[2] == c * xp.itemsize:
            # Stride 1 along W: tap (i, j) of output row r reads the ow*c contiguous values
            # of padded row r*sh + i*dh from column j*dw on.
            sn, sh, sw, sc = xp.strides
            rows = np.lib.stride_tricks.as_strided(
                xp, shape=(n, oh, kh, kw, ow * c),
                strides=(sn, sh * self.stride[0], sh * self.dilation[0], sw * self.dilation[1],
                         sc), writeable=False)
            if m == 1:
                np.einsum("nhijx,ijx->nhx", rows, tiled[..., 0], out=out.reshape(n, oh, ow * c))
            else:
                np.einsum("nhijx,ijxk->nhxk", rows, tiled, out=out.reshape(n, oh, ow * c, m))
            return
        win = windows_nhwc(xp, ax_h, ax_w, self.kernel, self.stride, self.dilation)
        if m == 1:
            np.einsum("nhwijc,ijc->nhwc", win, weight[..., 0], out=out)
        else:
            np.einsum("nhwijc,ijck->nhwck", win, weight, out=out.reshape(n, oh, ow, c, m))
