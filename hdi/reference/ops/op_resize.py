"""Resize: 2-D resampling of x [N, H, W, C] (semantics.md: NHWC; an input tagged FORMAT_NCHW
is [N, C, H, W]) to [N, newHeight, newWidth, C] by nearest, (bi)linear or (bi)cubic
interpolation, separably along H then W.

Coordinates (hdi.md 6.10), output index o -> input coordinate x for lengths L_in, L_out:
ASYMMETRIC x = o * L_in / L_out; ALIGN_CORNERS x = o * (L_in - 1) / (L_out - 1), 0 when
L_out == 1; HALF_PIXEL x = (o + 0.5) * L_in / L_out - 0.5 when L_out > 1, else 0 (ONNX's
"pytorch_half_pixel").

Methods (hdi.md 6.9), onnx Resize's definitions:

* NEAREST: index = round(x) by nearestMode (hdi.md 6.11), clamped to [0, L_in - 1]:
  NORMAL rounds halves away from zero (C's round()), ROUND_HALF_DOWN toward -inf
  (ceil(x - 0.5)), ROUND_HALF_UP toward +inf (floor(x + 0.5)), FLOOR, CEIL.
* LINEAR: samples floor(x) and floor(x) + 1 weighted 1 - t and t, t = x - floor(x).
* CUBIC: samples floor(x) - 1 .. floor(x) + 2 with Keys' kernel of coefficient A =
  cubicCoeff. cubicCoeff 0.0 (proto3's unset, and the C API's fixed value) takes the seed
  documents' defaults: -0.5 with HALF_PIXEL, -0.75 otherwise.
* Samples outside the input take the nearest edge value (onnx), unless excludeOutside is
  1: their weights are then 0 and the others renormalised to sum 1. excludeOutside must be
  0 or 1.
* extrapolationValue is accepted and not used: it only concerns ONNX's
  tf_crop_and_resize, which HDI does not have; with the three transforms above no sample
  is ever extrapolated (the edge rule covers the half cell past the border).
* preserveAspectRatio: one scale s = min(newHeight / H, newWidth / W) for both axes and an
  output of round(s * H) x round(s * W) (ties to even, at least 1; TensorFlow's rule); the
  coordinates then use these output lengths.
* newHeight and newWidth must be >= 1 (a node without them has no output size: invalid);
  one input only (the size does not arrive as a tensor in HDI).
* dtypes: NEAREST moves values, any dtype (bool included); LINEAR and CUBIC take float and
  integer types, floats computed in float32 (float64 for float64), integers in float64 and
  rounded to nearest even, saturated to the type's range. ResizeMethod UNKNOWN (-1) and any
  other undefined enum value are invalid nodes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from nnrt.hdi.reference.kernel import Kernel, invalid, register, unsupported
from nnrt.hdi.reference.ops._common import (
    FLOAT_DTYPES,
    NUMERIC_DTYPES,
    bad_shape,
    check_declared_shapes,
    compute_dtype,
    require_output_dtype,
    require_unquantised,
    spatial_layout,
)
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import DYNAMIC, NodeSpec, Shape

_METHODS = {ht.RESIZE_METHOD_LINEAR, ht.RESIZE_METHOD_NEAREST, ht.RESIZE_METHOD_CUBIC}
_TRANSFORMS = {ht.COORDINATE_TRANSFORM_MODE_ASYMMETRIC, ht.COORDINATE_TRANSFORM_MODE_ALIGN_CORNERS,
               ht.COORDINATE_TRANSFORM_MODE_HALF_PIXEL}
_NEAREST = {ht.NEAREST_MODE_NORMAL, ht.NEAREST_MODE_ROUND_HALF_DOWN,
            ht.NEAREST_MODE_ROUND_HALF_UP, ht.NEAREST_MODE_FLOOR, ht.NEAREST_MODE_CEIL}


def source_coordinates(transform: int, size_in: int, size_out: int) -> np.ndarray:
    """Input coordinate of every output index (hdi.md 6.10), float64."""
    o = np.arange(size_out, dtype=np.float64)
    if transform == ht.COORDINATE_TRANSFORM_MODE_ASYMMETRIC:
        return o * size_in / size_out
    if transform == ht.COORDINATE_TRANSFORM_MODE_ALIGN_CORNERS:
        return o * (size_in - 1) / (size_out - 1) if size_out != 1 else np.zeros(1)
    if size_out > 1:  # HALF_PIXEL
        return (o + 0.5) * size_in / size_out - 0.5
    return np.zeros(size_out)


def round_nearest(x: np.ndarray, mode: int) -> np.ndarray:
    if mode == ht.NEAREST_MODE_FLOOR:
        return np.floor(x)
    if mode == ht.NEAREST_MODE_CEIL:
        return np.ceil(x)
    if mode == ht.NEAREST_MODE_ROUND_HALF_DOWN:
        return np.ceil(x - 0.5)
    if mode == ht.NEAREST_MODE_ROUND_HALF_UP:
        return np.floor(x + 0.5)
    return np.where(x >= 0, np.floor(x + 0.5), np.ceil(x - 0.5))  # NORMAL: half away from 0


def cubic_kernel(d: np.ndarray, a: float) -> np.ndarray:
    """Keys' cubic convolution kernel of coefficient a at distances d."""
    d = np.abs(d)
    near = ((a + 2) * d - (a + 3)) * d * d + 1
    far = ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    return np.where(d <= 1, near, np.where(d < 2, far, 0.0))


@register(na.NODE_TYPE_RESIZE)
class Resize(Kernel):
    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        self.expect_counts(1)
        require_unquantised(node)
        attrs = node.attrs
        self.dtype = node.inputs[0].dtype
        require_output_dtype(node, self.dtype)
        self.method = int(attrs.method)
        if self.method not in _METHODS:
            raise invalid(node, f"method {self.method} is not LINEAR (0), NEAREST (1) or "
                                f"CUBIC (2)")
        if self.method != ht.RESIZE_METHOD_NEAREST and self.dtype not in NUMERIC_DTYPES:
            raise unsupported(node, f"interpolating {self.dtype} values")
        self.transform = int(attrs.coordinateTransformMode)
        if self.transform not in _TRANSFORMS:
            raise invalid(node, f"coordinateTransformMode {self.transform} is not 0, 1 or 2")
        self.nearest_mode = int(attrs.nearestMode)
        if self.nearest_mode not in _NEAREST:
            raise invalid(node, f"nearestMode {self.nearest_mode} is not 0..4")
        self.exclude = int(attrs.excludeOutside)
        if self.exclude not in (0, 1):
            raise invalid(node, f"excludeOutside {self.exclude} is not 0 or 1")
        a = float(attrs.cubicCoeff)
        if not math.isfinite(a) or not math.isfinite(float(attrs.extrapolationValue)):
            raise invalid(node, "cubicCoeff and extrapolationValue must be finite")
        if a == 0.0:
            a = -0.5 if self.transform == ht.COORDINATE_TRANSFORM_MODE_HALF_PIXEL else -0.75
        self.cubic_a = a
        self.size = (int(attrs.newHeight), int(attrs.newWidth))
        if min(self.size) < 1:
            raise invalid(node, f"newHeight/newWidth {list(self.size)} must be >= 1")
        self.preserve = bool(attrs.preserveAspectRatio)
        if len(node.inputs[0].shape) != 4:
            raise invalid(node, f"input must be 4-D, has shape {list(node.inputs[0].shape)}")
        self.nchw = spatial_layout(node)
        self.axes = (2, 3) if self.nchw else (1, 2)
        self.work = (np.dtype(np.float64) if self.dtype not in FLOAT_DTYPES
                     else compute_dtype(self.dtype))
        check_declared_shapes(self)

    def _out_size(self, h: int, w: int) -> tuple[int, int]:
        if not self.preserve:
            return self.size
        if DYNAMIC in (h, w):
            return DYNAMIC, DYNAMIC
        scale = min(self.size[0] / h, self.size[1] / w)
        return max(1, int(np.rint(scale * h))), max(1, int(np.rint(scale * w)))

    def infer_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        x = list(input_shapes[0])
        if len(x) != 4:
            raise bad_shape(self.node, f"input must be 4-D, has shape {x}")
        if 0 in (x[self.axes[0]], x[self.axes[1]]):
            raise bad_shape(self.node, f"cannot resize an empty plane {x}")
        out = self._out_size(x[self.axes[0]], x[self.axes[1]])
        x[self.axes[0]], x[self.axes[1]] = out
        return [tuple(x)]

    def _taps(self, size_in: int, size_out: int) -> tuple[np.ndarray, np.ndarray | None]:
        """(indices [K, out], weights [K, out] or None for nearest) along one axis."""
        x = source_coordinates(self.transform, size_in, size_out)
        if self.method == ht.RESIZE_METHOD_NEAREST:
            idx = np.clip(round_nearest(x, self.nearest_mode), 0, size_in - 1)
            return idx.astype(np.intp)[None], None
        base = np.floor(x)
        t = x - base
        if self.method == ht.RESIZE_METHOD_LINEAR:
            offsets = np.arange(2)[:, None]
            weights = np.stack([1 - t, t])
        else:
            offsets = np.arange(-1, 3)[:, None]
            weights = cubic_kernel(t[None] - offsets, self.cubic_a)
        idx = base[None].astype(np.intp) + offsets
        if self.exclude:
            weights = np.where((idx >= 0) & (idx < size_in), weights, 0.0)
            weights /= weights.sum(axis=0, keepdims=True)
        return np.clip(idx, 0, size_in - 1), weights

    def _along(self, x: np.ndarray, axis: int, size_out: int) -> np.ndarray:
        idx, weights = self._taps(x.shape[axis], size_out)
        if weights is None:
            return np.take(x, idx[0], axis=axis)
        shape = [1] * x.ndim
        shape[axis] = size_out
        out = np.zeros(x.shape[:axis] + (size_out,) + x.shape[axis + 1:], dtype=self.work)
        for k in range(idx.shape[0]):  # 2 or 4 taps; every output position at once
            out += np.take(x, idx[k], axis=axis) * weights[k].astype(self.work).reshape(shape)
        return out

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        x = inputs[0]
        (shape,) = self.infer_shapes([x.shape])
        if self.method != ht.RESIZE_METHOD_NEAREST:
            x = x.astype(self.work, copy=False)
        for axis in self.axes:
            x = self._along(x, axis, shape[axis])
        if self.dtype in FLOAT_DTYPES or self.method == ht.RESIZE_METHOD_NEAREST:
            return [x.astype(self.dtype, copy=False)]
        info = np.iinfo(self.dtype)
        return [np.clip(np.rint(x), info.min, info.max).astype(self.dtype)]
