"""QuantDTypeCast / QuantDTypeCastV2 against onnx's reference QuantizeLinear /
DequantizeLinear (per tensor and per axis) and an element loop with Python's round (ties to
even) on hdi.md's q = round(r / scale + zeroPoint): both attribute layouts and node types,
requantisation, saturation, ties, NaN/inf, scale 0, dtypes and errors."""

from __future__ import annotations

import numpy as np
import pytest

from nnrt.hdi.reference.kernel import create_kernel
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from nnrt.common.dtypes import hdi_data_type
from nnrt.hdi.graph import QuantParam
from tests.hdi.reference.util import (
    NNRT_INVALID_NODE,
    NNRT_INVALID_SHAPE,
    NNRT_UNSUPPORTED_OP,
    Declared,
    expect_error,
    make_node,
    onnx_reference,
    randn,
    run_node,
    tensor_spec,
)

QDC = na.NODE_TYPE_QUANT_DTYPE_CAST
QDC2 = na.NODE_TYPE_QUANT_DTYPE_CAST_V2


def qp(scale: float, zero: int) -> QuantParam:
    return QuantParam(8, zero, scale)


def cast_node(x, out_dtype, in_quant=(), out_quant=(), axis=None, node_type=QDC,
              src=None, dst=None, shape=None):
    src = hdi_data_type(x.dtype) if src is None else src
    dst = hdi_data_type(out_dtype) if dst is None else dst
    attrs = na.QuantDTypeCast(srcT=src, dstT=dst) if axis is None else \
        na.QuantDTypeCastV2(srcT=src, dstT=dst, axis=axis)
    spec = tensor_spec(0, x.dtype, x.shape if shape is None else shape, quant=in_quant)
    return make_node(node_type, attrs, [spec], out_dtype=out_dtype, out_quant=out_quant,
                     out_shape=spec.shape)


def convert(x, out_dtype, **kw):
    (out,) = run_node(cast_node(x, out_dtype, **kw), [x])
    return out


def loop_quantise(r: np.ndarray, params, axis: int, dtype) -> np.ndarray:
    info = np.iinfo(dtype)
    out = np.empty(r.shape, dtype)
    for idx in np.ndindex(r.shape):
        p = params[idx[axis]] if len(params) > 1 else params[0]
        v = float(r[idx])
        if v != v:
            q = p.zero_point
        elif abs(v) == float("inf"):
            q = info.max if v > 0 else info.min
        else:
            q = round(v / p.scale + p.zero_point)
        out[idx] = min(max(q, info.min), info.max)
    return out


def onnx_linear(op: str, x, scale, zero, axis: int):
    return onnx_reference(op, [x, scale, zero], axis=axis)


@pytest.mark.parametrize("dtype,zero", [(np.int8, 0), (np.int8, -10), (np.uint8, 128)])
@pytest.mark.parametrize("node_type,axis", [(QDC, None), (QDC, 0), (QDC2, 1)])
def test_quantise_per_tensor(dtype, zero, node_type, axis) -> None:
    x = randn(3, 4, seed=1) * np.float32(3)
    out = convert(x, dtype, out_quant=[qp(0.05, zero)], node_type=node_type, axis=axis)
    assert out.dtype == dtype
    np.testing.assert_array_equal(out, loop_quantise(x, [qp(0.05, zero)], 0, dtype))
    want = onnx_linear("QuantizeLinear", x, np.array(0.05, np.float32),
                       np.array(zero, dtype), 1)
    np.testing.assert_array_equal(out, want)  # random data: no exact ties


@pytest.mark.parametrize("axis", [0, 1, -1, 2])
def test_quantise_and_dequantise_per_channel(axis: int) -> None:
    x = randn(2, 3, 4, seed=2)
    n = x.shape[axis]
    params = [qp(0.02 * (i + 1), i - 1) for i in range(n)]
    out = convert(x, np.int8, out_quant=params, axis=axis, node_type=QDC2)
    np.testing.assert_array_equal(out, loop_quantise(x, params, axis % 3, np.int8))
    scales = np.array([p.scale for p in params], np.float32)
    zeros = np.array([p.zero_point for p in params], np.int8)
    np.testing.assert_array_equal(out, onnx_linear("QuantizeLinear", x, scales, zeros, axis))
    back = convert(out, np.float32, in_quant=params, axis=axis, node_type=QDC2)
    want = onnx_linear("DequantizeLinear", out, scales, zeros, axis)
    np.testing.assert_allclose(back, want, rtol=1e-6)
    assert np.abs(back - x).max() <= 0.5 * max(p.scale for p in params) + 1e-6


def test_v1_layout_per_channel_uses_axis_0() -> None:
    x = randn(3, 2, seed=3)
    params = [qp(0.1, 0), qp(0.2, 1), qp(0.4, -1)]
    out = convert(x, np.int8, out_quant=params)  # QuantDTypeCast: no axis attribute
    np.testing.assert_array_equal(out, loop_quantise(x, params, 0, np.int8))


def test_ties_to_even_saturation_and_specials() -> None:
    x = np.array([0.25, 0.75, -0.25, -0.75, 1.25, 100.0, -100.0, np.inf, -np.inf, np.nan],
                 np.float32)
    # r / 0.5 = 0.5, 1.5, -0.5, -1.5, 2.5, ...; + zeroPoint 1 -> 1.5, 2.5, 0.5, -0.5, 3.5
    out = convert(x, np.int8, out_quant=[qp(0.5, 1)])
    np.testing.assert_array_equal(out, [2, 2, 0, 0, 4, 127, -128, 127, -128, 1])
    out = convert(x, np.uint8, out_quant=[qp(0.5, 0)])
    np.testing.assert_array_equal(out, [0, 2, 0, 0, 2, 200, 0, 255, 0, 0])
    np.testing.assert_array_equal(out, loop_quantise(x, [qp(0.5, 0)], 0, np.uint8))
    out = convert(x[:5], np.int8, out_quant=[qp(0.0, 3)])  # scale 0: everything is zeroPoint
    np.testing.assert_array_equal(out, [3] * 5)
    back = convert(np.array([5, -3], np.int8), np.float32, in_quant=[qp(0.0, 0)])
    np.testing.assert_array_equal(back, [0.0, 0.0])


@pytest.mark.parametrize("out_dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("in_dtype,zero", [(np.int8, 5), (np.uint8, 128)])
def test_dequantise(out_dtype, in_dtype, zero) -> None:
    info = np.iinfo(in_dtype)
    q = np.arange(info.min, info.max + 1, dtype=in_dtype).reshape(16, 16)
    out = convert(q, out_dtype, in_quant=[qp(0.0123, zero)])
    assert out.dtype == out_dtype
    want = np.array([(int(v) - zero) * 0.0123 for v in q.reshape(-1)]).reshape(q.shape)
    np.testing.assert_array_equal(out, want.astype(out_dtype))


def test_requantise_and_float_inputs() -> None:
    q = np.array([[-128, -1, 0, 1, 127]], np.int8)
    out = convert(q, np.uint8, in_quant=[qp(0.1, 0)], out_quant=[qp(0.1, 128)])
    np.testing.assert_array_equal(out, [[0, 127, 128, 129, 255]])
    out = convert(q, np.int8, in_quant=[qp(0.1, 0)], out_quant=[qp(0.2, 0)])
    np.testing.assert_array_equal(out, [[-64, 0, 0, 0, 64]])  # -0.5, 0.5 tie to 0
    for dtype in (np.float16, np.float64):
        x = randn(5, dtype=dtype, seed=4)
        out = convert(x, np.int8, out_quant=[qp(0.03, 2)])
        np.testing.assert_array_equal(out, loop_quantise(x, [qp(0.03, 2)], 0, np.int8))


def test_rank0_and_dynamic() -> None:
    out = convert(np.array(1.0, np.float32), np.int8, out_quant=[qp(0.5, 0)])
    assert out.shape == () and out[()] == 2
    x = randn(2, 3, seed=5)
    params = [qp(0.1, 0), qp(0.2, 0), qp(0.3, 0)]
    node = cast_node(x, np.int8, out_quant=params, axis=1, node_type=QDC, shape=(-1, -1))
    kernel = create_kernel(node)
    (out,) = run_node(node, [x], kernel)
    np.testing.assert_array_equal(out, loop_quantise(x, params, 1, np.int8))
    expect_error(NNRT_INVALID_SHAPE, lambda: run_node(node, [x[:, :2]], kernel))


def test_error_paths() -> None:
    x = np.zeros((2, 3), np.float32)
    q = np.zeros((2, 3), np.int8)
    p = [qp(0.1, 0)]

    def refused(code, *args, **kw):
        node = cast_node(*args, **kw)
        expect_error(code, lambda: create_kernel(node))

    refused(NNRT_INVALID_NODE, x, np.int8, out_quant=p, src=0)
    refused(NNRT_INVALID_NODE, x, np.int8, out_quant=p, dst=ht.DATA_TYPE_UINT8)
    refused(NNRT_INVALID_NODE, x, np.int8)  # no output QuantParam
    refused(NNRT_INVALID_NODE, q, np.float32)  # no input QuantParam
    refused(NNRT_INVALID_NODE, x, np.int8, out_quant=[qp(0.1, 0)] * 4, axis=1)
    refused(NNRT_INVALID_NODE, x, np.int8, out_quant=[qp(0.1, 0)] * 3, axis=2)
    refused(NNRT_INVALID_NODE, np.zeros((), np.float32), np.int8, out_quant=[qp(0.1, 0)] * 2)
    refused(NNRT_UNSUPPORTED_OP, x, np.float16)
    refused(NNRT_UNSUPPORTED_OP, x, np.int16, out_quant=p)
    refused(NNRT_UNSUPPORTED_OP, np.zeros(3, np.int32), np.int8, in_quant=p, out_quant=p)
    refused(NNRT_UNSUPPORTED_OP, q, np.int32, in_quant=p)
    node = make_node(QDC, na.QuantDTypeCast(srcT=ht.DATA_TYPE_FLOAT32, dstT=ht.DATA_TYPE_INT8),
                     [x, x], out_dtype=np.int8, out_quant=p)
    expect_error(NNRT_INVALID_NODE, lambda: create_kernel(node))
    node = make_node(QDC, na.QuantDTypeCast(srcT=ht.DATA_TYPE_FLOAT32, dstT=ht.DATA_TYPE_INT8),
                     [Declared(x)], out_dtype=np.int8, out_quant=p, n_outputs=2)
    expect_error(NNRT_INVALID_NODE, lambda: create_kernel(node))
