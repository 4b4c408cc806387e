"""LeakyRelu: x if x >= 0 else negativeSlope * x. Reference: onnx's LeakyRelu."""

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

LEAKY = na.NODE_TYPE_LEAKY_RELU


@pytest.mark.parametrize("slope", [0.01, 0.2, 0.0, -0.5, 1.5])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("shape", [(2, 3, 4), (), (1, 5)])
def test_matches_onnx(slope: float, dtype: Any, shape) -> None:
    x = randn(*shape, dtype=dtype, seed=9)
    out = run_op(LEAKY, na.LeakyRelu(negativeSlope=slope), [x], out_shape=shape)
    want = onnx_reference("LeakyRelu", [x], alpha=slope)
    tol = 1e-3 if dtype == np.float16 else 1e-6
    np.testing.assert_allclose(out.astype(np.float64), want.astype(np.float64), rtol=tol)


def test_nan_and_zero() -> None:
    x = np.array([np.nan, 0.0, -0.0, -2.0], np.float32)
    out = run_op(LEAKY, na.LeakyRelu(negativeSlope=0.5), [x], out_shape=x.shape)
    assert np.isnan(out[0]) and out[1:].tolist() == [0.0, 0.0, -1.0]


def test_error_paths() -> None:
    f32 = np.ones(3, np.float32)
    expect_refused(NNRT_INVALID_NODE, LEAKY, na.LeakyRelu(negativeSlope=math.inf), [f32])
    expect_refused(NNRT_INVALID_NODE, LEAKY, na.LeakyRelu(negativeSlope=math.nan), [f32])
    expect_refused(NNRT_INVALID_NODE, LEAKY, na.LeakyRelu(), [f32, f32])
    expect_refused(NNRT_INVALID_NODE, LEAKY, na.LeakyRelu(), [f32], out_dtype=np.float16)
    expect_refused(NNRT_UNSUPPORTED_OP, LEAKY, na.LeakyRelu(), [np.ones(3, np.int32)])
    expect_refused(NNRT_UNSUPPORTED_OP, LEAKY, na.LeakyRelu(), [np.ones(3, np.bool_)])
    expect_refused(NNRT_UNSUPPORTED_OP, LEAKY, na.LeakyRelu(), [np.ones(3, np.int8)],
                   quant_type=ht.QUANT_TYPE_ALL)
