"""Helpers for the GPU driver's tests: one OpenCL runtime per test process (PoCL's CPU
device in CI: `--cl-device any`), graphs built in-process as the host builds them, and
the same graph run by the GPU plan and by the CPU driver's reference plan."""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np

from nnrt.common.hdi_model import HdiModelBuilder
from nnrt.hdi.reference.plan import ExecutionPlan
from nnrt.drivers.gpu.opencl import ClRuntime, choose_device
from nnrt.drivers.gpu.plan import GpuPlan
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.hdi.graph import Graph, NodeSpec
from tests.hdi.reference.util import assert_outputs_close
from nnrt.hdi.model_validation import build_graph

NEVER = lambda: False  # noqa: E731  (a run nobody abandons)


@functools.cache
def runtime() -> ClRuntime:
    return ClRuntime(choose_device("any"))


def graph_of(builder: HdiModelBuilder) -> Graph:
    """The validated Graph of a builder's model, its constants read from one blob."""
    order = sorted(builder.constants)
    blob = b"".join(builder.constants[i].tobytes() for i in order)
    model = builder.model(ht.SharedBuffer(bufferId=1, bufferSize=len(blob)) if blob else None)
    view = memoryview(blob)
    return build_graph(model, lambda b: view[b.offset:b.offset + b.dataSize].toreadonly())


def node_graph(node: NodeSpec) -> Graph:
    """A one-node Graph of a NodeSpec (as tests/hdi/reference/util.make_node builds them)."""
    tensors = list(node.inputs) + list(node.outputs)
    return Graph(name="node", tensors=tuple(tensors), nodes=(node,),
                 inputs=tuple(t for t in node.inputs if not t.is_constant),
                 outputs=tuple(node.outputs), execution_order=(0,))


def run_gpu(graph: Graph, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    plan = GpuPlan(graph, runtime(), f"test {graph.name}")
    try:
        return plan.run(inputs, NEVER)
    finally:
        plan.close()


def run_cpu(graph: Graph, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    return ExecutionPlan(graph).run(inputs, NEVER)


def assert_close(gpu: Sequence[np.ndarray], cpu: Sequence[np.ndarray], rtol: float = 1e-4,
                 atol: float = 1e-5) -> None:
    """float32 within 1e-4 relative (near 0: 1e-5 of the output's scale); the rest exact."""
    assert_outputs_close(gpu, cpu, rtol, atol)
