"""hdi/reference/activations.py: the fused-position rules, in-place use, the normal CDF, float32
GELU over the whole float32 / float16 range, and the mask-free piecewise formulas."""

from __future__ import annotations

import math

import numpy as np
import pytest

from nnrt.hdi.reference.activations import (
    NEEDS_PARAMETERS,
    apply_activation,
    check_activation,
    normal_cdf,
)
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from nnrt.common.errors import DriverError
from tests.hdi.reference.util import NNRT_INVALID_NODE, NNRT_UNSUPPORTED_OP, expect_error, make_node

NODE = make_node(na.NODE_TYPE_ADD_FUSION, na.AddFusion(),
                 [np.zeros(2, np.float32), np.zeros(2, np.float32)])
PARAMETERISED = {ht.ACTIVATION_TYPE_ELU, ht.ACTIVATION_TYPE_LEAKY_RELU,
                 ht.ACTIVATION_TYPE_HARD_TANH, ht.ACTIVATION_TYPE_THRESHOLDRELU}


@pytest.mark.parametrize("kind", range(ht.ACTIVATION_TYPE_UNKNOWN))
def test_fused_position_refuses_exactly_the_parameterised_types(kind: int) -> None:
    assert NEEDS_PARAMETERS == PARAMETERISED
    if kind in PARAMETERISED:
        expect_error(NNRT_UNSUPPORTED_OP, lambda: check_activation(NODE, kind, fused=True))
    else:
        check_activation(NODE, kind, fused=True)
    check_activation(NODE, kind, fused=False)  # the Activation operator computes them all


@pytest.mark.parametrize("fused", [True, False])
def test_unknown_is_invalid_everywhere(fused: bool) -> None:
    for kind in (ht.ACTIVATION_TYPE_UNKNOWN, 21, 99):
        expect_error(NNRT_INVALID_NODE, lambda: check_activation(NODE, kind, fused=fused))


def test_normal_cdf_against_math_erfc() -> None:
    x = np.concatenate([np.linspace(-40, 40, 4001), [-2.8284271247461903, 2.8284271247461903,
                                                     0.0, -0.0, 1e-300, -1e-300]])
    want = np.array([0.5 * math.erfc(-v / math.sqrt(2)) for v in x])
    got = normal_cdf(x)
    nonzero = want > 0
    np.testing.assert_allclose(got[nonzero], want[nonzero], rtol=1e-12, atol=0)
    assert np.all(got[~nonzero] < 1e-300)
    special = normal_cdf(np.array([np.inf, -np.inf, np.nan]))
    assert special[0] == 1.0 and special[1] == 0.0 and np.isnan(special[2])


def _gelu_reference(x: np.ndarray) -> np.ndarray:
    """x Phi(x) in float64 from math.erfc (x float; infinities and NaN passed through)."""
    return np.array([v * 0.5 * math.erfc(-v / math.sqrt(2)) if math.isfinite(v) else
                     (v if v > 0 or math.isnan(v) else -0.0) for v in x.astype(np.float64)])


def _ulp(x: np.ndarray, dtype=np.float32) -> np.ndarray:
    """dtype's spacing at |x| (x of dtype or narrower), in float64: no overflow at the top."""
    info = np.finfo(dtype)
    return np.maximum(np.spacing(np.abs(x.astype(np.float64))) * 2.0 ** (52 - info.nmant),
                      float(info.smallest_subnormal))


def test_gelu_float32_whole_range() -> None:
    # Around the saturation of tanh (|x| about 5.5 to 6), large magnitudes up to float32's
    # largest, tiny and subnormal ones, zeros and the specials; no floating-point warning.
    big = float(np.finfo(np.float32).max)
    mags = np.concatenate([np.linspace(5.2, 6.4, 2401), [0.0, 1e-45, 1e-40, 1.2e-38, 1e-20,
                                                        7.0, 10.0, 1e4, 1e19, 1e20, 1e30,
                                                        3e38, big]]).astype(np.float32)
    x = np.concatenate([mags, -mags])
    with np.errstate(all="raise"):
        got = apply_activation(x, ht.ACTIVATION_TYPE_GELU)
        special = apply_activation(np.array([np.inf, -np.inf, np.nan], np.float32),
                                   ht.ACTIVATION_TYPE_GELU)
    assert got.dtype == np.float32
    assert np.all(np.abs(got.astype(np.float64) - _gelu_reference(x)) <= 2 * _ulp(x))
    # From |x| = 6 on, tanh is +-1: x itself, or -0 (1 + tanh is exactly 0).
    assert np.array_equal(got[x >= 6], x[x >= 6])
    assert np.all(got[x <= -6] == 0) and np.all(np.signbit(got[x <= -6]))
    assert special[0] == np.inf and special[1] == 0 and np.signbit(special[1])
    assert np.isnan(special[2])


def test_gelu_float64_specials() -> None:
    # The float64 path (Cody's erf) agrees with the float32 one on the specials.
    x = np.array([np.inf, -np.inf, np.nan, -40.0, 40.0])
    with np.errstate(all="raise"):
        got = apply_activation(x, ht.ACTIVATION_TYPE_GELU)
    assert got[0] == np.inf and got[1] == 0 and np.signbit(got[1]) and np.isnan(got[2])
    assert got[3] == -40.0 * 0.5 * math.erfc(40.0 / math.sqrt(2)) and got[4] == 40.0


def test_gelu_float16_through_float32() -> None:
    # Every float16 value: a float32 result within 2 ulp (float32) of |x|, rounded once to
    # float16; the float16 extremes and specials without floating-point warnings.
    x = np.arange(0, 0x7C01, dtype=np.uint16).view(np.float16)  # 0 ... +inf
    x = np.concatenate([x, -x, [np.float16(np.nan)]])
    with np.errstate(all="raise"):
        got = apply_activation(x, ht.ACTIVATION_TYPE_GELU)
    assert got.dtype == np.float16
    finite = np.isfinite(x)
    g, want = got[finite].astype(np.float64), _gelu_reference(x[finite])
    bound = 0.5 * _ulp(got[finite], np.float16) + 2 * _ulp(x[finite])
    assert np.all(np.abs(g - want) <= bound)
    assert np.array_equal(got[x >= 6], x[x >= 6])  # 65504 included: no overflow to inf
    assert np.all(got[x <= -6] == 0)
    assert got[x == np.inf][0] == np.inf and got[x == -np.inf][0] == 0 and np.isnan(got[-1])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gelu_approximate_specials(dtype) -> None:
    big = np.finfo(dtype).max
    x = np.array([np.inf, -np.inf, np.nan, big, -big, 0.0, -0.0], dtype)
    with np.errstate(all="raise"):
        got = apply_activation(x, ht.ACTIVATION_TYPE_GELU, approximate=True)
    assert got[0] == np.inf and np.isnan(got[2]) and got[3] == big and got[5] == 0
    assert got[1] == 0 and np.signbit(got[1]) and got[4] == 0 and np.signbit(got[4])


PIECEWISE_VALUES = [-np.inf, -1e30, -100.0, -3.0, -1.0, -1e-30, -0.0, 0.0, 1e-30, 0.5, 1.0,
                    7.0, 100.0, 1e30, np.inf, np.nan]


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("alpha", [0.25, 1.0, 2.5, -0.5, 0.0, np.inf, -np.inf])
def test_mask_free_formulas_equal_the_literal_ones(dtype, alpha: float) -> None:
    # LEAKY_RELU, ELU, SELU and SIGMOID are computed without np.where (slow): the same values
    # as the literal piecewise formulas, specials included.
    with np.errstate(all="ignore"):
        x = np.concatenate([PIECEWISE_VALUES, np.linspace(-20, 20, 161)]).astype(dtype)
        a = dtype(alpha)
        leaky = np.where(x >= 0, x, a * x)
        wide = x.astype(np.float32) if dtype == np.float16 else x
        neg = np.expm1(np.minimum(wide, 0))
        elu = np.where(wide >= 0, wide, wide.dtype.type(alpha) * neg).astype(dtype)
        selu = (np.where(wide >= 0, wide, wide.dtype.type(1.67326324) * neg)
                * wide.dtype.type(1.05070098)).astype(dtype)
        e = np.exp(-np.abs(wide))
        sigmoid = (np.where(wide >= 0, wide.dtype.type(1), e) / (1 + e)).astype(dtype)
    with np.errstate(all="raise"):
        np.testing.assert_array_equal(
            apply_activation(x, ht.ACTIVATION_TYPE_LEAKY_RELU, alpha=alpha), leaky)
        np.testing.assert_array_equal(apply_activation(x, ht.ACTIVATION_TYPE_ELU, alpha=alpha),
                                      elu)
        np.testing.assert_array_equal(apply_activation(x, ht.ACTIVATION_TYPE_SELU), selu)
        np.testing.assert_array_equal(apply_activation(x, ht.ACTIVATION_TYPE_SIGMOID), sigmoid)


def test_inplace_reuses_only_when_allowed() -> None:
    x = np.array([-2.0, -0.5, 0.5, 3.0, 7.0], dtype=np.float32)
    keep = x.copy()
    out = apply_activation(x, ht.ACTIVATION_TYPE_RELU6)
    assert out is not x and np.array_equal(x, keep)
    out = apply_activation(x, ht.ACTIVATION_TYPE_RELU6, inplace=True)
    assert out is x and x.tolist() == [0.0, 0.0, 0.5, 3.0, 6.0]


def test_readonly_input_is_never_written() -> None:
    x = np.linspace(-4, 4, 9, dtype=np.float32)
    x.flags.writeable = False
    for kind in range(ht.ACTIVATION_TYPE_UNKNOWN):
        out = apply_activation(x, kind, alpha=0.5, min_val=-1, max_val=1)
        assert out.shape == x.shape and out.dtype == x.dtype


def test_float16_transcendental_rounded_once() -> None:
    x = np.linspace(-6, 6, 49).astype(np.float16)
    out = apply_activation(x, ht.ACTIVATION_TYPE_SIGMOID)
    want = np.array([1 / (1 + math.exp(-float(v))) for v in x]).astype(np.float16)
    assert out.dtype == np.float16
    np.testing.assert_array_equal(out, want)


def test_driver_error_type() -> None:
    with pytest.raises(DriverError):
        check_activation(NODE, 99, fused=True)
