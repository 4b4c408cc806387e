"""The accelerator simulator: an NPU in its own process, `nnrt-driver accel [--spec SPEC]`.

What it computes (drivers/accel/support.py): int8 and float16 natively with the CPU
driver's reference kernels; a float32 model only in relaxed precision (EnableFloat16).
How long it takes (drivers/accel/cost.py): every node has a simulated duration from the
device specification (drivers/accel/spec.py) and the performance mode's clock; a run holds
the one device queue (drivers/accel/scheduler.py) node by node, by priority, and completes
when its simulated time has passed. What it holds: device memory is a hard limit —
AllocateBuffer buffers and prepared weights count against it. Offline models
(drivers/accel/offline.py) are the simulator's own compiled binaries.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .. import DeviceUnavailable
from nnrt.hdi.reference import blas
from nnrt.hdi.reference.plan import ExecutionPlan
from nnrt.hdi.memory_budget import MemoryBudget
from nnrt.hdi.reference.graph_checks import supported_operations
from . import support
from .cost import graph_costs
from .scheduler import DeviceQueue
from .spec import AccelSpec, SpecError, load_spec
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.hdi import graph_cache
from nnrt.hdi.device import (CancelCheck, Capabilities, Device, PrepareConfig, PreparedModel,
                                StepTime)
from nnrt.common.errors import NNRT_INVALID_MODEL, NNRT_INVALID_MODEL_CACHE, DriverError
from nnrt.hdi.graph import DYNAMIC, Graph, Shape, TensorSpec

log = logging.getLogger(__name__)

DRIVER_VERSION = "0.1.0"
SWITCH_INTERVAL = 0.0005  # seconds (see AccelDevice.__init__)
HOST_BLAS_THREADS = 1  # see AccelDevice.__init__
MAX_COST_SHAPES = 16  # distinct input shapes whose node durations a dynamic model keeps


class AccelPreparedModel(PreparedModel):
    """A model on the NPU: its device graph (float16 / int8) planned once, run through the
    device queue with each node's simulated duration."""

    def __init__(self, inputs: Sequence[TensorSpec], outputs: Sequence[TensorSpec],
                 device_graph: Graph, config: PrepareConfig, device: AccelDevice,
                 cache_graph: Graph | None) -> None:
        super().__init__(inputs, outputs)  # what the client sees: float32 stays float32
        self.device = device
        self.cache_graph = cache_graph  # what ExportModelCache writes (None: offline model)
        self.config = config
        self.weights = sum(t.constant.nbytes for t in device_graph.tensors if t.is_constant)
        device.memory.reserve(self.weights, f"prepared weights of {device_graph.name!r}")
        try:
            self.plan = ExecutionPlan(device_graph)
        except BaseException:
            device.memory.release(self.weights)
            raise
        self.input_casts = [None if s.dtype == p.dtype else p.dtype
                            for s, p in zip(self.inputs, device_graph.inputs)]
        self.output_casts = [None if s.dtype == p.dtype else s.dtype
                             for s, p in zip(self.outputs, device_graph.outputs)]
        self._durations: dict[tuple[Shape, ...], list[float]] = {}
        if self.plan.shapes is not None and not self.plan.unsized:
            self._durations[()] = self._node_durations(self.plan.shapes)
        self._closed = False

    def _node_durations(self, shapes: dict[int, Shape]) -> list[float]:
        # A tensor that only the run's own computation sizes (ExecutionPlan.sizes_at) is
        # costed as empty: its node's launches alone.
        shapes = {i: tuple(0 if d == DYNAMIC else d for d in s) for i, s in shapes.items()}
        costs = graph_costs(self.plan.graph, shapes, self.device.spec)
        return [c.seconds(self.device.spec, self.config.mode) for c in costs]

    def durations(self, inputs: Sequence[np.ndarray]) -> list[float]:
        """Each node's simulated seconds for these inputs (cached per input shape when the
        shapes size every tensor; sized by the run's values at each run otherwise)."""
        if not self.plan.dynamic and not self.plan.unsized:
            return self._durations[()]
        key = tuple(tuple(a.shape) for a in inputs)
        found = self._durations.get(key)
        if found is None:
            shapes = self.plan.shapes if not self.plan.dynamic else \
                self.plan.infer(dict(zip(self.plan.input_ids, key)))
            if any(DYNAMIC in s for s in shapes.values()):
                return self._node_durations(self.plan.sizes_at(inputs))
            found = self._node_durations(shapes)
            if len(self._durations) >= MAX_COST_SHAPES:
                self._durations.pop(next(iter(self._durations)))
            self._durations[key] = found
        return found

    def predicted_seconds(self, inputs: Sequence[np.ndarray] | None = None) -> float:
        """The run's simulated duration on an idle device (the cost model's prediction)."""
        return sum(self._durations[()] if inputs is None else self.durations(inputs))

    def static_output_shapes(self) -> list[Shape] | None:
        return self.plan.output_shapes()

    def run(self, inputs: Sequence[np.ndarray], cancelled: CancelCheck,
            steps: list[StepTime] | None = None) -> list[np.ndarray]:
        inputs = [x if c is None else x.astype(c) for x, c in zip(inputs, self.input_casts)]
        queue = self.device.queue
        durations = self.durations(inputs)
        run = queue.admit(self.config.priority, self.config.mode, durations)
        try:
            if steps is None:
                outputs = self.plan.run(inputs, cancelled, around=run.node)
            else:  # each node's time on the device, its simulated one, the host's inside
                outputs = self.plan.run(inputs, cancelled,
                                        around=self.plan.timed(steps, run.node, durations))
        finally:
            queue.finish(run)
        return [y if c is None else y.astype(c) for y, c in zip(outputs, self.output_casts)]

    def run_profiled(self, inputs: Sequence[np.ndarray], cancelled: CancelCheck,
                     steps: list[StepTime]) -> list[np.ndarray]:
        return self.run(inputs, cancelled, steps)

    def export_cache(self) -> list[bytes]:
        if self.cache_graph is None:
            raise DriverError(NNRT_INVALID_MODEL, "an offline model has no model cache")
        return [graph_cache.encode(self.cache_graph, self.device.identity)]

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.device.memory.release(self.weights)


class AccelDevice(Device):
    kind = "accel"
    name = "nnrt-npu-sim"
    vendor = "nnrt"
    version = DRIVER_VERSION
    device_type = ht.ACCELERATOR
    capabilities = Capabilities(float16=True, performance_mode=True, priority=True,
                                dynamic_input=True, model_cache=True)

    def __init__(self, spec_path: str | Path | None = None) -> None:
        try:
            self.spec: AccelSpec = load_spec(spec_path)
        except (SpecError, OSError) as exc:
            raise DeviceUnavailable(f"device specification: {exc}") from exc
        self.memory = MemoryBudget(self.spec.device_memory_bytes)
        self.queue = DeviceQueue(self.spec)
        # The device changes hands between runs' threads at node boundaries: with Python's
        # default 5 ms GIL switch interval a waking HIGH run could wait that long behind a
        # thread running Python code, more than a node. 0.5 ms keeps the hand-over prompt.
        sys.setswitchinterval(min(sys.getswitchinterval(), SWITCH_INTERVAL))
        # The host computes a node and then sleeps out its simulated time: it only has to be
        # faster than the chip. On one BLAS thread it is (0.5 ms for a [32, 512] x [512, 512]
        # node against the default chip's 2.1 ms at HIGH), and it stays so when the machine is
        # busy: OpenBLAS's threads competing with other work for the cores ran the same node
        # 5x slower, late against the cost model. Nor does a simulator take every core.
        self.host_blas_threads = blas.limit_threads(HOST_BLAS_THREADS)
        log.info("NPU simulator, spec %s (%s); the host computes on %s BLAS thread(s)",
                 self.spec.identity, spec_path or "the built-in default",
                 self.host_blas_threads or "numpy's own")

    @property
    def identity(self) -> str:
        """What a model cache must have been written by to be read here."""
        return f"{self.name} {self.version} | spec {self.spec.identity}"

    def status(self) -> int:
        return ht.BUSY if self.queue.busy else ht.AVAILABLE

    def details(self) -> dict[str, str]:
        return {**self.spec.details(), "memory_used_bytes": str(self.memory.used),
                "memory_peak_bytes": str(self.memory.peak),
                "host_blas_threads": str(self.host_blas_threads or "unknown"),
                **self.queue.status()}

    def reserve_memory(self, nbytes: int, what: str) -> None:
        self.memory.reserve(nbytes, what)

    def release_memory(self, nbytes: int) -> None:
        self.memory.release(nbytes)

    def supported_operations(self, graph: Graph) -> list[bool | str]:
        return supported_operations(graph, support.accepts)

    def prepare(self, graph: Graph, config: PrepareConfig) -> PreparedModel:
        device_graph = support.device_graph(graph, config.enable_float16)
        return AccelPreparedModel(graph.inputs, graph.outputs, device_graph, config, self, graph)

    def prepare_from_cache(self, blobs: Sequence[bytes], config: PrepareConfig) -> PreparedModel:
        if len(blobs) != 1:
            raise DriverError(NNRT_INVALID_MODEL_CACHE, f"{len(blobs)} cache buffers, expected 1")
        return self.prepare(graph_cache.decode(blobs[0], self.identity), config)

    def prepare_offline(self, blobs: Sequence[bytes], config: PrepareConfig) -> PreparedModel:
        from .offline import load_offline

        if len(blobs) != 1:
            raise DriverError(NNRT_INVALID_MODEL, f"{len(blobs)} offline models, expected 1")
        model = load_offline(blobs[0], self.spec)
        if config.enable_float16 != model.enable_float16:
            log.info("offline model compiled %s float16 mode: the binary decides, not the "
                     "compilation's EnableFloat16", "in" if model.enable_float16 else "without")
        # inputs/outputs: what the client exchanges (float32 stays float32 on the wire)
        return AccelPreparedModel(model.inputs, model.outputs, model.graph, config, self, None)
