"""Resize against onnx's reference Resize (sizes input; NHWC transposed to NCHW) for every
method x coordinate transform, nearest modes, cubicCoeff and excludeOutside, and against an
exact (fractions) nearest-neighbour loop; preserveAspectRatio, NCHW tag, dtypes, errors."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from nnrt.hdi.reference.kernel import create_kernel
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from tests.hdi.reference.util import (
    NNRT_INVALID_NODE,
    NNRT_INVALID_SHAPE,
    NNRT_UNSUPPORTED_OP,
    Declared,
    expect_error,
    expect_refused,
    make_node,
    onnx_reference,
    randn,
    run_node,
    run_op,
)

RESIZE = na.NODE_TYPE_RESIZE
ASYM = ht.COORDINATE_TRANSFORM_MODE_ASYMMETRIC
ALIGN = ht.COORDINATE_TRANSFORM_MODE_ALIGN_CORNERS
HALF = ht.COORDINATE_TRANSFORM_MODE_HALF_PIXEL
ONNX_CTM = {ASYM: "asymmetric", ALIGN: "align_corners", HALF: "pytorch_half_pixel"}
ONNX_MODE = {ht.RESIZE_METHOD_LINEAR: "linear", ht.RESIZE_METHOD_CUBIC: "cubic",
             ht.RESIZE_METHOD_NEAREST: "nearest"}
ONNX_NEAREST = {ht.NEAREST_MODE_NORMAL: "round_prefer_ceil",
                ht.NEAREST_MODE_ROUND_HALF_DOWN: "round_prefer_floor",
                ht.NEAREST_MODE_ROUND_HALF_UP: "round_prefer_ceil",
                ht.NEAREST_MODE_FLOOR: "floor", ht.NEAREST_MODE_CEIL: "ceil"}


def onnx_resize(x_nhwc, size, method, ctm, a=-0.75, exclude=0,
                nearest=ht.NEAREST_MODE_NORMAL):
    x = x_nhwc.transpose(0, 3, 1, 2)
    sizes = np.array([x.shape[0], x.shape[1], *size], np.int64)
    # inputs X, roi and scales (left out), sizes
    y = onnx_reference("Resize", [x, None, None, sizes], opset=18, mode=ONNX_MODE[method],
                       coordinate_transformation_mode=ONNX_CTM[ctm], cubic_coeff_a=a,
                       exclude_outside=exclude, nearest_mode=ONNX_NEAREST[nearest])
    return y.transpose(0, 2, 3, 1)


def resize(x, size, method, ctm=ASYM, **kw):
    attrs = na.Resize(method=method, newHeight=size[0], newWidth=size[1],
                      coordinateTransformMode=ctm, **kw)
    return run_op(RESIZE, attrs, [x])


def exact_nearest_index(o: int, n_in: int, n_out: int, ctm: int, mode: int) -> int:
    """The nearest source index with exact rational coordinates (hdi.md 6.10 / 6.11)."""
    if ctm == ASYM:
        x = Fraction(o * n_in, n_out)
    elif ctm == ALIGN:
        x = Fraction(o * (n_in - 1), n_out - 1) if n_out != 1 else Fraction(0)
    else:
        x = Fraction(2 * o + 1, 2) * n_in / n_out - Fraction(1, 2) if n_out > 1 else Fraction(0)
    floor = x.numerator // x.denominator
    frac = x - floor
    half = Fraction(1, 2)
    if mode == ht.NEAREST_MODE_FLOOR:
        i = floor
    elif mode == ht.NEAREST_MODE_CEIL:
        i = floor + (frac > 0)
    elif mode == ht.NEAREST_MODE_ROUND_HALF_DOWN:
        i = floor + (frac > half)
    elif mode == ht.NEAREST_MODE_ROUND_HALF_UP:
        i = floor + (frac >= half)
    else:  # NORMAL: halves away from zero
        i = floor + (frac > half or (frac == half and x > 0))
    return min(max(i, 0), n_in - 1)


@pytest.mark.parametrize("method", [ht.RESIZE_METHOD_LINEAR, ht.RESIZE_METHOD_CUBIC])
@pytest.mark.parametrize("ctm", [ASYM, ALIGN, HALF])
@pytest.mark.parametrize("size", [(7, 9), (3, 2), (8, 4)])
@pytest.mark.parametrize("exclude", [0, 1])
def test_interpolation_against_onnx(method, ctm, size, exclude) -> None:
    x = randn(2, 4, 5, 3, seed=1)
    a = -0.5 if ctm == HALF else -0.75
    out = resize(x, size, method, ctm, excludeOutside=exclude)  # cubicCoeff 0: the default
    want = onnx_resize(x, size, method, ctm, a=a, exclude=exclude)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("a", [-0.5, -0.75, -1.0])
def test_cubic_coefficient(a: float) -> None:
    x = randn(1, 5, 4, 2, seed=2)
    out = resize(x, (9, 7), ht.RESIZE_METHOD_CUBIC, HALF, cubicCoeff=a)
    np.testing.assert_allclose(out, onnx_resize(x, (9, 7), ht.RESIZE_METHOD_CUBIC, HALF, a=a),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", [ht.NEAREST_MODE_NORMAL, ht.NEAREST_MODE_ROUND_HALF_DOWN,
                                  ht.NEAREST_MODE_ROUND_HALF_UP, ht.NEAREST_MODE_FLOOR,
                                  ht.NEAREST_MODE_CEIL])
@pytest.mark.parametrize("ctm", [ASYM, ALIGN, HALF])
@pytest.mark.parametrize("size", [(8, 10), (2, 3), (6, 1), (1, 5)])
def test_nearest_exact(mode, ctm, size) -> None:
    x = np.arange(2 * 4 * 5 * 2, dtype=np.float32).reshape(2, 4, 5, 2)
    out = resize(x, size, ht.RESIZE_METHOD_NEAREST, ctm, nearestMode=mode)
    rows = [exact_nearest_index(o, 4, size[0], ctm, mode) for o in range(size[0])]
    cols = [exact_nearest_index(o, 5, size[1], ctm, mode) for o in range(size[1])]
    np.testing.assert_array_equal(out, x[:, rows][:, :, cols])


@pytest.mark.parametrize("mode", sorted(ONNX_NEAREST))
@pytest.mark.parametrize("ctm", [ASYM, ALIGN, HALF])
def test_nearest_against_onnx(mode, ctm) -> None:
    x = randn(1, 4, 6, 2, seed=3)
    size = (7, 9)  # no coordinate falls on an exact half here
    out = resize(x, size, ht.RESIZE_METHOD_NEAREST, ctm, nearestMode=mode)
    want = onnx_resize(x, size, ht.RESIZE_METHOD_NEAREST, ctm, nearest=mode)
    np.testing.assert_array_equal(out, want)


def test_halves_normal_vs_half_down() -> None:
    x = np.arange(4, dtype=np.float32).reshape(1, 1, 4, 1)  # width 4 -> 8, asymmetric: o/2
    normal = resize(x, (1, 8), ht.RESIZE_METHOD_NEAREST, nearestMode=ht.NEAREST_MODE_NORMAL)
    down = resize(x, (1, 8), ht.RESIZE_METHOD_NEAREST,
                  nearestMode=ht.NEAREST_MODE_ROUND_HALF_DOWN)
    np.testing.assert_array_equal(normal.reshape(-1), [0, 1, 1, 2, 2, 3, 3, 3])
    np.testing.assert_array_equal(down.reshape(-1), [0, 0, 1, 1, 2, 2, 3, 3])


def test_preserve_aspect_ratio() -> None:
    x = randn(1, 4, 6, 2, seed=4)
    attrs = na.Resize(method=ht.RESIZE_METHOD_LINEAR, newHeight=10, newWidth=9,
                      preserveAspectRatio=True)
    out = run_op(RESIZE, attrs, [x])
    assert out.shape == (1, 6, 9, 2)  # scale min(10/4, 9/6) = 1.5
    np.testing.assert_allclose(out, resize(x, (6, 9), ht.RESIZE_METHOD_LINEAR), rtol=1e-6)
    x = randn(1, 5, 3, 1, seed=5)
    attrs = na.Resize(method=ht.RESIZE_METHOD_NEAREST, newHeight=2, newWidth=8,
                      preserveAspectRatio=True)
    assert run_op(RESIZE, attrs, [x]).shape == (1, 2, 1, 1)  # 0.4: round(2.0), round(1.2)
    node = make_node(RESIZE, attrs, [Declared(x, (1, -1, 3, 1))])
    assert create_kernel(node).infer_shapes([(1, -1, 3, 1)]) == [(1, -1, -1, 1)]


def test_nchw_tag() -> None:
    x = randn(2, 3, 4, 5, seed=6)  # NCHW
    attrs = na.Resize(method=ht.RESIZE_METHOD_LINEAR, newHeight=6, newWidth=3,
                      coordinateTransformMode=HALF)
    out = run_op(RESIZE, attrs, [x], fmt=ht.FORMAT_NCHW)
    want = onnx_resize(x.transpose(0, 2, 3, 1), (6, 3), ht.RESIZE_METHOD_LINEAR, HALF)
    np.testing.assert_allclose(out, want.transpose(0, 3, 1, 2), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.int32])
def test_integer_interpolation_rounds_and_saturates(dtype) -> None:
    rng = np.random.default_rng(7)
    info = np.iinfo(dtype)
    x = rng.integers(max(info.min, -1000), min(info.max, 1000), size=(1, 3, 4, 2)).astype(dtype)
    x[0, 0, 0, 0] = info.max
    for method in (ht.RESIZE_METHOD_LINEAR, ht.RESIZE_METHOD_CUBIC):
        out = resize(x, (5, 7), method, HALF)
        assert out.dtype == dtype
        want = onnx_resize(x.astype(np.float64), (5, 7), method, HALF, a=-0.5)
        want = np.clip(np.rint(want), info.min, info.max)
        if dtype == np.int32:  # onnx's reference rounds through float32 somewhere
            np.testing.assert_allclose(out, want, rtol=0, atol=info.max * 1e-6)
        else:
            np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("dtype", [np.float16, np.float64, np.bool_, np.int8])
def test_other_dtypes(dtype) -> None:
    x = (randn(1, 3, 3, 2, seed=8) > 0).astype(dtype)
    out = resize(x, (5, 4), ht.RESIZE_METHOD_NEAREST, ALIGN)
    assert out.dtype == dtype
    rows = [exact_nearest_index(o, 3, 5, ALIGN, 0) for o in range(5)]
    cols = [exact_nearest_index(o, 3, 4, ALIGN, 0) for o in range(4)]
    np.testing.assert_array_equal(out, x[:, rows][:, :, cols])
    if dtype in (np.float16, np.float64):
        x = randn(1, 3, 3, 2, dtype=dtype, seed=9)
        out = resize(x, (5, 4), ht.RESIZE_METHOD_CUBIC, ALIGN)
        want = onnx_resize(x.astype(np.float64), (5, 4), ht.RESIZE_METHOD_CUBIC, ALIGN)
        np.testing.assert_allclose(out.astype(np.float64), want, rtol=3e-3, atol=3e-3)


def test_size_one_and_identity() -> None:
    x = randn(1, 3, 4, 1, seed=10)
    out = resize(x, (1, 1), ht.RESIZE_METHOD_LINEAR, HALF)
    np.testing.assert_allclose(out.reshape(()), x[0, 0, 0, 0])  # coordinate 0 when L_out = 1
    for ctm in (ASYM, ALIGN, HALF):
        for method in (ht.RESIZE_METHOD_LINEAR, ht.RESIZE_METHOD_CUBIC,
                       ht.RESIZE_METHOD_NEAREST):
            np.testing.assert_allclose(resize(x, (3, 4), method, ctm), x, rtol=1e-6, atol=1e-6)


def test_error_paths() -> None:
    x = np.zeros((1, 2, 2, 1), np.float32)
    ok = dict(newHeight=3, newWidth=3)
    expect_refused(NNRT_INVALID_NODE, RESIZE, na.Resize(method=-1, **ok), [x])
    expect_refused(NNRT_INVALID_NODE, RESIZE, na.Resize(method=3, **ok), [x])
    expect_refused(NNRT_INVALID_NODE, RESIZE, na.Resize(coordinateTransformMode=3, **ok), [x])
    expect_refused(NNRT_INVALID_NODE, RESIZE, na.Resize(nearestMode=5, **ok), [x])
    expect_refused(NNRT_INVALID_NODE, RESIZE, na.Resize(excludeOutside=2, **ok), [x])
    expect_refused(NNRT_INVALID_NODE, RESIZE, na.Resize(cubicCoeff=float("inf"), **ok), [x])
    expect_refused(NNRT_INVALID_NODE, RESIZE, na.Resize(newHeight=3), [x])
    expect_refused(NNRT_INVALID_NODE, RESIZE, na.Resize(**ok), [x.reshape(1, 2, 2)])
    expect_refused(NNRT_INVALID_NODE, RESIZE, na.Resize(**ok), [x, x])
    expect_refused(NNRT_INVALID_NODE, RESIZE, na.Resize(**ok), [x], n_outputs=2)
    expect_refused(NNRT_INVALID_NODE, RESIZE, na.Resize(**ok), [x], out_dtype=np.float16)
    expect_refused(NNRT_INVALID_NODE, RESIZE, na.Resize(**ok), [np.zeros((1, 0, 2, 1),
                                                                         np.float32)])
    expect_refused(NNRT_UNSUPPORTED_OP, RESIZE, na.Resize(**ok), [x.astype(bool)])
    expect_refused(NNRT_UNSUPPORTED_OP, RESIZE, na.Resize(**ok), [x.astype(np.int8)],
                   quant_type=ht.QUANT_TYPE_ALL)
    node = make_node(RESIZE, na.Resize(**ok), [Declared(x, (1, -1, -1, 1))])
    expect_error(NNRT_INVALID_SHAPE, lambda: run_node(node, [np.zeros((1, 0, 2, 1),
                                                                      np.float32)]))
