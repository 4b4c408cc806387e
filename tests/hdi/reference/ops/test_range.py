"""Range against ONNX Range (onnx.reference): attribute bounds (the framework's one ignored
input), three constant or run-time inputs, positive and negative deltas, empty ranges,
integer and float dtypes, int64 extremes, dataType, errors."""

from __future__ import annotations

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
    expect_error,
    expect_refused,
    make_node,
    onnx_reference,
    readonly,
    run_node,
    run_op,
)

RANGE = na.NODE_TYPE_RANGE


BOUNDS = [(0, 5, 1), (2, 11, 3), (10, 1, -2), (5, 5, 1), (5, 0, 1), (-3, 4, 2), (7, -8, -5)]


@pytest.mark.parametrize("start,limit,delta", BOUNDS)
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float32])
def test_attributes_against_onnx(start, limit, delta, dtype) -> None:
    expected = onnx_reference("Range", [np.array(v, dtype) for v in (start, limit, delta)])
    out = run_op(RANGE, na.Range(start=start, limit=limit, delta=delta),
                 [np.zeros(1, np.float32)], out_dtype=dtype)
    assert out.dtype == dtype
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("bounds", [(0.5, 3.0, 0.5), (1.0, -1.0, -0.3), (0.0, 1.0, 0.1),
                                    (2.0, 2.0, 1.0)])
@pytest.mark.parametrize("const", [True, False])
def test_float_inputs_against_onnx(bounds, const) -> None:
    arrays = [np.array(v, np.float32) for v in bounds]
    expected = onnx_reference("Range", arrays)
    out = run_op(RANGE, na.Range(), [Const(a) if const else a for a in arrays],
                 out_dtype=np.float32)
    np.testing.assert_allclose(out, expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.uint64, np.float16,
                                   np.float64])
def test_dtypes(dtype) -> None:
    out = run_op(RANGE, na.Range(start=1, limit=10, delta=4), [], out_dtype=dtype)
    assert out.dtype == dtype and out.tolist() == [1, 5, 9]


def test_int64_extremes() -> None:
    big = np.iinfo(np.int64)
    out = run_op(RANGE, na.Range(start=big.max, limit=big.min, delta=big.min),
                 [np.zeros(1)], out_dtype=np.int64)
    assert out.tolist() == [big.max, -1]  # max + min = -1, both steps exact
    out = run_op(RANGE, na.Range(start=big.min, limit=big.max, delta=big.max),
                 [np.zeros(1)], out_dtype=np.int64)
    assert out.tolist() == [big.min, -1, big.max - 1]


def test_run_time_inputs_and_errors() -> None:
    arrays = [np.array(v, np.int32) for v in (0, 4, 1)]
    node = make_node(RANGE, na.Range(start=100), arrays, out_dtype=np.int32)
    kernel = create_kernel(node)
    assert kernel.infer_shapes([(), (), ()]) == [(-1,)]
    (out,) = run_node(node, [np.array(3, np.int32), np.array([9], np.int32),
                             np.array(2, np.int32)], kernel)
    assert out.tolist() == [3, 5, 7]  # the inputs win over the attributes
    expect_error(NNRT_INVALID_SHAPE, lambda: kernel.execute(
        [readonly(a) for a in (np.array(0, np.int32), np.array(4, np.int32),
                               np.array(0, np.int32))]))
    expect_error(NNRT_INVALID_SHAPE, lambda: kernel.execute(
        [readonly(a) for a in (np.array([0, 1], np.int32), np.array(4, np.int32),
                               np.array(1, np.int32))]))
    node = make_node(RANGE, na.Range(), [Const(a) for a in arrays], out_dtype=np.int32)
    assert create_kernel(node).infer_shapes([(), (), ()]) == [(4,)]


def test_error_paths() -> None:
    x = [np.zeros(1, np.float32)]
    expect_refused(NNRT_INVALID_NODE, RANGE, na.Range(start=0, limit=5, delta=0), x,
                   out_dtype=np.int32)
    expect_refused(NNRT_INVALID_NODE, RANGE, na.Range(start=0, limit=300, delta=1), x,
                   out_dtype=np.int8)
    expect_refused(NNRT_INVALID_NODE, RANGE, na.Range(start=-1, limit=3, delta=1), x,
                   out_dtype=np.uint8)
    expect_refused(NNRT_INVALID_NODE, RANGE,
                   na.Range(dataType=ht.DATA_TYPE_FLOAT32, limit=3, delta=1), x,
                   out_dtype=np.int32)
    expect_refused(NNRT_INVALID_NODE, RANGE, na.Range(limit=3, delta=1), x * 2,
                   out_dtype=np.int32)
    expect_refused(NNRT_INVALID_NODE, RANGE, na.Range(),
                   [Const(np.array(v, np.int64)) for v in (0, 3, 1)], out_dtype=np.int32)
    expect_refused(NNRT_INVALID_NODE, RANGE, na.Range(),
                   [Const(np.array([v, v], np.int32)) for v in (0, 3, 1)], out_dtype=np.int32)
    expect_refused(NNRT_UNSUPPORTED_OP, RANGE, na.Range(limit=3, delta=1), x,
                   out_dtype=np.bool_)
    expect_refused(NNRT_INVALID_NODE, RANGE, na.Range(limit=3, delta=1), x, out_dtype=np.int32,
                   n_outputs=2)
