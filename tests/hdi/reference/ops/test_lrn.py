"""LRN against onnx's reference LRN (alpha scaled by the window size, NCHW) and an explicit
loop over channels: radius, bias/alpha/beta, normRegion spellings, NCHW tag, dtypes."""

from __future__ import annotations

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

LRN = na.NODE_TYPE_LRN


def onnx_lrn(x_nchw, radius, bias, alpha, beta):
    size = 2 * radius + 1
    return onnx_reference("LRN", [x_nchw], opset=13, size=size, bias=bias, alpha=alpha * size,
                          beta=beta)


def loop_reference(x, radius, bias, alpha, beta):
    x = x.astype(np.float64)
    c = x.shape[-1]
    out = np.empty_like(x)
    for ch in range(c):
        window = x[..., max(0, ch - radius):min(c, ch + radius + 1)]
        out[..., ch] = x[..., ch] / (bias + alpha * (window ** 2).sum(-1)) ** beta
    return out


@pytest.mark.parametrize("radius", [0, 1, 2, 5])
@pytest.mark.parametrize("bias,alpha,beta", [(1.0, 1e-4, 0.75), (2.0, 0.5, 0.5)])
def test_against_onnx(radius, bias, alpha, beta) -> None:
    # onnx's reference LRN loops over range(x.shape[0]) for the channels (a bug in onnx
    # 1.x): it is only right when the batch equals the channel count, as here.
    x = randn(6, 3, 4, 6, seed=1)
    attrs = na.LRN(depthRadius=radius, bias=bias, alpha=alpha, beta=beta,
                   normRegion="ACROSS_CHANNELS")
    out = run_op(LRN, attrs, [x])
    want = onnx_lrn(x.transpose(0, 3, 1, 2), radius, bias, alpha, beta).transpose(0, 2, 3, 1)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out, loop_reference(x, radius, bias, alpha, beta), rtol=1e-5,
                               atol=1e-6)


def test_nchw_tag_other_ranks_and_spellings() -> None:
    x = randn(5, 5, 2, 3, seed=2)  # N == C for onnx's reference (see above)
    for region in ("ACROSS_CHNNEL", "", "across_channels"):
        attrs = na.LRN(depthRadius=1, bias=1.0, alpha=0.3, beta=0.75, normRegion=region)
        out = run_op(LRN, attrs, [x], fmt=ht.FORMAT_NCHW)
        np.testing.assert_allclose(out, onnx_lrn(x, 1, 1.0, 0.3, 0.75), rtol=1e-5, atol=1e-6)
    for shape in [(7,), (3, 7), (2, 2, 2, 2, 7)]:
        x = randn(*shape, seed=3)
        attrs = na.LRN(depthRadius=2, bias=1.5, alpha=0.2, beta=0.6)
        np.testing.assert_allclose(run_op(LRN, attrs, [x]), loop_reference(x, 2, 1.5, 0.2, 0.6),
                                   rtol=1e-5, atol=1e-6)
    # Every attribute unset: x / 0 ** 0 = x.
    np.testing.assert_array_equal(run_op(LRN, na.LRN(), [x]), x)


@pytest.mark.parametrize("dtype,tol", [(np.float16, 2e-3), (np.float64, 1e-13)])
def test_dtypes(dtype, tol) -> None:
    x = randn(2, 3, 4, dtype=dtype, seed=4)
    attrs = na.LRN(depthRadius=1, bias=1.0, alpha=0.5, beta=0.75)
    out = run_op(LRN, attrs, [x])
    assert out.dtype == dtype
    np.testing.assert_allclose(out.astype(np.float64), loop_reference(x, 1, 1.0, 0.5, 0.75),
                               rtol=tol, atol=tol)


def test_error_paths() -> None:
    x = np.zeros((1, 2, 2, 3), np.float32)
    expect_refused(NNRT_UNSUPPORTED_OP, LRN, na.LRN(normRegion="WITHIN_CHANNEL"), [x])
    expect_refused(NNRT_INVALID_NODE, LRN, na.LRN(depthRadius=-1), [x])
    expect_refused(NNRT_INVALID_NODE, LRN, na.LRN(beta=float("nan")), [x])
    expect_refused(NNRT_INVALID_NODE, LRN, na.LRN(), [np.array(1.0, np.float32)])
    expect_refused(NNRT_INVALID_NODE, LRN, na.LRN(), [x, x])
    expect_refused(NNRT_INVALID_NODE, LRN, na.LRN(), [x], out_dtype=np.float64)
    expect_refused(NNRT_UNSUPPORTED_OP, LRN, na.LRN(), [x.astype(np.int32)])
    expect_refused(NNRT_UNSUPPORTED_OP, LRN, na.LRN(), [x.astype(np.int8)],
                   quant_type=ht.QUANT_TYPE_ALL)
