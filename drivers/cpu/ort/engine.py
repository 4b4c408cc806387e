"""The onnxruntime engine of the CPU driver: partitioning, sessions, the optimised-model cache.

At prepare the validated graph is walked in execution order and each node is lowered into
the segment being built (`lowering.py`, `ops/lower_*.py`); a node that cannot be lowered
exactly closes the segment and runs on its numpy kernel. Each segment becomes one
onnxruntime `InferenceSession` over an ONNX model whose inputs are the HDI tensors it reads
from outside and whose outputs are those read after it (or model outputs). A graph entirely
lowerable is one session; the split is logged and counted (`Partition.describe`).

Session decisions (docs/cpu-driver.md, "Two engines"):

* Threads chosen from the load: a run alone on the device computes with `--threads`
  intra-op threads (default: the cores this process may use); runs that share the cores
  (server/run_scheduler.py admits one per core then) compute on one thread each, through a
  second, single-threaded session of the same optimised model made at the first such run.
  A segment whose runs alone take under a millisecond also times both sessions over its
  first runs and keeps the faster (`ThreadWidth`): small graphs lose more to synchronising
  threads than they gain.
  Every session has its own pool, whose threads spin between a run's parallel sections
  (the run was granted every core) and, by default, on after it while the CPUs are spare
  (`pool_spinning.py`, `--ort-spin auto|on|off`). Sessions run sequentially inside (no
  inter-op pool).
* Graph optimisations at ORT_ENABLE_ALL. The optimised model is what the model cache keeps
  (`export`): a cache read back loads it with optimisations off, so neither lowering nor
  optimisation is repeated. Its identity includes the onnxruntime version and the CPU, since
  layout optimisations choose instructions.
* Inputs go to onnxruntime as the shared-memory views they are (no copy); outputs bound to
  the client's output windows where the host offers them (`run_into`), and the binding
  kept for a request that comes again (`bind`, `SegmentBinding`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import struct
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

import numpy as np
import onnxruntime as ort
from onnx import helper

from nnrt.common.cpus import usable_cores
from nnrt.common.errors import NNRT_FAILED, NNRT_INVALID_MODEL_CACHE, DriverError
from nnrt.hdi.graph import DYNAMIC, Graph, TensorSpec
from nnrt.hdi.sealed_blob import refusal, seal_keyed, unseal_keyed
from nnrt.hdi.reference.kernel import Kernel
from nnrt.hdi.reference.quantized import QuantizedKernel
from . import ops  # noqa: F401  (every lowering registered)
from . import int8_kernels, pool_spinning
from .quantized import lower_quantized, unsigned_activations
from .shared_sessions import SharedSession, shared_session
from .trusted_model import check_own_model
from .lowering import IR_VERSION, LOWERINGS, OPSET, NodeEmitter, NotLowerable, SegmentGraph, \
    onnx_dtype, value_name

log = logging.getLogger(__name__)

# ------------------------------------------------------------------ the process's thread pool

_pool_lock = threading.Lock()
_pool_threads: int | None = None  # intra-op threads of a run that has the cores to itself


def configure_threads(threads: int | None) -> int:
    """The intra-op threads of a run alone on the device (default: the usable cores), fixed
    by the first call."""
    global _pool_threads
    with _pool_lock:
        if _pool_threads is None:
            _pool_threads = max(1, threads or usable_cores())
        elif threads and threads != _pool_threads:
            log.warning("onnxruntime sessions already have %d intra-op threads; %d ignored",
                        _pool_threads, threads)
        return _pool_threads


_narrow: ContextVar[bool] = ContextVar("nnrt_ort_narrow", default=False)


@contextmanager
def narrow_runs() -> Iterator[None]:
    """Within the block, segments run on their single-threaded sessions (a run that shares
    the cores with others)."""
    token = _narrow.set(True)
    try:
        yield
    finally:
        _narrow.reset(token)


def _session_options(optimize: bool, threads: int) -> ort.SessionOptions:
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    # A run with several threads is given them only when its client is the only active one
    # (server/run_scheduler.py): its pool threads spin between its parallel sections (waking
    # them at each section made two threads no faster than one on a VM whose idle vCPUs
    # halt: ResNet 96, 1.08 ms against 0.57 spinning), and on after it unless --ort-spin
    # off (pool_spinning.py says when a run may take the pool at all).
    # Runs that share the cores use the single-threaded sessions, which have no pool.
    so.add_session_config_entry("session.intra_op.allow_spinning", "1" if threads > 1 else "0")
    so.add_session_config_entry("session.force_spinning_stop",
                                "0" if pool_spinning.spins_on() else "1")
    so.add_session_config_entry("session.inter_op.allow_spinning", "0")  # sequential: no pool
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_ENABLE_ALL if optimize
                                   else ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    so.log_severity_level = 4  # fatal only: a failing run is logged by the driver, once
    if not int8_kernels.in_force().unsigned_activations:
        # int8 QDQ pairs fused as int8 (S8S8 kernels): onnxruntime's default on x86-64
        # rewrites them to uint8 (U8S8), which saturates without VNNI (int8_kernels.py).
        so.add_session_config_entry("session.qdqisint8allowed", "1")
    return so


def _session(model: bytes, so: ort.SessionOptions) -> ort.InferenceSession:
    # QDQ propagation (onnxruntime 1.32) rebuilds a QuantizeLinear of opset 21 with a zero
    # point of the wrong type and then refuses the graph; moving DequantizeLinear past a
    # Reshape gains nothing on the paths we lower.
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"],
                                disabled_optimizers=["QDQPropagationTransformer"])


def _shared(model: bytes, optimize: bool, threads: int) -> SharedSession:
    """The session of `model` with `threads` intra-op threads, shared with every segment of
    the same model made under the same settings (shared_sessions.py)."""
    def make(data: bytes, optimized_path: str | None) -> ort.InferenceSession:
        so = _session_options(optimize, threads)
        if optimized_path is not None:  # what onnxruntime makes of it, for the model cache
            so.optimized_model_filepath = optimized_path
        return _session(data, so)

    options = (threads, pool_spinning.spins_on(), int8_kernels.in_force().unsigned_activations)
    return shared_session(model, optimize, options, make)


# ------------------------------------------------------------------ segments

TRY_NARROW_BELOW_S = 0.001  # a segment whose wide runs take longer keeps its threads


class ThreadWidth:
    """Whether a run that may use every core computes faster on one thread. A small graph
    loses more to synchronising onnxruntime's threads at each operator than it gains (the
    benchmark's LSTM: 0.19 ms on two threads, 0.16 on one, onnxruntime in process alike).
    The first runs that may go wide measure both: two on the wide session (the second
    timed: a segment slower than TRY_NARROW_BELOW_S keeps its threads, and never makes a
    narrow session — a second copy of the prepacked weights — for this), one on the narrow
    session (made then, untimed), then SAMPLES of each, alternating; the faster median
    stays chosen."""

    SAMPLES = 5

    def __init__(self, threads: int) -> None:
        self.narrow: bool | None = True if threads == 1 else None  # None: still measuring
        self._runs = 0
        self._times: dict[bool, list[float]] = {False: [], True: []}
        self._lock = threading.Lock()

    def pick(self) -> tuple[bool, bool]:
        """(narrow, timed) for a run allowed every core."""
        if self.narrow is not None:
            return self.narrow, False
        with self._lock:
            n = self._runs
            self._runs += 1
        if n < 2:
            return False, n == 1
        if n == 2:
            return True, False
        return n % 2 == 0, True

    def record(self, narrow: bool, seconds: float) -> None:
        with self._lock:
            if self.narrow is not None:
                return
            times = self._times[narrow]
            times.append(seconds)
            if not narrow and len(times) == 1 and seconds >= TRY_NARROW_BELOW_S:
                self.narrow = False
            elif all(len(t) >= self.SAMPLES for t in self._times.values()):
                self.narrow = bool(np.median(self._times[True]) < np.median(self._times[False]))
                log.debug("runs alone compute on %s (median %.0f µs on one thread, %.0f on "
                          "all)", "one thread" if self.narrow else "all threads",
                          np.median(self._times[True]) * 1e6,
                          np.median(self._times[False]) * 1e6)


class OrtSegment:
    """Consecutive lowered nodes run as onnxruntime sessions: a wide one (the intra-op
    threads of a run alone on the device) and, made at the first run that shares the cores
    with others or when one thread computes it faster (`ThreadWidth`), a narrow one (one
    thread: the caller's); `execute(..., narrow)` picks."""

    def __init__(self, model: bytes, node_indices: Sequence[int], input_ids: Sequence[int],
                 output_ids: Sequence[int], *, optimized: bool) -> None:
        self.node_indices = tuple(node_indices)
        self.input_ids = tuple(input_ids)
        self.output_ids = tuple(output_ids)
        self.label = (f"onnxruntime segment of {len(self.node_indices)} node(s) "
                      f"[{self.node_indices[0]}..{self.node_indices[-1]}]")
        self.input_names = [value_name(i) for i in self.input_ids]
        self.output_names = [value_name(i) for i in self.output_ids]
        self.threads = configure_threads(None)
        # the model prepared again (another client's compilation) runs on the same session
        self._wide = _shared(model, not optimized, self.threads)
        self.session = self._wide.session
        self.optimized_model = self._wide.optimized_model  # what the model cache keeps
        self._narrow_shared: SharedSession | None = None
        self._narrow: ort.InferenceSession | None = self.session if self.threads == 1 else None
        self._narrow_lock = threading.Lock()
        self.width = ThreadWidth(self.threads)

    def _narrow_session(self) -> ort.InferenceSession:
        if self._narrow is None:
            with self._narrow_lock:
                if self._narrow is None:  # from the optimised model: nothing to optimise
                    self._narrow_shared = _shared(self.optimized_model, False, 1)
                    self._narrow = self._narrow_shared.session
        return self._narrow

    def pick(self, narrow: bool) -> tuple[ort.InferenceSession, bool, bool]:
        """(session, narrow, timed) of a run: narrow when it shares the cores, else as
        `width` chose (timed while it measures)."""
        timed = False
        if not narrow:
            narrow, timed = self.width.pick()
            if not narrow and self.threads > 1:  # asked only where the pool would compute
                if pool_spinning.may_go_wide(self.threads):
                    pool_spinning.went_wide(self.session, self.threads)
                else:  # the pool would spin on a CPU another task needs
                    narrow, timed = True, False
        return (self._narrow_session() if narrow else self.session), narrow, timed

    def execute(self, inputs: Sequence[np.ndarray],
                narrow: bool | None = None) -> list[np.ndarray]:
        """The outputs; `narrow` None: as `narrow_runs` says for this run."""
        session, narrow, timed = self.pick(_narrow.get() if narrow is None else narrow)
        started = time.perf_counter()
        try:
            outputs = session.run(self.output_names, dict(zip(self.input_names, inputs)))
        except Exception as exc:
            raise self.fail(exc) from None
        if timed:
            self.width.record(narrow, time.perf_counter() - started)
        return outputs

    def run_into(self, inputs: Sequence[np.ndarray],
                 targets: Sequence[np.ndarray | None], narrow: bool = False) -> None:
        """Outputs written by onnxruntime straight into `targets` (contiguous, shaped; per
        session output, None: an output nobody reads, left to onnxruntime)."""
        inputs = [np.ascontiguousarray(array) for array in inputs]  # alive for the run
        self.bind(inputs, targets).run(narrow)

    def bind(self, inputs: Sequence[np.ndarray],
             targets: Sequence[np.ndarray | None]) -> SegmentBinding:
        """`run_into` of these arrays made ready to run many times (their addresses)."""
        return SegmentBinding(self, inputs, targets)

    def fail(self, exc: Exception) -> DriverError:
        """A value-dependent failure inside onnxruntime: this run fails (logged once)."""
        log.error("%s failed: %s", self.label, exc)
        return DriverError(NNRT_FAILED, f"{self.label} failed: {exc}")


class SegmentBinding:
    """A segment's inputs and outputs bound by address (onnxruntime IOBinding), once per
    session (wide, narrow) at its first run there, then reused: a run costs onnxruntime's
    alone (~3 µs for a tiny model against ~13 µs binding afresh). The arrays are not kept:
    whoever runs it keeps the memory mapped at those addresses. A run that finds the binding
    in use by another thread binds afresh for itself."""

    def __init__(self, segment: OrtSegment, inputs: Sequence[np.ndarray],
                 targets: Sequence[np.ndarray | None]) -> None:
        self.segment = segment
        self._inputs = []
        for name, array in zip(segment.input_names, inputs):
            if not array.flags.c_contiguous:
                raise ValueError(f"input {name} is not contiguous")
            self._inputs.append((name, array.dtype, array.shape, array.ctypes.data))
        self._outputs = [(name, None) if target is None else
                         (name, (target.dtype, target.shape, target.ctypes.data))
                         for name, target in zip(segment.output_names, targets)]
        self._ready: dict[bool, object] = {}  # narrow -> IOBinding not in use now

    def _binding(self, session: ort.InferenceSession):
        binding = session.io_binding()
        for name, dtype, shape, address in self._inputs:
            binding.bind_input(name, "cpu", 0, dtype, shape, address)
        for name, target in self._outputs:
            if target is None:
                binding.bind_output(name, "cpu")
            else:
                binding.bind_output(name, "cpu", 0, *target)
        return binding

    def run(self, narrow: bool) -> None:
        segment = self.segment
        session, narrow, timed = segment.pick(narrow)
        # dict.pop and dict.setdefault are each one atomic step (the GIL, or the dict's own
        # lock without one): a binding is taken by one thread at most, no lock of ours
        binding = self._ready.pop(narrow, None)
        if binding is None:
            binding = self._binding(session)
        if timed:
            started = time.perf_counter()
            try:
                session.run_with_iobinding(binding)
            except Exception as exc:
                raise segment.fail(exc) from None
            segment.width.record(narrow, time.perf_counter() - started)
        else:
            try:
                session.run_with_iobinding(binding)
            except Exception as exc:
                raise segment.fail(exc) from None
        self._ready.setdefault(narrow, binding)


@dataclass
class Partition:
    """What runs where: per execution-order node, its segment (or None: numpy)."""

    units: list[Kernel | OrtSegment]
    reasons: dict[int, str] = field(default_factory=dict)  # numpy node index -> why

    @property
    def segments(self) -> list[OrtSegment]:
        return [u for u in self.units if isinstance(u, OrtSegment)]

    @property
    def ort_nodes(self) -> int:
        return sum(len(s.node_indices) for s in self.segments)

    @property
    def numpy_nodes(self) -> int:
        return sum(1 for u in self.units if not isinstance(u, OrtSegment))

    @property
    def single_segment(self) -> OrtSegment | None:
        return self.units[0] if len(self.units) == 1 and isinstance(self.units[0], OrtSegment) \
            else None

    def describe(self) -> str:
        parts = [f"{self.ort_nodes} node(s) on onnxruntime in {len(self.segments)} segment(s)",
                 f"{self.numpy_nodes} on numpy"]
        if self.reasons:
            parts.append("; ".join(f"node {i}: {why}" for i, why in
                                   list(self.reasons.items())[:8]))
        return ", ".join(parts)


def units_with_tensors(part: Partition, graph: Graph) -> list[tuple[object, tuple[int, ...],
                                                                     tuple[int, ...]]]:
    """The partition as the plan's steps: each unit with the tensors it reads and writes."""
    steps = []
    for unit in part.units:
        if isinstance(unit, OrtSegment):
            steps.append((unit, unit.input_ids, unit.output_ids))
        else:
            node = unit.node
            steps.append((unit, tuple(t.index for t in node.inputs),
                          tuple(t.index for t in node.outputs)))
    return steps


def _value_info(spec: TensorSpec, typed_only: bool = False) -> object:
    shape = None if typed_only else [f"d{spec.index}_{k}" if d == DYNAMIC else d
                                     for k, d in enumerate(spec.shape)]
    return helper.make_tensor_value_info(value_name(spec.index), onnx_dtype(spec.dtype), shape)


def _segment_model(seg: SegmentGraph, outputs: Sequence[TensorSpec], name: str) -> bytes:
    if int8_kernels.in_force().unsigned_activations:
        unsigned_activations(seg, {value_name(s.index) for s in outputs})
    graph = helper.make_graph(seg.nodes, name, [_value_info(s) for s in seg.inputs.values()],
                              [_value_info(s, typed_only=True) for s in outputs],
                              seg.initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="nnrt")
    model.ir_version = IR_VERSION
    return model.SerializeToString()


def lower_node(kernel: Kernel, seg: SegmentGraph) -> None:
    """Write one node into `seg`; NotLowerable (with `seg` partly written) when it cannot."""
    if isinstance(kernel, QuantizedKernel):
        if not int8_kernels.in_force().lowered:
            raise NotLowerable("no exact int8 kernels of onnxruntime on this CPU")
        lower_quantized(kernel, seg)
        return
    lower = LOWERINGS.get(kernel.node.node_type)
    if lower is None:
        raise NotLowerable("no lowering")
    lower(kernel, NodeEmitter(seg, kernel))


def partition(graph: Graph, kernels: dict[int, Kernel]) -> Partition:
    """Lower what can be lowered; one session per run of consecutive lowered nodes."""
    order = graph.execution_order
    position = {n: p for p, n in enumerate(order)}
    last_read: dict[int, int] = {}
    for node_index in order:
        for t in graph.nodes[node_index].inputs:
            last_read[t.index] = position[node_index]
    model_outputs = {t.index for t in graph.outputs}
    units: list[Kernel | OrtSegment] = []
    reasons: dict[int, str] = {}
    seg = SegmentGraph()

    def close(end: int) -> None:
        """Turn the segment (nodes before position `end`) into a session."""
        nonlocal seg
        if not seg.lowered:
            return
        outputs = [s for i, s in seg.written.items()
                   if i in model_outputs or last_read.get(i, -1) >= end]
        model = _segment_model(seg, outputs, f"{graph.name}:{seg.lowered[0]}")
        try:
            units.append(OrtSegment(model, seg.lowered, list(seg.inputs), [s.index for s in outputs],
                                    optimized=False))
        except Exception as exc:  # a lowering that onnxruntime refused: numpy computes it
            log.warning("onnxruntime refused nodes %s (%s); they run on numpy",
                        seg.lowered, str(exc).splitlines()[0][:300])
            for n in seg.lowered:
                reasons[n] = "onnxruntime refused its segment"
                units.append(kernels[n])
        seg = SegmentGraph()

    for p, node_index in enumerate(order):
        kernel = kernels[node_index]
        mark = seg.checkpoint()
        try:
            lower_node(kernel, seg)
            seg.lowered.append(node_index)
            continue
        except NotLowerable as exc:
            seg.rollback(mark)
            why = str(exc)
        reasons[node_index] = why
        close(p)
        units.append(kernel)
    close(len(order))
    return Partition(units, reasons)


# ------------------------------------------------------------------ the model cache

MAGIC = b"NNRTORTM"  # also drivers/cpu/device.py ORT_CACHE_MAGIC
FORMAT_VERSION = 2  # sealed with the driver's key
WHAT = "onnxruntime model cache"


def cache_identity(device_identity: str) -> str:
    """Who may read an optimised-model blob: the device, onnxruntime's version, the CPU,
    the int8 kernels' form (an optimised model has its QLinear nodes' types baked in)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            cpu = "".join(sorted({line for line in f if line.startswith(("model name", "flags"))}))
    except OSError:
        cpu = ""
    digest = hashlib.sha256(cpu.encode()).hexdigest()[:16]
    return (f"{device_identity} onnxruntime {ort.__version__} cpu {digest} "
            f"int8 {int8_kernels.in_force().form.value}")


def export(part: Partition, identity: str, float16: bool) -> bytes:
    """The optimised models of every segment, where they sit in the graph, and the
    precision mode they were lowered in."""
    segments = part.segments
    header = json.dumps({"float16": float16, "segments": [
        {"nodes": s.node_indices, "inputs": s.input_ids, "outputs": s.output_ids}
        for s in segments]}).encode()
    chunks = [struct.pack("<Q", len(header)), header]
    for s in segments:
        chunks += [struct.pack("<Q", len(s.optimized_model)), s.optimized_model]
    return seal_keyed(MAGIC, FORMAT_VERSION, cache_identity(identity), b"".join(chunks))


def restore(blob: bytes, identity: str, graph: Graph, kernels: dict[int, Kernel],
            float16: bool) -> Partition | None:
    """The partition of `graph` from an exported blob: sessions over the optimised models,
    numpy kernels for the rest; None when the blob was lowered in the other precision mode
    (the config of the import decides: lower again); NNRT_INVALID_MODEL_CACHE for a blob
    this driver did not write (its key: before any byte is parsed), or whose models are not
    the driver's own segments or reach outside the blob (trusted_model.py), or that does not
    fit."""
    payload = unseal_keyed(blob, MAGIC, FORMAT_VERSION, cache_identity(identity), WHAT)
    try:
        (length,) = struct.unpack_from("<Q", payload, 0)
        header = json.loads(bytes(payload[8:8 + length]))
        if not isinstance(header, dict) or not isinstance(header.get("segments"), list):
            raise ValueError("no segment table")
        entries = header["segments"]
        offset = 8 + length
        models = []
        for _ in entries:
            (size,) = struct.unpack_from("<Q", payload, offset)
            if offset + 8 + size > len(payload):
                raise ValueError("truncated")
            models.append(bytes(payload[offset + 8:offset + 8 + size]))
            offset += 8 + size
        if offset != len(payload):
            raise ValueError("trailing bytes")
    except (struct.error, ValueError, UnicodeDecodeError) as exc:
        raise refusal(WHAT, f"malformed ({exc})") from None
    if header.get("float16") is not float16:
        return None
    by_first: dict[int, tuple[dict, bytes]] = {}
    covered: set[int] = set()
    for entry, model in zip(entries, models):
        nodes = entry.get("nodes") if isinstance(entry, dict) else None
        if not nodes or not all(isinstance(n, int) and n in kernels for n in nodes) \
                or covered & set(nodes):
            raise refusal(WHAT, "its segments do not match the model")
        ids = [*entry.get("inputs", ()), *entry.get("outputs", ())]
        if not all(isinstance(i, int) and 0 <= i < len(graph.tensors) for i in ids):
            raise refusal(WHAT, "its segments name tensors the model does not have")
        covered |= set(nodes)
        by_first[nodes[0]] = (entry, model)
    units: list[Kernel | OrtSegment] = []
    order = list(graph.execution_order)
    p = 0
    while p < len(order):
        node_index = order[p]
        if node_index in by_first:
            entry, model = by_first[node_index]
            if order[p:p + len(entry["nodes"])] != list(entry["nodes"]):
                raise refusal(WHAT, "its segments do not match the model")
            check_own_model(model, [value_name(i) for i in entry["inputs"]],
                            [value_name(i) for i in entry["outputs"]])
            try:
                units.append(OrtSegment(model, entry["nodes"], entry["inputs"], entry["outputs"],
                                        optimized=True))
            except Exception as exc:
                raise DriverError(NNRT_INVALID_MODEL_CACHE,
                                  f"{WHAT} refused: onnxruntime cannot load a segment "
                                  f"({str(exc).splitlines()[0][:200]})") from None
            p += len(entry["nodes"])
        elif node_index in covered:
            raise refusal(WHAT, "its segments do not match the model")
        else:
            units.append(kernels[node_index])
            p += 1
    return Partition(units)
