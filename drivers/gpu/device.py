"""The GPU device: the validated graph as OpenCL kernels on one OpenCL device.

`nnrt-driver gpu --cl-device gpu|any|P:D` picks the device (drivers/gpu/opencl.py); the
model becomes a `GpuPlan` (drivers/gpu/plan.py) of ops from drivers/gpu/ops. Name and
vendor are the OpenCL device's own; `nnrt devices` and the admin status show the platform,
device, driver version and memory (`details`).

Float16 mode (`IsFloat16PrecisionSupported` true on every OpenCL device): the graph is
rewritten as the CPU driver rewrites it (float32 tensors become float16, int8 and integer
tensors keep their types; hdi/reference/float16.py) and the float kernels store those tensors
as half with vload_half / vstore_half_rte, core OpenCL since 1.0: no cl_khr_fp16 needed.
Arithmetic and accumulation stay float32, rounded once per stored value (semantics.md).
Inputs and outputs stay float32 on the wire, converted on the host at the edges.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np

from nnrt.hdi.reference.graph_checks import supported_operations
from nnrt.hdi.reference.float16 import to_float16
from . import model_cache
from .kernel import create_op
from .opencl import BroughtPrograms, ClRuntime, choose_device
from .plan import GpuPlan
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.hdi import graph_cache
from nnrt.hdi.device import (CancelCheck, Capabilities, Device, PrepareConfig, PreparedModel,
                                StepTime)
from nnrt.common.errors import NNRT_INVALID_MODEL_CACHE, DriverError
from nnrt.hdi.graph import Graph, Shape

log = logging.getLogger(__name__)

DRIVER_VERSION = "0.1.0"


class GpuPreparedModel(PreparedModel):
    def __init__(self, graph: Graph, device: GpuDevice, config: PrepareConfig,
                 brought: BroughtPrograms | None = None) -> None:
        super().__init__(graph.inputs, graph.outputs)  # what the client sees: float32 or not
        self.graph = graph
        self.device = device
        # The programs its cache brought: this model's alone (drivers/gpu/opencl.py).
        self.brought = brought
        with self._programs():
            if config.enable_float16:
                self.plan = GpuPlan(to_float16(graph), device.runtime,
                                    f"model {graph.name!r} (float16)",
                                    [t.dtype for t in graph.outputs])
            else:
                self.plan = GpuPlan(graph, device.runtime, f"model {graph.name!r}")
        if brought is not None and not self.plan.dynamic:
            brought.forget_unused()  # every program it will ever ask for is loaded

    def _programs(self):
        return self.device.runtime.programs.brought_by(self.brought)

    def static_output_shapes(self) -> list[Shape] | None:
        return self.plan.output_shapes()

    def run(self, inputs: Sequence[np.ndarray], cancelled: CancelCheck) -> list[np.ndarray]:
        with self._programs():  # a new input shape may build programs
            return self.plan.run(inputs, cancelled)

    def run_profiled(self, inputs: Sequence[np.ndarray], cancelled: CancelCheck,
                     steps: list[StepTime]) -> list[np.ndarray]:
        """Each node's kernels timed by OpenCL profiling events and on the host."""
        with self._programs():
            return self.plan.run(inputs, cancelled, steps=steps)

    writes_into_outputs = True  # the device-to-host copy lands in the client's windows

    def run_into(self, inputs: Sequence[np.ndarray], targets: Sequence[np.ndarray],
                 cancelled: CancelCheck) -> None:
        with self._programs():
            self.plan.run(inputs, cancelled, targets)

    def export_cache(self) -> list[bytes]:
        programs = self.device.runtime.programs
        binaries = {key: programs.binary(key, self.brought) for key in sorted(self.plan.programs)}
        return [graph_cache.encode(self.graph, self.device.identity),
                model_cache.encode(binaries, self.device.identity)]

    def close(self) -> None:
        self.plan.close()


class GpuDevice(Device):
    kind = "gpu"
    version = DRIVER_VERSION
    device_type = ht.GPU
    capabilities = Capabilities(float16=True, dynamic_input=True, model_cache=True)

    def __init__(self, cl_device: str = "gpu", memory_limit_mb: int | None = None) -> None:
        found = choose_device(cl_device)
        self.runtime = ClRuntime(found, None if memory_limit_mb is None
                                 else memory_limit_mb << 20)
        self.name = found.device.name.strip()
        self.vendor = found.device.vendor.strip()
        log.info("OpenCL device %s; driver %s; %d MiB global memory (budget %d MiB)%s",
                 found.describe(), found.device.driver_version,
                 found.device.global_mem_size >> 20, self.runtime.memory.limit >> 20,
                 "; host-unified memory" if self.runtime.unified_memory else "")

    @property
    def identity(self) -> str:
        """What a model cache must have been written by to be read here."""
        return f"nnrt-gpu {self.version} | {self.runtime.identity}"

    def details(self) -> dict[str, str]:
        return {**self.runtime.details(), **self.runtime.status()}

    def supported_operations(self, graph: Graph) -> list[bool | str]:
        return supported_operations(graph, create_op)

    def prepare(self, graph: Graph, config: PrepareConfig) -> PreparedModel:
        return GpuPreparedModel(graph, self, config)

    def prepare_from_cache(self, blobs: Sequence[bytes], config: PrepareConfig) -> PreparedModel:
        if len(blobs) != 2:
            raise DriverError(NNRT_INVALID_MODEL_CACHE,
                              f"{len(blobs)} cache buffers, expected 2 (graph, programs)")
        graph = graph_cache.decode(blobs[0], self.identity)
        brought = BroughtPrograms(model_cache.decode(blobs[1], self.identity))
        return GpuPreparedModel(graph, self, config, brought)

    def close(self) -> None:
        self.runtime.close()
