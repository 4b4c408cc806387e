"""Eltwise: PROD / SUM / MAXIMUM of two broadcast operands. References: onnx's Mul, Sum and
Max; Python integer arithmetic with wrap-around."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from tests.hdi.reference.util import (
    NNRT_INVALID_NODE,
    NNRT_UNSUPPORTED_OP,
    Const,
    expect_refused,
    int_wrapper,
    onnx_reference,
    randn,
    run_op,
)

ELTWISE = na.NODE_TYPE_ELTWISE
MODES = {ht.ELTWISE_MODE_PROD: "Mul", ht.ELTWISE_MODE_SUM: "Sum",
         ht.ELTWISE_MODE_MAXIMUM: "Max"}


@pytest.mark.parametrize("mode", MODES, ids=lambda m: ht.EltwiseMode.Name(m))
@pytest.mark.parametrize("shapes", [((2, 3, 4), (2, 3, 4)), ((2, 3, 4), (4,)), ((2, 1), (1, 3)),
                                    ((), ()), ((3,), ())])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_matches_onnx(mode: int, shapes, dtype: Any) -> None:
    x = randn(*shapes[0], dtype=dtype, seed=1)
    y = randn(*shapes[1], dtype=dtype, seed=2)
    out = run_op(ELTWISE, na.Eltwise(mode=mode), [x, Const(y)],
                 out_shape=np.broadcast_shapes(*shapes))
    want = onnx_reference(MODES[mode], [x, y])
    np.testing.assert_allclose(out.astype(np.float64), want.astype(np.float64),
                               rtol=1e-3 if dtype == np.float16 else 1e-6)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.uint8, np.int64])
def test_integers_wrap(dtype: Any) -> None:
    info = np.iinfo(dtype)
    x = np.array([info.max, info.min, 5, 0], dtype)
    y = np.array([2, 3, 6, 1], dtype)
    wrap = int_wrapper(dtype)

    pairs = list(zip(x.tolist(), y.tolist()))
    for mode, fn in ((ht.ELTWISE_MODE_PROD, lambda a, b: a * b),
                     (ht.ELTWISE_MODE_SUM, lambda a, b: a + b),
                     (ht.ELTWISE_MODE_MAXIMUM, max)):
        out = run_op(ELTWISE, na.Eltwise(mode=mode), [x, y], out_shape=(4,))
        assert out.dtype == dtype and out.tolist() == [wrap(fn(a, b)) for a, b in pairs]


def test_error_paths() -> None:
    f32 = np.ones((2, 3), np.float32)
    expect_refused(NNRT_INVALID_NODE, ELTWISE, na.Eltwise(mode=ht.ELTWISE_MODE_UNKNOWN),
                   [f32, f32])
    expect_refused(NNRT_INVALID_NODE, ELTWISE, na.Eltwise(mode=7), [f32, f32])
    attrs = na.Eltwise(mode=ht.ELTWISE_MODE_SUM)
    expect_refused(NNRT_INVALID_NODE, ELTWISE, attrs, [f32])
    expect_refused(NNRT_INVALID_NODE, ELTWISE, attrs, [f32, f32, f32])
    expect_refused(NNRT_INVALID_NODE, ELTWISE, attrs, [f32, f32], out_dtype=np.float64)
    expect_refused(NNRT_INVALID_NODE, ELTWISE, attrs, [f32, np.ones(4, np.float32)])
    expect_refused(NNRT_UNSUPPORTED_OP, ELTWISE, attrs, [f32, np.ones((2, 3), np.float16)])
    expect_refused(NNRT_UNSUPPORTED_OP, ELTWISE, attrs, [np.ones(2, np.bool_)] * 2)
    expect_refused(NNRT_UNSUPPORTED_OP, ELTWISE, attrs, [np.ones(2, np.int8)] * 2,
                   quant_type=ht.QUANT_TYPE_ALL)
