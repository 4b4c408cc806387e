"""MaxPoolFusion / AvgPoolFusion against explicit loops over windows of real cells, with the
expected output sizes and leading pads written out per case (closed forms of hdi.md 6.15 /
6.16): every PadMode, both RoundModes, global pooling, NHWC and NCHW, dtypes, errors."""

from __future__ import annotations

import numpy as np
import pytest

from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from tests.hdi.reference.util import (
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


# More window geometries: taps missing for many outputs (kernel wider than the input), gaps
# between windows (stride > kernel), CEIL windows running past the input, a kernel of 1
# along one axis or both, border windows only (no window wholly inside the input).
MORE_CASES = [
    ((3, 4), (5, 5), (1, 1), ht.PAD_MODE_PAD, (2, 2, 2, 2), False, (3, 4), (2, 2)),
    ((3, 3), (4, 4), (1, 1), ht.PAD_MODE_PAD, (2, 2, 2, 2), False, (4, 4), (2, 2)),
    ((7, 8), (2, 2), (3, 3), ht.PAD_MODE_VALID, (), False, (2, 3), (0, 0)),
    ((7, 8), (2, 2), (3, 3), ht.PAD_MODE_VALID, (), True, (3, 3), (0, 0)),
    ((5, 6), (1, 3), (1, 2), ht.PAD_MODE_PAD, (0, 0, 1, 1), False, (5, 3), (0, 1)),
    ((5, 6), (3, 1), (2, 1), ht.PAD_MODE_PAD, (1, 1, 0, 0), False, (3, 6), (1, 0)),
    ((4, 5), (1, 1), (1, 1), ht.PAD_MODE_VALID, (), False, (4, 5), (0, 0)),
    ((5, 5), (4, 4), (2, 2), ht.PAD_MODE_SAME, (), False, (3, 3), (1, 1)),
    ((6, 6), (3, 3), (3, 3), ht.PAD_MODE_PAD, (2, 2, 2, 2), True, (3, 3), (2, 2)),
    ((9, 9), (3, 3), (2, 2), ht.PAD_MODE_PAD, (1, 1, 1, 1), False, (5, 5), (1, 1)),
]

# One window: covering the whole input (reduced over all H*W cells at once) or not quite.
WHOLE_CASES = [
    ((4, 5), (4, 5), (1, 1), ht.PAD_MODE_VALID, (), False, (1, 1), (0, 0)),  # whole
    ((4, 5), (5, 6), (1, 1), ht.PAD_MODE_PAD, (1, 0, 0, 1), False, (1, 1), (1, 0)),  # whole
    ((4, 5), (4, 5), (7, 7), ht.PAD_MODE_VALID, (), True, (1, 1), (0, 0)),  # whole
    ((5, 5), (4, 4), (4, 4), ht.PAD_MODE_VALID, (), False, (1, 1), (0, 0)),  # misses a row
    ((5, 5), (4, 4), (4, 4), ht.PAD_MODE_VALID, (), True, (2, 2), (0, 0)),
    ((4, 5), (4, 4), (1, 1), ht.PAD_MODE_VALID, (), False, (1, 2), (0, 0)),
    ((4, 5), (3, 5), (1, 1), ht.PAD_MODE_VALID, (), False, (2, 1), (0, 0)),
    ((4, 5), (5, 5), (1, 1), ht.PAD_MODE_PAD, (0, 1, 0, 0), False, (1, 1), (0, 0)),  # whole
]


@pytest.mark.parametrize("kind", [MAX, AVG], ids=["max", "avg"])
@pytest.mark.parametrize("nchw", [False, True], ids=["nhwc", "nchw"])
@pytest.mark.parametrize("case", MORE_CASES + WHOLE_CASES,
                         ids=[f"more{i}" for i in range(len(MORE_CASES))]
                         + [f"whole{i}" for i in range(len(WHOLE_CASES))])
def test_more_windows(kind: int, nchw: bool, case) -> None:
    hw, kernel, strides, mode, pad, ceil, out_hw, before = case
    x = randn(2, *hw, 3, seed=7)
    want = pool_reference(x, kind, kernel, strides, before, out_hw)
    fmt = ht.FORMAT_NCHW if nchw else ht.FORMAT_NHWC
    attrs = _attrs(kind, kernel, strides, pad, mode, ceil, fmt)
    if nchw:
        out = run_op(kind, attrs, [np.ascontiguousarray(x.transpose(0, 3, 1, 2))], fmt=fmt)
        out = out.transpose(0, 2, 3, 1)
    else:
        out = run_op(kind, attrs, [x])
    assert out.shape == (2, *out_hw, 3)
    np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("kind,dtype", [(MAX, np.float16), (MAX, np.float64), (MAX, np.int8),
                                        (AVG, np.float16), (AVG, np.float64)])
def test_whole_window_dtypes(kind: int, dtype) -> None:
    x = (randn(2, 6, 7, 5, seed=8) * 40).astype(dtype)
    for attrs in (_attrs(kind, (6, 7), (1, 1)),
                  ATTRS[kind](format=ht.FORMAT_NHWC, **{"global": True})):
        out = run_op(kind, attrs, [x])
        assert out.dtype == dtype and out.shape == (2, 1, 1, 5)
        cells = x.astype(np.float64).reshape(2, 42, 5)
        want = [[max(cells[n, :, c]) if kind == MAX else sum(cells[n, :, c]) / 42
                 for c in range(5)] for n in range(2)]
        tol = 2e-3 if dtype == np.float16 else 1e-12
        np.testing.assert_allclose(out.astype(np.float64).reshape(2, 5), want, rtol=tol,
                                   atol=tol)


def test_whole_window_nan_and_activation() -> None:
    x = randn(1, 3, 3, 2, seed=9)
    x[0, 1, 2, 1] = np.nan
    out = run_op(MAX, _attrs(MAX, (3, 3), (1, 1), activationType=ht.ACTIVATION_TYPE_RELU),
                 [x])
    assert np.isnan(out[0, 0, 0, 1])
    assert out[0, 0, 0, 0] == max(0.0, float(np.max(x[0, :, :, 0])))
    out = run_op(AVG, _attrs(AVG, (3, 3), (1, 1), activationType=ht.ACTIVATION_TYPE_RELU),
                 [x])
    assert np.isnan(out[0, 0, 0, 1])
    want = max(0.0, sum(x[0, :, :, 0].ravel().tolist()) / 9)
    np.testing.assert_allclose(out[0, 0, 0, 0], want, rtol=1e-6)


@pytest.mark.parametrize("kind", [MAX, AVG], ids=["max", "avg"])
def test_runs_in_an_arena_reuse_buffers_correctly(kind: int) -> None:
    """Two runs of one kernel sharing the run's buffers (padding borders, row pass), the
    second with other values: each result is that run's own."""
    from nnrt.hdi.reference import arena
    from nnrt.hdi.reference.kernel import create_kernel

    case = CASES[4]  # PAD (1, 0, 2, 1), CEIL: border windows on every side
    hw, kernel, strides, mode, pad, ceil, out_hw, before = case
    node = make_node(kind, _attrs(kind, kernel, strides, pad, mode, ceil),
                     [randn(2, *hw, 3)])
    kernel_ = create_kernel(node)
    pool = arena.ArenaPool(frozenset())
    for seed in (11, 12, 13):
        x = randn(2, *hw, 3, seed=seed) - (5 if seed == 12 else 0)
        with pool.use():
            (out,) = run_node(node, [x], kernel_)
            np.testing.assert_allclose(out, pool_reference(x, kind, kernel, strides, before,
                                                           out_hw), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("kind", [MAX, AVG], ids=["max", "avg"])
def test_nan_reaches_exactly_the_windows_holding_it(kind: int) -> None:
    x = randn(1, 5, 6, 2, seed=14)
    x[0, 3, 0, 1] = np.nan  # row 3, column 0 (a left border cell), channel 1
    out = run_op(kind, _attrs(kind, (3, 3), (2, 2), (1, 1, 1, 1), ht.PAD_MODE_PAD), [x])
    assert out.shape == (1, 3, 3, 2)
    assert not np.isnan(out[..., 0]).any()
    # Window (oh, ow) covers rows 2*oh-1 .. 2*oh+1 and columns 2*ow-1 .. 2*ow+1.
    want = [[oh in (1, 2) and ow == 0 for ow in range(3)] for oh in range(3)]
    assert np.isnan(out[0, :, :, 1]).tolist() == want
