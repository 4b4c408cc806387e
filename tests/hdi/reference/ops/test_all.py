"""All: logical AND over the axis input, keepDims. References: Python's all() over explicit
index loops; onnx's ReduceMin on bool-as-int data (opset 18, axes input) for a second check."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

from nnrt.hdi.reference.kernel import create_kernel
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
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
    rng,
    run_node,
    run_op,
)

ALL = na.NODE_TYPE_ALL


def _loop_reference(x: np.ndarray, axes: list[int], keep: bool) -> np.ndarray:
    axes = sorted({a % x.ndim for a in axes}) if x.ndim else []
    kept = [i for i in range(x.ndim) if i not in axes]
    out = {}
    for idx in itertools.product(*(range(d) for d in x.shape)):
        key = tuple(idx[i] for i in kept)
        out[key] = out.get(key, True) and bool(x[idx] != 0)
    shape = [1 if i in axes else d for i, d in enumerate(x.shape)] if keep else \
        [x.shape[i] for i in kept]
    result = np.ones([x.shape[i] for i in kept], np.bool_)  # empty reductions stay true
    for key, v in out.items():
        result[key] = v
    return result.reshape(shape)


def _data(shape, dtype: Any = np.bool_, seed: int = 0) -> np.ndarray:
    # mostly true so that whole rows are true now and then
    return (rng(seed).random(shape) < 0.85).astype(dtype)


@pytest.mark.parametrize("axes", [[0], [1], [-1], [0, 2], [2, 0], [-3, -2, -1], []])
@pytest.mark.parametrize("keep", [0, 1, 7])
def test_axes_and_keepdims(axes: list[int], keep: int) -> None:
    x = _data((3, 4, 2), seed=1)
    want = _loop_reference(x, axes, bool(keep))
    out = run_op(ALL, na.All(keepDims=keep), [x, Const(np.array(axes, np.int64))],
                 out_shape=want.shape)
    assert out.dtype == np.bool_ and out.shape == want.shape
    np.testing.assert_array_equal(out, want)
    if axes:
        onnx = onnx_reference("ReduceMin", [x.astype(np.int32), np.array(axes, np.int64)],
                              keepdims=int(bool(keep)))
        np.testing.assert_array_equal(out, onnx.astype(np.bool_))


@pytest.mark.parametrize("dtype", [np.int8, np.uint16, np.int64, np.float16, np.float32])
def test_non_bool_inputs(dtype: Any) -> None:
    x = np.array([[1, 2, 0], [3, -1 if np.dtype(dtype).kind != "u" else 9, 5]], dtype)
    if np.dtype(dtype).kind == "f":
        x[0, 2] = np.nan  # non-zero: true
    out = run_op(ALL, na.All(), [x, Const(np.array(1, np.int32))], out_dtype=np.bool_,
                 out_shape=(2,))
    want = [all(bool(v) for v in row) for row in x.tolist()]
    assert out.tolist() == want


def test_scalar_axis_and_size_one_and_empty_dims() -> None:
    x = _data((1, 3), seed=2)
    out = run_op(ALL, na.All(keepDims=1), [x, Const(np.array(0, np.int32))], out_shape=(1, 3))
    np.testing.assert_array_equal(out, x)
    empty = np.zeros((2, 0), np.bool_)
    out = run_op(ALL, na.All(), [empty, Const(np.array([1], np.int32))], out_shape=(2,))
    assert out.tolist() == [True, True]


def test_run_time_axis() -> None:
    x = _data((3, 4), seed=3)
    axis = np.array([1], np.int32)
    node = make_node(ALL, na.All(), [x, axis], out_shape=(-1,))
    kernel = create_kernel(node)
    assert kernel.infer_shapes([(3, 4), (1,)]) == [(-1,)]
    (out,) = run_node(node, [x, axis], kernel)
    np.testing.assert_array_equal(out, _loop_reference(x, [1], False))
    out = kernel.execute([readonly(x), readonly(np.array([-2], np.int32))])[0]
    np.testing.assert_array_equal(out, _loop_reference(x, [0], False))
    expect_error(NNRT_FAILED, lambda: kernel.execute([readonly(x),
                                                      readonly(np.array([2], np.int32))]))
    keep = make_node(ALL, na.All(keepDims=1), [x, Declared(axis, (-1,))], out_shape=(-1, -1))
    kernel = create_kernel(keep)
    assert kernel.infer_shapes([(3, 4), (2,)]) == [(-1, -1)]
    out = kernel.execute([readonly(x), readonly(np.array([0, 1], np.int32))])[0]
    assert out.shape == (1, 1) and out.item() == x.all()
    expect_error(NNRT_FAILED, lambda: kernel.execute([readonly(x),
                                                      readonly(np.array([1, -1], np.int32))]))


def test_dynamic_input_dims() -> None:
    x = _data((3, 4), seed=4)
    node = make_node(ALL, na.All(), [Declared(x, (-1, 4)), Const(np.array([1], np.int32))],
                     out_shape=(-1,))
    kernel = create_kernel(node)
    assert kernel.infer_shapes([(-1, 4), (1,)]) == [(-1,)]
    assert kernel.infer_shapes([(5, 4), (1,)]) == [(5,)]


def test_error_paths() -> None:
    b = np.ones((2, 3), np.bool_)
    ax = Const(np.array([1], np.int32))
    expect_refused(NNRT_INVALID_NODE, ALL, na.All(), [b])
    expect_refused(NNRT_INVALID_NODE, ALL, na.All(), [b, ax, ax])
    expect_refused(NNRT_INVALID_NODE, ALL, na.All(), [b, ax], out_dtype=np.int32)
    expect_refused(NNRT_INVALID_NODE, ALL, na.All(), [b, Const(np.array([2], np.int32))])
    expect_refused(NNRT_INVALID_NODE, ALL, na.All(), [b, Const(np.array([-3], np.int32))])
    expect_refused(NNRT_INVALID_NODE, ALL, na.All(), [b, Const(np.array([1, -1], np.int32))])
    expect_refused(NNRT_INVALID_NODE, ALL, na.All(), [b, Const(np.array([1.0], np.float32))])
    expect_refused(NNRT_INVALID_NODE, ALL, na.All(), [b, Const(np.array([[1]], np.int32))])
    expect_refused(NNRT_UNSUPPORTED_OP, ALL, na.All(),
                   [b, Declared(np.array([1], np.int32), (-1,))])
    expect_refused(NNRT_UNSUPPORTED_OP, ALL, na.All(), [np.ones(2, np.int8), ax],
                   out_dtype=np.bool_, quant_type=ht.QUANT_TYPE_ALL)
