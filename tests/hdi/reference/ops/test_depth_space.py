"""DepthToSpace (DCR and CRD) and SpaceToDepth against ONNX (onnx.reference, NCHW): NCHW
inputs directly, NHWC inputs through transposes of ONNX's input and output, the closed-form
element mapping of TensorFlow's NHWC definition, the format attribute against the tensor's
tag, dtypes, DYNAMIC dims, errors."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from nnrt.hdi.reference.kernel import create_kernel
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from tests.hdi.reference.util import (
    NNRT_INVALID_FORMAT,
    NNRT_INVALID_NODE,
    NNRT_INVALID_SHAPE,
    Declared,
    expect_error,
    expect_refused,
    make_node,
    onnx_reference,
    readonly,
    run_node,
    run_op,
)

D2S, S2D = na.NODE_TYPE_DEPTH_TO_SPACE, na.NODE_TYPE_SPACE_TO_DEPTH
NCHW, NHWC = ht.FORMAT_NCHW, ht.FORMAT_NHWC


def to_nhwc(a: np.ndarray) -> np.ndarray:
    return a.transpose(0, 2, 3, 1)


def to_nchw(a: np.ndarray) -> np.ndarray:
    return a.transpose(0, 3, 1, 2)


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
@pytest.mark.parametrize("block,shape", [(2, (2, 8, 2, 3)), (3, (1, 18, 2, 2)), (2, (1, 4, 1, 1))])
def test_depth_to_space_against_onnx(mode, block, shape) -> None:
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)  # NCHW
    expected = onnx_reference("DepthToSpace", [x], blocksize=block, mode=mode)
    out = run_op(D2S, na.DepthToSpace(blockSize=block, format=NCHW, mode=mode), [x], fmt=NCHW)
    np.testing.assert_array_equal(out, expected)
    out = run_op(D2S, na.DepthToSpace(blockSize=block, format=NHWC, mode=mode), [to_nhwc(x)],
                 fmt=NHWC)
    np.testing.assert_array_equal(out, to_nhwc(expected))


@pytest.mark.parametrize("block,shape", [(2, (2, 3, 4, 6)), (3, (1, 2, 6, 3)), (2, (1, 1, 2, 2))])
def test_space_to_depth_against_onnx(block, shape) -> None:
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)  # NCHW
    expected = onnx_reference("SpaceToDepth", [x], blocksize=block)
    out = run_op(S2D, na.SpaceToDepth(blockSize=block, format=NCHW), [x], fmt=NCHW)
    np.testing.assert_array_equal(out, expected)
    out = run_op(S2D, na.SpaceToDepth(blockSize=block, format=NHWC), [to_nhwc(x)], fmt=NHWC)
    np.testing.assert_array_equal(out, to_nhwc(expected))


def test_tensorflow_nhwc_mapping_and_round_trip() -> None:
    b, n, h, w, c = 2, 1, 2, 3, 3
    x = np.arange(n * h * w * c * b * b, dtype=np.int32).reshape(n, h, w, c * b * b)
    out = run_op(D2S, na.DepthToSpace(blockSize=b, format=NHWC), [x])  # empty mode = DCR
    for i_n, i_h, i_w, i, j, i_c in itertools.product(range(n), range(h), range(w), range(b),
                                                        range(b), range(c)):
        assert out[i_n, i_h * b + i, i_w * b + j, i_c] == x[i_n, i_h, i_w, (i * b + j) * c + i_c]
    back = run_op(S2D, na.SpaceToDepth(blockSize=b, format=NHWC), [out])
    np.testing.assert_array_equal(back, x)


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint16, np.int64, np.float16])
def test_dtypes(dtype) -> None:
    x = (np.arange(16) % 3).astype(dtype).reshape(1, 2, 2, 4)
    out = run_op(D2S, na.DepthToSpace(blockSize=2, format=NHWC, mode="CRD"), [x])
    assert out.dtype == dtype and out.shape == (1, 4, 4, 1)
    back = run_op(S2D, na.SpaceToDepth(blockSize=2, format=NHWC), [out])
    assert back.dtype == dtype and back.shape == (1, 2, 2, 4)


def test_untagged_input_follows_the_attribute_and_dynamic_dims() -> None:
    x = np.arange(32, dtype=np.float32).reshape(1, 8, 2, 2)
    expected = onnx_reference("DepthToSpace", [x], blocksize=2, mode="DCR")
    out = run_op(D2S, na.DepthToSpace(blockSize=2, format=NCHW), [x], fmt=ht.FORMAT_NONE)
    np.testing.assert_array_equal(out, expected)
    node = make_node(D2S, na.DepthToSpace(blockSize=2, format=NHWC),
                     [Declared(to_nhwc(x), (-1, -1, 2, 8))])
    kernel = create_kernel(node)
    assert kernel.infer_shapes([(-1, -1, 2, 8)]) == [(-1, -1, 4, 2)]
    expect_error(NNRT_INVALID_SHAPE, lambda: kernel.infer_shapes([(1, 2, 2, 6)]))
    node = make_node(S2D, na.SpaceToDepth(blockSize=2, format=NHWC),
                     [Declared(to_nhwc(x), (1, -1, 2, -1))])
    kernel = create_kernel(node)
    assert kernel.infer_shapes([(1, -1, 2, -1)]) == [(1, -1, 1, -1)]
    expect_error(NNRT_INVALID_SHAPE, lambda: kernel.execute([readonly(np.zeros((1, 3, 2, 1)))]))
    (out,) = run_node(node, [to_nhwc(x)], kernel)
    assert out.shape == (1, 1, 1, 32)


def test_error_paths() -> None:
    x = np.zeros((1, 2, 2, 8), np.float32)
    expect_refused(NNRT_INVALID_NODE, D2S, na.DepthToSpace(blockSize=1, format=NHWC), [x])
    expect_refused(NNRT_INVALID_NODE, D2S, na.DepthToSpace(blockSize=2, format=NHWC,
                                                           mode="RDC"), [x])
    expect_refused(NNRT_INVALID_NODE, D2S, na.DepthToSpace(blockSize=3, format=NHWC), [x])
    expect_refused(NNRT_INVALID_NODE, D2S, na.DepthToSpace(blockSize=2, format=NHWC), [x[0]])
    expect_refused(NNRT_INVALID_NODE, D2S, na.DepthToSpace(blockSize=2, format=NHWC), [x, x])
    expect_refused(NNRT_INVALID_NODE, D2S, na.DepthToSpace(blockSize=2, format=NHWC), [x],
                   out_dtype=np.int8)
    expect_refused(NNRT_INVALID_NODE, D2S, na.DepthToSpace(blockSize=2, format=5), [x])
    expect_refused(NNRT_INVALID_FORMAT, D2S, na.DepthToSpace(blockSize=2, format=NCHW), [x],
                   fmt=NHWC)
    expect_refused(NNRT_INVALID_NODE, S2D, na.SpaceToDepth(blockSize=0, format=NHWC), [x])
    expect_refused(NNRT_INVALID_NODE, S2D, na.SpaceToDepth(blockSize=3, format=NHWC), [x])
    expect_refused(NNRT_INVALID_FORMAT, S2D, na.SpaceToDepth(blockSize=2, format=NHWC), [x],
                   fmt=NCHW)
