"""TileFusion against ONNX Tile (onnx.reference) and, for what ONNX lacks (the dims
attribute, multiples longer or shorter than the rank), against repeated concatenation."""

from __future__ import annotations

import numpy as np
import pytest

from nnrt.hdi.reference.kernel import create_kernel
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
    readonly,
    run_node,
    run_op,
)

TILE = na.NODE_TYPE_TILE_FUSION


def repeat_along(x: np.ndarray, counts: dict[int, int]) -> np.ndarray:
    """x with whole copies of itself concatenated `counts[d]` times along each dimension d."""
    for d, k in counts.items():
        x = np.concatenate([x] * k, axis=d) if k else x.take([], axis=d)
    return x


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("shape,multiples", [
    ((3,), (2,)), ((2, 3), (1, 2)), ((2, 3), (3, 1)), ((2, 1, 3), (2, 3, 2)), ((2, 2), (0, 2)),
    ((1,), (5,)),
])
def test_against_onnx_tile(index_dtype, shape, multiples) -> None:
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    expected = onnx_reference("Tile", [x, np.array(multiples, np.int64)])
    out = run_op(TILE, na.TileFusion(), [x, Const(np.array(multiples, index_dtype))])
    np.testing.assert_array_equal(out, expected)


def test_longer_and_shorter_multiples() -> None:
    x = np.arange(6, dtype=np.int16).reshape(2, 3)
    out = run_op(TILE, na.TileFusion(), [x, Const(np.array([2, 1, 3], np.int32))])
    np.testing.assert_array_equal(out, repeat_along(x[None], {0: 2, 2: 3}))
    # shorter: multiples[i] applies to dimension i (MindSpore Lite), trailing ones untouched
    out = run_op(TILE, na.TileFusion(), [x, Const(np.array([3], np.int32))])
    np.testing.assert_array_equal(out, repeat_along(x, {0: 3}))


def test_dims_attribute() -> None:
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    out = run_op(TILE, na.TileFusion(dims=[2, 0]), [x, Const(np.array([2, 3], np.int64))])
    np.testing.assert_array_equal(out, repeat_along(x, {2: 2, 0: 3}))
    out = run_op(TILE, na.TileFusion(dims=[-2]), [x, Const(np.array([2], np.int64))])
    np.testing.assert_array_equal(out, repeat_along(x, {1: 2}))
    # [0] is the upstream client's default: ignored when multiples has more entries
    out = run_op(TILE, na.TileFusion(dims=[0]), [x, Const(np.array([1, 2, 2], np.int64))])
    np.testing.assert_array_equal(out, repeat_along(x, {1: 2, 2: 2}))
    out = run_op(TILE, na.TileFusion(dims=[0]), [x, Const(np.array([3], np.int64))])
    np.testing.assert_array_equal(out, repeat_along(x, {0: 3}))


@pytest.mark.parametrize("dtype", [np.bool_, np.uint8, np.int64, np.float16, np.float64])
def test_dtypes_and_scalar(dtype) -> None:
    x = (np.arange(4) % 3).astype(dtype).reshape(2, 2)
    out = run_op(TILE, na.TileFusion(), [x, Const(np.array([2, 2], np.int32))])
    assert out.dtype == dtype
    np.testing.assert_array_equal(out, repeat_along(x, {0: 2, 1: 2}))
    s = np.array(1, dtype)
    out = run_op(TILE, na.TileFusion(), [s, Const(np.array([3], np.int32))])
    assert out.shape == (3,) and out.dtype == dtype


def test_run_time_multiples_and_dynamic_dims() -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    node = make_node(TILE, na.TileFusion(), [x, np.array([1, 1], np.int32)])
    kernel = create_kernel(node)
    assert kernel.infer_shapes([(2, 3), (2,)]) == [(-1, -1)]
    (out,) = run_node(node, [x, np.array([2, 1], np.int32)], kernel)
    np.testing.assert_array_equal(out, repeat_along(x, {0: 2}))
    expect_error(NNRT_INVALID_SHAPE, lambda: kernel.execute(
        [readonly(x), readonly(np.array([2, -1], np.int32))]))
    expect_error(NNRT_INVALID_SHAPE, lambda: kernel.execute(
        [readonly(x), readonly(np.array([2, 1, 1], np.int32))]))
    node = make_node(TILE, na.TileFusion(), [Declared(x, (-1, 3)),
                                             Const(np.array([2, 2], np.int32))])
    assert create_kernel(node).infer_shapes([(-1, 3), (2,)]) == [(-1, 6)]


def test_error_paths() -> None:
    x = np.zeros((2, 3), np.float32)
    m = Const(np.array([1, 2], np.int32))
    expect_refused(NNRT_INVALID_NODE, TILE, na.TileFusion(), [x])
    expect_refused(NNRT_INVALID_NODE, TILE, na.TileFusion(), [x, Const(np.array([1, -1]))])
    expect_refused(NNRT_INVALID_NODE, TILE, na.TileFusion(), [x, Const(np.array([1.0, 2.0]))])
    expect_refused(NNRT_INVALID_NODE, TILE, na.TileFusion(dims=[0, 1, 1]), [x, m])
    expect_refused(NNRT_INVALID_NODE, TILE, na.TileFusion(dims=[1, 1]), [x, m])
    expect_refused(NNRT_INVALID_NODE, TILE, na.TileFusion(dims=[0, 2]), [x, m])
    expect_refused(NNRT_INVALID_NODE, TILE, na.TileFusion(), [x, m], out_dtype=np.int32)
    expect_refused(NNRT_UNSUPPORTED_OP, TILE, na.TileFusion(),
                   [x, Declared(np.array([1, 2], np.int32), (-1,))])
