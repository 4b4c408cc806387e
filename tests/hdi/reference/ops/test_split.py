"""Split against ONNX Split (onnx.reference): equal pieces, explicit sizes (with a -1 entry
resolved by hand), every axis including negative ones, outputNum 0, dtypes, DYNAMIC dims,
errors."""

from __future__ import annotations

import numpy as np
import pytest

from nnrt.hdi.reference.kernel import create_kernel
from nnrt.protos import node_attrs_pb2 as na
from tests.hdi.reference.util import (
    NNRT_INVALID_NODE,
    NNRT_INVALID_SHAPE,
    Declared,
    QuantParam,
    expect_error,
    expect_refused,
    make_node,
    onnx_outputs,
    readonly,
    run_node,
    tensor_spec,
)

SPLIT = na.NODE_TYPE_SPLIT


X = np.arange(4 * 6 * 3, dtype=np.float32).reshape(4, 6, 3)


def split(x, attrs: na.Split, n: int) -> list[np.ndarray]:
    node = make_node(SPLIT, attrs, [x], n_outputs=n)
    return run_node(node, [x])


@pytest.mark.parametrize("axis,n", [(0, 1), (0, 2), (0, 4), (1, 2), (1, 3), (-1, 3), (-2, 6)])
def test_equal_pieces(axis, n) -> None:
    expected = onnx_outputs("Split", [X], n_out=n, axis=axis, num_outputs=n)
    for output_num in (n, 0):
        outs = split(X, na.Split(outputNum=output_num, axis=axis), n)
        assert len(outs) == n
        for out, ref in zip(outs, expected):
            np.testing.assert_array_equal(out, ref)


@pytest.mark.parametrize("sizes,resolved", [
    ([1, 2, 3], [1, 2, 3]), ([6], [6]), ([2, -1], [2, 4]), ([-1, 1, 1], [4, 1, 1]),
    ([0, 6], [0, 6]), ([3, 0, -1], [3, 0, 3]),
])
def test_explicit_sizes(sizes, resolved) -> None:
    expected = onnx_outputs("Split", [X, np.array(resolved, np.int64)], n_out=len(sizes), axis=1)
    outs = split(X, na.Split(outputNum=len(sizes), sizeSplits=sizes, axis=1), len(sizes))
    for out, ref in zip(outs, expected):
        assert out.shape == ref.shape
        np.testing.assert_array_equal(out, ref)


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint64, np.float16])
def test_dtypes(dtype) -> None:
    x = (np.arange(6) % 4).astype(dtype)
    a, b = split(x, na.Split(outputNum=2, sizeSplits=[4, 2]), 2)
    assert a.dtype == b.dtype == dtype
    np.testing.assert_array_equal(a, x[:4])
    np.testing.assert_array_equal(b, x[4:])


def test_dynamic_dimensions_and_quantisation() -> None:
    node = make_node(SPLIT, na.Split(outputNum=2, axis=1), [Declared(X, (4, -1, 3))],
                     n_outputs=2)
    kernel = create_kernel(node)
    assert kernel.infer_shapes([(4, -1, 3)]) == [(4, -1, 3)] * 2
    assert kernel.infer_shapes([(-1, 6, 3)]) == [(-1, 3, 3)] * 2
    expect_error(NNRT_INVALID_SHAPE, lambda: kernel.execute([readonly(X[:, :5])]))
    node = make_node(SPLIT, na.Split(sizeSplits=[1, -1], axis=1), [Declared(X, (4, -1, 3))],
                     n_outputs=2)
    kernel = create_kernel(node)
    assert kernel.infer_shapes([(4, -1, 3)]) == [(4, 1, 3), (4, -1, 3)]
    (a, b) = run_node(node, [X], kernel)
    assert a.shape == (4, 1, 3) and b.shape == (4, 5, 3)
    expect_error(NNRT_INVALID_SHAPE, lambda: kernel.execute([readonly(X[:, :0])]))
    q = (QuantParam(8, 0, 0.1),)
    node = make_node(SPLIT, na.Split(axis=0), [tensor_spec(0, np.int8, (4,), quant=q)],
                     n_outputs=2, out_quant=q)
    a, b = run_node(node, [np.array([1, 2, 3, 4], np.int8)])
    assert a.tolist() == [1, 2] and b.tolist() == [3, 4]


def test_error_paths() -> None:
    def refused(attrs, n, x=X, **kw):
        expect_refused(NNRT_INVALID_NODE, SPLIT, attrs, [x], n_outputs=n, **kw)

    refused(na.Split(outputNum=3, axis=1), 2)
    refused(na.Split(axis=0), 3)  # 4 rows into 3
    refused(na.Split(axis=3), 2)
    refused(na.Split(axis=-4), 2)
    refused(na.Split(sizeSplits=[1, 2], axis=1), 3)
    refused(na.Split(sizeSplits=[1, 2], axis=1), 2)  # 3 != 6
    refused(na.Split(sizeSplits=[7, -1], axis=1), 2)
    refused(na.Split(sizeSplits=[-1, -1], axis=1), 2)
    refused(na.Split(sizeSplits=[-2, 8], axis=1), 2)
    refused(na.Split(axis=1), 2, out_dtype=np.float16)
    refused(na.Split(axis=0), 0)
    refused(na.Split(axis=0), 1, x=np.array(1.0, np.float32))
    expect_refused(NNRT_INVALID_NODE, SPLIT, na.Split(axis=0), [X, X], n_outputs=2)
