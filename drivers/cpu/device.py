"""The CPU device: a plan per prepared model, computed by one of two engines.

* `ort` (the default): the graph is lowered to ONNX and run by onnxruntime
  (`nnrt.drivers.cpu.ort`); nodes that cannot be lowered exactly stay on numpy.
* `numpy`: every node on its numpy kernel (`nnrt.hdi.reference.ops`), the readable reference
  of our semantics. Chosen automatically, and said once in the log, when onnxruntime cannot
  be imported.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Sequence

import numpy as np

from nnrt.hdi.reference import ops  # noqa: F401  (every kernel loaded before the driver serves)
from nnrt.hdi.reference.float16 import to_float16
from nnrt.hdi.reference.kernel import Kernel, create_kernel
from nnrt.hdi.reference.plan import ExecutionPlan, StepScope, one_unit_per_node
from nnrt.hdi.reference.graph_checks import supported_operations
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.hdi import graph_cache, sealed_blob
from nnrt.hdi.device import (BoundRun, CancelCheck, Capabilities, Device, PrepareConfig,
                                PreparedModel, StepTime)
from nnrt.common.cpus import usable_cores
from nnrt.common.errors import NNRT_INVALID_MODEL_CACHE, NNRT_TIME_OUT, DriverError
from nnrt.hdi.graph import Graph, Shape
from nnrt.hdi.cores import granted_cores

log = logging.getLogger(__name__)

ENGINES = ("ort", "numpy")
ORT_CACHE_MAGIC = b"NNRTORTM"  # nnrt.drivers.cpu.ort.engine.MAGIC, known without onnxruntime
# Outputs smaller than this are copied from onnxruntime's result into the client's window:
# binding them (IOBinding) costs more than the copy (~6 µs against ~1 µs at 64 KiB).
_BIND_OUTPUTS_FROM_BYTES = 64 << 10


_SPIN_WORDS = {"auto": "spin on after a run while the CPUs are spare",
               "on": "spin on after a run", "off": "sleep between runs"}


def onnxruntime_importable() -> bool:
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return False
    return True


class CpuPreparedModel(PreparedModel):
    def __init__(self, graph: Graph, config: PrepareConfig, device: CpuDevice,
                 ort_blob: bytes | None = None) -> None:
        super().__init__(graph.inputs, graph.outputs)  # what the client sees, float32 or not
        self.graph = graph
        self.device = device
        self.float16 = config.enable_float16
        self.partition = None
        partitioner = one_unit_per_node
        if device.engine == "ort":
            partitioner = self._ort_partitioner(ort_blob)
        self.plan = ExecutionPlan(to_float16(graph) if config.enable_float16 else graph,
                                  partitioner=partitioner)
        # Where the plan computes in another dtype than the wire carries (float16 mode).
        self.input_casts = [None if s.dtype == p.dtype else p.dtype
                            for s, p in zip(self.inputs, self.plan.graph.inputs)]
        self.output_casts = [None if s.dtype == p.dtype else s.dtype
                             for s, p in zip(self.outputs, self.plan.graph.outputs)]
        self.segment = None if self.partition is None else self.partition.single_segment
        # The session's output of each model output, when it writes every one (a model
        # output may also be a model input, a constant, or the same tensor twice).
        self.output_positions: list[int] | None = None
        self.input_positions: list[int] = []
        if self.segment is not None and not any(self.input_casts + self.output_casts):
            ids = [t.index for t in self.plan.graph.outputs]
            if len(set(ids)) == len(ids) and set(ids) <= set(self.segment.output_ids):
                self.output_positions = [self.segment.output_ids.index(i) for i in ids]
            model_inputs = [t.index for t in self.plan.graph.inputs]
            if set(self.segment.input_ids) <= set(model_inputs):
                # the model input each session input is (in the session's order)
                self.input_positions = [model_inputs.index(i) for i in self.segment.input_ids]
            else:
                self.output_positions = None
        self.writes_into_outputs = self.output_positions is not None
        # Decided once: the outputs' shapes are static when the model writes into them.
        static = self.plan.output_shapes() or []
        self.bind_outputs = sum(math.prod(shape) * spec.dtype.itemsize for shape, spec
                                in zip(static, self.outputs)) >= _BIND_OUTPUTS_FROM_BYTES
        self.node_counts = (0, len(graph.nodes)) if self.partition is None else \
            (self.partition.ort_nodes, self.partition.numpy_nodes)
        device.count_nodes(self.node_counts, +1)

    def _ort_partitioner(self, blob: bytes | None):
        from nnrt.drivers.cpu.ort import engine

        def ort_units(graph: Graph, kernels: dict[int, Kernel]):
            if blob is not None:
                self.partition = engine.restore(blob, self.device.identity, graph, kernels,
                                                self.float16)
                if self.partition is not None:
                    log.info("prepared %r from its optimised-model cache: %s", graph.name,
                             self.partition.describe())
                    return engine.units_with_tensors(self.partition, graph)
                log.info("the optimised-model cache of %r was made for the other precision "
                         "mode: lowered again", graph.name)
            self.partition = engine.partition(graph, kernels)
            log.info("prepared %r: %s", graph.name, self.partition.describe())
            return engine.units_with_tensors(self.partition, graph)

        return ort_units

    def static_output_shapes(self) -> list[Shape] | None:
        return self.plan.output_shapes()

    def run(self, inputs: Sequence[np.ndarray], cancelled: CancelCheck,
            around: StepScope | None = None) -> list[np.ndarray]:
        inputs = [x if c is None else x.astype(c) for x, c in zip(inputs, self.input_casts)]
        if self.partition is not None and granted_cores() == 1:
            from nnrt.drivers.cpu.ort import engine

            with engine.narrow_runs():
                outputs = self.plan.run(inputs, cancelled, around)
        else:
            outputs = self.plan.run(inputs, cancelled, around)
        return [y if c is None else y.astype(c) for y, c in zip(outputs, self.output_casts)]

    def run_profiled(self, inputs: Sequence[np.ndarray], cancelled: CancelCheck,
                     steps: list[StepTime]) -> list[np.ndarray]:
        """Each step timed: a node on the numpy engine, a segment on onnxruntime."""
        return self.run(inputs, cancelled, self.plan.timed(steps))

    def run_into(self, inputs: Sequence[np.ndarray], targets: Sequence[np.ndarray],
                 cancelled: CancelCheck) -> None:
        """The whole model is one onnxruntime session: its outputs land in `targets`."""
        if cancelled():
            raise DriverError(NNRT_TIME_OUT, "run abandoned: its caller gave up")
        positions = self.output_positions
        inputs = [inputs[p] for p in self.input_positions]
        narrow = granted_cores() == 1
        if self.bind_outputs:
            self.segment.run_into(inputs, self._by_position(targets), narrow)
            return
        results = self.segment.execute(inputs, narrow)
        for position, target in zip(positions, targets):
            np.copyto(target, results[position], casting="no")

    def _by_position(self, targets: Sequence[np.ndarray]) -> list[np.ndarray | None]:
        """The model's output windows in the session's output order (None: a session
        output that is no model output)."""
        by_position: list[np.ndarray | None] = [None] * len(self.segment.output_ids)
        for position, target in zip(self.output_positions, targets):
            by_position[position] = target
        return by_position

    def bind(self, inputs: Sequence[np.ndarray],
             targets: Sequence[np.ndarray]) -> BoundRun | None:
        """The single session's IOBinding of these windows, kept (engine.SegmentBinding):
        a run then costs onnxruntime's own time alone, whatever the outputs' size."""
        if not self.writes_into_outputs or \
                not all(a.flags.c_contiguous for a in (*inputs, *targets)):
            return None
        binding = self.segment.bind([inputs[p] for p in self.input_positions],
                                    self._by_position(targets))

        def run(cancelled: CancelCheck) -> None:
            if cancelled():
                raise DriverError(NNRT_TIME_OUT, "run abandoned: its caller gave up")
            binding.run(granted_cores() == 1)

        return run

    def export_cache(self) -> list[bytes]:
        # The validated graph (the precision mode comes from the config of the import), and
        # with the ort engine the optimised onnxruntime models.
        blobs = [graph_cache.encode(self.graph, self.device.identity)]
        if self.partition is not None and self.partition.segments:
            from nnrt.drivers.cpu.ort import engine

            blobs.append(engine.export(self.partition, self.device.identity, self.float16))
        return blobs

    def close(self) -> None:
        self.device.count_nodes(self.node_counts, -1)


class CpuDevice(Device):
    kind = "cpu"
    name = "nnrt-cpu"
    vendor = "nnrt"
    version = "0.1.0"
    device_type = ht.CPU
    capabilities = Capabilities(float16=True, dynamic_input=True, model_cache=True)

    def __init__(self, engine: str = "ort", threads: int | None = None,
                 int8_kernels: str | None = None, ort_spin: str = "auto") -> None:
        if engine not in ENGINES:
            raise ValueError(f"engine {engine!r} is not one of {', '.join(ENGINES)}")
        if engine == "ort" and not onnxruntime_importable():
            log.warning("onnxruntime cannot be imported: the CPU driver computes with its "
                        "numpy kernels (--engine numpy)")
            engine = "numpy"
        self.engine = engine
        self.threads = None
        self.int8_kernels = None
        self.ort_spin = ort_spin if engine == "ort" else "off"
        if engine == "ort":
            from nnrt.drivers.cpu.ort import engine as ort_engine
            from nnrt.drivers.cpu.ort import int8_kernels as ort_int8
            from nnrt.drivers.cpu.ort import pool_spinning as ort_pool_spinning

            self.threads = ort_engine.configure_threads(threads)
            ort_pool_spinning.configure(ort_spin)
            self.int8_kernels = ort_int8.configure(int8_kernels)
            # One run per core at once (the host queues the rest, sessions in turn); a run
            # alone has them all (`--threads`), runs that share them one thread each
            # (hdi/cores.py `granted_cores`): oversubscribed cores made 8 clients
            # slower than one.
            self.concurrent_runs = usable_cores()
        self._lock = threading.Lock()
        self._nodes = [0, 0]  # nodes of live prepared models on onnxruntime, on numpy
        log.info("CPU engine: %s%s", engine,
                 f" ({self.threads} intra-op threads); onnxruntime's pool threads "
                 f"{_SPIN_WORDS[ort_spin]} (--ort-spin {ort_spin})"
                 if self.threads else "")

    @property
    def identity(self) -> str:
        """What a model cache blob must have been written by to be read here."""
        return f"{self.name} {self.vendor} {self.version}"

    def count_nodes(self, counts: tuple[int, int], sign: int) -> None:
        with self._lock:
            self._nodes[0] += sign * counts[0]
            self._nodes[1] += sign * counts[1]

    def details(self) -> dict[str, str]:
        with self._lock:
            ort_nodes, numpy_nodes = self._nodes
        details = {"engine": self.engine}
        if self.threads:
            details["threads"] = str(self.threads)
            details["concurrent_runs"] = str(self.concurrent_runs)
            details["ort_spin"] = self.ort_spin
            details["nodes_onnxruntime"] = str(ort_nodes)
            details["int8_kernels"] = self.int8_kernels.describe()
            from nnrt.drivers.cpu.ort.shared_sessions import sessions_held
            details["ort_sessions"] = str(sessions_held())  # shared by models alike
        details["nodes_numpy"] = str(numpy_nodes)
        return details

    def supported_operations(self, graph: Graph) -> list[bool | str]:
        return supported_operations(graph, create_kernel)

    def prepare(self, graph: Graph, config: PrepareConfig) -> PreparedModel:
        return CpuPreparedModel(graph, config, self)

    def prepare_from_cache(self, blobs: Sequence[bytes], config: PrepareConfig) -> PreparedModel:
        if len(blobs) not in (1, 2):
            raise DriverError(NNRT_INVALID_MODEL_CACHE,
                              f"{len(blobs)} cache buffers, expected 1 or 2")
        graph = graph_cache.decode(blobs[0], self.identity)
        # A numpy engine reads the graph alone; an ort engine given a graph alone (a cache
        # of the numpy engine) lowers and optimises it again.
        ort_blob = blobs[1] if len(blobs) == 2 else None
        if ort_blob is not None and not sealed_blob.has_magic(ort_blob, ORT_CACHE_MAGIC):
            raise DriverError(NNRT_INVALID_MODEL_CACHE, "model cache refused: the second blob "
                                                        "is not an onnxruntime model cache")
        if self.engine != "ort":
            ort_blob = None
        return CpuPreparedModel(graph, config, self, ort_blob)
