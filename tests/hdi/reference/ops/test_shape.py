"""Shape and Rank against ONNX Shape / the closed form x.ndim: INT32 and INT64 outputs,
ranks 0 to 4, any input dtype, DYNAMIC input dims, a [1]-declared Rank, errors."""

from __future__ import annotations

import numpy as np
import pytest

from nnrt.hdi.reference.kernel import create_kernel
from nnrt.protos import node_attrs_pb2 as na
from tests.hdi.reference.util import (
    NNRT_INVALID_NODE,
    NNRT_UNSUPPORTED_OP,
    Declared,
    expect_refused,
    make_node,
    onnx_reference,
    run_node,
    run_op,
)

SHAPE, RANK = na.NODE_TYPE_SHAPE, na.NODE_TYPE_RANK


@pytest.mark.parametrize("shape", [(), (5,), (2, 3), (1, 4, 1, 2)])
@pytest.mark.parametrize("out_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.float16, np.float32])
def test_shape_and_rank(shape, out_dtype, dtype) -> None:
    x = np.zeros(shape, dtype)
    expected = onnx_reference("Shape", [x])
    out = run_op(SHAPE, na.Shape(), [x], out_dtype=out_dtype, out_shape=(len(shape),))
    assert out.dtype == out_dtype and out.shape == (len(shape),)
    np.testing.assert_array_equal(out, expected)
    out = run_op(RANK, na.Rank(), [x], out_dtype=out_dtype)
    assert out.dtype == out_dtype and out.shape == () and out == len(shape)


def test_dynamic_input_and_rank_declared_1d() -> None:
    x = np.zeros((3, 4), np.float32)
    node = make_node(SHAPE, na.Shape(), [Declared(x, (-1, 4))], out_dtype=np.int64,
                     out_shape=(2,))
    kernel = create_kernel(node)
    assert kernel.infer_shapes([(-1, 4)]) == [(2,)]
    (out,) = run_node(node, [x], kernel)
    assert out.tolist() == [3, 4]
    node = make_node(RANK, na.Rank(), [x], out_dtype=np.int32, out_shape=(1,))
    (out,) = run_node(node, [x])
    assert out.shape == (1,) and out.tolist() == [2]


def test_error_paths() -> None:
    x = np.zeros((2, 3), np.float32)
    expect_refused(NNRT_UNSUPPORTED_OP, SHAPE, na.Shape(), [x])  # float32 output
    expect_refused(NNRT_UNSUPPORTED_OP, RANK, na.Rank(), [x], out_dtype=np.int8)
    expect_refused(NNRT_INVALID_NODE, SHAPE, na.Shape(), [x, x], out_dtype=np.int32)
    expect_refused(NNRT_INVALID_NODE, SHAPE, na.Shape(), [x], out_dtype=np.int32, n_outputs=2)
    expect_refused(NNRT_INVALID_NODE, RANK, na.Rank(), [x], out_dtype=np.int32,
                   out_shape=(2,))
