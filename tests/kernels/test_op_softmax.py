"""Softmax against exp/sum on Python floats along several axes; stability, dtypes, errors."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from tests.kernels.util import (
    NNRT_INVALID_NODE,
    NNRT_UNSUPPORTED_OP,
    expect_refused,
    randn,
    run_op,
)

SOFTMAX = na.NODE_TYPE_SOFTMAX


def _reference(x: np.ndarray, axis: int) -> np.ndarray:
    axis %= x.ndim
    out = np.empty(x.shape)
    others = [range(d) if i != axis else [slice(None)] for i, d in enumerate(x.shape)]
    for idx in itertools.product(*others):
        values = [float(v) for v in x[idx]]
        top = max(values)
        exps = [math.exp(v - top) for v in values]
        total = math.fsum(exps)
        out[idx] = [e / total for e in exps]
    return out


@pytest.mark.parametrize("axis_attr,axis", [([], -1), ([0], 0), ([1], 1), ([2], 2), ([-1], -1),
                                            ([-3], 0), ([1, -2], 1)])
def test_axes(axis_attr, axis) -> None:
    x = randn(2, 3, 4, seed=1) * np.float32(3)
    out = run_op(SOFTMAX, na.Softmax(axis=axis_attr), [x])
    np.testing.assert_allclose(out, _reference(x, axis), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(out.sum(axis=axis), 1.0, rtol=1e-5)


def test_large_values_are_stable() -> None:
    x = np.array([[1000.0, 1001.0, 999.0], [-1000.0, -1000.0, -1e4]], dtype=np.float32)
    with np.errstate(all="raise"):
        out = run_op(SOFTMAX, na.Softmax(), [x])
    np.testing.assert_allclose(out, _reference(x, -1), rtol=1e-6, atol=1e-30)


@pytest.mark.parametrize("dtype,tol", [(np.float16, 2e-3), (np.float64, 1e-14)])
def test_dtypes(dtype, tol) -> None:
    x = randn(3, 5, dtype=dtype, seed=2)
    out = run_op(SOFTMAX, na.Softmax(axis=[0]), [x])
    assert out.dtype == dtype
    np.testing.assert_allclose(out.astype(np.float64), _reference(x, 0), rtol=tol, atol=tol)


def test_one_dimensional_and_empty() -> None:
    out = run_op(SOFTMAX, na.Softmax(), [np.array([0.0, math.log(3.0)])])
    np.testing.assert_allclose(out, [0.25, 0.75], rtol=1e-15)
    out = run_op(SOFTMAX, na.Softmax(), [np.zeros((0, 3), np.float32)])
    assert out.shape == (0, 3)


def test_error_paths() -> None:
    x = np.zeros((2, 3), np.float32)
    expect_refused(NNRT_UNSUPPORTED_OP, SOFTMAX, na.Softmax(axis=[0, 1]), [x])
    expect_refused(NNRT_INVALID_NODE, SOFTMAX, na.Softmax(axis=[2]), [x])
    expect_refused(NNRT_INVALID_NODE, SOFTMAX, na.Softmax(axis=[-3]), [x])
    expect_refused(NNRT_INVALID_NODE, SOFTMAX, na.Softmax(), [np.array(1.0, np.float32)])
    expect_refused(NNRT_UNSUPPORTED_OP, SOFTMAX, na.Softmax(), [np.zeros((2, 3), np.int32)])
    expect_refused(NNRT_INVALID_NODE, SOFTMAX, na.Softmax(), [x, x])
    expect_refused(NNRT_INVALID_NODE, SOFTMAX, na.Softmax(), [x], out_dtype=np.float16)
    expect_refused(NNRT_UNSUPPORTED_OP, SOFTMAX, na.Softmax(), [np.zeros(2, np.int8)],
                   quant_type=ht.QUANT_TYPE_ALL)
