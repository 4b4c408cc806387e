"""StridedSlice against Python's own indexing: literal index expressions written by hand,
and many random specifications whose masks are turned into the equivalent Python index
(Ellipsis, None, an integer, or a slice with None for masked ends); numpy's basic indexing
and TensorFlow's clamping rules agree, and numpy's IndexError is the kernel's invalid node.
Also dtypes, run-time begin/end/strides, DYNAMIC dims, errors."""

from __future__ import annotations

import numpy as np
import pytest

from nnrt.hdi.reference.kernel import create_kernel
from nnrt.protos import node_attrs_pb2 as na
from nnrt.common.errors import DriverError
from tests.hdi.reference.util import (
    NNRT_INVALID_NODE,
    NNRT_INVALID_SHAPE,
    NNRT_UNSUPPORTED_OP,
    Const,
    Declared,
    expect_error,
    expect_refused,
    make_node,
    readonly,
    rng,
    run_node,
    run_op,
)

STRIDED_SLICE = na.NODE_TYPE_STRIDED_SLICE
X = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)


def masks(**bits: list[int]) -> na.StridedSlice:
    """StridedSlice attributes with the listed bit positions set in each mask."""
    return na.StridedSlice(**{name: sum(1 << b for b in positions)
                              for name, positions in bits.items()})


def strided(x, begin, end, strides, attrs, index_dtype=np.int64):
    return run_op(STRIDED_SLICE, attrs, [x, Const(np.array(begin, index_dtype)),
                                         Const(np.array(end, index_dtype)),
                                         Const(np.array(strides, index_dtype))])


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_literal_expressions(index_dtype) -> None:
    cases = [
        # (begin, end, strides, attrs, expected)
        ([0, 1, 0, 0], [2, 3, 4, 5], [1, 1, 1, 1], masks(), X[0:2, 1:3, 0:4, 0:5]),
        ([1], [2], [1], masks(), X[1:2]),
        ([0, 0, -1], [0, 0, 0], [1, 1, -1], masks(beginMask=[0, 1], endMask=[0, 1, 2]),
         X[:, :, ::-1]),
        ([1, 0, 3], [0, 0, 0], [1, 1, -2], masks(endMask=[0, 2], ellipsisMask=[1]),
         X[1:, ..., 3::-2]),
        ([0, 0, 0, 2], [0, 0, 0, 0], [1, 1, 1, 1],
         masks(beginMask=[0], endMask=[0], ellipsisMask=[1], newAxisMask=[2],
               shrinkAxisMask=[3]), X[:, ..., None, 2]),
        ([-1, 0], [0, 0], [1, 1], masks(shrinkAxisMask=[0], ellipsisMask=[1]), X[-1, ...]),
        ([0, 1, -2], [0, 0, -5], [1, 1, -1], masks(newAxisMask=[0], shrinkAxisMask=[1]),
         X[None, 1, -2:-5:-1]),
        ([-100, 100], [100, -100], [1, -1], masks(), X[-100:100, 100:-100:-1]),
        ([3, 0], [1, 0], [1, 1], masks(), X[3:1, 0:0]),  # empty
        ([0, 0, 0, 0, 0], [1, 1, 1, 1, 1], [1, 1, 1, 1, 1],
         masks(newAxisMask=[0, 4]), X[None, 0:1, 0:1, 0:1, None]),
        ([0, 0, 1], [0, 0, 4], [1, 1, 2], masks(ellipsisMask=[0], newAxisMask=[0, 1]),
         X[..., None, 1:4:2]),  # the ellipsis wins over a new-axis bit at its position
    ]
    for k, (begin, end, strides, attrs, expected) in enumerate(cases):
        out = strided(X, begin, end, strides, attrs, index_dtype)
        assert out.shape == expected.shape, (k, out.shape, expected.shape)
        np.testing.assert_array_equal(out, expected, err_msg=str(k))


def python_index(begin, end, strides, bits: dict[str, int]) -> tuple:
    """The Python index that the masks and values describe (TensorFlow's documented
    equivalence): written independently of the kernel's dense expansion."""
    index = []
    for i in range(len(begin)):
        def on(name: str) -> bool:
            return bool(bits[name] >> i & 1)

        if on("ellipsisMask"):
            index.append(Ellipsis)
        elif on("newAxisMask"):
            index.append(None)
        elif on("shrinkAxisMask"):
            index.append(int(begin[i]))
        else:
            index.append(slice(None if on("beginMask") else int(begin[i]),
                               None if on("endMask") else int(end[i]), int(strides[i])))
    return tuple(index)


def test_random_specifications() -> None:
    gen = rng(7)
    checked = refused = 0
    for _ in range(400):
        rank = int(gen.integers(1, 5))
        shape = tuple(int(d) for d in gen.integers(1, 5, rank))
        x = np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape)
        length = int(gen.integers(1, rank + 3))
        begin = gen.integers(-6, 7, length)
        end = gen.integers(-6, 7, length)
        strides = gen.choice([-3, -2, -1, 1, 2, 3], length)
        bits = {name: int(gen.integers(0, 1 << length)) & int(gen.integers(0, 1 << length))
                for name in ("beginMask", "endMask", "newAxisMask", "shrinkAxisMask")}
        bits["ellipsisMask"] = int(1 << int(gen.integers(0, length))) if gen.random() < 0.4 \
            else 0
        try:
            expected = x[python_index(begin, end, strides, bits)]
        except IndexError:
            expected = None
        node = make_node(STRIDED_SLICE, na.StridedSlice(**bits),
                         [x, Const(begin), Const(end), Const(strides)])
        if expected is None:
            with pytest.raises(DriverError) as info:
                create_kernel(node)
            assert info.value.code == NNRT_INVALID_NODE
            refused += 1
            continue
        (out,) = run_node(node, [x, begin, end, strides])
        assert out.shape == expected.shape, (shape, begin, end, strides, bits)
        np.testing.assert_array_equal(out, expected)
        checked += 1
    assert checked > 200 and refused > 20  # both paths really exercised


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint16, np.int64, np.float16,
                                   np.float64])
def test_dtypes(dtype) -> None:
    x = (np.arange(10) % 3).astype(dtype)
    out = strided(x, [8], [1], [-3], masks())
    assert out.dtype == dtype
    np.testing.assert_array_equal(out, x[8:1:-3])


def test_run_time_values_and_dynamic_dims() -> None:
    spec = [np.array([0, 0], np.int32)] * 3
    attrs = masks(newAxisMask=[0])
    node = make_node(STRIDED_SLICE, attrs, [X, *spec])
    kernel = create_kernel(node)
    assert kernel.infer_shapes([X.shape, (2,), (2,), (2,)]) == [(1, -1, 3, 4, 5)]
    values = [np.array(v, np.int32) for v in ([0, 1], [0, 2], [1, 1])]
    (out,) = run_node(node, [X, *values], kernel)
    np.testing.assert_array_equal(out, X[None, 1:2])
    expect_error(NNRT_INVALID_SHAPE, lambda: kernel.execute(
        [readonly(X), *(readonly(v) for v in values[:2]), readonly(np.array([1, 0], np.int32))]))
    expect_error(NNRT_INVALID_SHAPE, lambda: kernel.execute(
        [readonly(X), *(readonly(v) for v in values[:2]), readonly(np.array([1], np.int32))]))
    shrink = make_node(STRIDED_SLICE, masks(shrinkAxisMask=[0]), [X, *spec])
    shrink_kernel = create_kernel(shrink)
    assert shrink_kernel.infer_shapes([X.shape, (2,), (2,), (2,)]) == [(-1, 4, 5)]
    expect_error(NNRT_INVALID_SHAPE, lambda: shrink_kernel.execute(
        [readonly(X), readonly(np.array([2, 0], np.int32)), *(readonly(v) for v in values[1:])]))
    node = make_node(STRIDED_SLICE, masks(endMask=[1]),
                     [Declared(X, (-1, 3, 4, 5)), Const(np.array([0, 1])),
                      Const(np.array([1, 0])), Const(np.array([1, 1]))])
    kernel = create_kernel(node)
    assert kernel.infer_shapes([(-1, 3, 4, 5), (2,), (2,), (2,)]) == [(-1, 2, 4, 5)]
    (out,) = run_node(node, [X, np.array([0, 1]), np.array([1, 0]), np.array([1, 1])], kernel)
    np.testing.assert_array_equal(out, X[0:1, 1:])


def test_error_paths() -> None:
    def refused(begin, end, strides, attrs, code=NNRT_INVALID_NODE, **kw):
        expect_refused(code, STRIDED_SLICE, attrs,
                       [X, Const(np.array(begin)), Const(np.array(end)), Const(np.array(strides))],
                       **kw)

    refused([0], [1], [0], masks())  # zero stride
    refused([0], [1], [0], masks(shrinkAxisMask=[0]))  # zero stride on a shrunk dimension
    refused([0, 0], [1, 1], [1, 1], masks(ellipsisMask=[0, 1]))  # two ellipses
    refused([0] * 5, [1] * 5, [1] * 5, masks())  # more dimensions than x has
    refused([2], [3], [1], masks(shrinkAxisMask=[0]))  # index 2 of a dimension of 2
    refused([-3], [3], [1], masks(shrinkAxisMask=[0]))
    refused([0], [1], [1], na.StridedSlice(beginMask=-1))
    refused([0, 0], [1], [1, 1], masks())  # lengths differ
    refused([0], [1], [1], masks(), out_dtype=np.int32)
    expect_refused(NNRT_INVALID_NODE, STRIDED_SLICE, masks(),
                   [X, Const(np.array([0])), Const(np.array([1]))])
    expect_refused(NNRT_INVALID_NODE, STRIDED_SLICE, masks(),
                   [X, Const(np.array([0.0])), Const(np.array([1])), Const(np.array([1]))])
    dyn = Declared(np.array([0], np.int32), (-1,))
    expect_refused(NNRT_UNSUPPORTED_OP, STRIDED_SLICE, masks(), [X, dyn, dyn, dyn])
