"""Softmax / LogSoftmax on the GPU against the CPU reference: every axis of 1-D to 4-D
inputs (strided rows), odd and long rows, large values (the max shift), -inf / +inf / NaN
entries; refusals."""

from __future__ import annotations

import numpy as np
import pytest
from nnrt.drivers.gpu.kernel import create_op
from nnrt.protos import node_attrs_pb2 as na

from tests.drivers.gpu.util import assert_close, node_graph, run_cpu, run_gpu
from tests.hdi.reference.util import NNRT_UNSUPPORTED_OP, expect_error, make_node, randn

SOFTMAX, LOG_SOFTMAX = na.NODE_TYPE_SOFTMAX, na.NODE_TYPE_LOG_SOFTMAX


def attrs(kind: int, axis: int | None):
    if kind == SOFTMAX:
        return na.Softmax(axis=[] if axis is None else [axis])
    return na.LogSoftmax(axis=-1 if axis is None else axis)


def check(kind: int, axis: int | None, x: np.ndarray) -> None:
    graph = node_graph(make_node(kind, attrs(kind, axis), [x], out_shape=x.shape))
    assert_close(run_gpu(graph, [x]), run_cpu(graph, [x]))


KINDS = pytest.mark.parametrize("kind", [SOFTMAX, LOG_SOFTMAX], ids=["softmax", "log"])


@KINDS
@pytest.mark.parametrize("shape,axis", [
    ((7,), None), ((7,), 0), ((3, 1000), None), ((3, 1000), 0), ((5, 300), 1),
    ((2, 3, 5, 7), 0), ((2, 3, 5, 7), 1), ((2, 3, 5, 7), -2), ((2, 3, 5, 7), 3),
    ((4, 1, 129), 1), ((64, 10), None),
])
def test_axes(kind: int, shape, axis) -> None:
    check(kind, axis, randn(*shape, seed=len(shape)) * 3)


@KINDS
def test_large_values(kind: int) -> None:
    check(kind, None, randn(6, 33, seed=1) * 200)


@KINDS
def test_special_values(kind: int) -> None:
    x = randn(6, 9, seed=2)
    x[0, 3] = -np.inf
    x[1, :] = -np.inf
    x[2, 4] = np.inf
    x[3, 5] = np.nan
    x[4, :] = np.inf
    check(kind, None, x)
    check(kind, 0, x)


def test_refused() -> None:
    x = randn(4, 5).astype(np.float64)
    for kind in (SOFTMAX, LOG_SOFTMAX):
        node = make_node(kind, attrs(kind, None), [x], out_shape=x.shape)
        expect_error(NNRT_UNSUPPORTED_OP, lambda node=node: create_op(node))
