"""ExpFusion: base^(shift + scale * x). References: onnx's Exp for the natural case, Python's
math.pow / math.exp element by element for every base/scale/shift combination."""

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

EXP = na.NODE_TYPE_EXPFUSION


def _exp(x: np.ndarray, base: float = -1.0, scale: float = 1.0, shift: float = 0.0,
         **kw: Any) -> np.ndarray:
    return run_op(EXP, na.ExpFusion(base=base, scale=scale, shift=shift), [x],
                  out_shape=x.shape, **kw)


def _reference(x: np.ndarray, base: float, scale: float, shift: float) -> np.ndarray:
    def one(v: float) -> float:
        z = shift + scale * v
        return math.exp(z) if base == -1.0 else math.pow(base, z)

    return np.array([one(float(v)) for v in x.reshape(-1)]).reshape(x.shape)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(2, 3, 4), (), (1, 1)])
def test_natural_matches_onnx(dtype: Any, shape: tuple[int, ...]) -> None:
    x = randn(*shape, dtype=dtype, seed=3)
    tol = 1e-6 if dtype == np.float32 else 1e-14
    np.testing.assert_allclose(_exp(x), onnx_reference("Exp", [x]), rtol=tol)


@pytest.mark.parametrize("base,scale,shift", [(-1.0, 2.0, 0.5), (-1.0, -0.5, -1.0),
                                              (2.0, 1.0, 0.0), (10.0, 0.5, 1.0),
                                              (0.5, 3.0, -2.0), (1.0, 7.0, 3.0),
                                              (-1.0, 0.0, 1.0)])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_base_scale_shift(base: float, scale: float, shift: float, dtype: Any) -> None:
    x = randn(3, 5, dtype=dtype, seed=4)
    out = _exp(x, base, scale, shift)
    tol = {np.float16: 2e-3, np.float32: 2e-6, np.float64: 1e-13}[dtype]
    np.testing.assert_allclose(out.astype(np.float64),
                               _reference(x.astype(np.float64), base, scale, shift), rtol=tol)


def test_exact_powers_and_overflow() -> None:
    x = np.array([0.0, 1.0, 2.0, 3.0, 200.0, -200.0], np.float32)
    with np.errstate(all="raise"):
        out = _exp(x, base=10.0)
    assert out[:4].tolist() == [1.0, 10.0, 100.0, 1000.0]
    assert out[4] == np.inf and out[5] == 0.0


@pytest.mark.parametrize("base", [0.0, -2.0, -0.5, math.inf, math.nan])
def test_bad_base_is_invalid(base: float) -> None:
    expect_refused(NNRT_INVALID_NODE, EXP, na.ExpFusion(base=base, scale=1.0),
                   [np.ones(2, np.float32)])


def test_error_paths() -> None:
    f32 = np.ones(3, np.float32)
    attrs = na.ExpFusion(base=-1.0, scale=1.0)
    expect_refused(NNRT_INVALID_NODE, EXP, na.ExpFusion(base=-1.0, scale=math.inf), [f32])
    expect_refused(NNRT_INVALID_NODE, EXP, na.ExpFusion(base=2.0, scale=1.0, shift=math.nan),
                   [f32])
    expect_refused(NNRT_INVALID_NODE, EXP, attrs, [f32, f32])
    expect_refused(NNRT_INVALID_NODE, EXP, attrs, [f32], out_dtype=np.float16)
    expect_refused(NNRT_UNSUPPORTED_OP, EXP, attrs, [np.ones(3, np.int32)])
    expect_refused(NNRT_UNSUPPORTED_OP, EXP, attrs, [np.ones(3, np.bool_)])
    expect_refused(NNRT_UNSUPPORTED_OP, EXP, attrs, [np.ones(3, np.int8)],
                   quant_type=ht.QUANT_TYPE_ALL)
