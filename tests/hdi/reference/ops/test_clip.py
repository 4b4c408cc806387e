"""Clip: x clamped to the [min, max] attributes, ±inf meaning unbounded. References: onnx's
Clip (bounds as inputs, a left-out input meaning unbounded) and Python min/max."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from tests.hdi.reference.util import (
    NNRT_INVALID_NODE,
    NNRT_UNSUPPORTED_OP,
    expect_refused,
    onnx_reference,
    randn,
    run_op,
)

CLIP = na.NODE_TYPE_CLIP
INF = math.inf


def _clip(x: np.ndarray, low: float, high: float, **kw: Any) -> np.ndarray:
    return run_op(CLIP, na.Clip(min=low, max=high), [x], out_shape=x.shape, **kw)


@pytest.mark.parametrize("low,high", [(-0.5, 0.75), (0.0, 0.0), (-INF, 0.3), (-0.2, INF),
                                      (-INF, INF), (1.0, 1.0)])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("shape", [(2, 3, 4), (), (1,)])
def test_float_matches_onnx(low: float, high: float, dtype: Any, shape) -> None:
    x = randn(*shape, dtype=dtype, seed=2)
    # the attributes are proto floats: the bounds are float32 values
    bound = [None if math.isinf(b) else np.array(np.float32(b), dtype) for b in (low, high)]
    want = onnx_reference("Clip", [x, *bound])
    np.testing.assert_array_equal(_clip(x, low, high), want)


def test_nan_stays_nan_and_infinities_clamp() -> None:
    x = np.array([np.nan, -np.inf, np.inf, 0.5], np.float32)
    out = _clip(x, -1.0, 1.0)
    assert np.isnan(out[0]) and out[1:].tolist() == [-1.0, 1.0, 0.5]


def test_float16_bounds_beyond_range() -> None:
    x = np.array([-60000.0, 60000.0, 3.0], np.float16)
    assert _clip(x, -1e9, 1e9).tolist() == [-60000.0, 60000.0, 3.0]


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint8, np.uint16])
@pytest.mark.parametrize("low,high", [(-2.5, 3.7), (0.0, 0.0), (-INF, 5.0), (1.2, INF),
                                      (-1000.0, 1000.0), (-3.0, -1.0)])
def test_integers(dtype: Any, low: float, high: float) -> None:
    info = np.iinfo(dtype)
    lo = max(info.min, -INF if low == -INF else math.ceil(low))  # integers inside the bounds
    hi = min(info.max, INF if high == INF else math.floor(high))
    if lo > hi:
        return  # no integer of the dtype in range: covered by test_error_paths
    x = np.array([info.min, -4, -3, -1, 0, 1, 3, 4, 6, info.max], np.int64)
    x = x[(x >= info.min) & (x <= info.max)].astype(dtype)
    out = _clip(x, low, high)
    assert out.dtype == dtype
    assert out.tolist() == [v if lo <= v <= hi else lo if v < lo else hi for v in x.tolist()]


def test_error_paths() -> None:
    f32 = np.ones(3, np.float32)
    expect_refused(NNRT_INVALID_NODE, CLIP, na.Clip(min=1.0, max=0.0), [f32])
    expect_refused(NNRT_INVALID_NODE, CLIP, na.Clip(min=math.nan, max=1.0), [f32])
    expect_refused(NNRT_INVALID_NODE, CLIP, na.Clip(min=0.0, max=math.nan), [f32])
    expect_refused(NNRT_INVALID_NODE, CLIP, na.Clip(min=0.0, max=1.0), [f32, f32])
    expect_refused(NNRT_INVALID_NODE, CLIP, na.Clip(min=0.0, max=1.0), [f32],
                   out_dtype=np.float64)
    expect_refused(NNRT_UNSUPPORTED_OP, CLIP, na.Clip(min=0.2, max=0.8), [np.ones(3, np.int32)])
    expect_refused(NNRT_UNSUPPORTED_OP, CLIP, na.Clip(min=200.0, max=300.0),
                   [np.ones(3, np.int8)])
    expect_refused(NNRT_UNSUPPORTED_OP, CLIP, na.Clip(min=-5.0, max=-1.0),
                   [np.ones(3, np.uint8)])
    expect_refused(NNRT_UNSUPPORTED_OP, CLIP, na.Clip(min=0.0, max=1.0), [np.ones(3, np.bool_)])
    expect_refused(NNRT_UNSUPPORTED_OP, CLIP, na.Clip(min=0.0, max=1.0), [np.ones(3, np.int8)],
                   quant_type=ht.QUANT_TYPE_ALL)
