"""Conv2dTransposeFusion against a scatter loop over input pixels and kernel taps and against
onnx's reference ConvTranspose (NCHW, weight re-laid out): padding modes, stride, dilation,
outputPaddings, groups, bias, NCHW tag, fused activations, dtypes, errors."""

from __future__ import annotations

import numpy as np
import pytest

from nnrt.hdi.reference.kernel import create_kernel
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from tests.hdi.reference.util import (
    NNRT_INVALID_NODE,
    NNRT_INVALID_SHAPE,
    NNRT_UNSUPPORTED_OP,
    Const,
    Declared,
    expect_error,
    expect_refused,
    make_node,
    onnx_reference,
    randn,
    run_node,
    run_op,
)

DECONV = na.NODE_TYPE_CONV2D_TRANSPOSE_FUSION


def scatter_reference(x, w, b, stride=(1, 1), dilation=(1, 1), start=(0, 0), out=None,
                      group=1):
    """Each input pixel adds x * w into the output cells its kernel taps reach; `start` is
    where the output window begins on that full plane, `out` its size."""
    n_, h_, w_, _ = x.shape
    o_, kh_, kw_, cg = w.shape
    og = o_ // group
    full_h = (h_ - 1) * stride[0] + (kh_ - 1) * dilation[0] + 1
    full_w = (w_ - 1) * stride[1] + (kw_ - 1) * dilation[1] + 1
    out_h, out_w = out if out is not None else (full_h, full_w)
    y = np.zeros((n_, out_h, out_w, o_))
    for n in range(n_):
        for r in range(h_):
            for c in range(w_):
                for i in range(kh_):
                    oh = r * stride[0] + i * dilation[0] - start[0]
                    if not 0 <= oh < out_h:
                        continue
                    for j in range(kw_):
                        ow = c * stride[1] + j * dilation[1] - start[1]
                        if not 0 <= ow < out_w:
                            continue
                        for o in range(o_):
                            g = o // og
                            for ci in range(cg):
                                y[n, oh, ow, o] += float(x[n, r, c, g * cg + ci]) * float(
                                    w[o, i, j, ci])
    if b is not None:
        y += b
    return y


def onnx_deconv(x, w, b, stride, dilation, pads, out_pad, group):
    """onnx ConvTranspose on NHWC data: weight [outC, kH, kW, C/g] -> [C, outC/g, kH, kW]."""
    o_, kh, kw, cg = w.shape
    og = o_ // group
    w_onnx = w.reshape(group, og, kh, kw, cg).transpose(0, 4, 1, 2, 3).reshape(group * cg, og,
                                                                               kh, kw)
    inputs = [x.transpose(0, 3, 1, 2), w_onnx] + ([b] if b is not None else [])
    y = onnx_reference("ConvTranspose", inputs, opset=13, strides=list(stride),
                       dilations=list(dilation), group=group,
                       pads=[pads[0], pads[2], pads[1], pads[3]], output_padding=list(out_pad))
    return y.transpose(0, 2, 3, 1)


@pytest.mark.parametrize("stride", [(1, 1), (2, 2), (3, 2)])
@pytest.mark.parametrize("dilation", [(1, 1), (2, 1)])
@pytest.mark.parametrize("pads,out_pad", [((0, 0, 0, 0), (0, 0)), ((1, 1, 1, 1), (1, 0)),
                                          ((2, 0, 1, 3), (0, 1))])
def test_pad_mode_against_onnx(stride, dilation, pads, out_pad) -> None:
    out_pad = tuple(p if p < max(s, d) else 0 for p, s, d in zip(out_pad, stride, dilation))
    x, w, b = randn(2, 4, 5, 3, seed=1), randn(4, 3, 2, 3, seed=2), randn(4, seed=3)
    attrs = na.Conv2dTransposeFusion(kernelSize=[3, 2], stride=list(stride),
                                     dilation=list(dilation), padMode=ht.PAD_MODE_PAD,
                                     padList=list(pads), outputPaddings=list(out_pad))
    out = run_op(DECONV, attrs, [x, Const(w), Const(b)])
    size = [(n - 1) * s + (k - 1) * d + 1 - p0 - p1 + e for n, s, k, d, p0, p1, e in
            zip((4, 5), stride, (3, 2), dilation, pads[::2], pads[1::2], out_pad)]
    want = scatter_reference(x, w, b, stride, dilation, (pads[0], pads[2]), size)
    assert out.shape == want.shape
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
    if all(e < s for e, s in zip(out_pad, stride)):  # onnx's col2im needs that
        want = onnx_deconv(x, w, b, stride, dilation, pads, out_pad, 1)
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("group,in_c,out_c", [(2, 4, 6), (3, 3, 3), (2, 6, 2)])
def test_grouped(group, in_c, out_c) -> None:
    x = randn(1, 3, 3, in_c, seed=4)
    w, b = randn(out_c, 3, 3, in_c // group, seed=5), randn(out_c, seed=6)
    attrs = na.Conv2dTransposeFusion(stride=[2, 2], padMode=ht.PAD_MODE_PAD,
                                     padList=[1, 1, 1, 1], group=group,
                                     inChannel=in_c // group, outChannel=out_c)
    out = run_op(DECONV, attrs, [x, Const(w), Const(b)])
    # (onnx 1.x's reference ConvTranspose mishandles group > 1: the scatter loop only.)
    want = scatter_reference(x, w, b, (2, 2), start=(1, 1), out=(5, 5), group=group)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("size,k,s,d,start", [
    (4, 3, 2, 1, 0),   # full 9, out 8: total 1 -> 0 before
    (3, 4, 2, 1, 1),   # full 8, out 6: total 2 -> 1 before
    (3, 5, 1, 1, 2),   # full 7, out 3: total 4 -> 2 before
    (3, 3, 2, 2, 1),   # dilated kernel of 5: full 9, out 6: total 3 -> 1 before
    (3, 1, 3, 1, 0),   # kernel smaller than the stride: full 7 < out 9, zeros after
])
def test_same_padding(size, k, s, d, start) -> None:
    x, w = randn(1, size, size, 2, seed=7), randn(3, k, k, 2, seed=8)
    attrs = na.Conv2dTransposeFusion(stride=[s, s], dilation=[d, d], padMode=ht.PAD_MODE_SAME)
    out = run_op(DECONV, attrs, [x, Const(w)])
    assert out.shape == (1, size * s, size * s, 3)
    want = scatter_reference(x, w, None, (s, s), (d, d), (start, start), (size * s, size * s))
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def test_valid_and_output_padding() -> None:
    x, w, b = randn(2, 3, 2, 3, seed=9), randn(2, 2, 3, 3, seed=10), randn(2, seed=11)
    attrs = na.Conv2dTransposeFusion(stride=[2, 3], padMode=ht.PAD_MODE_VALID,
                                     outputPaddings=[1, 2])
    out = run_op(DECONV, attrs, [x, Const(w), Const(b)])
    assert out.shape == (2, 7, 8, 2)  # (3-1)*2+2+1, (2-1)*3+3+2
    want = scatter_reference(x, w, b, (2, 3), out=(7, 8))  # extra cells: bias only
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
    attrs = na.Conv2dTransposeFusion(stride=[2, 2], padMode=ht.PAD_MODE_SAME,
                                     outputPaddings=[1, 1])
    out = run_op(DECONV, attrs, [x, Const(w), Const(b)])
    assert out.shape == (2, 7, 5, 2)
    want = scatter_reference(x, w, b, (2, 2), start=(0, 0), out=(7, 5))
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("act,fn", [(ht.ACTIVATION_TYPE_RELU, lambda v: np.maximum(v, 0)),
                                    (ht.ACTIVATION_TYPE_RELU6, lambda v: np.clip(v, 0, 6)),
                                    (ht.ACTIVATION_TYPE_SIGMOID, lambda v: 1 / (1 + np.exp(-v)))])
def test_fused_activation_runtime_weight_and_nchw(act, fn) -> None:
    x, w, b = randn(1, 3, 3, 2, seed=12) * 3, randn(2, 2, 2, 2, seed=13), randn(2, seed=14)
    attrs = na.Conv2dTransposeFusion(stride=[2, 2], activationType=act)
    out = run_op(DECONV, attrs, [x, w, b])  # weight and bias as run-time inputs
    want = fn(scatter_reference(x, w, b, (2, 2)))
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
    out = run_op(DECONV, attrs, [x.transpose(0, 3, 1, 2), Const(w), Const(b)],
                 fmt=ht.FORMAT_NCHW)
    np.testing.assert_allclose(out, want.transpose(0, 3, 1, 2), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype,tol", [(np.float16, 1e-2), (np.float64, 1e-12)])
def test_dtypes(dtype, tol) -> None:
    x, w = randn(1, 3, 3, 2, dtype=dtype, seed=15), randn(3, 3, 3, 2, dtype=dtype, seed=16)
    b = randn(3, dtype=dtype, seed=17)
    attrs = na.Conv2dTransposeFusion(stride=[2, 2], padMode=ht.PAD_MODE_PAD,
                                     padList=[1, 1, 1, 1])
    out = run_op(DECONV, attrs, [x, Const(w), Const(b)])
    assert out.dtype == dtype
    want = scatter_reference(x, w, b, (2, 2), start=(1, 1), out=(5, 5))
    np.testing.assert_allclose(out.astype(np.float64), want, rtol=tol, atol=tol)


def test_dynamic_input() -> None:
    x, w = randn(2, 3, 4, 2, seed=18), randn(1, 2, 2, 2, seed=19)
    attrs = na.Conv2dTransposeFusion(stride=[2, 2])
    node = make_node(DECONV, attrs, [Declared(x, (-1, -1, -1, 2)), Const(w)])
    kernel = create_kernel(node)
    assert kernel.infer_shapes([(-1, -1, -1, 2), w.shape]) == [(-1, -1, -1, 1)]
    (out,) = run_node(node, [x, w], kernel)
    np.testing.assert_allclose(out, scatter_reference(x, w, None, (2, 2)), rtol=1e-5, atol=1e-5)
    expect_error(NNRT_INVALID_SHAPE, lambda: run_node(node, [x[..., :1], w], kernel))


def test_error_paths() -> None:
    x, w = np.zeros((1, 3, 3, 2), np.float32), Const(np.zeros((4, 3, 3, 2), np.float32))
    ok = na.Conv2dTransposeFusion()
    expect_refused(NNRT_INVALID_NODE, DECONV, ok, [x])
    expect_refused(NNRT_INVALID_NODE, DECONV, ok, [x, w], n_outputs=2)
    expect_refused(NNRT_INVALID_NODE, DECONV, ok, [np.zeros((3, 3, 2), np.float32), w])
    expect_refused(NNRT_INVALID_NODE, DECONV, ok, [x, Const(np.zeros((4, 3, 3), np.float32))])
    expect_refused(NNRT_INVALID_NODE, DECONV, ok, [np.zeros((1, 3, 3, 3), np.float32), w])
    expect_refused(NNRT_INVALID_NODE, DECONV, na.Conv2dTransposeFusion(kernelSize=[2, 2]), [x, w])
    expect_refused(NNRT_INVALID_NODE, DECONV, na.Conv2dTransposeFusion(stride=[0, 1]), [x, w])
    expect_refused(NNRT_INVALID_NODE, DECONV, na.Conv2dTransposeFusion(group=3), [x, w])
    expect_refused(NNRT_INVALID_NODE, DECONV, na.Conv2dTransposeFusion(outChannel=5), [x, w])
    expect_refused(NNRT_INVALID_NODE, DECONV, na.Conv2dTransposeFusion(inChannel=3), [x, w])
    expect_refused(NNRT_INVALID_NODE, DECONV, na.Conv2dTransposeFusion(outputPaddings=[1, 0]),
                   [x, w])  # not below stride 1
    expect_refused(NNRT_INVALID_NODE, DECONV, na.Conv2dTransposeFusion(outputPaddings=[1]),
                   [x, w])
    expect_refused(NNRT_INVALID_NODE, DECONV, na.Conv2dTransposeFusion(
        padMode=ht.PAD_MODE_SAME, padList=[1, 1, 1, 1]), [x, w])
    expect_refused(NNRT_INVALID_NODE, DECONV, na.Conv2dTransposeFusion(padMode=5), [x, w])
    expect_refused(NNRT_INVALID_NODE, DECONV, na.Conv2dTransposeFusion(padList=[3, 3, 0, 0]),
                   [x, w])  # output height 5 - 6 < 1
    expect_refused(NNRT_INVALID_NODE, DECONV, ok, [x, w, Const(np.zeros(3, np.float32))])
    expect_refused(NNRT_INVALID_NODE, DECONV, na.Conv2dTransposeFusion(activationType=20), [x, w])
    expect_refused(NNRT_UNSUPPORTED_OP, DECONV, na.Conv2dTransposeFusion(
        activationType=ht.ACTIVATION_TYPE_ELU), [x, w])
    expect_refused(NNRT_UNSUPPORTED_OP, DECONV, ok, [x.astype(np.int32),
                                                     Const(np.zeros((4, 3, 3, 2), np.int32))])
    expect_refused(NNRT_UNSUPPORTED_OP, DECONV, ok, [x, Const(np.zeros((4, 3, 3, 2)))])
    expect_refused(NNRT_UNSUPPORTED_OP, DECONV, ok, [x, Declared(w.array, (4, -1, 3, 2))])
    expect_refused(NNRT_UNSUPPORTED_OP, DECONV, ok, [x, w], quant_type=ht.QUANT_TYPE_ALL)
