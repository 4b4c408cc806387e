"""The GPU's data-movement operators (Reshape family, Transpose, Concat, Split, SliceFusion,
StridedSlice, Gather, PadFusion, Resize) against the CPU reference on the same graphs:
float32 and integer/bool/float16 dtypes (moved bit-exactly), odd shapes, negative axes,
each supported attribute variant; the refusals; and an alias chain in one graph."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from nnrt.hdi.reference.kernel import create_kernel
from nnrt.drivers.gpu.kernel import create_op
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import Graph, NodeSpec
from nnrt.drivers.gpu.plan import GpuPlan
from tests.drivers.gpu.util import NEVER, assert_close, node_graph, run_cpu, run_gpu, runtime
from tests.hdi.reference.util import (
    NNRT_FAILED,
    NNRT_INVALID_NODE,
    NNRT_UNSUPPORTED_OP,
    Const,
    Declared,
    arrays_of,
    expect_error,
    make_node,
    randn,
    rng,
    tensor_spec,
)


def data(shape: tuple[int, ...], dtype: Any = np.float32, seed: int = 0) -> np.ndarray:
    """Distinct-looking values of `dtype` (NaN-free; bit patterns matter, not sizes)."""
    if np.dtype(dtype) == np.bool_:
        return rng(seed).random(shape) < 0.5
    if np.issubdtype(dtype, np.floating):
        return randn(*shape, dtype=dtype, seed=seed)
    info = np.iinfo(dtype)
    return rng(seed).integers(max(info.min, -1000), min(info.max, 1000), shape, dtype=dtype)


def shaped_node(node_type: int, attrs: Any, inputs: list, **kw: Any) -> NodeSpec:
    """make_node with the output shapes the reference infers from the declared inputs."""
    node = make_node(node_type, attrs, inputs, **kw)
    shapes = create_kernel(node).infer_shapes([t.shape for t in node.inputs])
    outputs = tuple(dataclasses.replace(t, shape=tuple(s)) for t, s in zip(node.outputs, shapes))
    return dataclasses.replace(node, outputs=outputs)


def check(node_type: int, attrs: Any, inputs: list, **kw: Any) -> list[np.ndarray]:
    """Run one node on the GPU and the CPU reference; their outputs must agree."""
    node = shaped_node(node_type, attrs, inputs, **kw)
    graph = node_graph(node)
    arrays = [a for item, a in zip(inputs, arrays_of(inputs)) if not isinstance(item, Const)]
    gpu, cpu = run_gpu(graph, arrays), run_cpu(graph, arrays)
    assert_close(gpu, cpu, rtol=1e-5)
    return gpu


def refused(node_type: int, attrs: Any, inputs: list, code: int = NNRT_UNSUPPORTED_OP,
            **kw: Any) -> None:
    node = make_node(node_type, attrs, inputs, **kw)
    expect_error(code, lambda: create_op(node))


I32, I64 = np.int32, np.int64


# ----------------------------------------------------------------------------- reshape family


@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_reshape_family(dtype) -> None:
    x = data((2, 3, 1, 5), dtype)
    check(na.NODE_TYPE_RESHAPE, na.Reshape(), [x, Const(np.array([0, -1, 5], I64))])
    check(na.NODE_TYPE_FLATTEN, na.Flatten(axis=-1), [x])
    check(na.NODE_TYPE_SQUEEZE, na.Squeeze(axis=[-2]), [x])
    check(na.NODE_TYPE_SQUEEZE, na.Squeeze(), [x])
    check(na.NODE_TYPE_UNSQUEEZE, na.Unsqueeze(axis=[0, -1]), [x])
    check(na.NODE_TYPE_EXPAND_DIMS, na.ExpandDims(), [x, Const(np.array([-1], I32))])


def test_alias_chain() -> None:
    """Reshape -> Transpose -> Reshape in one graph: the aliases share buffers and the
    transpose reads through them."""
    x = data((4, 6, 10))
    t = [tensor_spec(0, np.float32, x.shape),
         tensor_spec(1, np.int32, (2,), constant=np.array([24, 10], I32)),
         tensor_spec(2, np.float32, (24, 10)),
         tensor_spec(3, np.int32, (2,), constant=np.array([1, 0], I32)),
         tensor_spec(4, np.float32, (10, 24)),
         tensor_spec(5, np.int64, (3,), constant=np.array([5, -1, 4], I64)),
         tensor_spec(6, np.float32, (5, 12, 4))]
    nodes = (NodeSpec(0, "r1", na.NODE_TYPE_RESHAPE, na.Reshape(), (t[0], t[1]), (t[2],)),
             NodeSpec(1, "t", na.NODE_TYPE_TRANSPOSE, na.Transpose(), (t[2], t[3]), (t[4],)),
             NodeSpec(2, "r2", na.NODE_TYPE_RESHAPE, na.Reshape(), (t[4], t[5]), (t[6],)))
    graph = Graph(name="chain", tensors=tuple(t), nodes=nodes, inputs=(t[0],),
                  outputs=(t[6],), execution_order=(0, 1, 2))
    assert_close(run_gpu(graph, [x]), run_cpu(graph, [x]))


# ----------------------------------------------------------------------------- transpose


@pytest.mark.parametrize("shape, perm", [
    ((37, 45), [1, 0]),  # tiled, one batch
    ((3, 20, 33), [0, -1, 1]),  # tiled, batched, negative axis
    ((2, 3, 4, 5), [0, 3, 1, 2]),  # NHWC -> NCHW, C small: strided
    ((2, 9, 1, 11), [2, 3, 0, 1]),  # a size-1 axis merged away
    ((3, 4, 5, 2), [3, 1, 0, 2]),  # general
])
def test_transpose(shape, perm) -> None:
    check(na.NODE_TYPE_TRANSPOSE, na.Transpose(), [data(shape), Const(np.array(perm, I32))])


@pytest.mark.parametrize("dtype", [np.int8, np.float16, np.int64, np.bool_])
def test_transpose_dtypes(dtype) -> None:
    x = data((2, 17, 19), dtype)
    check(na.NODE_TYPE_TRANSPOSE, na.Transpose(), [x, Const(np.array([0, 2, 1], I64))])
    check(na.NODE_TYPE_TRANSPOSE, na.Transpose(), [x, Const(np.array([1, 2, 0], I64))])


# ----------------------------------------------------------------------------- concat / split


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concat(dtype, axis) -> None:
    shapes = [[3, 4, 5]] * 3
    for k, s in enumerate(shapes):
        shapes[k] = list(s)
        shapes[k][axis] = (2, 1, 3)[k]
    a, b, c = (data(tuple(s), dtype, seed=k) for k, s in enumerate(shapes))
    check(na.NODE_TYPE_CONCAT, na.Concat(axis=axis), [a, Const(b), c])


def test_concat_empty_piece() -> None:
    a, b = data((2, 0, 3)), data((2, 4, 3), np.float32, 1)
    check(na.NODE_TYPE_CONCAT, na.Concat(axis=1), [a, b])


@pytest.mark.parametrize("attrs, n", [
    (na.Split(outputNum=3, axis=1), 3),
    (na.Split(outputNum=3, sizeSplits=[2, -1, 0], axis=-1), 3),
    (na.Split(sizeSplits=[1, 3], axis=0), 2),
])
@pytest.mark.parametrize("dtype", [np.float32, np.int16])
def test_split(attrs, n, dtype) -> None:
    check(na.NODE_TYPE_SPLIT, attrs, [data((4, 6, 7), dtype)], n_outputs=n)


# ----------------------------------------------------------------------------- slices


@pytest.mark.parametrize("begin, size, axes", [
    ([1, 0, 2], [2, -1, 3], []),
    ([3], [2], [-1]),
    ([1, 1], [-1, 0], [2, 0]),  # an empty result
    ([0, 2], [2, 3], [0, 1]),
])
@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_slice(begin, size, axes, dtype) -> None:
    x = data((3, 5, 7), dtype)
    check(na.NODE_TYPE_SLICE_FUSION, na.SliceFusion(axes=axes),
          [x, Const(np.array(begin, I32)), Const(np.array(size, I64))])


def masks(**bits: list[int]) -> na.StridedSlice:
    return na.StridedSlice(**{name: sum(1 << b for b in positions)
                              for name, positions in bits.items()})


STRIDED_CASES = [
    ([0, 1, 0, 0], [2, 3, 4, 5], [1, 1, 1, 1], masks()),
    ([0, 0, -1], [0, 0, 0], [1, 1, -1], masks(beginMask=[0, 1], endMask=[0, 1, 2])),
    ([1, 0, 3], [0, 0, 0], [1, 1, -2], masks(endMask=[0, 2], ellipsisMask=[1])),
    ([0, 0, 0, 2], [0, 0, 0, 0], [1, 1, 1, 1],
     masks(beginMask=[0], endMask=[0], ellipsisMask=[1], newAxisMask=[2], shrinkAxisMask=[3])),
    ([-1, 0], [0, 0], [1, 1], masks(shrinkAxisMask=[0], ellipsisMask=[1])),
    ([0, 1, -2], [0, 0, -5], [1, 1, -1], masks(newAxisMask=[0], shrinkAxisMask=[1])),
    ([-100, 100], [100, -100], [1, -1], masks()),
    ([3, 0], [1, 0], [1, 1], masks()),  # empty
    ([0, 1, 4, 0], [2, 3, 0, 5], [1, 2, -3, 2], masks()),
]


@pytest.mark.parametrize("case", range(len(STRIDED_CASES)))
def test_strided_slice(case) -> None:
    begin, end, strides, attrs = STRIDED_CASES[case]
    x = data((2, 3, 4, 5))
    check(na.NODE_TYPE_STRIDED_SLICE, attrs, [x, Const(np.array(begin, I64)),
                                              Const(np.array(end, I64)),
                                              Const(np.array(strides, I32))])


@pytest.mark.parametrize("dtype", [np.uint8, np.bool_, np.float16])
def test_strided_slice_dtypes(dtype) -> None:
    x = data((11, 3), dtype)
    check(na.NODE_TYPE_STRIDED_SLICE, masks(endMask=[1]),
          [x, Const(np.array([9, 1], I32)), Const(np.array([1, 0], I32)),
           Const(np.array([-3, 1], I32))])


# ----------------------------------------------------------------------------- gather


@pytest.mark.parametrize("shape, indices, axis", [
    ((5, 4), [4, 0, -1, 2, 2], 0),
    ((3, 7, 2), [[1, -7], [6, 0], [3, 3]], 1),
    ((3, 7, 5), [4, -5], -1),
    ((6, 3), 2, 0),  # a 0-D index drops the axis
    ((2, 3), np.zeros((0,), I64), 1),  # no indices
])
@pytest.mark.parametrize("index_dtype", [I32, I64])
def test_gather(shape, indices, axis, index_dtype) -> None:
    for dtype in (np.float32, np.int32):
        check(na.NODE_TYPE_GATHER, na.Gather(),
              [data(shape, dtype), Const(np.array(indices, index_dtype)),
               Const(np.array([axis], index_dtype))])


def test_gather_index_out_of_range() -> None:
    """Out-of-range constant indices: the reference's own error, on the GPU too."""
    x = data((4, 3))
    refused(na.NODE_TYPE_GATHER, na.Gather(), [x, Const(np.array([4], I32)),
                                               Const(np.array([0], I32))], NNRT_INVALID_NODE)
    # the size only known at run time: the specialisation fails as the reference's run does
    node = shaped_node(na.NODE_TYPE_GATHER, na.Gather(),
                       [Declared(x, (-1, 3)), Const(np.array([-5], I32)),
                        Const(np.array([0], I32))])
    expect_error(NNRT_FAILED, lambda: run_cpu(node_graph(node), [x]))
    expect_error(NNRT_FAILED, lambda: run_gpu(node_graph(node), [x]))


@pytest.mark.parametrize("index_dtype", [I32, I64])
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.float16])
def test_gather_with_run_time_indices(index_dtype, dtype) -> None:
    """An embedding lookup: token ids as a run-time input, negative ones counting from the end."""
    table = data((50, 8), dtype)
    ids = np.array([[3, 49, -1, 0], [7, 7, -50, 12]], index_dtype)
    check(na.NODE_TYPE_GATHER, na.Gather(), [table, ids, Const(np.array([0], index_dtype))])
    check(na.NODE_TYPE_GATHER, na.Gather(), [data((4, 50, 3), dtype), ids,
                                             Const(np.array([1], index_dtype))])


@pytest.mark.parametrize("bad", [50, -51, 2 ** 40])
def test_run_time_indices_out_of_range_fail_the_run_and_the_next_run_succeeds(bad) -> None:
    table = data((50, 8))
    index_dtype = I64 if abs(bad) > 2 ** 31 else I32
    node = shaped_node(na.NODE_TYPE_GATHER, na.Gather(),
                       [table, np.array([0, bad], index_dtype),
                        Const(np.array([0], index_dtype))])
    graph = node_graph(node)
    ids = np.array([1, bad], index_dtype)
    expect_error(NNRT_FAILED, lambda: run_cpu(graph, [table, ids]))
    plan = GpuPlan(graph, runtime(), "gather")
    try:
        error = expect_error(NNRT_FAILED, lambda: plan.run([table, ids], NEVER))
        assert "outside [-50, 50)" in error.message
        good = np.array([1, -1], index_dtype)  # the same plan: its flag was reset
        assert_close(plan.run([table, good], NEVER), run_cpu(graph, [table, good]))
    finally:
        plan.close()


# ----------------------------------------------------------------------------- pad


PADS = np.array([[1, 2], [0, 3], [2, 1]])


@pytest.mark.parametrize("mode", [ht.PADDING_MODE_CONSTANT, ht.PADDING_MODE_REFLECT,
                                  ht.PADDING_MODE_SYMMETRIC])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_pad(mode, dtype) -> None:
    x = data((3, 4, 5), dtype)
    check(na.NODE_TYPE_PAD_FUSION,
          na.PadFusion(paddingMode=mode, constantValue=7.5), [x, Const(PADS.astype(I64))])


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.float16, np.int64])
def test_pad_constant_dtypes(dtype) -> None:
    x = data((2, 3), dtype)
    check(na.NODE_TYPE_PAD_FUSION, na.PadFusion(constantValue=-3.0),
          [x, Const(np.array([[2, 0], [1, 1]], I32))])


def test_pad_attribute_paddings() -> None:
    attrs = na.PadFusion(paddings=[ht.Int64Array(values=[1, 1]), ht.Int64Array(values=[0, 2])],
                         paddingMode=ht.PADDING_MODE_SYMMETRIC)
    check(na.NODE_TYPE_PAD_FUSION, attrs, [data((3, 2))])


# ----------------------------------------------------------------------------- resize

ASYM = ht.COORDINATE_TRANSFORM_MODE_ASYMMETRIC
ALIGN = ht.COORDINATE_TRANSFORM_MODE_ALIGN_CORNERS
HALF = ht.COORDINATE_TRANSFORM_MODE_HALF_PIXEL
NEAREST_MODES = [ht.NEAREST_MODE_NORMAL, ht.NEAREST_MODE_ROUND_HALF_DOWN,
                 ht.NEAREST_MODE_ROUND_HALF_UP, ht.NEAREST_MODE_FLOOR, ht.NEAREST_MODE_CEIL]


def resize(x: np.ndarray, size: tuple[int, int], method: int, ctm: int, **kw: Any) -> None:
    fmt = kw.pop("fmt", ht.FORMAT_NHWC)
    attrs = na.Resize(method=method, newHeight=size[0], newWidth=size[1],
                      coordinateTransformMode=ctm, **kw)
    check(na.NODE_TYPE_RESIZE, attrs, [x], fmt=fmt)


@pytest.mark.parametrize("ctm", [ASYM, ALIGN, HALF])
def test_resize_nearest(ctm) -> None:
    x = data((2, 4, 5, 3))
    xi = data((1, 5, 4, 2), np.int32)
    for k, mode in enumerate(NEAREST_MODES):
        resize(x, [(8, 10), (3, 7), (1, 5), (9, 2), (4, 5)][k], ht.RESIZE_METHOD_NEAREST, ctm,
               nearestMode=mode)
        resize(xi, (9, 6), ht.RESIZE_METHOD_NEAREST, ctm, nearestMode=mode)


@pytest.mark.parametrize("method", [ht.RESIZE_METHOD_LINEAR, ht.RESIZE_METHOD_CUBIC])
@pytest.mark.parametrize("ctm", [ASYM, ALIGN, HALF])
def test_resize_interpolation(method, ctm) -> None:
    x = data((2, 4, 5, 3), seed=1)
    resize(x, (7, 9), method, ctm)
    resize(x, (3, 2), method, ctm, excludeOutside=1)
    if method == ht.RESIZE_METHOD_CUBIC:
        resize(x, (9, 4), method, ctm, cubicCoeff=-0.5)


def test_resize_layouts_and_aspect() -> None:
    x = data((1, 3, 6, 4), seed=2)
    resize(x, (11, 5), ht.RESIZE_METHOD_LINEAR, HALF, fmt=ht.FORMAT_NCHW)
    resize(x, (5, 7), ht.RESIZE_METHOD_NEAREST, ASYM, fmt=ht.FORMAT_NCHW)
    resize(x, (12, 12), ht.RESIZE_METHOD_LINEAR, ALIGN, preserveAspectRatio=True)


# ----------------------------------------------------------------------------- refusals


def test_refusals() -> None:
    x = data((2, 3, 4))
    shape = np.array([6, 4], I32)
    refused(na.NODE_TYPE_RESHAPE, na.Reshape(), [x, shape])
    refused(na.NODE_TYPE_EXPAND_DIMS, na.ExpandDims(), [x, np.array([0], I32)])
    refused(na.NODE_TYPE_TRANSPOSE, na.Transpose(), [x, np.array([2, 0, 1], I32)])
    refused(na.NODE_TYPE_SLICE_FUSION, na.SliceFusion(),
            [x, np.array([0, 1], I32), Const(np.array([1, 1], I32))])
    refused(na.NODE_TYPE_STRIDED_SLICE, na.StridedSlice(),
            [x, Const(np.array([0], I32)), np.array([1], I32), Const(np.array([1], I32))])
    refused(na.NODE_TYPE_PAD_FUSION, na.PadFusion(), [x, np.zeros((3, 2), I32)])
    refused(na.NODE_TYPE_RESIZE, na.Resize(method=ht.RESIZE_METHOD_LINEAR, newHeight=3,
                                           newWidth=3), [data((1, 2, 2, 1), np.int32)])
    refused(na.NODE_TYPE_RESIZE, na.Resize(method=ht.RESIZE_METHOD_CUBIC, newHeight=3,
                                           newWidth=3), [data((1, 2, 2, 1), np.float16)])
