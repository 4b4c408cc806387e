"""drivers/cpu/activations.py: the fused-position rules, in-place use and the normal CDF."""

from __future__ import annotations

import math

import numpy as np
import pytest

from nnrt.drivers.cpu.activations import (
    NEEDS_PARAMETERS,
    apply_activation,
    check_activation,
    normal_cdf,
)
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from nnrt.server.errors import DriverError
from tests.kernels.util import NNRT_INVALID_NODE, NNRT_UNSUPPORTED_OP, expect_error, make_node

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
    # the shorter expansions used for float32 / float16 results
    x, want = x[:4001], want[:4001]
    keep = want > 1e-37  # what float32 can represent
    np.testing.assert_allclose(normal_cdf(x, precise=False)[keep], want[keep], rtol=1e-7, atol=0)


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
