"""InstanceNorm against onnx's reference InstanceNormalization (NCHW; NHWC transposed) and
explicit per-(instance, channel) loops: ranks, NCHW tag, dtypes, epsilon, errors."""

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

IN = na.NODE_TYPE_INSTANCE_NORM


def onnx_instance_norm(x_nchw, scale, bias, eps):
    return onnx_reference("InstanceNormalization", [x_nchw, scale, bias], opset=6, epsilon=eps)


@pytest.mark.parametrize("eps", [1e-5, 0.1])
def test_nhwc_against_onnx(eps: float) -> None:
    x = randn(2, 4, 5, 3, seed=1)
    s, b = randn(3, seed=2), randn(3, seed=3)
    out = run_op(IN, na.InstanceNorm(epsilon=eps), [x, Const(s), Const(b)])
    want = onnx_instance_norm(x.transpose(0, 3, 1, 2), s, b, eps).transpose(0, 2, 3, 1)
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)


def test_nchw_tag_and_rank3_rank5() -> None:
    x = randn(2, 3, 4, 5, seed=4)
    s, b = randn(3, seed=5), randn(3, seed=6)
    out = run_op(IN, na.InstanceNorm(epsilon=1e-5), [x, s, b], fmt=ht.FORMAT_NCHW)
    np.testing.assert_allclose(out, onnx_instance_norm(x, s, b, 1e-5), rtol=1e-4, atol=1e-5)
    for shape in [(2, 6, 3), (1, 2, 3, 2, 4)]:
        x = randn(*shape, seed=7)
        c = shape[-1]
        s, b = randn(c, seed=8), randn(c, seed=9)
        out = run_op(IN, na.InstanceNorm(epsilon=1e-3), [x, s, b])
        xr = x.reshape(shape[0], -1, c).astype(np.float64)
        for n in range(shape[0]):
            for ch in range(c):
                v = xr[n, :, ch]
                want = (v - v.mean()) / np.sqrt(v.var() + 1e-3) * s[ch] + b[ch]
                np.testing.assert_allclose(out.reshape(shape[0], -1, c)[n, :, ch], want,
                                           rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype,tol", [(np.float16, 1e-2), (np.float64, 1e-12)])
def test_dtypes(dtype, tol) -> None:
    x = randn(2, 3, 3, 2, dtype=dtype, seed=10)
    s, b = randn(2, dtype=dtype, seed=11), randn(2, dtype=dtype, seed=12)
    out = run_op(IN, na.InstanceNorm(epsilon=1e-5), [x, s, b])
    assert out.dtype == dtype
    x64 = x.astype(np.float64).transpose(0, 3, 1, 2)
    want = onnx_instance_norm(x64, s.astype(np.float64), b.astype(np.float64), 1e-5)
    np.testing.assert_allclose(out.astype(np.float64), want.transpose(0, 2, 3, 1), rtol=tol,
                               atol=tol)


def test_constant_slice_and_dynamic() -> None:
    x = np.ones((1, 2, 2, 1), np.float32)
    out = run_op(IN, na.InstanceNorm(epsilon=1e-5), [x, np.array([2.0], np.float32),
                                                     np.array([0.5], np.float32)])
    np.testing.assert_allclose(out, 0.5)
    out = run_op(IN, na.InstanceNorm(), [x, np.ones(1, np.float32), np.zeros(1, np.float32)])
    assert np.isnan(out).all()  # epsilon 0 on a constant slice: 0 / 0
    x = randn(2, 3, 3, 4, seed=13)
    s, b = randn(4, seed=14), randn(4, seed=15)
    node = make_node(IN, na.InstanceNorm(epsilon=1e-5), [Declared(x, (-1, -1, -1, 4)), s, b])
    run_node(node, [x, s, b])
    expect_error(NNRT_INVALID_SHAPE, lambda: run_node(node, [x[..., :3], s, b]))


def test_error_paths() -> None:
    x = np.zeros((1, 2, 2, 3), np.float32)
    s = np.ones(3, np.float32)
    attrs = na.InstanceNorm(epsilon=1e-5)
    expect_refused(NNRT_INVALID_NODE, IN, attrs, [x, s])
    expect_refused(NNRT_INVALID_NODE, IN, attrs, [x, s, s], n_outputs=2)
    expect_refused(NNRT_INVALID_NODE, IN, attrs, [x, np.ones(2, np.float32), s])
    expect_refused(NNRT_INVALID_NODE, IN, attrs, [x, s.reshape(1, 3), s])
    expect_refused(NNRT_INVALID_NODE, IN, attrs, [np.zeros((2, 3), np.float32), s, s])
    expect_refused(NNRT_INVALID_NODE, IN, na.InstanceNorm(epsilon=-1e-5), [x, s, s])
    expect_refused(NNRT_UNSUPPORTED_OP, IN, attrs, [x.astype(np.int8), s.astype(np.int8),
                                                    s.astype(np.int8)])
    expect_refused(NNRT_UNSUPPORTED_OP, IN, attrs, [x, s.astype(np.float16), s])
    expect_refused(NNRT_UNSUPPORTED_OP, IN, attrs, [x, s, s], quant_type=ht.QUANT_TYPE_ALL)
