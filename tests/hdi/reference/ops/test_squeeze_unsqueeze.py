"""Squeeze and Unsqueeze against ONNX Squeeze / Unsqueeze (onnx.reference): listed and
negative axes, no axis (every size-1 dimension), several inserted axes, dtypes, DYNAMIC
dims, quantisation kept, errors."""

from __future__ import annotations

import numpy as np
import pytest

from nnrt.hdi.reference.kernel import create_kernel
from nnrt.protos import node_attrs_pb2 as na
from tests.hdi.reference.util import (
    NNRT_INVALID_NODE,
    NNRT_INVALID_SHAPE,
    NNRT_UNSUPPORTED_OP,
    Declared,
    QuantParam,
    expect_error,
    expect_refused,
    make_node,
    onnx_reference,
    readonly,
    run_node,
    run_op,
    tensor_spec,
)

SQUEEZE, UNSQUEEZE = na.NODE_TYPE_SQUEEZE, na.NODE_TYPE_UNSQUEEZE


@pytest.mark.parametrize("axes", [[], [0], [2], [-1], [0, 3], [-4, 2], [3, 0, 2]])
def test_squeeze_against_onnx(axes) -> None:
    x = np.arange(6, dtype=np.float32).reshape(1, 6, 1, 1)
    inputs = [x] + ([np.array(axes, np.int64)] if axes else [])
    expected = onnx_reference("Squeeze", inputs)
    out = run_op(SQUEEZE, na.Squeeze(axis=axes), [x])
    assert out.shape == expected.shape
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("axes", [[0], [2], [-1], [0, 3], [-1, 0], [1, 2, 4], [-4, -2]])
def test_unsqueeze_against_onnx(axes) -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    expected = onnx_reference("Unsqueeze", [x, np.array(axes, np.int64)])
    out = run_op(UNSQUEEZE, na.Unsqueeze(axis=axes), [x])
    assert out.shape == expected.shape
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint64, np.float16, np.float64])
def test_dtypes_and_edge_ranks(dtype) -> None:
    one = np.ones((1, 1), dtype)
    out = run_op(SQUEEZE, na.Squeeze(), [one])
    assert out.shape == () and out.dtype == dtype
    out = run_op(UNSQUEEZE, na.Unsqueeze(axis=[0, -1]), [np.array(1, dtype)])
    assert out.shape == (1, 1) and out.dtype == dtype
    out = run_op(SQUEEZE, na.Squeeze(), [np.ones((2, 3), dtype)])  # nothing to remove
    assert out.shape == (2, 3)


def test_dynamic_dimensions() -> None:
    x = np.zeros((1, 3, 1), np.float32)
    node = make_node(SQUEEZE, na.Squeeze(axis=[0]), [Declared(x, (-1, 3, 1))])
    kernel = create_kernel(node)
    assert kernel.infer_shapes([(-1, 3, 1)]) == [(3, 1)]
    (out,) = run_node(node, [x], kernel)
    assert out.shape == (3, 1)
    expect_error(NNRT_INVALID_SHAPE, lambda: kernel.execute([readonly(np.zeros((2, 3, 1)))]))
    # no axis: a DYNAMIC dimension stays in the inferred shape, the run decides
    node = make_node(SQUEEZE, na.Squeeze(), [Declared(x, (-1, 3, 1))])
    kernel = create_kernel(node)
    assert kernel.infer_shapes([(-1, 3, 1)]) == [(-1, 3)]
    assert kernel.execute([readonly(x)])[0].shape == (3,)
    assert kernel.execute([readonly(np.zeros((2, 3, 1)))])[0].shape == (2, 3)
    node = make_node(UNSQUEEZE, na.Unsqueeze(axis=[1]), [Declared(x, (-1, 3, 1))])
    assert create_kernel(node).infer_shapes([(-1, 3, 1)]) == [(-1, 1, 3, 1)]


def test_quantised_kept() -> None:
    q = (QuantParam(8, -3, 0.25),)
    node = make_node(SQUEEZE, na.Squeeze(), [tensor_spec(0, np.int8, (1, 2), quant=q)],
                     out_quant=q)
    (out,) = run_node(node, [np.array([[5, -7]], np.int8)])
    assert out.tolist() == [5, -7]
    node = make_node(UNSQUEEZE, na.Unsqueeze(axis=[0]),
                     [tensor_spec(0, np.int8, (2,), quant=q)])  # output not quantised
    expect_error(NNRT_UNSUPPORTED_OP, lambda: create_kernel(node))


def test_error_paths() -> None:
    x = np.zeros((1, 3), np.float32)
    expect_refused(NNRT_INVALID_NODE, SQUEEZE, na.Squeeze(axis=[1]), [x])  # size 3
    expect_refused(NNRT_INVALID_NODE, SQUEEZE, na.Squeeze(axis=[2]), [x])
    expect_refused(NNRT_INVALID_NODE, SQUEEZE, na.Squeeze(axis=[0, -2]), [x])  # repeated
    expect_refused(NNRT_INVALID_NODE, SQUEEZE, na.Squeeze(), [x, x])
    expect_refused(NNRT_INVALID_NODE, SQUEEZE, na.Squeeze(), [x], out_dtype=np.int8)
    expect_refused(NNRT_INVALID_NODE, UNSQUEEZE, na.Unsqueeze(), [x])  # nothing to insert
    expect_refused(NNRT_INVALID_NODE, UNSQUEEZE, na.Unsqueeze(axis=[3]), [x])
    expect_refused(NNRT_INVALID_NODE, UNSQUEEZE, na.Unsqueeze(axis=[-4]), [x])
    expect_refused(NNRT_INVALID_NODE, UNSQUEEZE, na.Unsqueeze(axis=[1, -3]), [x])  # repeated
    expect_refused(NNRT_INVALID_NODE, UNSQUEEZE, na.Unsqueeze(axis=[0]), [x], n_outputs=2)
