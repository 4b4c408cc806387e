"""MatMulFusion against explicit sum-of-products loops: transposes, batch broadcasting,
1-D operands, integer and float16 dtypes, fused activations, error paths."""

from __future__ import annotations

import itertools

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
    randn,
    run_op,
)


def _matrix(a: np.ndarray, transpose: bool) -> list[list[float]]:
    rows = [[float(v) for v in row] for row in a]
    return [list(col) for col in zip(*rows)] if transpose else rows


def _product(a: list[list[float]], b: list[list[float]]) -> list[list[float]]:
    return [[sum(a[i][k] * b[k][j] for k in range(len(b))) for j in range(len(b[0]))]
            for i in range(len(a))]


def _reference(x: np.ndarray, y: np.ndarray, ta: bool, tb: bool) -> np.ndarray:
    """Batched product by hand: each batch index picks (broadcast) matrices from x and y."""
    bx, by = x.shape[:-2], y.shape[:-2]
    rank = max(len(bx), len(by))
    bx, by = (1,) * (rank - len(bx)) + bx, (1,) * (rank - len(by)) + by
    xr, yr = x.reshape(bx + x.shape[-2:]), y.reshape(by + y.shape[-2:])
    batch = tuple(max(p, q) for p, q in zip(bx, by))
    results = {}
    for idx in itertools.product(*(range(d) for d in batch)):
        xi = tuple(i if d > 1 else 0 for i, d in zip(idx, bx))
        yi = tuple(i if d > 1 else 0 for i, d in zip(idx, by))
        results[idx] = _product(_matrix(xr[xi], ta), _matrix(yr[yi], tb))
    first = next(iter(results.values()))
    out = np.empty(batch + (len(first), len(first[0])))
    for idx, m in results.items():
        out[idx] = m
    return out


@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
@pytest.mark.parametrize("batch_a,batch_b", [((), ()), ((3,), (3,)), ((2, 1), (4,)), ((), (2, 3)),
                                             ((2, 3), ())])
def test_transposes_and_batch_broadcast(ta: bool, tb: bool, batch_a, batch_b) -> None:
    m, k, n = 3, 4, 2
    a = randn(*batch_a, *((k, m) if ta else (m, k)), seed=1)
    b = randn(*batch_b, *((n, k) if tb else (k, n)), seed=2)
    out = run_op(na.NODE_TYPE_MATMUL_FUSION, na.MatMulFusion(transposeA=ta, transposeB=tb), [a, b])
    np.testing.assert_allclose(out, _reference(a, b, ta, tb), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("tb", [False, True])
def test_constant_operand(tb: bool) -> None:
    a = randn(2, 5, 3, seed=3)
    b = randn(4, 3, seed=4) if tb else randn(3, 4, seed=4)
    out = run_op(na.NODE_TYPE_MATMUL_FUSION, na.MatMulFusion(transposeB=tb), [a, Const(b)])
    np.testing.assert_allclose(out, _reference(a, b, False, tb), rtol=1e-5, atol=1e-5)


def test_one_dimensional_operands() -> None:
    v = np.array([1.0, 2.0, 3.0], dtype=np.float64)
    m = np.arange(6, dtype=np.float64).reshape(3, 2)
    mt = np.arange(6, dtype=np.float64).reshape(2, 3)
    attrs = na.MatMulFusion()
    # vector @ matrix: [3] @ [3, 2] -> [2]
    out = run_op(na.NODE_TYPE_MATMUL_FUSION, attrs, [v, m])
    assert out.shape == (2,) and out.tolist() == [1 * 0 + 2 * 2 + 3 * 4, 1 * 1 + 2 * 3 + 3 * 5]
    # matrix @ vector: [2, 3] @ [3] -> [2]
    out = run_op(na.NODE_TYPE_MATMUL_FUSION, attrs, [mt, v])
    assert out.shape == (2,) and out.tolist() == [0 + 2 + 6, 3 + 8 + 15]
    # vector @ vector -> scalar; transposes of a 1-D operand change nothing
    out = run_op(na.NODE_TYPE_MATMUL_FUSION, na.MatMulFusion(transposeA=True, transposeB=True),
                 [v, v])
    assert out.shape == () and float(out) == 14.0
    # batched matrix @ vector: [2, 2, 3] @ [3] -> [2, 2]
    out = run_op(na.NODE_TYPE_MATMUL_FUSION, attrs, [np.stack([mt, 2 * mt]), v])
    assert out.tolist() == [[8, 26], [16, 52]]


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_matmul(dtype) -> None:
    a = np.array([[1, -2, 3], [4, 5, -6]], dtype=dtype)
    b = np.array([[7, 8], [9, -10], [11, 12]], dtype=dtype)
    attrs = na.MatMulFusion(activationType=ht.ACTIVATION_TYPE_RELU)
    out = run_op(na.NODE_TYPE_MATMUL_FUSION, attrs, [a, b])
    assert out.dtype == dtype
    want = [[max(0, sum(int(a[i, k]) * int(b[k, j]) for k in range(3))) for j in range(2)]
            for i in range(2)]
    assert out.tolist() == want


def test_float16_accumulates_in_float32() -> None:
    a = randn(4, 64, dtype=np.float16, seed=5)
    b = randn(64, 3, dtype=np.float16, seed=6)
    out = run_op(na.NODE_TYPE_MATMUL_FUSION, na.MatMulFusion(), [a, b])
    assert out.dtype == np.float16
    np.testing.assert_allclose(out.astype(np.float64), _reference(a, b, False, False),
                               rtol=2e-3, atol=2e-2)


def test_fused_activations() -> None:
    a = randn(3, 4, dtype=np.float64, seed=7)
    b = randn(4, 5, dtype=np.float64, seed=8)
    ref = _reference(a, b, False, False)
    out = run_op(na.NODE_TYPE_MATMUL_FUSION,
                 na.MatMulFusion(activationType=ht.ACTIVATION_TYPE_RELU6), [a, b])
    np.testing.assert_allclose(out, np.clip(ref, 0, 6), rtol=1e-12)
    out = run_op(na.NODE_TYPE_MATMUL_FUSION,
                 na.MatMulFusion(activationType=ht.ACTIVATION_TYPE_SIGMOID), [a, b])
    np.testing.assert_allclose(out, 1 / (1 + np.exp(-ref)), rtol=1e-12)
    expect_refused(NNRT_UNSUPPORTED_OP, na.NODE_TYPE_MATMUL_FUSION,
                   na.MatMulFusion(activationType=ht.ACTIVATION_TYPE_LEAKY_RELU), [a, b])


def test_dynamic_batch() -> None:
    a = randn(2, 3, 4, seed=9)
    b = randn(4, 5, seed=10)
    node = make_node(na.NODE_TYPE_MATMUL_FUSION, na.MatMulFusion(), [Declared(a, (-1, 3, 4)), b])
    kernel = create_kernel(node)
    assert kernel.infer_shapes([(-1, 3, 4), (4, 5)]) == [(-1, 3, 5)]
    expect_error(NNRT_INVALID_SHAPE, lambda: kernel.infer_shapes([(2, 3, 5), (4, 5)]))


def test_error_paths() -> None:
    a = np.ones((3, 4), np.float32)
    expect_refused(NNRT_INVALID_NODE, na.NODE_TYPE_MATMUL_FUSION, na.MatMulFusion(),
                   [a, np.ones((5, 2), np.float32)])
    expect_refused(NNRT_INVALID_NODE, na.NODE_TYPE_MATMUL_FUSION, na.MatMulFusion(transposeA=True),
                   [a, np.ones((4, 2), np.float32)])
    expect_refused(NNRT_INVALID_NODE, na.NODE_TYPE_MATMUL_FUSION, na.MatMulFusion(),
                   [np.ones((2, 3, 4), np.float32), np.ones((3, 4, 2), np.float32)])
    expect_refused(NNRT_INVALID_NODE, na.NODE_TYPE_MATMUL_FUSION, na.MatMulFusion(), [a])
    expect_refused(NNRT_INVALID_NODE, na.NODE_TYPE_MATMUL_FUSION, na.MatMulFusion(),
                   [np.array(1.0, np.float32), a])
    expect_refused(NNRT_UNSUPPORTED_OP, na.NODE_TYPE_MATMUL_FUSION, na.MatMulFusion(),
                   [a, np.ones((4, 2), np.float64)])
