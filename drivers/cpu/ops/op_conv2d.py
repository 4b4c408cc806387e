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
* Float dtypes only; float16 is computed in float32 and rounded once.

Computation: the windows are a strided view [N, OH, OW, kH, kW, C] of the zero-padded input.
Ordinary and grouped convolutions copy blocks of it into im2col matrices (at most
_IM2COL_BLOCK_BYTES at a time) for one GEMM per block and group; depthwise accumulates the
kH*kW taps, each a broadcast multiply over every pixel. The weight is laid out for that
(one [kH*kW*C/group, outC/group] matrix per group, or [kH, kW, C, m] for depthwise) at
prepare time when it is constant, at each run otherwise.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence

import numpy as np

from nnrt.drivers.cpu.activations import apply_activation, fused_activation
from nnrt.drivers.cpu.kernel import Kernel, invalid, register, unsupported
from nnrt.drivers.cpu.ops._common import (
    FLOAT_DTYPES,
    Axis1D,
    bad_shape,
    cast,
    check_declared_shapes,
    common_dtype,
    compute_dtype,
    explicit_pads,
    from_nhwc,
    pad_nhwc,
    pair_attr,
    require_unquantised,
    spatial_layout,
    to_nhwc,
    window_axis,
    windows_nhwc,
)
from nnrt.protos import node_attrs_pb2 as na
from nnrt.server.graph import DYNAMIC, NodeSpec, Shape

log = logging.getLogger(__name__)

_IM2COL_BLOCK_BYTES = 16 << 20  # bound on one im2col block (memory, cache friendliness)


def _blocks(n: int, rows: int, row_bytes: int, limit: int) -> Iterator[tuple[slice, slice]]:
    """(image slice, output-row slice) blocks whose im2col matrix stays under `limit` bytes."""
    rows_per_block = max(1, limit // max(row_bytes, 1))
    if rows_per_block >= rows:
        images = max(1, rows_per_block // max(rows, 1))
        for i in range(0, n, images):
            yield slice(i, min(i + images, n)), slice(0, rows)
    else:
        for i in range(n):
            for r in range(0, rows, rows_per_block):
                yield slice(i, i + 1), slice(r, min(r + rows_per_block, rows))


@register(na.NODE_TYPE_CONV2D_FUSION)
class Conv2DFusion(Kernel):
    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        self.expect_counts(range(2, 4))
        require_unquantised(node)
        self.dtype = common_dtype(node, node.inputs, FLOAT_DTYPES, "inputs")
        self.work = compute_dtype(self.dtype)
        self.activation = fused_activation(node, self.dtype)
        x, weight = node.inputs[0], node.inputs[1]
        if len(x.shape) != 4:
            raise invalid(node, f"input must be 4-D, has shape {list(x.shape)}")
        if len(weight.shape) != 4:
            raise invalid(node, f"weight must be 4-D [outC, kH, kW, C/group], has shape "
                                f"{list(weight.shape)}")
        if DYNAMIC in weight.shape:
            raise unsupported(node, "a weight of dynamic shape")
        if min(weight.shape) < 1:
            raise invalid(node, f"weight shape {list(weight.shape)} has an empty dimension")
        self.nchw = spatial_layout(node)
        self.out_c, kh, kw, self.group_c = weight.shape
        self.kernel = (kh, kw)
        self._read_geometry(node.attrs)
        self._check_channels(node.attrs, to_nhwc(x.shape, self.nchw)[3])
        self.has_bias = len(node.inputs) == 3
        if self.has_bias and node.inputs[2].shape != (self.out_c,):
            raise invalid(node, f"bias shape {list(node.inputs[2].shape)} is not [{self.out_c}]")
        self.depthwise = self.group > 1 and self.group_c == 1
        check_declared_shapes(self)
        self.weight = self._layout(weight.constant) if weight.is_constant else None
        self.bias = None
        if self.has_bias and node.inputs[2].is_constant:
            self.bias = node.inputs[2].constant.astype(self.work, copy=False)
        log.debug("Conv2DFusion node %d: %s kernel %s stride %s dilation %s group %d%s",
                  node.index, "NCHW" if self.nchw else "NHWC", self.kernel, self.stride,
                  self.dilation, self.group, " (depthwise)" if self.depthwise else "")

    def _read_geometry(self, attrs: na.Conv2DFusion) -> None:
        node = self.node
        if list(attrs.kernelSize) and tuple(attrs.kernelSize) != self.kernel:
            raise invalid(node, f"kernelSize {list(attrs.kernelSize)} does not match the "
                                f"weight's {list(self.kernel)}")
        self.stride = pair_attr(node, attrs.stride, "stride", (1, 1))
        self.dilation = pair_attr(node, attrs.dilation, "dilation", (1, 1))
        self.pad_mode = int(attrs.padMode)
        pads = explicit_pads(node, attrs.padList, self.pad_mode, "padList")
        self.pads = (pads[:2], pads[2:])  # (top, bottom), (left, right)

    def _check_channels(self, attrs: na.Conv2DFusion, declared_c: int) -> None:
        node = self.node
        self.group = int(attrs.group) or 1  # 0: the field was not set
        if self.group < 1:
            raise invalid(node, f"group {attrs.group} must be >= 1")
        self.in_c = self.group * self.group_c
        if declared_c not in (DYNAMIC, self.in_c):
            raise invalid(node, f"input has {declared_c} channels; weight and group {self.group} "
                                f"need {self.in_c}")
        if self.out_c < 1 or self.out_c % self.group:
            raise invalid(node, f"outChannel {self.out_c} is not a positive multiple of group "
                                f"{self.group}")
        if attrs.inChannel and attrs.inChannel not in (self.in_c, self.group_c):
            raise invalid(node, f"inChannel {attrs.inChannel} does not match the input's "
                                f"{self.in_c} channels")
        if attrs.outChannel and attrs.outChannel != self.out_c:
            raise invalid(node, f"outChannel {attrs.outChannel} does not match the weight's "
                                f"{self.out_c}")

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
        x = tuple(input_shapes[0])
        if len(x) != 4:
            raise bad_shape(self.node, f"input must be 4-D, has shape {list(x)}")
        if tuple(input_shapes[1]) != (self.out_c, *self.kernel, self.group_c):
            raise bad_shape(self.node, f"weight shape {list(input_shapes[1])} changed")
        n, h, w, c = to_nhwc(x, self.nchw)
        if c not in (DYNAMIC, self.in_c):
            raise bad_shape(self.node, f"input has {c} channels, the weight needs {self.in_c}")
        oh, ow = (DYNAMIC if size == DYNAMIC else self._axis(dim, size).out
                  for dim, size in ((0, h), (1, w)))
        return [from_nhwc((n, oh, ow, self.out_c), self.nchw)]

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        x = inputs[0]
        self.infer_shapes([x.shape, inputs[1].shape])
        weight = self.weight if self.weight is not None else self._layout(inputs[1])
        if self.nchw:
            x = x.transpose(0, 2, 3, 1)
        x = x.astype(self.work, copy=False)
        n, h, w, _ = x.shape
        ax_h, ax_w = self._axis(0, h), self._axis(1, w)
        pointwise = (self.kernel == (1, 1) and self.stride == (1, 1) and self.group == 1
                     and ax_h.pad_before == ax_h.pad_after == ax_w.pad_before == ax_w.pad_after
                     == 0)
        if pointwise:  # 1x1: no windows at all, one GEMM over every pixel
            out = (x.reshape(-1, self.in_c) @ weight[0]).reshape(n, h, w, self.out_c)
        else:
            xp = pad_nhwc(x, ax_h, ax_w, 0)
            win = windows_nhwc(xp, ax_h, ax_w, self.kernel, self.stride, self.dilation)
            out = self._depthwise(win, weight) if self.depthwise else self._im2col(win, weight)
        if self.has_bias:
            bias = self.bias if self.bias is not None else inputs[2].astype(self.work, copy=False)
            out += bias
        out = apply_activation(out, self.activation, inplace=True)
        if self.nchw:
            out = out.transpose(0, 3, 1, 2)
        return [cast(out, self.dtype)]

    def _im2col(self, win: np.ndarray, weight: np.ndarray) -> np.ndarray:
        n, oh, ow, kh, kw, _ = win.shape
        og = self.out_c // self.group
        k = kh * kw * self.group_c
        out = np.empty((n, oh, ow, self.out_c), dtype=self.work)
        row_bytes = ow * k * win.itemsize
        for images, rows in _blocks(n, oh, row_bytes, _IM2COL_BLOCK_BYTES):
            block = win[images, rows]
            shape = block.shape[:3]
            for g in range(self.group):
                cols = block[..., g * self.group_c:(g + 1) * self.group_c].reshape(-1, k)
                out[images, rows, :, g * og:(g + 1) * og] = (cols @ weight[g]).reshape(*shape, og)
        return out

    def _depthwise(self, win: np.ndarray, weight: np.ndarray) -> np.ndarray:
        n, oh, ow, kh, kw, c = win.shape
        m = weight.shape[3]
        out = np.zeros((n, oh, ow, c, m), dtype=self.work)
        tap = np.empty_like(out)
        for i in range(kh):  # loop over kernel taps; every pixel at once inside
            for j in range(kw):
                np.multiply(win[:, :, :, i, j, :, None], weight[i, j], out=tap)
                out += tap
        return out.reshape(n, oh, ow, c * m)
