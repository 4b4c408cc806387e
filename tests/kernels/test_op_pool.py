"""MaxPoolFusion / AvgPoolFusion against explicit loops over windows of real cells, with the
expected output sizes and leading pads written out per case (closed forms of hdi.md 6.15 /
6.16): every PadMode, both RoundModes, global pooling, NHWC and NCHW, dtypes, errors."""

from __future__ import annotations

import numpy as np
import pytest

from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from tests.kernels.util import (
    NNRT_INVALID_FORMAT,
    NNRT_INVALID_NODE,
    NNRT_UNSUPPORTED_OP,
    Declared,
    expect_refused,
    make_node,
    randn,
    run_node,
    run_op,
)

MAX, AVG = na.NODE_TYPE_MAX_POOL_FUSION, na.NODE_TYPE_AVGPOOL_FUSION
ATTRS = {MAX: na.MaxPoolFusion, AVG: na.AvgPoolFusion}


def pool_reference(x: np.ndarray, kind: int, kernel, stride, before, out_hw) -> np.ndarray:
    """NHWC pooling over the real cells of each window; `before` = (top, left) padding."""
    n_, h_, w_, c_ = x.shape
    out = np.zeros((n_, *out_hw, c_))
    for n in range(n_):
        for oh in range(out_hw[0]):
            for ow in range(out_hw[1]):
                for c in range(c_):
                    cells = [float(x[n, r, q, c])
                             for r in range(oh * stride[0] - before[0],
                                            oh * stride[0] - before[0] + kernel[0])
                             for q in range(ow * stride[1] - before[1],
                                            ow * stride[1] - before[1] + kernel[1])
                             if 0 <= r < h_ and 0 <= q < w_]
                    assert cells, "every window must hold a real cell"
                    out[n, oh, ow, c] = max(cells) if kind == MAX else sum(cells) / len(cells)
    return out


def _attrs(kind: int, kernel=(2, 2), strides=(2, 2), pad=(), mode=ht.PAD_MODE_VALID,
           ceil=False, fmt=ht.FORMAT_NHWC, **kw):
    return ATTRS[kind](kernelSize=list(kernel), strides=list(strides), pad=list(pad),
                       padMode=mode, format=fmt,
                       roundMode=ht.ROUND_MODE_CEIL if ceil else ht.ROUND_MODE_FLOOR, **kw)


# (input H, W), kernel, strides, padMode, pad, ceil, expected (OH, OW), expected (top, left)
CASES = [
    ((6, 7), (2, 2), (2, 2), ht.PAD_MODE_VALID, (), False, (3, 3), (0, 0)),
    ((6, 7), (2, 2), (2, 2), ht.PAD_MODE_VALID, (), True, (3, 4), (0, 0)),
    ((5, 5), (3, 3), (1, 1), ht.PAD_MODE_PAD, (1, 1, 1, 1), False, (5, 5), (1, 1)),
    ((6, 7), (3, 3), (2, 2), ht.PAD_MODE_PAD, (1, 0, 2, 1), False, (3, 4), (1, 2)),
    ((6, 7), (3, 3), (2, 2), ht.PAD_MODE_PAD, (1, 0, 2, 1), True, (3, 5), (1, 2)),
    # CEIL would add a window starting on the bottom padding: dropped (Caffe/PyTorch/ONNX)
    ((5, 5), (2, 2), (2, 2), ht.PAD_MODE_PAD, (1, 1, 1, 1), True, (3, 3), (1, 1)),
    ((4, 4), (1, 1), (2, 2), ht.PAD_MODE_VALID, (), True, (2, 2), (0, 0)),
    ((5, 6), (3, 3), (2, 2), ht.PAD_MODE_SAME, (), False, (3, 3), (1, 0)),
    ((5, 6), (3, 3), (2, 2), ht.PAD_MODE_SAME, (), True, (3, 3), (1, 0)),
    ((7, 4), (3, 2), (1, 3), ht.PAD_MODE_SAME, (), False, (7, 2), (1, 0)),
]


@pytest.mark.parametrize("kind", [MAX, AVG], ids=["max", "avg"])
@pytest.mark.parametrize("case", CASES, ids=[f"case{i}" for i in range(len(CASES))])
def test_windows(kind: int, case) -> None:
    hw, kernel, strides, mode, pad, ceil, out_hw, before = case
    x = randn(2, *hw, 3, seed=1)
    out = run_op(kind, _attrs(kind, kernel, strides, pad, mode, ceil), [x])
    assert out.shape == (2, *out_hw, 3)
    np.testing.assert_allclose(out, pool_reference(x, kind, kernel, strides, before, out_hw),
                               rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("kind", [MAX, AVG], ids=["max", "avg"])
def test_nchw(kind: int) -> None:
    x_nhwc = randn(2, 6, 7, 3, seed=2)
    x = np.ascontiguousarray(x_nhwc.transpose(0, 3, 1, 2))
    attrs = _attrs(kind, (3, 3), (2, 2), (1, 0, 2, 1), ht.PAD_MODE_PAD, True, ht.FORMAT_NCHW)
    out = run_op(kind, attrs, [x], fmt=ht.FORMAT_NCHW)
    want = pool_reference(x_nhwc, kind, (3, 3), (2, 2), (1, 2), (3, 5)).transpose(0, 3, 1, 2)
    np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6)
    # An untagged input takes the layout from the format attribute.
    out = run_op(kind, attrs, [Declared(x, format=ht.FORMAT_NONE)])
    np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("kind", [MAX, AVG], ids=["max", "avg"])
@pytest.mark.parametrize("nchw", [False, True])
def test_global(kind: int, nchw: bool) -> None:
    x = randn(2, 4, 5, 3, seed=3)
    # kernel / strides / pads are ignored (even nonsensical ones)
    attrs = ATTRS[kind](kernelSize=[1], strides=[0], pad=[9], padMode=ht.PAD_MODE_SAME,
                        format=ht.FORMAT_NCHW if nchw else ht.FORMAT_NHWC, **{"global": True})
    want = np.array([[[[(max if kind == MAX else lambda v: sum(v) / len(v))(
        [float(x[n, h, w, c]) for h in range(4) for w in range(5)]) for c in range(3)]]]
        for n in range(2)])
    if nchw:
        out = run_op(kind, attrs, [np.ascontiguousarray(x.transpose(0, 3, 1, 2))],
                     fmt=ht.FORMAT_NCHW)
        want = want.transpose(0, 3, 1, 2)
    else:
        out = run_op(kind, attrs, [x])
    assert out.shape == want.shape
    np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.uint8])
def test_max_integers_padding_never_wins(dtype) -> None:
    lo = np.iinfo(dtype).min
    x = np.full((1, 3, 3, 1), lo, dtype=dtype)
    x[0, 1, 1, 0] = lo + 5
    out = run_op(MAX, _attrs(MAX, (2, 2), (1, 1), (1, 1, 1, 1), ht.PAD_MODE_PAD), [x])
    assert out.dtype == dtype and out.shape == (1, 4, 4, 1)
    want = pool_reference(x, MAX, (2, 2), (1, 1), (1, 1), (4, 4))
    assert out.astype(np.int64).tolist() == want.astype(np.int64).tolist()


def test_max_float_padding_never_wins() -> None:
    x = -np.arange(1, 10, dtype=np.float32).reshape(1, 3, 3, 1) - 100
    out = run_op(MAX, _attrs(MAX, (3, 3), (1, 1), mode=ht.PAD_MODE_SAME), [x])
    assert np.all(out < -100)


def test_float16_avg_and_float64() -> None:
    x = randn(1, 6, 6, 4, seed=4)
    want = pool_reference(x.astype(np.float16), AVG, (3, 3), (2, 2), (0, 0), (3, 3))
    out = run_op(AVG, _attrs(AVG, (3, 3), (2, 2), mode=ht.PAD_MODE_SAME), [x.astype(np.float16)])
    assert out.dtype == np.float16
    np.testing.assert_allclose(out.astype(np.float64), want, rtol=2e-3, atol=2e-3)
    out = run_op(AVG, _attrs(AVG, (3, 3), (2, 2), mode=ht.PAD_MODE_SAME), [x.astype(np.float64)])
    np.testing.assert_allclose(out, pool_reference(x, AVG, (3, 3), (2, 2), (0, 0), (3, 3)),
                               rtol=1e-12)


@pytest.mark.parametrize("kind", [MAX, AVG], ids=["max", "avg"])
def test_fused_activation(kind: int) -> None:
    x = randn(1, 4, 4, 2, seed=5)
    out = run_op(kind, _attrs(kind, activationType=ht.ACTIVATION_TYPE_RELU), [x])
    want = np.maximum(pool_reference(x, kind, (2, 2), (2, 2), (0, 0), (2, 2)), 0)
    np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6)
    out = run_op(kind, _attrs(kind, activationType=ht.ACTIVATION_TYPE_TANH, **{"global": True}),
                 [x])
    assert out.shape == (1, 1, 1, 2)
    expect_refused(NNRT_UNSUPPORTED_OP, kind,
                   _attrs(kind, activationType=ht.ACTIVATION_TYPE_HARD_TANH), [x])


def test_dynamic_spatial_dims() -> None:
    x = randn(1, 7, 9, 2, seed=6)
    node = make_node(MAX, _attrs(MAX, (3, 3), (2, 2), mode=ht.PAD_MODE_SAME),
                     [Declared(x, (-1, -1, -1, 2))])
    (out,) = run_node(node, [x])
    assert out.shape == (1, 4, 5, 2)


@pytest.mark.parametrize("kind", [MAX, AVG], ids=["max", "avg"])
def test_error_paths(kind: int) -> None:
    x = np.ones((1, 4, 4, 2), np.float32)
    bad = [
        dict(kernel=(2,)), dict(kernel=()), dict(kernel=(2, 0)), dict(strides=(0, 1)),
        dict(strides=(1, 1, 1)), dict(pad=(2, 0, 0, 0), mode=ht.PAD_MODE_PAD),
        dict(pad=(1, 1, 1), mode=ht.PAD_MODE_PAD), dict(pad=(1, 0, 0, 0)),
        dict(pad=(-1, 0, 0, 0), mode=ht.PAD_MODE_PAD), dict(mode=3), dict(fmt=5),
        dict(kernel=(5, 5)), dict(activationType=99),
    ]
    for kw in bad:
        expect_refused(NNRT_INVALID_NODE, kind, _attrs(kind, **kw), [x])
    expect_refused(NNRT_INVALID_NODE, kind, ATTRS[kind](kernelSize=[2, 2], roundMode=5), [x],
                   fmt=ht.FORMAT_NCHW)
    expect_refused(NNRT_INVALID_NODE, kind, _attrs(kind), [x, x])
    expect_refused(NNRT_INVALID_NODE, kind, _attrs(kind), [np.ones((4, 4, 2), np.float32)])
    expect_refused(NNRT_INVALID_FORMAT, kind, _attrs(kind, fmt=ht.FORMAT_NCHW), [x])
    expect_refused(NNRT_INVALID_FORMAT, kind, _attrs(kind), [x], fmt=ht.FORMAT_NCHW)
    expect_refused(NNRT_INVALID_NODE, kind, _attrs(kind), [x], out_dtype=np.float16)


def test_avg_integer_unsupported() -> None:
    expect_refused(NNRT_UNSUPPORTED_OP, AVG, _attrs(AVG), [np.ones((1, 4, 4, 2), np.int32)])
