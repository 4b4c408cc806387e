"""PReLUFusion: per-channel (last dimension; dimension 1 for NCHW-tagged inputs of rank >= 3)
or shared slopes. References: onnx's PRelu (slope broadcast to the input) and explicit loops."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

from nnrt.hdi.reference.kernel import create_kernel
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
    run_op,
)

PRELU = na.NODE_TYPE_PRELU_FUSION


def _loop_reference(x: np.ndarray, slope: np.ndarray, axis: int | None) -> np.ndarray:
    out = np.empty(x.shape, dtype=np.float64)
    for idx in itertools.product(*(range(d) for d in x.shape)):
        v = float(x[idx])
        s = float(slope.reshape(-1)[0 if slope.size == 1 else idx[axis]])
        out[idx] = v if v >= 0 else s * v
    return out


@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (3, 4), (1, 2, 2, 2, 3)])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_per_channel_nhwc(shape, dtype: Any) -> None:
    x = randn(*shape, dtype=dtype, seed=1)
    slope = randn(shape[-1], dtype=dtype, seed=2)
    out = run_op(PRELU, na.PReLUFusion(), [x, Const(slope)], out_shape=shape)
    tol = 2e-3 if dtype == np.float16 else 1e-6
    np.testing.assert_allclose(out.astype(np.float64), _loop_reference(x, slope, len(shape) - 1),
                               rtol=tol, atol=tol)
    np.testing.assert_allclose(out.astype(np.float64),
                               onnx_reference("PRelu", [x, slope]).astype(np.float64),
                               rtol=tol, atol=tol)


@pytest.mark.parametrize("shared", [False, True])
@pytest.mark.parametrize("shape", [(2, 3, 4), (5,), (), (1, 1)])
def test_shared_slope(shared: bool, shape) -> None:
    x = randn(*shape, seed=3)
    slope = np.array([0.25], np.float32)
    out = run_op(PRELU, na.PReLUFusion(channelShared=shared), [x, slope], out_shape=shape)
    np.testing.assert_allclose(out, _loop_reference(x, slope, None), rtol=1e-6)
    np.testing.assert_allclose(out, onnx_reference("PRelu", [x, slope.reshape(())]), rtol=1e-6)


def test_rank0_weight_is_shared() -> None:
    x = randn(2, 3, seed=4)
    out = run_op(PRELU, na.PReLUFusion(), [x, np.array(0.5, np.float32)], out_shape=(2, 3))
    np.testing.assert_allclose(out, _loop_reference(x, np.array([0.5]), None), rtol=1e-6)


def test_nchw_channel_axis() -> None:
    x = randn(2, 3, 4, 5, seed=5)
    slope = randn(3, seed=6)
    out = run_op(PRELU, na.PReLUFusion(), [x, slope], out_shape=x.shape, fmt=ht.FORMAT_NCHW)
    np.testing.assert_allclose(out, _loop_reference(x, slope, 1), rtol=1e-6)


def test_nan_stays_nan() -> None:
    x = np.array([np.nan, -1.0], np.float32)
    out = run_op(PRELU, na.PReLUFusion(), [x, np.array([0.1], np.float32)], out_shape=(2,))
    assert np.isnan(out[0]) and out[1] == np.float32(-0.1)


def test_dynamic_shapes() -> None:
    x = np.ones((2, 3), np.float32)
    node = make_node(PRELU, na.PReLUFusion(), [Declared(x, (-1, -1)), np.ones(3, np.float32)],
                     out_shape=(-1, -1))
    kernel = create_kernel(node)
    assert kernel.infer_shapes([(-1, -1), (3,)]) == [(-1, -1)]
    assert kernel.infer_shapes([(4, 3), (3,)]) == [(4, 3)]
    expect_error(NNRT_INVALID_SHAPE, lambda: kernel.infer_shapes([(4, 5), (3,)]))


def test_error_paths() -> None:
    f32 = np.ones((2, 3), np.float32)
    w3 = np.ones(3, np.float32)
    expect_refused(NNRT_INVALID_NODE, PRELU, na.PReLUFusion(), [f32])
    expect_refused(NNRT_INVALID_NODE, PRELU, na.PReLUFusion(), [f32, w3, w3])
    expect_refused(NNRT_INVALID_NODE, PRELU, na.PReLUFusion(), [f32, np.ones(4, np.float32)])
    expect_refused(NNRT_INVALID_NODE, PRELU, na.PReLUFusion(channelShared=True), [f32, w3])
    expect_refused(NNRT_INVALID_NODE, PRELU, na.PReLUFusion(), [np.ones(3, np.float32), w3])
    expect_refused(NNRT_INVALID_NODE, PRELU, na.PReLUFusion(), [f32, np.ones((1, 3), np.float32)])
    expect_refused(NNRT_INVALID_NODE, PRELU, na.PReLUFusion(), [f32, w3], out_dtype=np.float16)
    expect_refused(NNRT_UNSUPPORTED_OP, PRELU, na.PReLUFusion(), [f32, np.ones(3, np.float64)])
    expect_refused(NNRT_UNSUPPORTED_OP, PRELU, na.PReLUFusion(),
                   [np.ones((2, 3), np.int32), np.ones(3, np.int32)])
    expect_refused(NNRT_UNSUPPORTED_OP, PRELU, na.PReLUFusion(),
                   [np.ones((2, 3), np.int8), np.ones(3, np.int8)], quant_type=ht.QUANT_TYPE_ALL)
