"""TopKFusion against onnx's reference TopK (random data: no ties) and hand-made cases for
ties, NaN, sorted=false (index order), k as INT32/INT64, run-time k, dtypes and errors."""

from __future__ import annotations

import dataclasses

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
    arrays_of,
    expect_error,
    make_node,
    onnx_outputs,
    randn,
    run_node,
    tensor_spec,
)

TOPK = na.NODE_TYPE_TOPK_FUSION


def topk_node(x, k, axis=-1, sorted_=True, index_dtype=np.int32, value_dtype=None, **kw):
    inputs = [x, k if isinstance(k, (np.ndarray, Declared)) else Const(np.array([k], np.int64))]
    node = make_node(TOPK, na.TopKFusion(axis=axis, sorted=sorted_), inputs, n_outputs=2, **kw)
    outs = (tensor_spec(2, value_dtype or node.inputs[0].dtype, ()),
            tensor_spec(3, index_dtype, ()))
    return dataclasses.replace(node, outputs=outs), arrays_of(inputs)


def topk(x, k, **kw):
    node, arrays = topk_node(x, k, **kw)
    return run_node(node, arrays)


def onnx_topk(x: np.ndarray, k: int, axis: int):
    return onnx_outputs("TopK", [x, np.array([k], np.int64)], 2, opset=18, axis=axis)


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -3])
@pytest.mark.parametrize("k", [0, 1, 2, 3])
def test_against_onnx(axis: int, k: int) -> None:
    x = randn(3, 4, 5, seed=1)
    values, indices = topk(x, k, axis=axis)
    want_v, want_i = onnx_topk(x, k, axis)
    np.testing.assert_array_equal(values, want_v)
    np.testing.assert_array_equal(indices, want_i)
    assert indices.dtype == np.int32


def test_ties_nan_and_unsorted() -> None:
    x = np.array([[1.0, 3.0, 3.0, 2.0, 3.0], [np.nan, 0.0, np.nan, 5.0, -1.0]], np.float32)
    values, indices = topk(x, 3)
    np.testing.assert_array_equal(indices, [[1, 2, 4], [0, 2, 3]])
    np.testing.assert_array_equal(values[0], [3.0, 3.0, 3.0])
    assert np.isnan(values[1, :2]).all() and values[1, 2] == 5.0
    # sorted = false: the same entries in increasing index order.
    y = np.array([4, 9, 1, 7, 9], np.int16)
    values, indices = topk(y, 3, sorted_=False, index_dtype=np.int64)
    np.testing.assert_array_equal(indices, [1, 3, 4])
    np.testing.assert_array_equal(values, [9, 7, 9])
    values, indices = topk(y, 3)
    np.testing.assert_array_equal(indices, [1, 4, 3])
    assert indices.dtype == np.int32 and values.dtype == np.int16


@pytest.mark.parametrize("dtype", [np.float16, np.float64, np.int8, np.uint8, np.int64,
                                   np.uint32])
def test_dtypes(dtype) -> None:
    rng = np.random.default_rng(2)
    x = rng.permutation(60).reshape(6, 10).astype(dtype)  # distinct values: no ties
    values, indices = topk(x, 4, axis=1)
    for r in range(6):
        row = [int(v) for v in x[r]]
        want = sorted(range(10), key=lambda i: -row[i])[:4]
        assert list(indices[r]) == want
        assert [int(v) for v in values[r]] == [row[i] for i in want]


def test_extremes_of_integer_types() -> None:
    x = np.array([-128, 127, 0, -1, 127], np.int8)
    _, indices = topk(x, 5)
    np.testing.assert_array_equal(indices, [1, 4, 2, 3, 0])
    u = np.array([0, 255, 1, 255], np.uint8)
    _, indices = topk(u, 4)
    np.testing.assert_array_equal(indices, [1, 3, 2, 0])


def test_runtime_k_and_dynamic_shape() -> None:
    x = randn(2, 7, seed=3)
    k = np.array([3], np.int32)
    node, arrays = topk_node(x, k)
    kernel = create_kernel(node)
    assert kernel.infer_shapes([x.shape, k.shape]) == [(2, -1), (2, -1)]
    values, _ = run_node(node, arrays, kernel)
    np.testing.assert_array_equal(values, -np.sort(-x, axis=1)[:, :3])
    expect_error(NNRT_FAILED, lambda: run_node(node, [x, np.array([8], np.int32)], kernel))
    expect_error(NNRT_FAILED, lambda: run_node(node, [x, np.array([-1], np.int32)], kernel))
    node, _ = topk_node(Declared(x, (-1, -1)), 2)
    kernel = create_kernel(node)
    assert kernel.infer_shapes([(-1, -1), (1,)]) == [(-1, 2), (-1, 2)]
    expect_error(NNRT_INVALID_SHAPE, lambda: run_node(node, [x[:, :1], np.array([2])], kernel))


def test_error_paths() -> None:
    x = np.zeros((2, 3), np.float32)
    def refused(code, *args, **kw):
        node, _ = topk_node(*args, **kw)
        expect_error(code, lambda: create_kernel(node))
    refused(NNRT_INVALID_NODE, x, 4)
    refused(NNRT_INVALID_NODE, x, -1)
    refused(NNRT_INVALID_NODE, x, 1, axis=2)
    refused(NNRT_INVALID_NODE, x, 1, index_dtype=np.float32)
    refused(NNRT_INVALID_NODE, x, 1, value_dtype=np.float64)
    refused(NNRT_INVALID_NODE, x, Const(np.array([1.0], np.float32)).array)
    refused(NNRT_INVALID_NODE, np.array(1.0, np.float32), 1, axis=0)
    refused(NNRT_UNSUPPORTED_OP, np.zeros(3, bool), 1)
    refused(NNRT_UNSUPPORTED_OP, np.zeros(3, np.int8), 1, quant_type=ht.QUANT_TYPE_ALL)
    node = make_node(TOPK, na.TopKFusion(), [x, Const(np.array([1]))])  # one output
    expect_error(NNRT_INVALID_NODE, lambda: create_kernel(node))
    node, _ = topk_node(x, Const(np.array([1, 2], np.int64)).array)
    node = dataclasses.replace(node, inputs=(node.inputs[0], tensor_spec(
        1, np.int64, (2,), constant=np.array([1, 2]))))
    expect_error(NNRT_INVALID_NODE, lambda: create_kernel(node))
