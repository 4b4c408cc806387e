"""ReduceFusion on the GPU against the CPU reference: every mode, several axes (leading,
middle, trailing, non-adjacent, all, none given), keepDims, reduceToEnd, coeff, short
reductions (one work-item per output), long ones (one work-group per output) and long
ones over few outputs (split into chunks); NaN / inf; empty reductions; refusals."""

from __future__ import annotations

import numpy as np
import pytest
from nnrt.hdi.reference.kernel import create_kernel
from nnrt.drivers.gpu.kernel import create_op
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na

from tests.drivers.gpu.util import assert_close, node_graph, run_cpu, run_gpu
from tests.hdi.reference.util import (
    NNRT_UNSUPPORTED_OP,
    Const,
    expect_error,
    make_node,
    randn,
)

REDUCE = na.NODE_TYPE_REDUCE_FUSION
MODES = {
    "mean": ht.REDUCE_MODE_MEAN, "max": ht.REDUCE_MODE_MAX, "min": ht.REDUCE_MODE_MIN,
    "prod": ht.REDUCE_MODE_PROD, "sum": ht.REDUCE_MODE_SUM,
    "sum_square": ht.REDUCE_MODE_SUM_SQUARE, "asum": ht.REDUCE_MODE_ASUM,
    "all": ht.REDUCE_MODE_ALL, "l2": ht.REDUCE_MODE_L2,
}


def data(mode: int, *shape: int, seed: int = 0) -> np.ndarray:
    x = randn(*shape, seed=seed)
    if mode == ht.REDUCE_MODE_PROD:  # near 1: no overflow / underflow over many cells
        return (1 + 0.01 * x).astype(np.float32)
    if mode == ht.REDUCE_MODE_ALL:  # some zeros
        return np.where(np.abs(x) < 0.05, 0, x).astype(np.float32)
    return x


def check(mode: int, x: np.ndarray, axes, keep: bool = False, to_end: bool = False,
          coeff: float = 0.0) -> None:
    attrs = na.ReduceFusion(mode=mode, keepDims=keep, reduceToEnd=to_end, coeff=coeff)
    inputs = [x] if axes is None else [x, Const(np.asarray(axes, dtype=np.int32))]
    (shape,) = create_kernel(make_node(REDUCE, attrs, inputs)).infer_shapes(
        [x.shape] + ([] if axes is None else [(len(axes),)]))
    graph = node_graph(make_node(REDUCE, attrs, inputs, out_shape=shape))
    assert_close(run_gpu(graph, [x]), run_cpu(graph, [x]))


@pytest.mark.parametrize("mode", MODES.values(), ids=MODES.keys())
@pytest.mark.parametrize("shape,axes,keep", [
    ((3, 5, 7), [1], False), ((3, 5, 7), [-1], True), ((3, 5, 7), [0, 2], False),
    ((4, 300), [1], False), ((300, 5), [0], True), ((2, 3, 4, 5), [1, 2], True),
    ((2, 3, 4, 5), [], False), ((130, 9), None, False),
], ids=lambda v: str(v).replace(" ", ""))
def test_modes(mode: int, shape, axes, keep: bool) -> None:
    check(mode, data(mode, *shape, seed=len(shape)), axes, keep)


@pytest.mark.parametrize("mode", ["mean", "max", "sum", "all", "l2", "asum"])
def test_chunked(mode: str) -> None:
    """Few outputs over long reductions: partial results per chunk, then one more pass."""
    m = MODES[mode]
    check(m, data(m, 2, 20000, seed=1), [1])
    check(m, data(m, 9000, 3, seed=2), [0], keep=True)
    check(m, data(m, 50000, seed=3), None)


def test_reduce_to_end_and_coeff() -> None:
    x = randn(2, 3, 4, 5, seed=4)
    check(ht.REDUCE_MODE_SUM, x, [1], keep=True, to_end=True)
    check(ht.REDUCE_MODE_MEAN, x, [-2], to_end=False, coeff=0.5)
    check(ht.REDUCE_MODE_L2, x, [2, 3], keep=False, coeff=-3.0)
    check(ht.REDUCE_MODE_MAX, x, [0, 3], keep=True, coeff=2.0)


def test_special_values() -> None:
    x = randn(4, 70, seed=5)
    x[0, 3] = np.nan
    x[1, 5] = np.inf
    x[2, 6] = -np.inf
    for mode in MODES.values():
        check(mode, x, [1])
        check(mode, x[:, :9].copy(), [1])


def test_empty_reduction() -> None:
    x = np.zeros((3, 0, 2), np.float32)
    for mode in MODES.values():
        check(mode, x, [1], keep=True)


def test_refused() -> None:
    x = np.arange(12, dtype=np.int32).reshape(3, 4)
    node = make_node(REDUCE, na.ReduceFusion(mode=ht.REDUCE_MODE_SUM),
                     [x, Const(np.array([1], np.int32))], out_shape=(3,))
    expect_error(NNRT_UNSUPPORTED_OP, lambda: create_op(node))
    y = randn(3, 4)
    node = make_node(REDUCE, na.ReduceFusion(mode=ht.REDUCE_MODE_SUM, keepDims=True),
                     [y, np.array([1], np.int32)], out_shape=(3, 1))
    expect_error(NNRT_UNSUPPORTED_OP, lambda: create_op(node))
