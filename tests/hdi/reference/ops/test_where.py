"""Where / Select: condition ? x1 : x2 with broadcasting; Select's 1-D condition over the first
dimension; one-input Where (coordinates of the true elements). References: onnx's Where and
NonZero (transposed), explicit loops for Select's row rule."""

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
    rng,
    run_node,
    run_op,
)

WHERE, SELECT = na.NODE_TYPE_WHERE, na.NODE_TYPE_SELECT
KINDS = {WHERE: na.Where, SELECT: na.Select}
DTYPES = [np.bool_, np.int8, np.int32, np.int64, np.uint8, np.uint64, np.float16, np.float32,
          np.float64]


def _cond(shape, seed: int = 0) -> np.ndarray:
    return rng(seed).integers(0, 2, shape).astype(np.bool_)


@pytest.mark.parametrize("node_type", KINDS, ids=["where", "select"])
@pytest.mark.parametrize("shapes", [((2, 3), (2, 3), (2, 3)), ((), (2, 3), (2, 3)),
                                    ((2, 1), (1, 3), (2, 3)), ((4, 1, 3), (3,), ()),
                                    ((), (), ()), ((1,), (5,), (5,))])
def test_selection_matches_onnx(node_type: int, shapes) -> None:
    cond = _cond(shapes[0], 1)
    x1 = randn(*shapes[1], seed=2)
    x2 = randn(*shapes[2], seed=3)
    out_shape = np.broadcast_shapes(*shapes)
    out = run_op(node_type, KINDS[node_type](), [cond, x1, x2], out_shape=out_shape,
                 out_dtype=np.float32)
    np.testing.assert_array_equal(out, onnx_reference("Where", [cond, x1, x2]))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_every_value_dtype(dtype: Any) -> None:
    cond = np.array([True, False, True])
    x1 = np.array([1, 0, 0], dtype)
    x2 = np.array([0, 1, 1], dtype)
    out = run_op(WHERE, na.Where(), [cond, x1, Const(x2)], out_shape=(3,), out_dtype=dtype)
    assert out.dtype == dtype and out.tolist() == np.array([1, 1, 0], dtype).tolist()


def test_select_vector_condition_picks_rows() -> None:
    cond = np.array([True, False, True])
    x1 = randn(3, 2, 4, seed=4)
    x2 = randn(3, 2, 4, seed=5)
    out = run_op(SELECT, na.Select(), [cond, x1, x2], out_shape=x1.shape, out_dtype=np.float32)
    want = np.empty_like(x1)
    for i, j, k in itertools.product(range(3), range(2), range(4)):
        want[i, j, k] = x1[i, j, k] if cond[i] else x2[i, j, k]
    np.testing.assert_array_equal(out, want)
    # square values: rows (Select's rule), where Where broadcasts over the last dimension
    x1, x2 = randn(3, 3, seed=6), randn(3, 3, seed=7)
    rows = run_op(SELECT, na.Select(), [cond, x1, x2], out_shape=(3, 3), out_dtype=np.float32)
    cols = run_op(WHERE, na.Where(), [cond, x1, x2], out_shape=(3, 3), out_dtype=np.float32)
    np.testing.assert_array_equal(rows, [x1[i] if cond[i] else x2[i] for i in range(3)])
    np.testing.assert_array_equal(cols, onnx_reference("Where", [cond, x1, x2]))


@pytest.mark.parametrize("shape", [(2, 3), (4,), (2, 1, 3), ()])
@pytest.mark.parametrize("out_dtype", [np.int64, np.int32])
def test_coordinates(shape, out_dtype: Any) -> None:
    cond = _cond(shape, 8)
    node = make_node(WHERE, na.Where(), [Declared(cond, shape)], out_dtype=out_dtype,
                     out_shape=(-1, len(shape)))
    kernel = create_kernel(node)
    assert kernel.infer_shapes([shape]) == [(-1, len(shape))]
    (out,) = run_node(node, [cond], kernel)
    want = [idx for idx in itertools.product(*(range(d) for d in shape)) if cond[idx]]
    assert out.dtype == out_dtype and out.shape == (len(want), len(shape))
    assert [tuple(r) for r in out.tolist()] == want
    if shape:
        np.testing.assert_array_equal(out, onnx_reference("NonZero", [cond]).T)


def test_coordinates_of_a_constant_condition_are_static() -> None:
    cond = np.array([[True, False], [True, True]])
    node = make_node(WHERE, na.Where(), [Const(cond)], out_dtype=np.int64, out_shape=(3, 2))
    kernel = create_kernel(node)
    assert kernel.infer_shapes([(2, 2)]) == [(3, 2)]
    assert kernel.execute([cond])[0].tolist() == [[0, 0], [1, 0], [1, 1]]


def test_dynamic_shapes() -> None:
    cond = _cond((2, 3))
    x = np.ones((2, 3), np.float32)
    node = make_node(WHERE, na.Where(), [Declared(cond, (-1, 3)), x, x], out_dtype=np.float32,
                     out_shape=(-1, 3))
    kernel = create_kernel(node)
    assert kernel.infer_shapes([(-1, 3), (2, 3), (2, 3)]) == [(2, 3)]
    expect_error(NNRT_INVALID_SHAPE, lambda: kernel.infer_shapes([(4, 3), (2, 3), (2, 3)]))


@pytest.mark.parametrize("node_type", KINDS, ids=["where", "select"])
def test_error_paths(node_type: int) -> None:
    attrs = KINDS[node_type]()
    cond = np.ones((2, 3), np.bool_)
    f32 = np.ones((2, 3), np.float32)
    kw = {"out_dtype": np.float32}
    expect_refused(NNRT_INVALID_NODE, node_type, attrs, [cond, f32], **kw)
    expect_refused(NNRT_INVALID_NODE, node_type, attrs, [cond, f32, f32, f32], **kw)
    expect_refused(NNRT_INVALID_NODE, node_type, attrs, [cond, f32, f32], out_dtype=np.float64)
    expect_refused(NNRT_INVALID_NODE, node_type, attrs,
                   [cond, f32, np.ones((2, 4), np.float32)], **kw)
    expect_refused(NNRT_UNSUPPORTED_OP, node_type, attrs, [f32, f32, f32], **kw)
    expect_refused(NNRT_UNSUPPORTED_OP, node_type, attrs,
                   [cond, f32, np.ones((2, 3), np.float64)], **kw)
    expect_refused(NNRT_UNSUPPORTED_OP, node_type, attrs, [cond, f32, f32],
                   quant_type=ht.QUANT_TYPE_ALL, **kw)
    if node_type == SELECT:
        expect_refused(NNRT_INVALID_NODE, SELECT, attrs, [cond], out_dtype=np.int64)
    else:
        expect_refused(NNRT_UNSUPPORTED_OP, WHERE, attrs, [cond], out_dtype=np.float32)
        expect_refused(NNRT_UNSUPPORTED_OP, WHERE, attrs, [f32], out_dtype=np.int64)
