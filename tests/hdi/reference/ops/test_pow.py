"""PowFusion: (scale * x + shift) ^ e. References: onnx's Pow (scale 1, shift 0), Python's
math.pow / int ** element by element with explicit broadcasting otherwise."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from nnrt.hdi.reference.kernel import create_kernel
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from tests.hdi.reference.util import (
    NNRT_FAILED,
    NNRT_INVALID_NODE,
    NNRT_INVALID_SHAPE,
    NNRT_UNSUPPORTED_OP,
    Const,
    Declared,
    broadcast_apply,
    expect_error,
    expect_refused,
    int_wrapper,
    make_node,
    onnx_reference,
    readonly,
    rng,
    run_op,
)

POW = na.NODE_TYPE_POW_FUSION


def _attrs(scale: float = 1.0, shift: float = 0.0) -> na.PowFusion:
    return na.PowFusion(scale=scale, shift=shift)


@pytest.mark.parametrize("shapes", [((2, 3), (2, 3)), ((2, 3), ()), ((3, 1), (1, 4)),
                                    ((), ())])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_plain_power_matches_onnx(shapes, dtype: Any) -> None:
    r = rng(5)
    x = r.uniform(0.1, 3.0, shapes[0]).astype(dtype)
    e = r.uniform(-2.0, 3.0, shapes[1]).astype(dtype)
    out = run_op(POW, _attrs(), [x, e], out_shape=np.broadcast_shapes(*shapes))
    tol = 2e-6 if dtype == np.float32 else 1e-14
    np.testing.assert_allclose(out, onnx_reference("Pow", [x, e]), rtol=tol)


@pytest.mark.parametrize("scale,shift", [(2.0, 0.5), (-1.0, 4.0), (0.5, 0.0), (1.0, -0.25)])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_scale_shift(scale: float, shift: float, dtype: Any) -> None:
    r = rng(6)
    x = r.uniform(0.2, 2.0, (2, 1, 3)).astype(dtype)
    e = r.uniform(-1.5, 2.5, (4, 1)).astype(dtype)
    out = run_op(POW, _attrs(scale, shift), [x, Const(e)], out_shape=(2, 4, 3))
    want = broadcast_apply(lambda a, b: math.pow(scale * a + shift, b), x, e)
    tol = {np.float16: 3e-3, np.float32: 3e-6, np.float64: 1e-13}[dtype]
    np.testing.assert_allclose(out.astype(np.float64).reshape(-1), want, rtol=tol)


def test_integer_exponent_with_float_base() -> None:
    x = np.array([[-2.0, 0.5, 3.0]], np.float32)
    e = np.array([[3], [-2]], np.int64)
    out = run_op(POW, _attrs(), [x, e], out_shape=(2, 3))
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, [[-8.0, 0.125, 27.0], [0.25, 4.0, 1 / 9]], rtol=1e-6)


def test_ieee_results() -> None:
    x = np.array([-8.0, 0.0, 0.0, 4.0], np.float32)
    e = np.array([1 / 3, -1.0, 0.0, 0.5], np.float32)
    with np.errstate(all="raise"):
        out = run_op(POW, _attrs(), [x, e], out_shape=(4,))
    assert np.isnan(out[0]) and out[1] == np.inf and out[2] == 1.0 and out[3] == 2.0


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint8, np.uint64])
def test_integer_power_wraps(dtype: Any) -> None:
    info = np.iinfo(dtype)
    bases = [0, 1, 2, 3, 7, 100] + ([-3, -2, -128 if info.bits == 8 else -5] if info.min else [])
    x = np.array(bases, dtype)
    e = np.array([0, 5, 70, 3, 21, 2, 3, 2, 1][:len(bases)], np.int64)
    out = run_op(POW, _attrs(), [x, e], out_shape=x.shape)
    wrap = int_wrapper(dtype)

    assert out.dtype == dtype
    assert out.tolist() == [wrap(int(a) ** int(b)) for a, b in zip(x, e)]


def test_integer_negative_exponent() -> None:
    x = np.array([2, 3], np.int32)
    expect_refused(NNRT_INVALID_NODE, POW, _attrs(), [x, Const(np.array([1, -1], np.int32))])
    kernel = create_kernel(make_node(POW, _attrs(), [x, x], out_shape=(2,)))
    expect_error(NNRT_FAILED, lambda: kernel.execute([readonly(x),
                                                      readonly(np.array([2, -1], np.int32))]))
    assert kernel.execute([readonly(x), readonly(x)])[0].tolist() == [4, 27]


def test_dynamic_broadcast() -> None:
    x = np.ones((2, 3), np.float32)
    node = make_node(POW, _attrs(), [Declared(x, (-1, 3)), np.ones((3,), np.float32)],
                     out_shape=(-1, 3))
    kernel = create_kernel(node)
    assert kernel.infer_shapes([(-1, 3), (3,)]) == [(-1, 3)]
    expect_error(NNRT_INVALID_SHAPE, lambda: kernel.infer_shapes([(2, 4), (3,)]))


def test_error_paths() -> None:
    f32 = np.ones((2, 3), np.float32)
    i32 = np.ones((2, 3), np.int32)
    expect_refused(NNRT_INVALID_NODE, POW, _attrs(), [f32])
    expect_refused(NNRT_INVALID_NODE, POW, _attrs(), [f32, f32, f32])
    expect_refused(NNRT_INVALID_NODE, POW, _attrs(math.nan), [f32, f32])
    expect_refused(NNRT_INVALID_NODE, POW, _attrs(1.0, math.inf), [f32, f32])
    expect_refused(NNRT_INVALID_NODE, POW, _attrs(), [f32, f32], out_dtype=np.float64)
    expect_refused(NNRT_INVALID_NODE, POW, _attrs(), [f32, np.ones((4,), np.float32)])
    expect_refused(NNRT_UNSUPPORTED_OP, POW, _attrs(), [i32, f32], out_dtype=np.int32)
    expect_refused(NNRT_UNSUPPORTED_OP, POW, _attrs(2.0), [i32, i32])
    expect_refused(NNRT_UNSUPPORTED_OP, POW, _attrs(1.0, 1.0), [i32, i32])
    expect_refused(NNRT_UNSUPPORTED_OP, POW, _attrs(), [f32, np.ones((2, 3), np.bool_)])
    expect_refused(NNRT_UNSUPPORTED_OP, POW, _attrs(), [np.ones(2, np.bool_)] * 2)
    expect_refused(NNRT_UNSUPPORTED_OP, POW, _attrs(), [np.ones(2, np.int8)] * 2,
                   quant_type=ht.QUANT_TYPE_ALL)
