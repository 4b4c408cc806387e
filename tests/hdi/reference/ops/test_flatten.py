"""Flatten against ONNX Flatten (onnx.reference): every axis in [-r, r], ranks 0 to 4,
dtypes, DYNAMIC dims, errors."""

from __future__ import annotations

import numpy as np
import pytest

from nnrt.hdi.reference.kernel import create_kernel
from nnrt.protos import node_attrs_pb2 as na
from tests.hdi.reference.util import (
    NNRT_INVALID_NODE,
    Declared,
    expect_refused,
    make_node,
    onnx_reference,
    run_node,
    run_op,
)

FLATTEN = na.NODE_TYPE_FLATTEN


@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (3,), (2, 1, 3)])
def test_against_onnx(shape) -> None:
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    r = len(shape)
    for axis in range(-r, r + 1):
        expected = onnx_reference("Flatten", [x], axis=axis)
        out = run_op(FLATTEN, na.Flatten(axis=axis), [x])
        assert out.shape == expected.shape, axis
        np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint16, np.int64, np.float16])
def test_dtypes_and_scalar(dtype) -> None:
    out = run_op(FLATTEN, na.Flatten(axis=0), [np.array(7, dtype)])
    assert out.shape == (1, 1) and out.dtype == dtype
    out = run_op(FLATTEN, na.Flatten(axis=1), [np.ones((2, 2, 2), dtype)])
    assert out.shape == (2, 4) and out.dtype == dtype


def test_dynamic_dimensions() -> None:
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    node = make_node(FLATTEN, na.Flatten(axis=1), [Declared(x, (-1, 3, 4))])
    kernel = create_kernel(node)
    assert kernel.infer_shapes([(-1, 3, 4)]) == [(-1, 12)]
    assert kernel.infer_shapes([(2, -1, 4)]) == [(2, -1)]
    (out,) = run_node(node, [x], kernel)
    assert out.shape == (2, 12) and out.ravel().tolist() == list(range(24))


def test_error_paths() -> None:
    x = np.zeros((2, 3), np.float32)
    expect_refused(NNRT_INVALID_NODE, FLATTEN, na.Flatten(axis=3), [x])
    expect_refused(NNRT_INVALID_NODE, FLATTEN, na.Flatten(axis=-3), [x])
    expect_refused(NNRT_INVALID_NODE, FLATTEN, na.Flatten(axis=1), [x, x])
    expect_refused(NNRT_INVALID_NODE, FLATTEN, na.Flatten(axis=1), [x], out_dtype=np.int32)
