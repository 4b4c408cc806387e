"""FusedBatchNorm against onnx's reference BatchNormalization (NCHW, transposed) and the
closed form per channel: ranks, NCHW tag, dtypes, run-time parameters, errors."""

from __future__ import annotations

import numpy as np
import pytest

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
    onnx_reference,
    randn,
    run_node,
    run_op,
)

BN = na.NODE_TYPE_FUSED_BATCH_NORM


def onnx_bn(x_nchw, scale, offset, mean, var, eps):
    return onnx_reference("BatchNormalization", [x_nchw, scale, offset, mean, var], opset=15,
                          epsilon=eps)


def params(c: int, dtype=np.float32, seed: int = 0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(c).astype(dtype), rng.standard_normal(c).astype(dtype),
            rng.standard_normal(c).astype(dtype), rng.uniform(0.1, 2.0, c).astype(dtype)]


@pytest.mark.parametrize("eps", [1e-4, 1e-2, 0.0])
@pytest.mark.parametrize("const", [True, False])
def test_nhwc_against_onnx(eps: float, const: bool) -> None:
    x = randn(2, 3, 4, 5, seed=1)
    p = params(5, seed=2)
    inputs = [x] + [Const(a) if const else a for a in p]
    out = run_op(BN, na.FusedBatchNorm(epsilon=eps), inputs)
    want = onnx_bn(x.transpose(0, 3, 1, 2), *p, eps).transpose(0, 2, 3, 1)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def test_nchw_tag_and_other_ranks() -> None:
    x = randn(2, 3, 4, 5, seed=3)
    p = params(3, seed=4)
    out = run_op(BN, na.FusedBatchNorm(epsilon=1e-3), [x] + [Const(a) for a in p],
                 fmt=ht.FORMAT_NCHW)
    np.testing.assert_allclose(out, onnx_bn(x, *p, 1e-3), rtol=1e-5, atol=1e-5)
    for shape in [(7,), (4, 7), (2, 3, 7)]:
        x = randn(*shape, seed=5)
        p = params(7, seed=6)
        out = run_op(BN, na.FusedBatchNorm(epsilon=1e-3), [x] + [Const(a) for a in p])
        s, b, m, v = (a.astype(np.float64) for a in p)
        want = (x - m) / np.sqrt(v + 1e-3) * s + b
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype,tol", [(np.float16, 5e-3), (np.float64, 1e-12)])
def test_dtypes(dtype, tol) -> None:
    x = randn(3, 4, dtype=dtype, seed=7)
    p = params(4, dtype, seed=8)
    out = run_op(BN, na.FusedBatchNorm(epsilon=1e-5), [x] + [Const(a) for a in p])
    assert out.dtype == dtype
    s, b, m, v = (a.astype(np.float64) for a in p)
    want = (x.astype(np.float64) - m) / np.sqrt(v + 1e-5) * s + b
    np.testing.assert_allclose(out.astype(np.float64), want, rtol=tol, atol=tol)


def test_dynamic_shapes() -> None:
    x = randn(2, 6, seed=9)
    p = params(6, seed=10)
    node = make_node(BN, na.FusedBatchNorm(), [Declared(x, (-1, -1))] + p)
    (out,) = run_node(node, [x] + p)
    s, b, m, v = p
    np.testing.assert_allclose(out, (x - m) / np.sqrt(v) * s + b, rtol=1e-5)
    expect_error(NNRT_INVALID_SHAPE, lambda: run_node(node, [x[:, :5]] + p))


def test_error_paths() -> None:
    x = np.zeros((2, 4), np.float32)
    p = [Const(a) for a in params(4)]
    attrs = na.FusedBatchNorm(epsilon=1e-3)
    expect_refused(NNRT_INVALID_NODE, BN, attrs, [x] + p[:3])
    expect_refused(NNRT_INVALID_NODE, BN, attrs, [x] + p, n_outputs=3)
    expect_refused(NNRT_INVALID_NODE, BN, attrs, [x] + [Const(a) for a in params(3)])
    expect_refused(NNRT_INVALID_NODE, BN, attrs, [x] + p[:3] + [Const(np.ones((1, 4), np.float32))])
    expect_refused(NNRT_INVALID_NODE, BN, na.FusedBatchNorm(epsilon=-1.0), [x] + p)
    expect_refused(NNRT_INVALID_NODE, BN, na.FusedBatchNorm(epsilon=float("inf")), [x] + p)
    expect_refused(NNRT_INVALID_NODE, BN, attrs, [np.array(1.0, np.float32)] + p)
    expect_refused(NNRT_INVALID_NODE, BN, attrs, [x] + p, out_dtype=np.float64)
    expect_refused(NNRT_UNSUPPORTED_OP, BN, attrs, [x.astype(np.float64)] + p)
    expect_refused(NNRT_UNSUPPORTED_OP, BN, attrs,
                   [x.astype(np.int32)] + [Const(a.astype(np.int32)) for a in params(4)])
    expect_refused(NNRT_UNSUPPORTED_OP, BN, attrs, [x] + p, quant_type=ht.QUANT_TYPE_ALL)
