"""MaxPoolFusion and AvgPoolFusion: 2-D max / average pooling with fused activation.

* Layout (semantics.md): the input tensor's tag and the `format` attribute name the real
  layout, NHWC or NCHW; they must agree when the tensor is tagged (FORMAT_NONE defers to the
  attribute). The output has the input's layout.
* kernelSize [kH, kW] is required (unless global); strides default to [1, 1].
* Padding (hdi.md 6.15): PAD takes `pad` [top, bottom, left, right], each smaller than the
  window along its axis (a window made only of padding has no value); SAME gives
  out = ceil(in / stride), the odd padding cell at the bottom/right; VALID pads nothing.
* roundMode FLOOR / CEIL rounds (in + pads - k) / stride + 1 for PAD and VALID; in CEIL mode
  the windows running past the input are kept, except one that would start past the input
  and its leading padding (Caffe/PyTorch/ONNX), so every window holds a real cell.
* Max pooling pads with -inf (the dtype's minimum for integers): padding never wins.
  Average pooling divides each window's sum by the number of real (unpadded) cells, also
  for the CEIL windows running past the input.
* global: the whole H x W plane, kernel / strides / pads ignored; the output is [N, 1, 1, C]
  (or [N, C, 1, 1] for NCHW).
* Max pooling takes float and integer dtypes, average pooling float dtypes (float16
  summed in float32).

Computation is separable: a pass along W then one along H, each a loop over the kernel
taps of strided slices covering every output at once (kW + kH vectorised steps), into
buffers of the run's arena (the padded input, whose border is written once, the row pass
and the output); the window geometry of the declared input shape is worked out at prepare
time.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from nnrt.drivers.cpu import arena
from nnrt.drivers.cpu.activations import apply_activation, fused_activation
from nnrt.drivers.cpu.kernel import Kernel, invalid, register
from nnrt.drivers.cpu.ops._common import (
    FLOAT_DTYPES,
    NUMERIC_DTYPES,
    Axis1D,
    bad_shape,
    cast,
    check_declared_shapes,
    computed_dtypes,
    explicit_pads,
    from_nhwc,
    padded_nhwc,
    pair_attr,
    spatial_layout,
    to_nhwc,
    window_axis,
)
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from nnrt.server.graph import DYNAMIC, NodeSpec, Shape


def _real_cells(axis: Axis1D, size: int, kernel: int, stride: int) -> np.ndarray:
    """Per output position along one axis: how many window cells lie inside the input."""
    start = np.arange(axis.out) * stride - axis.pad_before
    return np.minimum(start + kernel, size) - np.maximum(start, 0)


class _Pool(Kernel):
    reduce: np.ufunc  # np.maximum or np.add
    dtypes: frozenset[np.dtype]

    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        self.expect_counts(1)
        self.dtype, self.work = computed_dtypes(node, self.dtypes, "input")
        self.activation = fused_activation(node, self.dtype)
        attrs = node.attrs
        if len(node.inputs[0].shape) != 4:
            raise invalid(node, f"input must be 4-D, has shape {list(node.inputs[0].shape)}")
        self.nchw = spatial_layout(node, int(attrs.format))
        self.global_ = bool(getattr(attrs, "global"))
        self.ceil = int(attrs.roundMode) == ht.ROUND_MODE_CEIL
        if int(attrs.roundMode) not in (ht.ROUND_MODE_FLOOR, ht.ROUND_MODE_CEIL):
            raise invalid(node, f"roundMode {attrs.roundMode} is not FLOOR (0) or CEIL (1)")
        self.pad_mode = int(attrs.padMode)
        if self.global_:  # kernelSize, strides and pad are ignored; padMode is still an enum
            explicit_pads(node, (), self.pad_mode, "pad")
        else:
            pads = explicit_pads(node, attrs.pad, self.pad_mode, "pad")
            self.kernel = pair_attr(node, attrs.kernelSize, "kernelSize", None)
            self.strides = pair_attr(node, attrs.strides, "strides", (1, 1))
            self.pads = (pads[:2], pads[2:])  # (top, bottom), (left, right)
            if max(pads[:2]) >= self.kernel[0] or max(pads[2:]) >= self.kernel[1]:
                raise invalid(node, f"pad {list(pads)} must be smaller than kernelSize "
                                    f"{list(self.kernel)}: a window would hold only padding")
        check_declared_shapes(self)
        shape = tuple(node.inputs[0].shape)
        self.static = None  # (input shape, geometry along H and W) of the declared shape
        if not self.global_ and DYNAMIC not in shape:
            _, h, w, _ = to_nhwc(shape, self.nchw)
            self.static = (shape, self._axis(0, h), self._axis(1, w))

    def _axis(self, dim: int, size: int) -> Axis1D:
        """Window geometry along H (dim 0) or W (dim 1) for an input of that size."""
        return window_axis(self.node, size, self.kernel[dim], self.strides[dim], 1,
                           self.pad_mode, self.pads[dim], self.ceil)

    def infer_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        x = tuple(input_shapes[0])
        if len(x) != 4:
            raise bad_shape(self.node, f"input must be 4-D, has shape {list(x)}")
        n, h, w, c = to_nhwc(x, self.nchw)
        if self.global_:
            return [from_nhwc((n, 1, 1, c), self.nchw)]
        oh, ow = (DYNAMIC if size == DYNAMIC else self._axis(dim, size).out
                  for dim, size in ((0, h), (1, w)))
        return [from_nhwc((n, oh, ow, c), self.nchw)]

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        x = inputs[0]
        static = self.static
        geometry = None
        if static is not None and x.shape == static[0]:
            geometry = static[1:]
        else:
            self.infer_shapes([x.shape])
        if self.nchw:
            x = x.transpose(0, 2, 3, 1)
        out = self._global(x) if self.global_ else self._windows(x, geometry)
        out = apply_activation(out, self.activation, inplace=True)
        if self.nchw:
            out = out.transpose(0, 3, 1, 2)
        return [cast(out, self.dtype)]

    def _windows(self, x: np.ndarray, geometry: tuple[Axis1D, Axis1D] | None) -> np.ndarray:
        n, h, w, c = x.shape
        ax_h, ax_w = geometry or (self._axis(0, h), self._axis(1, w))
        xp = padded_nhwc(self, x, ax_h, ax_w, self.pad_value(), self.work)
        (kh, kw), (sh, sw) = self.kernel, self.strides
        # Along W: rows[:, r, o] = reduce over j of xp[:, r, o*sw + j].
        span_w = (ax_w.out - 1) * sw + 1
        rows, _ = arena.scratch(self, "rows", (n, xp.shape[1], ax_w.out, c), self.work)
        np.copyto(rows, xp[:, :, 0:span_w:sw])  # accumulated in place below
        for j in range(1, kw):
            self.reduce(rows, xp[:, :, j:j + span_w:sw], out=rows)
        # Along H, on the row results.
        span_h = (ax_h.out - 1) * sh + 1
        out = arena.output(self, 0, (n, ax_h.out, ax_w.out, c), self.work)
        np.copyto(out, rows[:, 0:span_h:sh])
        for i in range(1, kh):
            self.reduce(out, rows[:, i:i + span_h:sh], out=out)
        return self.finish(out, ax_h, ax_w, h, w)

    def pad_value(self) -> float | int:
        raise NotImplementedError

    def finish(self, window_result: np.ndarray, ax_h: Axis1D, ax_w: Axis1D, h: int,
               w: int) -> np.ndarray:
        return window_result

    def _global(self, x: np.ndarray) -> np.ndarray:
        raise NotImplementedError


@register(na.NODE_TYPE_MAX_POOL_FUSION)
class MaxPoolFusion(_Pool):
    reduce = np.maximum
    dtypes = NUMERIC_DTYPES

    def pad_value(self) -> float | int:
        if np.issubdtype(self.work, np.integer):
            return np.iinfo(self.work).min
        return -np.inf

    def _global(self, x: np.ndarray) -> np.ndarray:
        return x.max(axis=(1, 2), keepdims=True).astype(self.work, copy=False)


@register(na.NODE_TYPE_AVGPOOL_FUSION)
class AvgPoolFusion(_Pool):
    reduce = np.add
    dtypes = FLOAT_DTYPES

    def pad_value(self) -> float | int:
        return 0

    def finish(self, window_result: np.ndarray, ax_h: Axis1D, ax_w: Axis1D, h: int,
               w: int) -> np.ndarray:
        cells = np.outer(_real_cells(ax_h, h, self.kernel[0], self.strides[0]),
                         _real_cells(ax_w, w, self.kernel[1], self.strides[1]))
        window_result /= cells[None, :, :, None].astype(self.work)
        return window_result

    def _global(self, x: np.ndarray) -> np.ndarray:
        return x.mean(axis=(1, 2), keepdims=True, dtype=self.work)
