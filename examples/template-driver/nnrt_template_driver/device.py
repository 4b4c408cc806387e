"""The template device: six float32 operators computed with nnrt's reference kernels.

A real driver would hand the graph to its compiler in `prepare` and to its hardware in
`run`; everything else here is what every driver does the same way:

- `supported_operations` answers per node, truthfully: GetSupportedOperation's answer is
  what PrepareModel then accepts, and a model prepared is a model that runs;
- `prepare` refuses what it does not support with NNRT_UNSUPPORTED_OP before doing work,
  and counts the weights it keeps against the device memory;
- the model cache is the graph itself (nnrt.hdi.graph_cache), sealed with the driver's key,
  and the identity says which driver version wrote it, so a foreign or altered blob is
  refused with NNRT_INVALID_MODEL_CACHE;
- the device memory (nnrt.hdi.memory_budget) counts client buffers (AllocateBuffer) and
  prepared weights: beyond it NNRT_OUT_OF_MEMORY, and what is held keeps working.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np

from nnrt.common.errors import NNRT_INVALID_MODEL_CACHE, NNRT_UNSUPPORTED_OP, DriverError
from nnrt.hdi import graph_cache
from nnrt.hdi.device import CancelCheck, Capabilities, Device, PrepareConfig, PreparedModel
from nnrt.hdi.graph import Graph, NodeSpec, Shape
from nnrt.hdi.memory_budget import MemoryBudget
from nnrt.hdi.reference.graph_checks import supported_operations
from nnrt.hdi.reference.kernel import create_kernel
from nnrt.hdi.reference.plan import ExecutionPlan
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na

log = logging.getLogger(__name__)

DRIVER_VERSION = "0.1.0"

# NodeType -> the activations it may apply (fused or its own); None: it has none.
SUPPORTED: dict[int, frozenset[int] | None] = {
    na.NODE_TYPE_ADD_FUSION: frozenset({ht.ACTIVATION_TYPE_NO_ACTIVATION,
                                        ht.ACTIVATION_TYPE_RELU}),
    na.NODE_TYPE_MUL_FUSION: frozenset({ht.ACTIVATION_TYPE_NO_ACTIVATION,
                                        ht.ACTIVATION_TYPE_RELU}),
    na.NODE_TYPE_MATMUL_FUSION: frozenset({ht.ACTIVATION_TYPE_NO_ACTIVATION,
                                           ht.ACTIVATION_TYPE_RELU}),
    na.NODE_TYPE_ACTIVATION: frozenset({ht.ACTIVATION_TYPE_RELU, ht.ACTIVATION_TYPE_SIGMOID}),
    na.NODE_TYPE_SOFTMAX: None,
    na.NODE_TYPE_RESHAPE: None,
}


def unsupported(node: NodeSpec, why: str) -> DriverError:
    return DriverError(NNRT_UNSUPPORTED_OP, f"node {node.index} ({node.name}): {why}")


def accept(node: NodeSpec) -> None:
    """Raise DriverError when this device cannot run `node`; return when it can."""
    if node.node_type not in SUPPORTED:
        raise unsupported(node, f"NodeType {node.node_type} is not one of the template "
                                f"driver's operators")
    if node.quant_type != ht.QUANT_TYPE_NONE:
        raise unsupported(node, "quantised nodes are not supported (float32 only)")
    activations = SUPPORTED[node.node_type]
    if activations is not None and node.attrs.activationType not in activations:
        raise unsupported(node, f"activation {node.attrs.activationType} is not supported")
    # The data (the first input, every output) is float32; Reshape's shape is an integer.
    for tensor in (node.inputs[:1] + node.outputs):
        if tensor.data_type != ht.DATA_TYPE_FLOAT32:
            raise unsupported(node, f"tensor {tensor.name!r} is not float32")
    create_kernel(node)  # the reference validates the node and its shapes (NNRT_INVALID_*)


class TemplatePreparedModel(PreparedModel):
    def __init__(self, graph: Graph, device: TemplateDevice) -> None:
        super().__init__(graph.inputs, graph.outputs)
        self.graph = graph
        self.device = device
        self.weights = sum(t.constant.nbytes for t in graph.tensors if t.is_constant)
        device.memory.reserve(self.weights, f"the weights of {graph.name!r}")
        try:
            self.plan = ExecutionPlan(graph)  # validates shapes and the run's memory
        except BaseException:
            device.memory.release(self.weights)
            raise
        self._closed = False

    def static_output_shapes(self) -> list[Shape] | None:
        return self.plan.output_shapes()

    def run(self, inputs: Sequence[np.ndarray], cancelled: CancelCheck) -> list[np.ndarray]:
        return self.plan.run(inputs, cancelled)

    def export_cache(self) -> list[bytes]:
        return [graph_cache.encode(self.graph, self.device.identity)]

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.device.memory.release(self.weights)


class TemplateDevice(Device):
    kind = "template"
    name = "nnrt-template"
    vendor = "example"
    version = DRIVER_VERSION
    device_type = ht.OTHER
    # What it does, nothing more: no float16 mode, no priority or performance mode; dynamic
    # input dimensions run (the plan infers shapes at each run); models cache.
    capabilities = Capabilities(dynamic_input=True, model_cache=True)

    def __init__(self, memory_bytes: int) -> None:
        self.memory = MemoryBudget(memory_bytes)
        log.info("template device: %d MiB of device memory", memory_bytes >> 20)

    @property
    def identity(self) -> str:
        """Who may read a model cache: this device, this driver version."""
        return f"{self.name} {self.vendor} {self.version}"

    def details(self) -> dict[str, str]:
        return {"device_memory": f"{self.memory.limit >> 20} MiB",
                "memory_used_bytes": str(self.memory.used)}

    def reserve_memory(self, nbytes: int, what: str) -> None:
        self.memory.reserve(nbytes, what)

    def release_memory(self, nbytes: int) -> None:
        self.memory.release(nbytes)

    def supported_operations(self, graph: Graph) -> list[bool | str]:
        return supported_operations(graph, accept)

    def prepare(self, graph: Graph, config: PrepareConfig) -> PreparedModel:
        for node in graph.nodes:
            accept(node)  # what GetSupportedOperation said no to is refused here
        return TemplatePreparedModel(graph, self)

    def prepare_from_cache(self, blobs: Sequence[bytes], config: PrepareConfig) -> PreparedModel:
        if len(blobs) != 1:
            raise DriverError(NNRT_INVALID_MODEL_CACHE, f"{len(blobs)} cache buffers, expected 1")
        return self.prepare(graph_cache.decode(blobs[0], self.identity), config)
