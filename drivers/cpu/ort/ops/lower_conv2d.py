"""Conv2DFusion as ONNX Conv (NCHW, OIHW weights) with its bias and fused activation.

Padding: PAD gives explicit pads, SAME is SAME_UPPER (the odd cell after, as TensorFlow and
semantics.md), VALID none. Depthwise with a channel multiplier needs no reordering: ONNX's
grouped convolution numbers output channels group by group, as ours do (c·m + k).
"""

from __future__ import annotations

from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import DYNAMIC
from nnrt.hdi.reference.kernel import Kernel
from nnrt.hdi.reference.ops._common import to_nhwc, window_axis
from ..activation import emit_activation
from ..lowering import NodeEmitter, NotLowerable, lowers

TO_NCHW = (0, 3, 1, 2)
TO_NHWC = [0, 2, 3, 1]


def conv_geometry(k: Kernel, e: NodeEmitter) -> dict:
    """kernel_shape, strides, dilations and padding attributes of ONNX Conv."""
    attrs = {"kernel_shape": list(k.kernel), "strides": list(k.stride),
             "dilations": list(k.dilation)}
    if k.pad_mode == ht.PAD_MODE_SAME:
        if k.dilation == (1, 1):
            attrs["auto_pad"] = "SAME_UPPER"
            return attrs
        # onnxruntime's SAME_UPPER refuses dilation: explicit pads from the static size
        n, h, w, c = to_nhwc(e.spec(0).shape, k.nchw)
        if DYNAMIC in (h, w):
            raise NotLowerable("SAME padding with dilation on a dynamic image size")
        ax_h, ax_w = (window_axis(k.node, size, k.kernel[d], k.stride[d], k.dilation[d],
                                  k.pad_mode, k.pads[d]) for d, size in enumerate((h, w)))
        attrs["pads"] = [ax_h.pad_before, ax_w.pad_before, ax_h.pad_after, ax_w.pad_after]
    else:
        (top, bottom), (left, right) = k.pads if k.pad_mode == ht.PAD_MODE_PAD \
            else ((0, 0), (0, 0))
        attrs["pads"] = [top, left, bottom, right]
    return attrs


def finish_spatial(k: Kernel, e: NodeEmitter, y: str) -> None:
    """Fused activation on the NCHW result, then back to the input's layout."""
    if k.nchw:
        emit_activation(e, y, k.activation, out=e.output())
        return
    e.op("Transpose", [emit_activation(e, y, k.activation)], perm=TO_NHWC, out=e.output())


@lowers(na.NODE_TYPE_CONV2D_FUSION)
def conv2d(k: Kernel, e: NodeEmitter) -> None:
    e.require_float32()
    x = e.input(0) if k.nchw else e.input(0, perm=TO_NCHW)
    inputs = [x, e.input(1, perm=TO_NCHW)] + ([e.input(2)] if k.has_bias else [])
    y = e.op("Conv", inputs, group=k.group, **conv_geometry(k, e))
    finish_spatial(k, e, y)
