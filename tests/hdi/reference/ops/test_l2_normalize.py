"""L2NormalizeFusion against explicit per-slice loops with math.sqrt, onnx's LpNormalization
(p = 2, one axis) where the formulas coincide; axes, epsilon, fused activations, dtypes."""

from __future__ import annotations

import itertools
import math

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

L2N = na.NODE_TYPE_L2_NORMALIZE_FUSION


def loop_reference(x: np.ndarray, axes: list[int], eps: float) -> np.ndarray:
    axes = sorted(a % x.ndim for a in axes) if axes else list(range(x.ndim))
    out = np.empty(x.shape)
    kept = [range(d) if i not in axes else [None] for i, d in enumerate(x.shape)]
    for idx in itertools.product(*kept):
        sel = tuple(slice(None) if i is None else i for i in idx)
        values = x[sel]
        norm = math.sqrt(math.fsum(float(v) ** 2 for v in values.reshape(-1)))
        out[sel] = values / max(norm, eps)
    return out


def onnx_lp(x: np.ndarray, axis: int) -> np.ndarray:
    return onnx_reference("LpNormalization", [x], opset=13, axis=axis, p=2)


@pytest.mark.parametrize("axes", [[0], [1], [-1], [0, 2], [2, -2], []])
def test_axes(axes) -> None:
    x = randn(2, 3, 4, seed=1)
    out = run_op(L2N, na.L2NormalizeFusion(axis=axes, epsilon=1e-6), [x])
    np.testing.assert_allclose(out, loop_reference(x, axes, 1e-6), rtol=1e-5, atol=1e-7)
    if len(axes) == 1:
        np.testing.assert_allclose(out, onnx_lp(x, axes[0]), rtol=1e-5, atol=1e-7)


def test_epsilon_bounds_the_norm() -> None:
    x = np.array([[3e-4, 4e-4], [0.0, 0.0], [3.0, 4.0]], np.float32)
    out = run_op(L2N, na.L2NormalizeFusion(axis=[1], epsilon=1e-3), [x])
    np.testing.assert_allclose(out, [[0.3, 0.4], [0.0, 0.0], [0.6, 0.8]], rtol=1e-5)
    out = run_op(L2N, na.L2NormalizeFusion(axis=[1]), [x])  # epsilon 0: 0 / 0 is NaN
    assert np.isnan(out[1]).all()
    np.testing.assert_allclose(out[0], [0.6, 0.8], rtol=1e-5)


@pytest.mark.parametrize("act,fn", [
    (ht.ACTIVATION_TYPE_RELU, lambda v: np.maximum(v, 0)),
    (ht.ACTIVATION_TYPE_RELU6, lambda v: np.clip(v, 0, 6)),
    (ht.ACTIVATION_TYPE_TANH, np.tanh),
])
def test_fused_activation(act, fn) -> None:
    x = randn(3, 4, seed=2)
    out = run_op(L2N, na.L2NormalizeFusion(axis=[-1], epsilon=1e-6, activationType=act), [x])
    np.testing.assert_allclose(out, fn(loop_reference(x, [-1], 1e-6)), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("dtype,tol", [(np.float16, 2e-3), (np.float64, 1e-14)])
def test_dtypes_and_edges(dtype, tol) -> None:
    x = randn(3, 5, dtype=dtype, seed=3)
    out = run_op(L2N, na.L2NormalizeFusion(axis=[0], epsilon=1e-6), [x])
    assert out.dtype == dtype
    np.testing.assert_allclose(out.astype(np.float64), loop_reference(x, [0], 1e-6), rtol=tol,
                               atol=tol)
    s = run_op(L2N, na.L2NormalizeFusion(epsilon=1e-6), [np.array(-2.5, dtype)])
    assert s.shape == () and s[()] == -1.0


def test_error_paths() -> None:
    x = np.zeros((2, 3), np.float32)
    expect_refused(NNRT_INVALID_NODE, L2N, na.L2NormalizeFusion(axis=[2]), [x])
    expect_refused(NNRT_INVALID_NODE, L2N, na.L2NormalizeFusion(axis=[1, -1]), [x])
    expect_refused(NNRT_INVALID_NODE, L2N, na.L2NormalizeFusion(epsilon=-1.0), [x])
    expect_refused(NNRT_INVALID_NODE, L2N, na.L2NormalizeFusion(activationType=20), [x])
    expect_refused(NNRT_INVALID_NODE, L2N, na.L2NormalizeFusion(), [x, x])
    expect_refused(NNRT_INVALID_NODE, L2N, na.L2NormalizeFusion(), [x], out_dtype=np.float16)
    expect_refused(NNRT_UNSUPPORTED_OP, L2N, na.L2NormalizeFusion(
        activationType=ht.ACTIVATION_TYPE_LEAKY_RELU), [x])
    expect_refused(NNRT_UNSUPPORTED_OP, L2N, na.L2NormalizeFusion(), [x.astype(np.int32)])
    expect_refused(NNRT_UNSUPPORTED_OP, L2N, na.L2NormalizeFusion(), [x.astype(np.int8)],
                   quant_type=ht.QUANT_TYPE_ALL)
