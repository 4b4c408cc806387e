"""The CPU device: numpy kernels, planned once per prepared model."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from nnrt.drivers.cpu import ops  # noqa: F401  (every kernel loaded before the driver serves)
from nnrt.drivers.cpu.float16 import to_float16
from nnrt.drivers.cpu.kernel import create_kernel
from nnrt.drivers.cpu.plan import ExecutionPlan
from nnrt.drivers.reference import supported_operations
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.server import graph_cache
from nnrt.server.device import CancelCheck, Capabilities, Device, PrepareConfig, PreparedModel
from nnrt.server.errors import NNRT_INVALID_MODEL_CACHE, DriverError
from nnrt.server.graph import Graph, Shape


class CpuPreparedModel(PreparedModel):
    def __init__(self, graph: Graph, config: PrepareConfig, identity: str) -> None:
        super().__init__(graph.inputs, graph.outputs)  # what the client sees, float32 or not
        self.graph = graph
        self.identity = identity
        self.plan = ExecutionPlan(to_float16(graph) if config.enable_float16 else graph)
        # Where the plan computes in another dtype than the wire carries (float16 mode).
        self.input_casts = [None if s.dtype == p.dtype else p.dtype
                            for s, p in zip(self.inputs, self.plan.graph.inputs)]
        self.output_casts = [None if s.dtype == p.dtype else s.dtype
                             for s, p in zip(self.outputs, self.plan.graph.outputs)]

    def static_output_shapes(self) -> list[Shape] | None:
        return self.plan.output_shapes()

    def run(self, inputs: Sequence[np.ndarray], cancelled: CancelCheck) -> list[np.ndarray]:
        inputs = [x if c is None else x.astype(c) for x, c in zip(inputs, self.input_casts)]
        outputs = self.plan.run(inputs, cancelled)
        return [y if c is None else y.astype(c) for y, c in zip(outputs, self.output_casts)]

    def export_cache(self) -> list[bytes]:
        # The validated graph; the precision mode comes from the config of the import.
        return [graph_cache.encode(self.graph, self.identity)]


class CpuDevice(Device):
    kind = "cpu"
    name = "nnrt-cpu"
    vendor = "nnrt"
    version = "0.1.0"
    device_type = ht.CPU
    capabilities = Capabilities(float16=True, dynamic_input=True, model_cache=True)

    @property
    def identity(self) -> str:
        """What a model cache blob must have been written by to be read here."""
        return f"{self.name} {self.vendor} {self.version}"

    def supported_operations(self, graph: Graph) -> list[bool]:
        return supported_operations(graph, create_kernel)

    def prepare(self, graph: Graph, config: PrepareConfig) -> PreparedModel:
        return CpuPreparedModel(graph, config, self.identity)

    def prepare_from_cache(self, blobs: Sequence[bytes], config: PrepareConfig) -> PreparedModel:
        if len(blobs) != 1:
            raise DriverError(NNRT_INVALID_MODEL_CACHE, f"{len(blobs)} cache buffers, expected 1")
        return CpuPreparedModel(graph_cache.decode(blobs[0], self.identity), config, self.identity)
