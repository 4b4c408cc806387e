"""ArgMaxFusion against onnx's reference ArgMax and hand-made cases: axis, keepDims, topK,
outMaxValue, the optional value output, ties, dtypes and error paths."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from nnrt.hdi.reference.kernel import create_kernel
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from tests.hdi.reference.util import (
    NNRT_INVALID_NODE,
    NNRT_INVALID_SHAPE,
    NNRT_UNSUPPORTED_OP,
    Declared,
    expect_error,
    expect_refused,
    make_node,
    onnx_reference,
    randn,
    run_node,
    run_op,
    tensor_spec,
)

ARGMAX = na.NODE_TYPE_ARGMAX_FUSION


def onnx_argmax(x: np.ndarray, axis: int, keep: bool) -> np.ndarray:
    return onnx_reference("ArgMax", [x], opset=13, axis=axis, keepdims=int(keep))


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -2])
@pytest.mark.parametrize("keep", [False, True])
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_against_onnx(axis: int, keep: bool, index_dtype) -> None:
    x = randn(3, 4, 5, seed=1)
    out = run_op(ARGMAX, na.ArgMaxFusion(axis=axis, keepDims=keep), [x], out_dtype=index_dtype)
    want = onnx_argmax(x, axis, keep)
    assert out.shape == want.shape and out.dtype == index_dtype
    np.testing.assert_array_equal(out, want)
    # topK = 1 given explicitly is the same.
    out = run_op(ARGMAX, na.ArgMaxFusion(axis=axis, keepDims=keep, topK=1), [x],
                 out_dtype=index_dtype)
    np.testing.assert_array_equal(out, want)


def test_ties_take_the_first() -> None:
    x = np.array([[1, 5, 5, 2], [7, 7, 7, 7]], np.int32)
    out = run_op(ARGMAX, na.ArgMaxFusion(axis=1), [x], out_dtype=np.int32)
    np.testing.assert_array_equal(out, [1, 0])
    f = np.array([1.0, np.nan, 3.0, np.nan], np.float32)
    out = run_op(ARGMAX, na.ArgMaxFusion(axis=0), [f], out_dtype=np.int64)
    assert out[()] == 1


def test_top_k_keeps_the_axis() -> None:
    x = np.array([[3.0, 9.0, 1.0, 9.0], [0.0, -1.0, 2.0, 8.0]], np.float32)
    out = run_op(ARGMAX, na.ArgMaxFusion(axis=-1, topK=3), [x], out_dtype=np.int32)
    np.testing.assert_array_equal(out, [[1, 3, 0], [3, 2, 0]])
    out = run_op(ARGMAX, na.ArgMaxFusion(axis=0, topK=2), [x], out_dtype=np.int32)
    np.testing.assert_array_equal(out, [[0, 0, 1, 0], [1, 1, 0, 1]])
    values = run_op(ARGMAX, na.ArgMaxFusion(axis=-1, topK=2, outMaxValue=True), [x])
    np.testing.assert_array_equal(values, [[9.0, 9.0], [8.0, 2.0]])


@pytest.mark.parametrize("dtype", [np.float16, np.float64, np.int8, np.uint8, np.int64])
def test_out_max_value_and_dtypes(dtype) -> None:
    rng = np.random.default_rng(2)
    x = rng.permutation(24).reshape(2, 3, 4).astype(dtype)
    out = run_op(ARGMAX, na.ArgMaxFusion(axis=1, outMaxValue=True), [x])
    assert out.dtype == dtype
    np.testing.assert_array_equal(out, x.max(axis=1))
    out = run_op(ARGMAX, na.ArgMaxFusion(axis=1, keepDims=True, outMaxValue=True), [x])
    np.testing.assert_array_equal(out, x.max(axis=1, keepdims=True))
    idx = run_op(ARGMAX, na.ArgMaxFusion(axis=2), [x], out_dtype=np.int32)
    np.testing.assert_array_equal(idx, onnx_argmax(x.astype(np.float64), 2, False))


def test_two_outputs_and_rank1() -> None:
    x = np.array([2.0, 7.0, 7.0, 1.0], np.float32)
    node = make_node(ARGMAX, na.ArgMaxFusion(axis=0), [x], n_outputs=2)
    node = dataclasses.replace(node, outputs=(tensor_spec(1, np.int64, ()),
                                              tensor_spec(2, np.float32, ())))
    idx, values = run_node(node, [x])
    assert idx.shape == () and idx[()] == 1 and values[()] == 7.0
    node = make_node(ARGMAX, na.ArgMaxFusion(axis=0, topK=2, outMaxValue=True), [x],
                     n_outputs=2)
    first, second = run_node(node, [x])
    np.testing.assert_array_equal(first, [7.0, 7.0])
    np.testing.assert_array_equal(second, [7.0, 7.0])


def test_dynamic_dims() -> None:
    x = randn(2, 5, seed=3)
    node = make_node(ARGMAX, na.ArgMaxFusion(axis=1, topK=2), [Declared(x, (-1, -1))],
                     out_dtype=np.int32)
    kernel = create_kernel(node)
    assert kernel.infer_shapes([(-1, -1)]) == [(-1, 2)]
    (out,) = run_node(node, [x], kernel)
    np.testing.assert_array_equal(out, np.argsort(-x, axis=1)[:, :2])
    expect_error(NNRT_INVALID_SHAPE, lambda: run_node(node, [x[:, :1]], kernel))


def test_error_paths() -> None:
    x = np.zeros((2, 3), np.float32)
    expect_refused(NNRT_INVALID_NODE, ARGMAX, na.ArgMaxFusion(axis=2), [x], out_dtype=np.int32)
    expect_refused(NNRT_INVALID_NODE, ARGMAX, na.ArgMaxFusion(axis=-3), [x], out_dtype=np.int32)
    expect_refused(NNRT_INVALID_NODE, ARGMAX, na.ArgMaxFusion(topK=-1), [x], out_dtype=np.int32)
    expect_refused(NNRT_INVALID_NODE, ARGMAX, na.ArgMaxFusion(axis=1, topK=4), [x],
                   out_dtype=np.int32)
    expect_refused(NNRT_INVALID_NODE, ARGMAX, na.ArgMaxFusion(), [x])  # float indices
    expect_refused(NNRT_INVALID_NODE, ARGMAX, na.ArgMaxFusion(outMaxValue=True), [x],
                   out_dtype=np.int32)
    expect_refused(NNRT_INVALID_NODE, ARGMAX, na.ArgMaxFusion(), [x, x], out_dtype=np.int32)
    expect_refused(NNRT_INVALID_NODE, ARGMAX, na.ArgMaxFusion(), [x], out_dtype=np.int32,
                   n_outputs=3)
    expect_refused(NNRT_INVALID_NODE, ARGMAX, na.ArgMaxFusion(), [x], out_dtype=np.int32,
                   n_outputs=2)  # the value output must have x's dtype
    expect_refused(NNRT_INVALID_NODE, ARGMAX, na.ArgMaxFusion(), [np.array(1.0, np.float32)],
                   out_dtype=np.int32)
    expect_refused(NNRT_UNSUPPORTED_OP, ARGMAX, na.ArgMaxFusion(), [np.zeros(3, bool)],
                   out_dtype=np.int32)
    expect_refused(NNRT_UNSUPPORTED_OP, ARGMAX, na.ArgMaxFusion(), [np.zeros(3, np.int8)],
                   out_dtype=np.int32, quant_type=ht.QUANT_TYPE_ALL)
