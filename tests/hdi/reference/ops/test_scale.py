"""ScaleFusion: activation(x * scale + bias), scale/bias aligned with x from `axis` on.
Reference: explicit loops over every element of x (scale index = x index[axis:axis+k])."""

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
    randn,
    run_op,
)

SCALE = na.NODE_TYPE_SCALE_FUSION


def _loop_reference(x: np.ndarray, scale: np.ndarray, bias: np.ndarray | None,
                    axis: int, act=lambda v: v) -> np.ndarray:
    out = np.empty(x.shape, dtype=np.float64)
    k = scale.ndim
    for idx in itertools.product(*(range(d) for d in x.shape)):
        s = idx[axis:axis + k]
        v = float(x[idx]) * float(scale[s])
        if bias is not None:
            v += float(bias[s])
        out[idx] = act(v)
    return out


@pytest.mark.parametrize("x_shape,axis,scale_shape", [
    ((2, 3, 4, 5), 3, (5,)), ((2, 3, 4, 5), -1, (5,)), ((2, 3, 4, 5), 1, (3,)),
    ((2, 3, 4, 5), 1, (3, 4)), ((2, 3, 4, 5), -3, (3, 4, 5)), ((2, 3, 4), 0, (2,)),
    ((4,), 0, (4,)), ((2, 3), 1, ()), ((), 0, ()), ((1, 1, 3), 2, (3,)),
])
@pytest.mark.parametrize("with_bias", [True, False])
def test_axis_alignment(x_shape, axis: int, scale_shape, with_bias: bool) -> None:
    x = randn(*x_shape, seed=1)
    scale = randn(*scale_shape, seed=2)
    bias = randn(*scale_shape, seed=3) if with_bias else None
    inputs = [x, Const(scale)] + ([Const(bias)] if with_bias else [])
    out = run_op(SCALE, na.ScaleFusion(axis=axis), inputs, out_shape=x_shape)
    norm = axis + len(x_shape) if axis < 0 else axis
    np.testing.assert_allclose(out, _loop_reference(x, scale, bias, norm), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_other_float_dtypes(dtype: Any) -> None:
    x = randn(2, 3, 4, dtype=dtype, seed=4)
    scale = randn(3, dtype=dtype, seed=5)
    bias = randn(3, dtype=dtype, seed=6)
    out = run_op(SCALE, na.ScaleFusion(axis=1), [x, scale, bias], out_shape=x.shape)
    tol = 2e-3 if dtype == np.float16 else 1e-14
    np.testing.assert_allclose(out.astype(np.float64), _loop_reference(x, scale, bias, 1),
                               rtol=tol, atol=tol)


@pytest.mark.parametrize("kind,fn", [
    (ht.ACTIVATION_TYPE_RELU, lambda v: max(v, 0.0)),
    (ht.ACTIVATION_TYPE_RELU6, lambda v: min(max(v, 0.0), 6.0)),
    (ht.ACTIVATION_TYPE_TANH, np.tanh),
])
def test_fused_activation(kind: int, fn) -> None:
    x = randn(2, 4, seed=7) * 4
    scale = np.array([2.0, -1.0, 0.5, 3.0], np.float32)
    bias = np.array([0.5, 0.0, -1.0, 1.0], np.float32)
    out = run_op(SCALE, na.ScaleFusion(axis=-1, activationType=kind), [x, scale, bias],
                 out_shape=x.shape)
    np.testing.assert_allclose(out, _loop_reference(x, scale, bias, 1, fn), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.uint8])
def test_integers_wrap(dtype: Any) -> None:
    info = np.iinfo(dtype)
    x = np.array([[info.max, 3], [info.min, 5]], dtype)
    scale = np.array([2, 3], dtype)
    bias = np.array([1, 4], dtype)
    out = run_op(SCALE, na.ScaleFusion(axis=1, activationType=ht.ACTIVATION_TYPE_RELU),
                 [x, scale, bias], out_shape=(2, 2))
    wrap = int_wrapper(dtype)

    assert out.dtype == dtype
    assert out.tolist() == [[max(wrap(int(v) * int(s) + int(b)), 0)
                             for v, s, b in zip(row, scale, bias)] for row in x]


def test_dynamic_shapes() -> None:
    x = np.ones((2, 3, 4), np.float32)
    node = make_node(SCALE, na.ScaleFusion(axis=1),
                     [Declared(x, (-1, -1, 4)), np.ones(3, np.float32), np.ones(3, np.float32)],
                     out_shape=(-1, 3, 4))
    kernel = create_kernel(node)
    assert kernel.infer_shapes([(-1, -1, 4), (3,), (3,)]) == [(-1, 3, 4)]
    assert kernel.infer_shapes([(5, 3, 4), (3,), (3,)]) == [(5, 3, 4)]
    expect_error(NNRT_INVALID_SHAPE, lambda: kernel.infer_shapes([(5, 2, 4), (3,), (3,)]))


def test_error_paths() -> None:
    f32 = np.ones((2, 3), np.float32)
    s3 = np.ones(3, np.float32)
    expect_refused(NNRT_INVALID_NODE, SCALE, na.ScaleFusion(axis=1), [f32])
    expect_refused(NNRT_INVALID_NODE, SCALE, na.ScaleFusion(axis=1), [f32, s3, s3, s3])
    expect_refused(NNRT_INVALID_NODE, SCALE, na.ScaleFusion(axis=2), [f32, s3, s3])
    expect_refused(NNRT_INVALID_NODE, SCALE, na.ScaleFusion(axis=-3), [f32, s3, s3])
    expect_refused(NNRT_INVALID_NODE, SCALE, na.ScaleFusion(axis=0), [f32, s3, s3])
    expect_refused(NNRT_INVALID_NODE, SCALE, na.ScaleFusion(axis=1),
                   [f32, np.ones((3, 1), np.float32)])
    expect_refused(NNRT_INVALID_NODE, SCALE, na.ScaleFusion(axis=1),
                   [f32, s3, np.ones(4, np.float32)])
    expect_refused(NNRT_INVALID_NODE, SCALE, na.ScaleFusion(axis=1),
                   [f32, s3, np.ones((1, 3), np.float32)])
    expect_refused(NNRT_INVALID_NODE, SCALE, na.ScaleFusion(axis=1), [f32, s3, s3],
                   out_dtype=np.float16)
    expect_refused(NNRT_INVALID_NODE, SCALE, na.ScaleFusion(axis=1, activationType=99),
                   [f32, s3, s3])
    expect_refused(NNRT_UNSUPPORTED_OP, SCALE,
                   na.ScaleFusion(axis=1, activationType=ht.ACTIVATION_TYPE_LEAKY_RELU),
                   [f32, s3, s3])
    expect_refused(NNRT_UNSUPPORTED_OP, SCALE,
                   na.ScaleFusion(axis=1, activationType=ht.ACTIVATION_TYPE_SIGMOID),
                   [np.ones((2, 3), np.int32), np.ones(3, np.int32), np.ones(3, np.int32)])
    expect_refused(NNRT_UNSUPPORTED_OP, SCALE, na.ScaleFusion(axis=1),
                   [f32, np.ones(3, np.float64), s3])
    expect_refused(NNRT_UNSUPPORTED_OP, SCALE, na.ScaleFusion(axis=1),
                   [np.ones((2, 3), np.bool_), np.ones(3, np.bool_)])
    expect_refused(NNRT_UNSUPPORTED_OP, SCALE, na.ScaleFusion(axis=1),
                   [np.ones((2, 3), np.int8), np.ones(3, np.int8)], quant_type=ht.QUANT_TYPE_ALL)
