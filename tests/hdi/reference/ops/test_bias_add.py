"""BiasAdd: x + bias along the channel dimension (last; dimension 1 for NCHW-tagged inputs of
rank >= 3). References: explicit loops over every element, onnx's Add for NHWC."""

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
    int_wrapper,
    make_node,
    onnx_reference,
    randn,
    run_op,
)

BIAS_ADD = na.NODE_TYPE_BIAS_ADD


def _loop_reference(x: np.ndarray, bias: np.ndarray, axis: int) -> np.ndarray:
    out = np.empty(x.shape, dtype=np.float64)
    for idx in itertools.product(*(range(d) for d in x.shape)):
        out[idx] = float(x[idx]) + float(bias[idx[axis]])
    return out


@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (3, 4), (6,), (1, 1, 2, 3, 4), (2, 1, 1)])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_nhwc_last_axis(shape, dtype: Any) -> None:
    x = randn(*shape, dtype=dtype, seed=1)
    bias = randn(shape[-1], dtype=dtype, seed=2)
    out = run_op(BIAS_ADD, na.BiasAdd(), [x, Const(bias)], out_shape=shape)
    tol = 2e-3 if dtype == np.float16 else 1e-6
    np.testing.assert_allclose(out.astype(np.float64), _loop_reference(x, bias, len(shape) - 1),
                               rtol=tol, atol=tol)
    if dtype != np.float16:
        np.testing.assert_allclose(out, onnx_reference("Add", [x, bias]), rtol=tol)


@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (2, 3, 4)])
def test_nchw_channel_axis(shape) -> None:
    x = randn(*shape, seed=3)
    bias = randn(shape[1], seed=4)
    out = run_op(BIAS_ADD, na.BiasAdd(), [x, bias], out_shape=shape, fmt=ht.FORMAT_NCHW)
    np.testing.assert_allclose(out, _loop_reference(x, bias, 1), rtol=1e-6)


def test_nchw_rank2_uses_last_axis() -> None:
    x = randn(2, 3, seed=5)
    bias = randn(3, seed=6)
    out = run_op(BIAS_ADD, na.BiasAdd(), [x, bias], out_shape=(2, 3), fmt=ht.FORMAT_NCHW)
    np.testing.assert_allclose(out, _loop_reference(x, bias, 1), rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.uint8, np.int64])
def test_integers_wrap(dtype: Any) -> None:
    info = np.iinfo(dtype)
    x = np.array([[info.max, info.min], [1, 2]], dtype)
    bias = np.array([1, 3], dtype)
    out = run_op(BIAS_ADD, na.BiasAdd(), [x, bias], out_shape=(2, 2))
    wrap = int_wrapper(dtype)

    assert out.dtype == dtype
    assert out.tolist() == [[wrap(int(v) + int(b)) for v, b in zip(row, bias)] for row in x]


def test_dynamic_shapes() -> None:
    x = np.ones((2, 3), np.float32)
    node = make_node(BIAS_ADD, na.BiasAdd(), [Declared(x, (-1, -1)), np.ones(3, np.float32)],
                     out_shape=(-1, 3))
    kernel = create_kernel(node)
    assert kernel.infer_shapes([(-1, -1), (3,)]) == [(-1, 3)]
    assert kernel.infer_shapes([(5, 3), (3,)]) == [(5, 3)]
    expect_error(NNRT_INVALID_SHAPE, lambda: kernel.infer_shapes([(5, 4), (3,)]))


def test_error_paths() -> None:
    f32 = np.ones((2, 3), np.float32)
    b3 = np.ones(3, np.float32)
    expect_refused(NNRT_INVALID_NODE, BIAS_ADD, na.BiasAdd(), [f32])
    expect_refused(NNRT_INVALID_NODE, BIAS_ADD, na.BiasAdd(), [f32, b3, b3])
    expect_refused(NNRT_INVALID_NODE, BIAS_ADD, na.BiasAdd(), [f32, np.ones(4, np.float32)])
    expect_refused(NNRT_INVALID_NODE, BIAS_ADD, na.BiasAdd(), [f32, np.ones(1, np.float32)])
    expect_refused(NNRT_INVALID_NODE, BIAS_ADD, na.BiasAdd(), [f32, np.ones((1, 3), np.float32)])
    expect_refused(NNRT_INVALID_NODE, BIAS_ADD, na.BiasAdd(),
                   [np.ones((), np.float32), np.ones(1, np.float32)])
    expect_refused(NNRT_INVALID_NODE, BIAS_ADD, na.BiasAdd(), [f32, b3], out_dtype=np.float16)
    expect_refused(NNRT_UNSUPPORTED_OP, BIAS_ADD, na.BiasAdd(), [f32, np.ones(3, np.float64)])
    expect_refused(NNRT_UNSUPPORTED_OP, BIAS_ADD, na.BiasAdd(),
                   [np.ones((2, 3), np.bool_), np.ones(3, np.bool_)])
    expect_refused(NNRT_UNSUPPORTED_OP, BIAS_ADD, na.BiasAdd(),
                   [np.ones((2, 3), np.int8), np.ones(3, np.int8)], quant_type=ht.QUANT_TYPE_ALL)
