"""SpaceToBatchND and BatchToSpaceND against TensorFlow's documented examples and an
element-by-element loop over the defining index formula; paddings and crops, round trips,
NCHW-tagged inputs, quantised zero-point padding, dtypes, DYNAMIC dims, errors."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from nnrt.hdi.reference.kernel import create_kernel
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from tests.hdi.reference.util import (
    NNRT_INVALID_NODE,
    NNRT_INVALID_SHAPE,
    Declared,
    QuantParam,
    expect_error,
    expect_refused,
    make_node,
    readonly,
    run_node,
    run_op,
    tensor_spec,
)

B2S, S2B = na.NODE_TYPE_BATCH_TO_SPACE_ND, na.NODE_TYPE_SPACE_TO_BATCH_ND


def rows(pairs) -> list[ht.Int64Array]:
    return [ht.Int64Array(values=list(p)) for p in pairs]


def s2b_reference(x: np.ndarray, block, pads) -> np.ndarray:
    """out[(i*bw + j)*N + n, h, w, c] = padded[n, h*bh + i, w*bw + j, c], cell by cell."""
    (bh, bw), ((t, b), (l, r)) = block, pads
    n_, h_, w_, c_ = x.shape
    oh, ow = (h_ + t + b) // bh, (w_ + l + r) // bw
    out = np.zeros((n_ * bh * bw, oh, ow, c_), x.dtype)
    for i, j, n, h, w, c in itertools.product(range(bh), range(bw), range(n_), range(oh),
                                              range(ow), range(c_)):
        src_h, src_w = h * bh + i - t, w * bw + j - l
        if 0 <= src_h < h_ and 0 <= src_w < w_:
            out[(i * bw + j) * n_ + n, h, w, c] = x[n, src_h, src_w, c]
    return out


def b2s_reference(x: np.ndarray, block, crops) -> np.ndarray:
    (bh, bw), ((t, b), (l, r)) = block, crops
    n_, h_, w_, c_ = x.shape
    batch = n_ // (bh * bw)
    full = np.zeros((batch, h_ * bh, w_ * bw, c_), x.dtype)
    for i, j, n, h, w, c in itertools.product(range(bh), range(bw), range(batch), range(h_),
                                              range(w_), range(c_)):
        full[n, h * bh + i, w * bw + j, c] = x[(i * bw + j) * batch + n, h, w, c]
    return full[:, t:h_ * bh - b, l:w_ * bw - r, :]


def s2b(x, block, pads, **kw):
    return run_op(S2B, na.SpaceToBatchND(blockShape=block, paddings=rows(pads)), [x], **kw)


def b2s(x, block, crops, **kw):
    return run_op(B2S, na.BatchToSpaceND(blockShape=block, crops=rows(crops)), [x], **kw)


def test_tensorflow_examples() -> None:
    x = np.array([[[[1], [2]], [[3], [4]]]], np.float32)  # [1, 2, 2, 1]
    out = s2b(x, [2, 2], [[0, 0], [0, 0]])
    assert out.shape == (4, 1, 1, 1) and out.ravel().tolist() == [1, 2, 3, 4]
    np.testing.assert_array_equal(b2s(out, [2, 2], [[0, 0], [0, 0]]), x)
    x = np.arange(1, 17, dtype=np.float32).reshape(1, 4, 4, 1)
    out = s2b(x, [2, 2], [[0, 0], [0, 0]])
    assert out[:, :, :, 0].tolist() == [[[1, 3], [9, 11]], [[2, 4], [10, 12]],
                                        [[5, 7], [13, 15]], [[6, 8], [14, 16]]]


@pytest.mark.parametrize("block,pads,shape", [
    ([2, 2], [[0, 0], [0, 0]], (2, 4, 6, 3)), ([2, 3], [[1, 1], [2, 1]], (1, 4, 3, 2)),
    ([1, 2], [[0, 0], [1, 1]], (3, 2, 4, 1)), ([3, 1], [[2, 1], [0, 0]], (2, 3, 2, 2)),
])
def test_against_loops_and_round_trip(block, pads, shape) -> None:
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape) + 1
    out = s2b(x, block, pads)
    np.testing.assert_array_equal(out, s2b_reference(x, block, pads))
    np.testing.assert_array_equal(b2s(out, block, pads), x)  # crops undo the paddings
    np.testing.assert_array_equal(b2s(out, block, pads), b2s_reference(out, block, pads))
    np.testing.assert_array_equal(b2s(out, block, [[0, 0], [0, 0]]),
                                  b2s_reference(out, block, [[0, 0], [0, 0]]))


def test_nchw_tagged_inputs() -> None:
    x = np.arange(2 * 3 * 4 * 6, dtype=np.int32).reshape(2, 4, 6, 3)  # NHWC data
    expected = s2b_reference(x, (2, 3), ((0, 2), (0, 0)))
    nchw = x.transpose(0, 3, 1, 2)
    out = s2b(nchw, [2, 3], [[0, 2], [0, 0]], fmt=ht.FORMAT_NCHW)
    np.testing.assert_array_equal(out, expected.transpose(0, 3, 1, 2))
    back = b2s(out, [2, 3], [[0, 2], [0, 0]], fmt=ht.FORMAT_NCHW)
    np.testing.assert_array_equal(back, nchw)


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint32, np.float16, np.float64])
def test_dtypes(dtype) -> None:
    x = (np.arange(8) % 2).astype(dtype).reshape(1, 2, 2, 2)
    out = s2b(x, [2, 2], [[1, 1], [0, 2]])
    assert out.dtype == dtype
    np.testing.assert_array_equal(out, s2b_reference(x, (2, 2), ((1, 1), (0, 2))))


def test_quantised_padding_uses_the_zero_point() -> None:
    q = (QuantParam(8, -5, 0.1),)
    node = make_node(S2B, na.SpaceToBatchND(blockShape=[1, 1], paddings=rows([[1, 0], [0, 0]])),
                     [tensor_spec(0, np.int8, (1, 1, 1, 1), quant=q)], out_quant=q)
    (out,) = run_node(node, [np.array([[[[7]]]], np.int8)])
    assert out.ravel().tolist() == [-5, 7]


def test_dynamic_dims() -> None:
    x = np.zeros((4, 2, 3, 1), np.float32)
    node = make_node(B2S, na.BatchToSpaceND(blockShape=[2, 2], crops=rows([[1, 0], [0, 1]])),
                     [Declared(x, (-1, 2, -1, 1))])
    kernel = create_kernel(node)
    assert kernel.infer_shapes([(-1, 2, -1, 1)]) == [(-1, 3, -1, 1)]
    expect_error(NNRT_INVALID_SHAPE, lambda: kernel.execute([readonly(np.zeros((3, 2, 3, 1)))]))
    (out,) = run_node(node, [x], kernel)
    assert out.shape == (1, 3, 5, 1)
    node = make_node(S2B, na.SpaceToBatchND(blockShape=[2, 2]), [Declared(x, (-1, -1, 4, 1))])
    kernel = create_kernel(node)
    assert kernel.infer_shapes([(-1, -1, 4, 1)]) == [(-1, -1, 2, 1)]
    expect_error(NNRT_INVALID_SHAPE, lambda: kernel.execute([readonly(np.zeros((1, 3, 4, 1)))]))


def test_error_paths() -> None:
    x = np.zeros((4, 2, 2, 1), np.float32)
    zero = rows([[0, 0], [0, 0]])
    expect_refused(NNRT_INVALID_NODE, B2S, na.BatchToSpaceND(blockShape=[3, 1], crops=zero), [x])
    expect_refused(NNRT_INVALID_NODE, B2S, na.BatchToSpaceND(blockShape=[2], crops=zero), [x])
    expect_refused(NNRT_INVALID_NODE, B2S, na.BatchToSpaceND(blockShape=[2, 0], crops=zero), [x])
    expect_refused(NNRT_INVALID_NODE, B2S, na.BatchToSpaceND(blockShape=[2, 2],
                                                             crops=rows([[3, 2], [0, 0]])), [x])
    expect_refused(NNRT_INVALID_NODE, B2S, na.BatchToSpaceND(blockShape=[2, 2],
                                                             crops=rows([[-1, 0], [0, 0]])), [x])
    expect_refused(NNRT_INVALID_NODE, B2S, na.BatchToSpaceND(blockShape=[2, 2],
                                                             crops=rows([[0, 0]])), [x])
    expect_refused(NNRT_INVALID_NODE, B2S, na.BatchToSpaceND(blockShape=[2, 2]), [x[0]])
    expect_refused(NNRT_INVALID_NODE, B2S, na.BatchToSpaceND(blockShape=[2, 2]), [x],
                   out_dtype=np.float64)
    expect_refused(NNRT_INVALID_NODE, S2B, na.SpaceToBatchND(blockShape=[3, 1]), [x])
    expect_refused(NNRT_INVALID_NODE, S2B, na.SpaceToBatchND(blockShape=[2, 2],
                                                             paddings=rows([[1, 0], [0, 0]])), [x])
    expect_refused(NNRT_INVALID_NODE, S2B, na.SpaceToBatchND(blockShape=[]), [x])
    expect_refused(NNRT_INVALID_NODE, S2B, na.SpaceToBatchND(blockShape=[1, 1]), [x, x])
