"""Cast: every pair of HDI dtypes; float -> integer truncation with saturation and NaN -> 0;
integer wrap-around; the target-type input (constant, run-time, left out). References:
Python's int()/float()/bool() element by element with explicit wrap and saturation, onnx's
Cast for the in-range values where numpy-backed ONNX is defined."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from onnx.helper import np_dtype_to_tensor_dtype

from nnrt.hdi.reference.kernel import create_kernel
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from nnrt.common.dtypes import hdi_data_type
from tests.hdi.reference.util import (
    NNRT_FAILED,
    NNRT_INVALID_NODE,
    NNRT_UNSUPPORTED_OP,
    Const,
    Declared,
    expect_error,
    expect_refused,
    make_node,
    onnx_reference,
    readonly,
    run_node,
    run_op,
)

CAST = na.NODE_TYPE_CAST
DTYPES = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
          np.uint64, np.float16, np.float32, np.float64]
IDS = [np.dtype(d).name for d in DTYPES]


def _code(dtype: Any, code_dtype: Any = np.int32) -> Const:
    return Const(np.array([hdi_data_type(np.dtype(dtype))], code_dtype))


def _cast(x: np.ndarray, dtype: Any) -> np.ndarray:
    return run_op(CAST, na.Cast(), [x, _code(dtype)], out_dtype=dtype, out_shape=x.shape)


def _sample(dtype: Any) -> np.ndarray:
    d = np.dtype(dtype)
    if d == np.bool_:
        return np.array([True, False, True])
    if d.kind in "iu":
        info = np.iinfo(d)
        return np.array([info.min, info.max, 0, 1, 100, info.max // 3], d)
    values = np.array([-300.75, -129.5, -1.5, -0.5, -0.0, 0.0, 0.5, 1.5, 2.5, 127.9, 255.5,
                       65504.0, 3e9, -3e9, 1e30, -1e30, np.inf, -np.inf, np.nan])
    with np.errstate(over="ignore"):  # 1e30 as float16 is inf: fine for a sample
        return values.astype(d)


def _reference(v: Any, dtype: Any) -> Any:
    """One value converted by the module's rules, in plain Python."""
    d = np.dtype(dtype)
    if d == np.bool_:
        return bool(v != 0) if not (isinstance(v, float) and math.isnan(v)) else True
    if d.kind in "iu":
        info = np.iinfo(d)
        if isinstance(v, float):
            if math.isnan(v):
                return 0
            if math.isinf(v):
                return info.max if v > 0 else info.min
            return min(max(math.trunc(v), info.min), info.max)  # saturate
        v = int(v) & ((1 << info.bits) - 1)  # wrap
        return v - (1 << info.bits) if info.min < 0 and v >= 1 << (info.bits - 1) else v
    with np.errstate(over="ignore"):
        return float(d.type(float(v)))  # to float: nearest (±inf beyond the range)


@pytest.mark.parametrize("src", DTYPES, ids=IDS)
@pytest.mark.parametrize("dst", DTYPES, ids=IDS)
def test_every_pair(src: Any, dst: Any) -> None:
    x = _sample(src)
    with np.errstate(all="raise"):  # no numpy warning escapes
        out = _cast(x, dst)
    assert out.dtype == dst and out.shape == x.shape
    values = x.tolist()
    if np.dtype(src).kind == "f":
        values = [float(v) for v in values]
    want = [_reference(v, dst) for v in values]
    got = out.tolist()
    if np.dtype(dst).kind == "f":
        np.testing.assert_array_equal(np.array(got, np.float64), np.array(want, np.float64))
    else:
        assert got == want


@pytest.mark.parametrize("pair", [(np.float32, np.int32), (np.int32, np.float32),
                                  (np.float64, np.float16), (np.int64, np.int8),
                                  (np.uint8, np.float64), (np.float32, np.bool_)])
def test_in_range_values_match_onnx(pair) -> None:
    src, dst = pair
    x = np.array([[-5.75, 3.25, 0.0], [100.5, -1.0, 7.0]]).astype(src)
    out = _cast(x, dst)
    want = onnx_reference("Cast", [x], to=np_dtype_to_tensor_dtype(np.dtype(dst)))
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("shape", [(), (1,), (2, 1, 3)])
def test_shapes_and_scalar_code(shape) -> None:
    x = np.full(shape, 2.7, np.float32)
    code = Const(np.array(hdi_data_type(np.int16), np.int64))  # rank 0, INT64
    out = run_op(CAST, na.Cast(), [x, code], out_dtype=np.int16, out_shape=shape)
    assert out.shape == shape and out.dtype == np.int16 and (out == 2).all()


def test_same_dtype_is_identity() -> None:
    x = np.array([1.5, np.nan], np.float32)
    out = _cast(x, np.float32)
    assert out[0] == 1.5 and np.isnan(out[1])


def test_one_input_uses_the_output_dtype() -> None:
    x = np.array([1.9, -1.9], np.float64)
    out = run_op(CAST, na.Cast(), [x], out_dtype=np.int8, out_shape=(2,))
    assert out.dtype == np.int8 and out.tolist() == [1, -1]


def test_run_time_type_input() -> None:
    x = np.array([1.9, -1.9], np.float32)
    code = np.array([hdi_data_type(np.int32)], np.int32)
    node = make_node(CAST, na.Cast(), [Declared(x, (-1,)), code], out_dtype=np.int32,
                     out_shape=(-1,))
    kernel = create_kernel(node)
    assert run_node(node, [x, code], kernel)[0].tolist() == [1, -1]
    wrong = readonly(np.array([hdi_data_type(np.int64)], np.int32))
    expect_error(NNRT_FAILED, lambda: kernel.execute([readonly(x), wrong]))
    unknown = readonly(np.array([99], np.int32))
    expect_error(NNRT_FAILED, lambda: kernel.execute([readonly(x), unknown]))


def test_error_paths() -> None:
    f32 = np.ones(3, np.float32)
    expect_refused(NNRT_INVALID_NODE, CAST, na.Cast(), [f32, _code(np.int32)],
                   out_dtype=np.int64)  # target differs from the declared output
    expect_refused(NNRT_INVALID_NODE, CAST, na.Cast(), [f32, Const(np.array([99], np.int32))],
                   out_dtype=np.int32)  # not a DataType
    expect_refused(NNRT_INVALID_NODE, CAST, na.Cast(), [f32, Const(np.array([0], np.int32))],
                   out_dtype=np.int32)  # DATA_TYPE_UNKNOWN
    expect_refused(NNRT_INVALID_NODE, CAST, na.Cast(),
                   [f32, Const(np.array([34, 34], np.int32))], out_dtype=np.int32)
    expect_refused(NNRT_INVALID_NODE, CAST, na.Cast(),
                   [f32, Const(np.array([34.0], np.float32))], out_dtype=np.int32)
    expect_refused(NNRT_INVALID_NODE, CAST, na.Cast(), [f32, _code(np.int32), f32],
                   out_dtype=np.int32)
    expect_refused(NNRT_INVALID_NODE, CAST, na.Cast(), [], out_dtype=np.int32)
    expect_refused(NNRT_INVALID_NODE, CAST, na.Cast(), [f32, _code(np.int32)],
                   out_dtype=np.int32, n_outputs=2)
    expect_refused(NNRT_UNSUPPORTED_OP, CAST, na.Cast(), [f32, _code(np.int8)],
                   out_dtype=np.int8, quant_type=ht.QUANT_TYPE_ALL)
