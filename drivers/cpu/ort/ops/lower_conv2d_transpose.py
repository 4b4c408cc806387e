"""Conv2dTransposeFusion as ONNX ConvTranspose (NCHW) with its bias and fused activation.

Weight: ours is [outC, kH, kW, C/group] (output channels first, grouped by group), ONNX's
[C, outC/group, kH, kW]: [group, outC/group, kH, kW, C/group] transposed to
[group, C/group, outC/group, kH, kW] (a constant once, here; a run-time weight by nodes).

Geometry: ours crops the canvas of every cell a tap reaches (full = (in - 1)·stride + k')
from `start` for `out` cells; ONNX's output cell y is canvas cell y + pad_begin, and its
output size is full - pad_begin - pad_end + output_padding. So pad_begin = start and
pad_end = full - start - out when that is >= 0, else pad_end 0 and output_padding its
negation (cells past the canvas: zeros, as ours). onnxruntime refuses an output_padding of
max(stride, dilation) or more (SAME with a kernel narrower than the stride reaches that):
the cells beyond are a zero Pad of the result, before the bias. With a static image size this covers
PAD, SAME and VALID with outputPaddings; with a dynamic one PAD and VALID give their pads
and outputPaddings as they are, SAME stays on numpy.
"""

from __future__ import annotations

import numpy as np

from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import DYNAMIC
from nnrt.hdi.reference.kernel import Kernel
from nnrt.hdi.reference.ops._common import to_nhwc
from ..lowering import F32, NodeEmitter, NotLowerable, lowers
from .lower_conv2d import TO_NCHW, finish_spatial


def _weight(k: Kernel, e: NodeEmitter) -> str:
    kh, kw = k.kernel
    og = k.out_c // k.group
    grouped = (k.group, og, kh, kw, k.group_c)
    perm = (0, 4, 1, 2, 3)
    onnx_shape = (k.group * k.group_c, og, kh, kw)
    spec = e.spec(1)
    if spec.is_constant:
        w = spec.constant.reshape(grouped).transpose(perm).reshape(onnx_shape)
        return e.const(w, F32, "w")
    w = e.op("Reshape", [e.input(1), e.int64s(grouped)])
    return e.op("Reshape", [e.op("Transpose", [w], perm=list(perm)), e.int64s(onnx_shape)])


def _geometry(k: Kernel, e: NodeEmitter) -> dict:
    attrs = {"kernel_shape": list(k.kernel), "strides": list(k.stride),
             "dilations": list(k.dilation)}
    n, h, w, c = to_nhwc(e.spec(0).shape, k.nchw)
    if DYNAMIC in (h, w):
        if k.pad_mode == ht.PAD_MODE_SAME:
            raise NotLowerable("SAME padding on a dynamic image size")
        (top, bottom), (left, right) = k.pads if k.pad_mode == ht.PAD_MODE_PAD \
            else ((0, 0), (0, 0))
        attrs["pads"] = [top, left, bottom, right]
        attrs["output_padding"] = list(k.out_pad)
        return attrs
    begin, end, extra = [], [], []
    for axis, size in enumerate((h, w)):
        span = k._span(axis, size)
        k_eff = (k.kernel[axis] - 1) * k.dilation[axis] + 1
        full = (size - 1) * k.stride[axis] + k_eff
        after = full - span.start - span.out
        begin.append(span.start)
        end.append(max(after, 0))
        extra.append(max(-after, 0))
    attrs["pads"] = begin + end
    attrs["output_padding"] = extra
    return attrs


@lowers(na.NODE_TYPE_CONV2D_TRANSPOSE_FUSION)
def conv2d_transpose(k: Kernel, e: NodeEmitter) -> None:
    e.require_float32()
    x = e.input(0) if k.nchw else e.input(0, perm=TO_NCHW)
    attrs = _geometry(k, e)
    # onnxruntime refuses output_padding >= max(stride, dilation): the cells beyond are
    # zeros padded onto the result, and the bias is added after them
    limit = [max(s, d) - 1 for s, d in zip(k.stride, k.dilation)]
    rest = [max(p - m, 0) for p, m in zip(attrs["output_padding"], limit)]
    attrs["output_padding"] = [p - r for p, r in zip(attrs["output_padding"], rest)]
    bias_inside = k.has_bias and not any(rest)
    inputs = [x, _weight(k, e)] + ([e.input(2)] if bias_inside else [])
    y = e.op("ConvTranspose", inputs, group=k.group, **attrs)
    if any(rest):
        y = e.op("Pad", [y, e.int64s([0, 0, 0, 0, 0, 0, *rest])])
        if k.has_bias:
            y = e.op("Add", [y, e.op("Reshape", [e.input(2), e.int64s([-1, 1, 1])])])
    finish_spatial(k, e, y)
