"""Conv2DFusion against a direct convolution written as loops over output positions and
kernel taps: padding modes, stride, dilation, groups, depthwise with multiplier, bias, NCHW,
fused activations, the blocks of copied rows (with and without direct BLAS), error paths."""

from __future__ import annotations

from math import erf, exp, sqrt

import numpy as np
import pytest

from nnrt.hdi.reference import blas
from nnrt.hdi.reference.kernel import create_kernel
from nnrt.hdi.reference.ops import op_conv2d
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
    randn,
    run_node,
    run_op,
)

CONV = na.NODE_TYPE_CONV2D_FUSION


def conv_reference(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, stride=(1, 1),
                   dilation=(1, 1), pads=(0, 0, 0, 0), group: int = 1) -> np.ndarray:
    """Direct NHWC convolution; cells outside the input (padding) contribute 0."""
    n_, h_, w_, _ = x.shape
    o_, kh_, kw_, cg = w.shape
    top, bottom, left, right = pads
    oh_ = (h_ + top + bottom - ((kh_ - 1) * dilation[0] + 1)) // stride[0] + 1
    ow_ = (w_ + left + right - ((kw_ - 1) * dilation[1] + 1)) // stride[1] + 1
    og = o_ // group
    out = np.zeros((n_, oh_, ow_, o_))
    for n in range(n_):
        for oh in range(oh_):
            for ow in range(ow_):
                for o in range(o_):
                    g = o // og
                    acc = 0.0 if b is None else float(b[o])
                    for i in range(kh_):
                        r = oh * stride[0] - top + i * dilation[0]
                        if not 0 <= r < h_:
                            continue
                        for j in range(kw_):
                            c = ow * stride[1] - left + j * dilation[1]
                            if not 0 <= c < w_:
                                continue
                            for ci in range(cg):
                                acc += float(x[n, r, c, g * cg + ci]) * float(w[o, i, j, ci])
                    out[n, oh, ow, o] = acc
    return out


DEFAULT_THRESHOLDS = (op_conv2d._ROW_GEMM_MIN_PIXELS, op_conv2d._ROW_GEMM_MIN_DEPTH)


@pytest.fixture(autouse=True, params=["row GEMMs", "im2col"])
def computation(request, monkeypatch) -> str:
    """Every test twice: with one GEMM per kernel row wherever the row stride allows it, and
    with im2col always, whatever the sizes (the thresholds that choose between them)."""
    limit = 0 if request.param == "row GEMMs" else 1 << 30
    monkeypatch.setattr(op_conv2d, "_ROW_GEMM_MIN_PIXELS", limit)
    monkeypatch.setattr(op_conv2d, "_ROW_GEMM_MIN_DEPTH", limit)
    return request.param


def _attrs(w: np.ndarray, **kw) -> na.Conv2DFusion:
    return na.Conv2DFusion(kernelSize=list(w.shape[1:3]), **kw)


@pytest.mark.parametrize("pads", [(0, 0, 0, 0), (1, 1, 1, 1), (2, 0, 1, 3)])
@pytest.mark.parametrize("stride", [(1, 1), (2, 2), (2, 1)])
def test_pad_mode_pad_and_stride(pads, stride) -> None:
    x, w, b = randn(2, 6, 7, 3, seed=1), randn(4, 3, 3, 3, seed=2), randn(4, seed=3)
    attrs = _attrs(w, stride=list(stride), padMode=ht.PAD_MODE_PAD, padList=list(pads))
    out = run_op(CONV, attrs, [x, Const(w), Const(b)])
    np.testing.assert_allclose(out, conv_reference(x, w, b, stride, pads=pads), rtol=1e-5,
                               atol=1e-5)


@pytest.mark.parametrize("h,k,s,dil,pads_h,out_h", [
    (5, 3, 1, 1, (1, 1), 5),   # odd total: 2 -> 1 / 1
    (6, 3, 2, 1, (0, 1), 3),   # total 1: the odd cell goes to the bottom
    (5, 4, 2, 1, (1, 2), 3),   # total 3 -> 1 / 2
    (7, 3, 3, 2, (2, 2), 3),   # dilated kernel of 5: total 4 -> 2 / 2
    (8, 2, 3, 3, (1, 1), 3),   # dilated kernel of 4: total 2 -> 1 / 1
    (4, 2, 4, 1, (0, 0), 1),   # no padding needed
])
def test_same_padding(h: int, k: int, s: int, dil: int, pads_h, out_h: int) -> None:
    x, w = randn(1, h, h, 2, seed=4), randn(3, k, k, 2, seed=5)
    attrs = _attrs(w, stride=[s, s], dilation=[dil, dil], padMode=ht.PAD_MODE_SAME)
    out = run_op(CONV, attrs, [x, Const(w)])
    assert out.shape == (1, out_h, out_h, 3)
    want = conv_reference(x, w, None, (s, s), (dil, dil), pads=pads_h + pads_h)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def test_valid_padding_and_dilation() -> None:
    x, w = randn(2, 9, 8, 3, seed=6), randn(2, 3, 2, 3, seed=7)
    attrs = _attrs(w, dilation=[2, 3], stride=[1, 2], padMode=ht.PAD_MODE_VALID)
    out = run_op(CONV, attrs, [x, Const(w)])
    assert out.shape == (2, 5, 3, 2)
    np.testing.assert_allclose(out, conv_reference(x, w, None, (1, 2), (2, 3)), rtol=1e-5,
                               atol=1e-5)


@pytest.mark.parametrize("group,in_c,out_c", [(2, 4, 6), (3, 6, 3), (4, 4, 8)])
def test_grouped(group: int, in_c: int, out_c: int) -> None:
    x = randn(2, 5, 5, in_c, seed=8)
    w, b = randn(out_c, 3, 3, in_c // group, seed=9), randn(out_c, seed=10)
    attrs = _attrs(w, group=group, padMode=ht.PAD_MODE_PAD, padList=[1, 1, 1, 1],
                   inChannel=in_c, outChannel=out_c)
    out = run_op(CONV, attrs, [x, Const(w), Const(b)])
    np.testing.assert_allclose(out, conv_reference(x, w, b, pads=(1, 1, 1, 1), group=group),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("multiplier", [1, 2, 3])
@pytest.mark.parametrize("stride", [(1, 1), (2, 2)])
def test_depthwise_with_multiplier(multiplier: int, stride) -> None:
    c = 3
    x = randn(2, 6, 6, c, seed=11)
    w, b = randn(c * multiplier, 3, 3, 1, seed=12), randn(c * multiplier, seed=13)
    attrs = _attrs(w, group=c, stride=list(stride), padMode=ht.PAD_MODE_SAME, inChannel=c,
                   outChannel=c * multiplier)
    out = run_op(CONV, attrs, [x, Const(w), Const(b)])
    want = conv_reference(x, w, b, stride, pads=(1, 1, 1, 1) if stride == (1, 1) else (0, 1, 0, 1),
                          group=c)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def test_depthwise_channel_order_is_tensorflow_s() -> None:
    # 1x1 depthwise, multiplier 2: output channel c*2 + k = x[..., c] * w[c*2 + k].
    x = np.arange(1, 7, dtype=np.float32).reshape(1, 1, 2, 3)
    w = np.array([10, 20, 30, 40, 50, 60], dtype=np.float32).reshape(6, 1, 1, 1)
    out = run_op(CONV, _attrs(w, group=3), [x, Const(w)])
    assert out[0, 0, 0].tolist() == [10, 20, 2 * 30, 2 * 40, 3 * 50, 3 * 60]
    assert out[0, 0, 1].tolist() == [40, 80, 5 * 30, 5 * 40, 6 * 50, 6 * 60]


def test_pointwise_and_without_attrs_defaults() -> None:
    x, w, b = randn(2, 4, 5, 6, seed=14), randn(3, 1, 1, 6, seed=15), randn(3, seed=16)
    # No kernelSize, stride, dilation, group: taken from the weight and the defaults.
    out = run_op(CONV, na.Conv2DFusion(), [x, Const(w), Const(b)])
    np.testing.assert_allclose(out, conv_reference(x, w, b), rtol=1e-5, atol=1e-5)


def test_nchw_input() -> None:
    x_nhwc, w, b = randn(2, 5, 6, 3, seed=17), randn(4, 3, 2, 3, seed=18), randn(4, seed=19)
    x = np.ascontiguousarray(x_nhwc.transpose(0, 3, 1, 2))
    attrs = _attrs(w, stride=[2, 1], padMode=ht.PAD_MODE_PAD, padList=[1, 0, 0, 1])
    out = run_op(CONV, attrs, [x, Const(w), Const(b)], fmt=ht.FORMAT_NCHW)
    want = conv_reference(x_nhwc, w, b, (2, 1), pads=(1, 0, 0, 1)).transpose(0, 3, 1, 2)
    assert out.shape == want.shape
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
    # depthwise on NCHW too
    wd = randn(6, 3, 3, 1, seed=20)
    out = run_op(CONV, _attrs(wd, group=3, padMode=ht.PAD_MODE_SAME), [x, Const(wd)],
                 fmt=ht.FORMAT_NCHW)
    want = conv_reference(x_nhwc, wd, None, pads=(1, 1, 1, 1), group=3).transpose(0, 3, 1, 2)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def test_run_time_weight_and_bias() -> None:
    x, w, b = randn(1, 5, 5, 4, seed=21), randn(4, 3, 3, 2, seed=22), randn(4, seed=23)
    out = run_op(CONV, _attrs(w, group=2, padMode=ht.PAD_MODE_VALID), [x, w, b])
    np.testing.assert_allclose(out, conv_reference(x, w, b, group=2), rtol=1e-5, atol=1e-5)
    wd = randn(8, 2, 2, 1, seed=24)
    out = run_op(CONV, _attrs(wd, group=4), [x, wd])
    np.testing.assert_allclose(out, conv_reference(x, wd, None, group=4), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", [ht.ACTIVATION_TYPE_RELU, ht.ACTIVATION_TYPE_RELU6,
                                  ht.ACTIVATION_TYPE_SIGMOID, ht.ACTIVATION_TYPE_GELU])
def test_fused_activation(kind: int) -> None:
    x, w, b = randn(1, 5, 5, 2, seed=25), randn(3, 3, 3, 2, seed=26), randn(3, seed=27)
    out = run_op(CONV, _attrs(w, padMode=ht.PAD_MODE_SAME, activationType=kind),
                 [x.astype(np.float64), Const(w.astype(np.float64)), Const(b.astype(np.float64))])
    ref = conv_reference(x, w, b, pads=(1, 1, 1, 1))
    f = {ht.ACTIVATION_TYPE_RELU: lambda v: max(v, 0.0),
         ht.ACTIVATION_TYPE_RELU6: lambda v: min(max(v, 0.0), 6.0),
         ht.ACTIVATION_TYPE_SIGMOID: lambda v: 1 / (1 + exp(-v)),
         ht.ACTIVATION_TYPE_GELU: lambda v: v * 0.5 * (1 + erf(v / sqrt(2)))}[kind]
    np.testing.assert_allclose(out, np.vectorize(f)(ref), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("kind", [ht.ACTIVATION_TYPE_HARD_TANH, ht.ACTIVATION_TYPE_LEAKY_RELU])
def test_fused_parameterised_activation_unsupported(kind: int) -> None:
    x, w = randn(1, 5, 5, 2), randn(3, 3, 3, 2)
    expect_refused(NNRT_UNSUPPORTED_OP, CONV, _attrs(w, activationType=kind), [x, Const(w)])


def test_float16_and_float64() -> None:
    x, w, b = randn(1, 6, 6, 8, seed=28), randn(4, 3, 3, 8, seed=29), randn(4, seed=30)
    ref = conv_reference(x.astype(np.float16), w.astype(np.float16), b.astype(np.float16),
                         pads=(1, 1, 1, 1))
    out = run_op(CONV, _attrs(w, padMode=ht.PAD_MODE_SAME),
                 [x.astype(np.float16), Const(w.astype(np.float16)), Const(b.astype(np.float16))])
    assert out.dtype == np.float16
    np.testing.assert_allclose(out.astype(np.float64), ref, rtol=5e-3, atol=2e-2)
    out = run_op(CONV, _attrs(w, padMode=ht.PAD_MODE_SAME),
                 [x.astype(np.float64), Const(w.astype(np.float64)), Const(b.astype(np.float64))])
    np.testing.assert_allclose(out, conv_reference(x, w, b, pads=(1, 1, 1, 1)), rtol=1e-12,
                               atol=1e-12)


@pytest.mark.parametrize("limit", [64, 8 * 7 * 9 * 4, 1 << 20])
@pytest.mark.parametrize("stride, dilation", [((1, 1), (1, 1)), ((2, 1), (1, 1)),
                                              ((1, 2), (2, 1)), ((3, 2), (2, 1))])
@pytest.mark.parametrize("direct_blas", [True, False])
def test_copy_blocks(limit: int, stride, dilation, direct_blas: bool, monkeypatch) -> None:
    # Blocks of single output rows, of a few rows (with the rows below them that the kernel
    # also reads), and of whole images; strides and dilations that split the input rows
    # into phases; one GEMM per kernel row and im2col. The GEMMs through BLAS itself and
    # through numpy (blas.py's fallback).
    monkeypatch.setattr(op_conv2d, "_COPY_BLOCK_BYTES", limit)
    if not direct_blas:
        monkeypatch.setattr(blas, "_BLAS", None)
    x, w, b = randn(3, 11, 7, 3, seed=31), randn(4, 3, 3, 3, seed=32), randn(4, seed=33)
    out = run_op(CONV, _attrs(w, stride=list(stride), dilation=list(dilation),
                              padList=[1, 2, 1, 0]), [x, Const(w), Const(b)])
    ref = conv_reference(x, w, b, stride=stride, dilation=dilation, pads=(1, 2, 1, 0))
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


def test_dynamic_spatial_dims() -> None:
    x, w = randn(1, 7, 9, 2, seed=34), randn(3, 3, 3, 2, seed=35)
    node = make_node(CONV, _attrs(w, stride=[2, 2], padMode=ht.PAD_MODE_SAME),
                     [Declared(x, (-1, -1, -1, 2)), Const(w)])
    (out,) = run_node(node, [x, w])
    assert out.shape == (1, 4, 5, 3)


def test_error_paths() -> None:
    x, w = np.ones((1, 5, 5, 4), np.float32), np.ones((2, 3, 3, 4), np.float32)
    b = np.ones(2, np.float32)
    expect_refused(NNRT_INVALID_NODE, CONV, _attrs(w), [x])
    expect_refused(NNRT_INVALID_NODE, CONV, _attrs(w), [x, Const(w), Const(b), Const(b)])
    expect_refused(NNRT_INVALID_NODE, CONV, na.Conv2DFusion(kernelSize=[3]), [x, Const(w)])
    expect_refused(NNRT_INVALID_NODE, CONV, na.Conv2DFusion(kernelSize=[2, 2]), [x, Const(w)])
    expect_refused(NNRT_INVALID_NODE, CONV, _attrs(w, stride=[1, 0]), [x, Const(w)])
    expect_refused(NNRT_INVALID_NODE, CONV, _attrs(w, dilation=[2]), [x, Const(w)])
    expect_refused(NNRT_INVALID_NODE, CONV, _attrs(w, padMode=7), [x, Const(w)])
    expect_refused(NNRT_INVALID_NODE, CONV, _attrs(w, padList=[1, 1, 1]), [x, Const(w)])
    expect_refused(NNRT_INVALID_NODE, CONV, _attrs(w, padList=[-1, 0, 0, 0]), [x, Const(w)])
    expect_refused(NNRT_INVALID_NODE, CONV,
                   _attrs(w, padMode=ht.PAD_MODE_SAME, padList=[1, 1, 1, 1]), [x, Const(w)])
    expect_refused(NNRT_INVALID_NODE, CONV, _attrs(w, activationType=99), [x, Const(w)])
    # inconsistent shapes and channel attributes
    expect_refused(NNRT_INVALID_NODE, CONV, _attrs(w), [x, Const(np.ones((2, 3, 3), np.float32))])
    expect_refused(NNRT_INVALID_NODE, CONV, _attrs(w), [x, Const(np.ones((2, 3, 3, 3),
                                                                         np.float32))])
    expect_refused(NNRT_INVALID_NODE, CONV, _attrs(w, group=2), [x, Const(w)])
    expect_refused(NNRT_INVALID_NODE, CONV, na.Conv2DFusion(),
                   [x, Const(np.ones((2, 0, 3, 4), np.float32))])
    expect_refused(NNRT_INVALID_NODE, CONV, _attrs(w, group=-1), [x, Const(w)])
    expect_refused(NNRT_INVALID_NODE, CONV, _attrs(w), [x, Const(w), Const(np.ones(3, np.float32))])
    expect_refused(NNRT_INVALID_NODE, CONV, _attrs(w, inChannel=3), [x, Const(w)])
    expect_refused(NNRT_INVALID_NODE, CONV, _attrs(w, outChannel=5), [x, Const(w)])
    expect_refused(NNRT_INVALID_NODE, CONV, _attrs(w), [np.ones((5, 5, 4), np.float32), Const(w)])
    expect_refused(NNRT_INVALID_NODE, CONV, _attrs(w, padMode=ht.PAD_MODE_VALID),
                   [np.ones((1, 2, 2, 4), np.float32), Const(w)])
    # dtypes
    expect_refused(NNRT_UNSUPPORTED_OP, CONV, _attrs(w),
                   [x.astype(np.int32), Const(w.astype(np.int32))])
    expect_refused(NNRT_UNSUPPORTED_OP, CONV, _attrs(w), [x, Const(w.astype(np.float64))])
    expect_refused(NNRT_UNSUPPORTED_OP, CONV, _attrs(w), [x, Declared(w, (2, -1, 3, 4))])


def test_run_time_shape_errors() -> None:
    x, w = randn(1, 5, 5, 4), randn(2, 3, 3, 4)
    node = make_node(CONV, _attrs(w, padMode=ht.PAD_MODE_VALID),
                     [Declared(x, (1, -1, -1, 4)), Const(w)])
    kernel = create_kernel(node)
    expect_error(NNRT_INVALID_SHAPE, lambda: kernel.infer_shapes([(1, 2, 2, 4), w.shape]))
    expect_error(NNRT_INVALID_SHAPE, lambda: kernel.infer_shapes([(1, 5, 5, 3), w.shape]))


@pytest.mark.parametrize("shape, stride, row_gemms", [
    ((1, 32, 32, 64), 1, True),  # ResNet's 3x3 layers: one GEMM per kernel row
    ((1, 32, 32, 64), 2, False),  # a row stride of 2: im2col
    ((1, 8, 8, 256), 1, False),  # 64 output pixels: im2col
    ((1, 64, 64, 3), 1, False),  # 3 input channels: im2col
])
def test_which_computation_a_convolution_takes(shape, stride: int, row_gemms: bool,
                                               computation: str, monkeypatch) -> None:
    if computation != "im2col":
        pytest.skip("the default thresholds, once")
    monkeypatch.setattr(op_conv2d, "_ROW_GEMM_MIN_PIXELS", DEFAULT_THRESHOLDS[0])
    monkeypatch.setattr(op_conv2d, "_ROW_GEMM_MIN_DEPTH", DEFAULT_THRESHOLDS[1])
    accumulated = []
    gemm = blas.gemm

    def spy(a, b, out, accumulate=False):
        accumulated.append(accumulate)
        gemm(a, b, out, accumulate)

    monkeypatch.setattr(blas, "gemm", spy)
    x, w = randn(*shape, seed=40), randn(4, 3, 3, shape[3], seed=41)
    out = run_op(CONV, _attrs(w, stride=[stride, stride], padList=[1, 1, 1, 1]), [x, Const(w)])
    assert any(accumulated) == row_gemms
    ref = conv_reference(x[:, :12, :12], w, None, (stride, stride), pads=(1, 0, 1, 0))
    rows = ref.shape[1] - 1  # the corner whose windows lie inside x[:, :12, :12] and its padding
    np.testing.assert_allclose(out[:, :rows, :rows], ref[:, :rows, :rows], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("n, rows, halo, row_bytes, limit", [
    (5, 4, 0, 10, 80),  # two whole images per block, the last block one image
    (5, 4, 0, 10, 1000),  # every image in one block
    (3, 7, 2, 10, 50),  # rows of one image: 3 rows (+2 halo) per block
    (2, 7, 0, 10, 5),  # a block is never less than one row
    (2, 3, 2, 10, 10),  # nor when the halo alone is over the limit
])
def test_blocks_cover_every_row_once(n: int, rows: int, halo: int, row_bytes: int, limit: int,
                                     monkeypatch) -> None:
    monkeypatch.setattr(op_conv2d, "_COPY_BLOCK_BYTES", limit)
    blocks = op_conv2d._blocks(n, rows, halo, row_bytes)
    covered = [(i, r) for images, r0, count in blocks
               for i in range(images.start, images.stop) for r in range(r0, r0 + count)]
    assert sorted(covered) == [(i, r) for i in range(n) for r in range(rows)]
    for images, r0, count in blocks:
        several = images.stop - images.start > 1
        assert not several or (halo == 0 and r0 == 0 and count == rows)
        if count > 1:
            assert (images.stop - images.start) * (count + halo) * row_bytes <= limit
