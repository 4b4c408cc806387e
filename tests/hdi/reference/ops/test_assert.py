"""Assert: a true condition passes (the output is the condition), a false one fails the run
with NNRT_FAILED naming the node and showing `summarize` entries of each data tensor."""

from __future__ import annotations

import numpy as np
import pytest

from nnrt.hdi.reference.kernel import create_kernel
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import NodeSpec
from tests.hdi.reference.util import (
    NNRT_FAILED,
    NNRT_INVALID_NODE,
    NNRT_UNSUPPORTED_OP,
    Const,
    expect_error,
    expect_refused,
    make_node,
    readonly,
    run_node,
)

ASSERT = na.NODE_TYPE_ASSERT


def _node(summarize: int, inputs: list, n_outputs: int = 1) -> NodeSpec:
    shape = np.asarray(inputs[0]).shape
    return make_node(ASSERT, na.Assert(summarize=summarize), inputs, out_dtype=np.bool_,
                     out_shape=shape, n_outputs=n_outputs)


@pytest.mark.parametrize("cond", [np.array(True), np.ones((2, 3), np.bool_),
                                  np.zeros((0,), np.bool_)])
def test_true_condition_passes(cond: np.ndarray) -> None:
    data = np.arange(4, dtype=np.float32)
    node = _node(3, [cond, data])
    (out,) = run_node(node, [cond, data])
    assert out.dtype == np.bool_ and out.shape == cond.shape and out.all()


def test_false_condition_fails_and_summarises() -> None:
    cond = np.array([True, False, False])
    data = np.arange(10, dtype=np.int32)
    other = np.array([[1.5, 2.5]], np.float32)
    node = _node(3, [cond, data, other])
    kernel = create_kernel(node)
    err = expect_error(NNRT_FAILED, lambda: kernel.execute([readonly(cond), readonly(data),
                                                            readonly(other)]))
    message = err.message
    assert "node 0 (node)" in message and "2 of 3" in message
    assert "[0, 1, 2, ... (7 more)]" in message
    assert "[1.5, 2.5]" in message


@pytest.mark.parametrize("summarize,shown", [(0, "input 1 int64[5]"),
                                             (-1, "input 1 int64[5]: [0, 1, 2, 3, 4]"),
                                             (10, "input 1 int64[5]: [0, 1, 2, 3, 4]")])
def test_summarize(summarize: int, shown: str) -> None:
    cond = np.array(False)
    data = np.arange(5, dtype=np.int64)
    kernel = create_kernel(_node(summarize, [cond, data]))
    err = expect_error(NNRT_FAILED, lambda: kernel.execute([readonly(cond), readonly(data)]))
    assert err.message.endswith(shown)


def test_negative_summarize_is_bounded() -> None:
    cond = np.array(False)
    data = np.zeros(5000, np.uint8)
    kernel = create_kernel(_node(-1, [cond, data]))
    err = expect_error(NNRT_FAILED, lambda: kernel.execute([readonly(cond), readonly(data)]))
    assert "(4000 more)" in err.message


def test_constant_false_condition_fails_each_run_and_no_output_form() -> None:
    cond = np.array([False])
    node = _node(1, [Const(cond)], n_outputs=0)
    kernel = create_kernel(node)  # not refused at prepare time
    assert kernel.infer_shapes([(1,)]) == []
    expect_error(NNRT_FAILED, lambda: kernel.execute([cond]))
    ok = create_kernel(_node(1, [np.array([True])], n_outputs=0))
    assert ok.execute([readonly(np.array([True]))]) == []


def test_error_paths() -> None:
    cond = np.ones(2, np.bool_)
    expect_refused(NNRT_INVALID_NODE, ASSERT, na.Assert(), [], out_dtype=np.bool_)
    expect_refused(NNRT_INVALID_NODE, ASSERT, na.Assert(), [cond], out_dtype=np.bool_,
                   n_outputs=2)
    expect_refused(NNRT_INVALID_NODE, ASSERT, na.Assert(), [cond], out_dtype=np.int32)
    expect_refused(NNRT_UNSUPPORTED_OP, ASSERT, na.Assert(), [np.ones(2, np.int32)],
                   out_dtype=np.bool_)
