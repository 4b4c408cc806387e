"""Transpose: constant and run-time perm (INT32/INT64, negative entries), a view as result,
checked element by element through explicit index mapping."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from nnrt.hdi.reference.kernel import create_kernel
from nnrt.protos import node_attrs_pb2 as na
from tests.hdi.reference.util import (
    NNRT_INVALID_NODE,
    NNRT_INVALID_SHAPE,
    Const,
    expect_error,
    expect_refused,
    make_node,
    readonly,
    run_node,
    run_op,
)

TRANSPOSE = na.NODE_TYPE_TRANSPOSE


def _check(x: np.ndarray, out: np.ndarray, perm) -> None:
    perm = [p % x.ndim for p in perm]
    assert out.shape == tuple(x.shape[p] for p in perm)
    for idx in itertools.product(*(range(d) for d in out.shape)):
        src = [0] * x.ndim
        for i, p in enumerate(perm):
            src[p] = idx[i]
        assert out[idx] == x[tuple(src)]


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("perm", [[0, 1, 2, 3], [0, 3, 1, 2], [0, 2, 3, 1], [3, 2, 1, 0],
                                  [-1, 0, -2, 1]])
def test_constant_perm(index_dtype, perm) -> None:
    x = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
    out = run_op(TRANSPOSE, na.Transpose(), [x, Const(np.array(perm, index_dtype))])
    _check(x, out, perm)


def test_view_and_other_dtypes() -> None:
    x = readonly(np.arange(6, dtype=np.uint8).reshape(2, 3))
    node = make_node(TRANSPOSE, na.Transpose(), [x, Const(np.array([1, 0], np.int32))])
    out = create_kernel(node).execute([x, node.inputs[1].constant])[0]
    assert np.shares_memory(out, x) and out.tolist() == [[0, 3], [1, 4], [2, 5]]
    out = run_op(TRANSPOSE, na.Transpose(), [np.array(5.0), Const(np.zeros(0, np.int64))])
    assert out.shape == () and float(out) == 5.0


def test_run_time_perm() -> None:
    x = np.arange(24, dtype=np.int64).reshape(2, 3, 4)
    node = make_node(TRANSPOSE, na.Transpose(), [x, np.array([2, 0, 1], np.int32)])
    kernel = create_kernel(node)
    assert kernel.infer_shapes([(2, 3, 4), (3,)]) == [(-1, -1, -1)]
    (out,) = run_node(node, [x, np.array([2, 0, -2], np.int32)], kernel)
    _check(x, out, [2, 0, 1])
    expect_error(NNRT_INVALID_SHAPE,
                 lambda: kernel.execute([readonly(x), readonly(np.array([0, 0, 1], np.int32))]))


def test_error_paths() -> None:
    x = np.zeros((2, 3, 4), np.float32)
    for perm in ([0, 1], [0, 1, 1], [0, 1, 3], [-4, 0, 1], [0, 1, 2, 3]):
        expect_refused(NNRT_INVALID_NODE, TRANSPOSE, na.Transpose(),
                       [x, Const(np.array(perm, np.int32))])
    expect_refused(NNRT_INVALID_NODE, TRANSPOSE, na.Transpose(),
                   [x, Const(np.array([0, 1, 2], np.float32))])
    expect_refused(NNRT_INVALID_NODE, TRANSPOSE, na.Transpose(), [x])
    expect_refused(NNRT_INVALID_NODE, TRANSPOSE, na.Transpose(),
                   [x, Const(np.array([0, 1, 2], np.int32))], out_dtype=np.int32)
