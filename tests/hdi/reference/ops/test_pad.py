"""PadFusion: hdi.md 6.17's example literally, CONSTANT and REFLECT against ONNX Pad
(onnx.reference), SYMMETRIC against an explicit index-mirroring loop; the attribute form,
dtypes and constantValue conversion, quantised zero-point padding, run-time paddings,
DYNAMIC dims, errors."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from nnrt.hdi.reference.kernel import KERNELS, create_kernel
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from tests.hdi.reference.util import (
    NNRT_INVALID_NODE,
    NNRT_INVALID_SHAPE,
    NNRT_UNSUPPORTED_OP,
    Const,
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

PAD = na.NODE_TYPE_PAD_FUSION
CONSTANT, REFLECT, SYMMETRIC = (ht.PADDING_MODE_CONSTANT, ht.PADDING_MODE_REFLECT,
                                ht.PADDING_MODE_SYMMETRIC)


def pad(x, paddings, mode=CONSTANT, value=0.0, index_dtype=np.int64, const=True):
    p = np.array(paddings, index_dtype)
    return run_op(PAD, na.PadFusion(paddingMode=mode, constantValue=value),
                  [x, Const(p) if const else p])


def onnx_pad(x, paddings, mode: str, value=None) -> np.ndarray:
    p = np.array(paddings, np.int64)
    inputs = [x, np.concatenate([p[:, 0], p[:, 1]])]
    if value is not None:
        inputs.append(np.array(value, x.dtype))
    return onnx_reference("Pad", inputs, mode=mode)


def symmetric_reference(x: np.ndarray, paddings) -> np.ndarray:
    """Each output cell read from the input cell its index mirrors to, edge included."""
    shape = [d + b + a for d, (b, a) in zip(x.shape, paddings)]
    out = np.empty(shape, x.dtype)
    for pos in itertools.product(*(range(s) for s in shape)):
        src = []
        for p, d, (b, _) in zip(pos, x.shape, paddings):
            i = p - b
            i = -i - 1 if i < 0 else (2 * d - i - 1 if i >= d else i)
            src.append(i)
        out[pos] = x[tuple(src)]
    return out


EXAMPLE = np.array([[1, 2, 3], [4, 5, 6], [7, 8, 9]], np.float32)


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_hdi_example(index_dtype) -> None:
    by2 = [[2, 2], [2, 2]]
    out = pad(EXAMPLE, by2, CONSTANT, 0.0, index_dtype)
    assert out.shape == (7, 7) and out[2:5, 2:5].tolist() == EXAMPLE.tolist()
    assert out.sum() == EXAMPLE.sum()  # a border of zeros
    out = pad(EXAMPLE, by2, REFLECT, index_dtype=index_dtype)
    assert out[0].tolist() == [9, 8, 7, 8, 9, 8, 7]
    out = pad(EXAMPLE, by2, SYMMETRIC, index_dtype=index_dtype)
    assert out[0].tolist() == [5, 4, 4, 5, 6, 6, 5]


@pytest.mark.parametrize("paddings", [
    [[1, 0], [0, 2], [1, 1]], [[0, 0], [3, 3], [0, 4]], [[2, 1], [1, 2], [0, 0]],
    [[0, 0], [0, 0], [0, 0]],
])
def test_against_onnx_and_loops(paddings) -> None:
    x = np.arange(3 * 4 * 5, dtype=np.float32).reshape(3, 4, 5)
    np.testing.assert_array_equal(pad(x, paddings, CONSTANT, 1.5),
                                  onnx_pad(x, paddings, "constant", 1.5))
    np.testing.assert_array_equal(pad(x, paddings, REFLECT), onnx_pad(x, paddings, "reflect"))
    np.testing.assert_array_equal(pad(x, paddings, SYMMETRIC), symmetric_reference(x, paddings))
    np.testing.assert_array_equal(pad(x, paddings, REFLECT, const=False),
                                  onnx_pad(x, paddings, "reflect"))


def test_attribute_paddings() -> None:
    rows = [ht.Int64Array(values=[1, 0]), ht.Int64Array(values=[0, 2])]
    out = run_op(PAD, na.PadFusion(paddings=rows, constantValue=-1), [EXAMPLE])
    np.testing.assert_array_equal(out, onnx_pad(EXAMPLE, [[1, 0], [0, 2]], "constant", -1))
    out = run_op(PAD, na.PadFusion(paddings=rows),
                 [EXAMPLE, Const(np.array([[1, 0], [0, 2]], np.int32))])  # agreeing input
    assert out.shape == (4, 5)
    expect_refused(NNRT_INVALID_NODE, PAD, na.PadFusion(paddings=rows),
                   [EXAMPLE, Const(np.array([[1, 1], [0, 2]], np.int32))])


@pytest.mark.parametrize("dtype,value,fill", [
    (np.int8, -3.7, -3), (np.uint8, 200.0, 200), (np.int32, 2.9, 2), (np.bool_, 0.5, True),
    (np.float16, 1e6, np.inf), (np.float64, 0.1, np.float32(0.1)), (np.int64, 0.0, 0),
])
def test_dtypes_and_constant_value(dtype, value, fill) -> None:
    x = np.ones((2,), dtype)
    out = pad(x, [[1, 1]], CONSTANT, value)
    assert out.dtype == dtype
    assert out[0] == np.array(fill).astype(dtype) and out[1] == x[0]
    out = pad(x, [[1, 1]], SYMMETRIC)
    np.testing.assert_array_equal(out, np.ones(4, dtype))


def test_quantised_pads_with_the_quantised_value() -> None:
    q = (QuantParam(8, 10, 0.5),)
    node = make_node(PAD, na.PadFusion(constantValue=1.0),
                     [tensor_spec(0, np.int8, (2,), quant=q), Const(np.array([[1, 2]]))],
                     out_quant=q, quant_type=ht.QUANT_TYPE_ALL)
    # create_kernel refuses QUANT_TYPE_ALL nodes for now; the kernel itself pads with
    # round(1.0 / 0.5) + 10 = 12, and with the zero point 10 for 0.0.
    (out,) = run_node(node, [np.array([1, 2], np.int8), np.array([[1, 2]])], KERNELS[PAD](node))
    assert out.tolist() == [12, 1, 2, 12, 12]
    node = make_node(PAD, na.PadFusion(), [tensor_spec(0, np.int8, (2,), quant=q),
                                           Const(np.array([[1, 0]]))], out_quant=q)
    (out,) = run_node(node, [np.array([1, 2], np.int8), np.array([[1, 0]])])
    assert out.tolist() == [10, 1, 2]


def test_run_time_paddings_and_dynamic_dims() -> None:
    node = make_node(PAD, na.PadFusion(paddingMode=REFLECT), [EXAMPLE, np.zeros((2, 2), np.int32)])
    kernel = create_kernel(node)
    assert kernel.infer_shapes([(3, 3), (2, 2)]) == [(-1, -1)]
    expect_error(NNRT_INVALID_SHAPE, lambda: kernel.execute(
        [readonly(EXAMPLE), readonly(np.array([[3, 0], [0, 0]], np.int32))]))  # reflect > 2
    expect_error(NNRT_INVALID_SHAPE, lambda: kernel.execute(
        [readonly(EXAMPLE), readonly(np.array([[-1, 0], [0, 0]], np.int32))]))
    expect_error(NNRT_INVALID_SHAPE, lambda: kernel.execute(
        [readonly(EXAMPLE), readonly(np.array([1, 0, 0, 0], np.int32))]))
    node = make_node(PAD, na.PadFusion(paddingMode=SYMMETRIC),
                     [Declared(EXAMPLE, (-1, 3)), Const(np.array([[3, 3], [3, 0]]))])
    kernel = create_kernel(node)
    assert kernel.infer_shapes([(-1, 3), (2, 2)]) == [(-1, 6)]
    expect_error(NNRT_INVALID_SHAPE, lambda: kernel.infer_shapes([(2, 3), (2, 2)]))
    (out,) = run_node(node, [EXAMPLE, np.array([[3, 3], [3, 0]])], kernel)
    np.testing.assert_array_equal(out, symmetric_reference(EXAMPLE, [[3, 3], [3, 0]]))


def test_error_paths() -> None:
    p = Const(np.array([[1, 1], [1, 1]]))

    def refused(code, attrs, inputs, **kw):
        expect_refused(code, PAD, attrs, inputs, **kw)

    refused(NNRT_UNSUPPORTED_OP, na.PadFusion(paddingMode=ht.PADDING_MODE_RESERVED), [EXAMPLE, p])
    refused(NNRT_INVALID_NODE, na.PadFusion(paddingMode=4), [EXAMPLE, p])
    refused(NNRT_INVALID_NODE, na.PadFusion(paddingMode=REFLECT),
            [EXAMPLE, Const(np.array([[3, 0], [0, 0]]))])
    refused(NNRT_INVALID_NODE, na.PadFusion(paddingMode=SYMMETRIC),
            [EXAMPLE, Const(np.array([[4, 0], [0, 0]]))])
    refused(NNRT_INVALID_NODE, na.PadFusion(), [EXAMPLE, Const(np.array([[-1, 0], [0, 0]]))])
    refused(NNRT_INVALID_NODE, na.PadFusion(), [EXAMPLE, Const(np.array([[1, 1]]))])
    refused(NNRT_INVALID_NODE, na.PadFusion(), [EXAMPLE, Const(np.array([[1.0, 1.0]] * 2))])
    refused(NNRT_INVALID_NODE, na.PadFusion(), [EXAMPLE, np.zeros((3, 2), np.int32)])
    refused(NNRT_INVALID_NODE, na.PadFusion(), [EXAMPLE])  # no paddings at all
    refused(NNRT_INVALID_NODE, na.PadFusion(), [EXAMPLE, p, p])
    refused(NNRT_INVALID_NODE, na.PadFusion(), [EXAMPLE, p], out_dtype=np.int32)
    refused(NNRT_INVALID_NODE, na.PadFusion(constantValue=300.0),
            [EXAMPLE.astype(np.int8), Const(np.array([[1, 1], [1, 1]]))])
    refused(NNRT_INVALID_NODE, na.PadFusion(constantValue=float("nan")),
            [EXAMPLE.astype(np.int32), Const(np.array([[1, 1], [1, 1]]))])
