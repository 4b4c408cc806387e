"""The data-movement lowerings (drivers/cpu/ort/ops/lower_reshape.py and its siblings) in
graphs: chains that stay one onnxruntime segment, nodes that stay on numpy with their
reason, and run-time failures that both engines report. Single nodes are compared over
every kernel test case by tests/drivers/cpu/ort/differential.py."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from nnrt.hdi.reference.kernel import create_kernel
from nnrt.drivers.cpu.ort import engine
from nnrt.hdi.reference.plan import ExecutionPlan
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from nnrt.common.errors import DriverError
from nnrt.hdi.graph import DYNAMIC, Graph, NodeSpec, TensorSpec
from tests.hdi.reference.util import tensor_spec
from tests.drivers.cpu.ort.differential import assert_agree, never, run_on_ort


class Builder:
    """A graph built node by node: tensors numbered in order of creation."""

    def __init__(self) -> None:
        self.tensors: list[TensorSpec] = []
        self.nodes: list[NodeSpec] = []
        self.inputs: list[TensorSpec] = []

    def tensor(self, dtype: object, shape: Sequence[int],
               constant: np.ndarray | None = None) -> TensorSpec:
        spec = tensor_spec(len(self.tensors), dtype, shape, constant=constant)
        self.tensors.append(spec)
        return spec

    def input(self, dtype: object, shape: Sequence[int]) -> TensorSpec:
        spec = self.tensor(dtype, shape)
        self.inputs.append(spec)
        return spec

    def const(self, array: np.ndarray) -> TensorSpec:
        return self.tensor(array.dtype, array.shape, constant=array)

    def node(self, node_type: int, attrs: object, inputs: Sequence[TensorSpec],
             out_dtype: object, out_shape: Sequence[int]) -> TensorSpec:
        out = self.tensor(out_dtype, out_shape)
        self.nodes.append(NodeSpec(index=len(self.nodes), name=f"n{len(self.nodes)}",
                                   node_type=node_type, attrs=attrs, inputs=tuple(inputs),
                                   outputs=(out,)))
        return out

    def graph(self, outputs: Sequence[TensorSpec]) -> Graph:
        return Graph(name="movement", tensors=tuple(self.tensors), nodes=tuple(self.nodes),
                     inputs=tuple(self.inputs), outputs=tuple(outputs),
                     execution_order=tuple(range(len(self.nodes))))


def both_engines(graph: Graph, inputs: Sequence[np.ndarray]
                 ) -> tuple[engine.Partition, list[np.ndarray], list[np.ndarray]]:
    """(the ort partition, its outputs, the numpy engine's outputs)."""
    kernels = {i: create_kernel(n) for i, n in enumerate(graph.nodes)}
    part = engine.partition(graph, kernels)
    ort_plan = ExecutionPlan(graph, partitioner=lambda g, k: engine.units_with_tensors(part, g))
    return part, ort_plan.run(inputs, never), ExecutionPlan(graph).run(inputs, never)


def i64(*values: int) -> np.ndarray:
    return np.array(values, np.int64)


def test_reshape_transpose_concat_chain_is_one_segment() -> None:
    b = Builder()
    x = b.input(np.float32, (2, 3, 4))
    y = b.input(np.float32, (2, 4, 2))
    r = b.node(na.NODE_TYPE_RESHAPE, na.Reshape(), [x, b.const(i64(2, 4, 3))], np.float32,
               (2, 4, 3))
    t = b.node(na.NODE_TYPE_TRANSPOSE, na.Transpose(), [r, b.const(i64(0, 2, 1))],
               np.float32, (2, 3, 4))
    tt = b.node(na.NODE_TYPE_TRANSPOSE, na.Transpose(), [y, b.const(i64(0, 2, 1))],
                np.float32, (2, 2, 4))
    c = b.node(na.NODE_TYPE_CONCAT, na.Concat(axis=1), [t, tt], np.float32, (2, 5, 4))
    s = b.node(na.NODE_TYPE_STRIDED_SLICE, na.StridedSlice(shrinkAxisMask=1),
               [c, b.const(i64(-1)), b.const(i64(0)), b.const(i64(1))], np.float32, (5, 4))
    graph = b.graph([s])
    xs = [np.arange(24, dtype=np.float32).reshape(2, 3, 4),
          -np.arange(16, dtype=np.float32).reshape(2, 4, 2)]
    part, got, want = both_engines(graph, xs)
    assert part.single_segment is not None and part.ort_nodes == 5, part.describe()
    assert part.reasons == {}
    assert_agree(got, want)


def test_not_lowerable_node_stays_on_numpy_with_its_reason() -> None:
    """A run-time perm cannot be lowered: that Transpose runs on numpy, splitting the
    lowered nodes around it into two segments."""
    b = Builder()
    x = b.input(np.int32, (2, 3))
    perm = b.input(np.int64, (2,))
    r = b.node(na.NODE_TYPE_RESHAPE, na.Reshape(), [x, b.const(i64(3, 2))], np.int32, (3, 2))
    t = b.node(na.NODE_TYPE_TRANSPOSE, na.Transpose(), [r, perm], np.int32, (DYNAMIC, DYNAMIC))
    f = b.node(na.NODE_TYPE_FLATTEN, na.Flatten(axis=0), [t], np.int32, (1, DYNAMIC))
    graph = b.graph([f])
    xs = [np.arange(6, dtype=np.int32).reshape(2, 3), i64(1, 0)]
    part, got, want = both_engines(graph, xs)
    assert part.reasons == {1: "a run-time perm"}
    assert len(part.segments) == 2 and part.numpy_nodes == 1
    assert_agree(got, want)
    np.testing.assert_array_equal(got[0], [[0, 2, 4, 1, 3, 5]])


@pytest.mark.parametrize("indices", [[0, 3], [-4], [1, 2**40]])
def test_run_time_gather_index_out_of_range_fails_the_run_on_both(indices) -> None:
    b = Builder()
    x = b.input(np.float32, (2, 3))
    idx = b.input(np.int64, (DYNAMIC,))
    g = b.node(na.NODE_TYPE_GATHER, na.Gather(), [x, idx, b.const(np.array([1], np.int32))],
               np.float32, (2, DYNAMIC))
    graph = b.graph([g])
    kernels = {0: create_kernel(graph.nodes[0])}
    part = engine.partition(graph, kernels)
    assert part.single_segment is not None
    ort_plan = ExecutionPlan(graph, partitioner=lambda g_, k: engine.units_with_tensors(part, g_))
    numpy_plan = ExecutionPlan(graph)
    inputs = [np.zeros((2, 3), np.float32), np.array(indices, np.int64)]
    for plan in (ort_plan, numpy_plan):
        with pytest.raises(DriverError) as info:
            plan.run(inputs, never)
        assert info.value.code == ht.NNRT_FAILED


def test_scalar_constant_index_keeps_the_rank() -> None:
    """A 0-D constant stays 0-D in the segment: Gather by it drops the axis."""
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    idx = np.array(-1, np.int64)
    node = NodeSpec(index=0, name="g", node_type=na.NODE_TYPE_GATHER, attrs=na.Gather(),
                    inputs=(tensor_spec(0, np.float32, (3, 4)),
                            tensor_spec(1, np.int64, (), constant=idx),
                            tensor_spec(2, np.int32, (1,), constant=np.array([0], np.int32))),
                    outputs=(tensor_spec(3, np.float32, (4,)),))
    (out,), on_ort = run_on_ort(node, [x, idx, np.array([0], np.int32)])
    assert on_ort
    np.testing.assert_array_equal(out, x[-1])


def test_float16_stays_on_numpy() -> None:
    node = NodeSpec(index=0, name="t", node_type=na.NODE_TYPE_TRANSPOSE, attrs=na.Transpose(),
                    inputs=(tensor_spec(0, np.float16, (2, 3)),
                            tensor_spec(1, np.int64, (2,), constant=i64(1, 0))),
                    outputs=(tensor_spec(2, np.float16, (3, 2)),))
    x = np.arange(6, dtype=np.float16).reshape(2, 3)
    (out,), on_ort = run_on_ort(node, [x, i64(1, 0)])
    assert not on_ort
    np.testing.assert_array_equal(out, x.T)
