"""MaxPoolFusion and AvgPoolFusion as ONNX MaxPool / AveragePool (NCHW) with the fused
activation.

Geometry: with a static image size the padding the windows really read is computed as the
numpy kernel does (`window_axis`: SAME splits with the odd cell after, CEIL keeps the
windows running past the input except one starting past it) and given to ONNX as explicit
pads with ceil_mode 0, so ONNX's own ceil and SAME rules never matter. With a dynamic size,
VALID and PAD in FLOOR mode give their pads as they are, SAME is auto_pad SAME_UPPER; CEIL
mode stays on numpy. Every pad is smaller than the window (the kernel's validation
guarantees it for PAD; SAME and the CEIL extension cannot reach a whole window).

Average pooling is count_include_pad 0: each window's sum divided by its real cells, as
ours. A window covering the whole plane (global) is GlobalAveragePool / GlobalMaxPool.

NaN: onnxruntime's MaxPool (and GlobalMaxPool) do not propagate NaN (a NaN cell may lose
to a later number). Ours does, so a float max pool adds a zero-weight depthwise convolution
of Tanh(x) over the same windows: 0, or NaN where a window held one (`_nan_of_windows`);
with a dynamic channel count or a whole-plane window it pools an IsNaN mask instead and
writes NaN where a window held one. Integer max pooling (int8, uint8: onnxruntime's
MaxPool kernels) needs nothing of the kind; other integer dtypes and float16 stay on numpy.
"""

from __future__ import annotations

import numpy as np

from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import DYNAMIC
from nnrt.hdi.reference.kernel import Kernel
from nnrt.hdi.reference.ops._common import to_nhwc, window_axis
from ..activation import _IDENTITY
from ..lowering import F32, NodeEmitter, NotLowerable, lowers
from .lower_conv2d import TO_NCHW, finish_spatial

_MAX_DTYPES = frozenset({F32, np.dtype(np.int8), np.dtype(np.uint8)})


def _geometry(k: Kernel, e: NodeEmitter) -> dict:
    attrs = {"kernel_shape": list(k.kernel), "strides": list(k.strides)}
    n, h, w, c = to_nhwc(e.spec(0).shape, k.nchw)
    if DYNAMIC not in (h, w):
        ax_h, ax_w = (window_axis(k.node, size, k.kernel[d], k.strides[d], 1, k.pad_mode,
                                  k.pads[d], k.ceil) for d, size in enumerate((h, w)))
        attrs["pads"] = [ax_h.pad_before, ax_w.pad_before, ax_h.pad_after, ax_w.pad_after]
        return attrs
    if k.ceil:
        raise NotLowerable("CEIL round mode on a dynamic image size")
    if k.pad_mode == ht.PAD_MODE_SAME:
        attrs["auto_pad"] = "SAME_UPPER"
    elif k.pad_mode == ht.PAD_MODE_PAD:
        (top, bottom), (left, right) = k.pads
        attrs["pads"] = [top, left, bottom, right]
    else:
        attrs["pads"] = [0, 0, 0, 0]
    return attrs


def _whole_plane(k: Kernel, e: NodeEmitter) -> bool:
    """Global pooling, or one window holding every cell of a static image."""
    if k.global_:
        return True
    n, h, w, c = to_nhwc(e.spec(0).shape, k.nchw)
    if DYNAMIC in (h, w):
        return False
    axes = [window_axis(k.node, size, k.kernel[d], k.strides[d], 1, k.pad_mode, k.pads[d],
                        k.ceil) for d, size in enumerate((h, w))]
    return all(ax.out == 1 and k.kernel[d] - ax.pad_before >= size
               for d, (ax, size) in enumerate(zip(axes, (h, w))))


def _pool(k: Kernel, e: NodeEmitter, x: str, op: str) -> str:
    if _whole_plane(k, e):
        return e.op(f"Global{op}", [x])
    attrs = _geometry(k, e)
    if op == "AveragePool":
        attrs["count_include_pad"] = 0
    return e.op(op, [x], **attrs)


@lowers(na.NODE_TYPE_MAX_POOL_FUSION)
def max_pool(k: Kernel, e: NodeEmitter) -> None:
    e.require_dtypes(_MAX_DTYPES)
    dtype = e.spec(0).dtype
    is_float = dtype == F32
    if not is_float:
        if k.activation not in _IDENTITY:
            raise NotLowerable(f"fused activation on a {dtype} max pool")
        if k.global_ or _whole_plane(k, e):  # GlobalMaxPool is float-only
            raise NotLowerable(f"whole-plane max pool of {dtype}")
    x = e.input(0) if k.nchw else e.input(0, perm=TO_NCHW)
    y = _pool(k, e, x, "MaxPool")
    if is_float and not e.finite(0):  # NaN where a window held one (onnxruntime may drop it)
        channels = to_nhwc(e.spec(0).shape, k.nchw)[3]
        if channels != DYNAMIC and not _whole_plane(k, e):
            y = e.op("Add", [y, _nan_of_windows(k, e, x, channels)])
        else:
            nan = _pool(k, e, e.op("Cast", [e.op("IsNaN", [x])], to=1), "MaxPool")
            y = e.op("Where", [e.op("Cast", [nan], to=9), e.const(np.nan, F32, "nan"), y])
    finish_spatial(k, e, y)


def _nan_of_windows(k: Kernel, e: NodeEmitter, x: str, channels: int) -> str:
    """0 where a window holds no NaN, NaN where it does: a depthwise convolution of zero
    weights over the pooling's windows, of Tanh(x) — which keeps NaN and bounds infinities
    (0 · ±inf would be NaN too). Added to the pooled values it leaves them as they are (x +
    0) or makes them NaN. Operators onnxruntime keeps in its blocked NCHWc layout, fusing
    the Add into the convolution: the IsNaN mask it replaces (IsNaN, Cast, a second pooling,
    Where) took the layout apart around every max pool (a ResNet's first pooling ~0.35 ms
    of a 2.8 ms run)."""
    attrs = _geometry(k, e)
    zeros = e.const(np.zeros((channels, 1, *k.kernel)), F32, "zero_taps")
    return e.op("Conv", [e.op("Tanh", [x]), zeros], group=channels,
                kernel_shape=list(k.kernel), **{a: v for a, v in attrs.items()
                                                 if a != "kernel_shape"})


@lowers(na.NODE_TYPE_AVGPOOL_FUSION)
def avg_pool(k: Kernel, e: NodeEmitter) -> None:
    e.require_float32()
    x = e.input(0) if k.nchw else e.input(0, perm=TO_NCHW)
    finish_spatial(k, e, _pool(k, e, x, "AveragePool"))
