"""The schedule of a GPU prepared model: made once at prepare, specialised per concrete shape.

At prepare every node becomes a `GpuOp` (refused as a whole when one cannot run here), the
constants go to the device once, and element-wise epilogues are fused into the op that
produces their input: an Activation node, or an AddFusion whose other operand has the same
static shape (the residual of a ResNet block), becomes the `POST` of a GEMM-family or
element-wise kernel when the producer's output has no other reader and is not a model
output. The fused op then runs where the absorbed node ran, when its residual is ready.

A specialisation is everything that depends on the concrete input shapes: every tensor's
shape (the reference kernels infer them), a device buffer per tensor (Reshape-like ops
share their input's), and the launches with their arguments bound. A static model has one,
made at prepare, so that a model that does not fit the device is refused there; a model
with dynamic inputs makes one per distinct input shape at run time and keeps the last few.

A run takes the model's lock (a specialisation's buffers serve one run at a time), copies
the inputs to the device, enqueues the launches on the device's one in-order queue, in
chunks so that an abandoned run stops between them, and copies the outputs back.

Zero-copy (a device whose memory is the host's, drivers/gpu/opencl.py `HostWindows`): an
input whose window is aligned is not copied: the launches that read its tensor are rebound
to the window's own memory, wrapped once per window. So is an output written by a launch
into the client's window (the model's run_into), unless the run can fail on a kernel's
check (then nothing is written before the check passes), or its tensor's buffer is also an
input's or another output's. The rest is copied, as on a discrete GPU.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pyopencl as cl

from nnrt.hdi.reference.graph_checks import infer_graph_shapes
from .kernel import (
    NO_EPILOGUE,
    Act,
    Builder,
    DeviceTensor,
    Epilogue,
    GpuOp,
    Launch,
    Preparer,
    RunCheck,
    create_op,
)
from .opencl import ClRuntime, DeviceMemory, cl_error, iter_chunks
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.reference.plan import op_name
from nnrt.hdi.device import CancelCheck, StepTime
from nnrt.common.errors import NNRT_FAILED, NNRT_TIME_OUT, DriverError
from nnrt.hdi.graph import DYNAMIC, Graph, Shape

log = logging.getLogger(__name__)

MAX_SPECIALISATIONS = 4  # distinct input shapes kept per dynamic model
LAUNCHES_PER_CHUNK = 64  # between two checks whether the run was abandoned
_ZERO = np.zeros(1, np.int32)


@dataclass(frozen=True)
class Scheduled:
    """One op at its place in the schedule, with the epilogue fused after it."""

    op: GpuOp
    inputs: tuple[int, ...]  # tensor indices
    outputs: tuple[int, ...]  # the last one replaced by the absorbed node's output if fused
    residual: int | None = None
    post_act: Act | None = None
    absorbed: int | None = None  # the node index fused into this op


Uses = list[tuple[Launch, int]]  # the (launch, argument position)s that bind one buffer


@dataclass
class Specialisation:
    shapes: dict[int, Shape]
    inputs: list[DeviceTensor]
    outputs: list[DeviceTensor]
    launches: list[Launch]
    memory: DeviceMemory
    checks: list[RunCheck]
    # Per input / output: the uses of its buffer, which a run may rebind to the client's
    # window; None where it must be copied (its buffer is shared, or a check guards outputs).
    input_uses: list[Uses | None] = field(default_factory=list)
    output_uses: list[Uses | None] = field(default_factory=list)
    bound: dict[int, cl.Buffer] = field(default_factory=dict)  # id(own buffer) -> bound now
    owners: list[tuple[int, ...]] = field(default_factory=list)  # per launch: its nodes

    def rebind(self, own: cl.Buffer, uses: Uses, buffer: cl.Buffer) -> None:
        """Bind `buffer` wherever the launches bound `own` (what was bound last time stays)."""
        if self.bound.get(id(own), own) is buffer:
            return
        for launch, position in uses:
            launch.kernel.set_arg(position, buffer)
        self.bound[id(own)] = buffer


def _window_uses(inputs: list[DeviceTensor], outputs: list[DeviceTensor],
                 launches: list[Launch], fixed: set[int],
                 checked: bool) -> tuple[list[Uses | None], list[Uses | None]]:
    """Which inputs and outputs a run may serve from the client's windows (`Specialisation`);
    `fixed`: ids of buffers that are never a window (constants)."""
    uses: dict[int, Uses] = {}
    for launch in launches:
        for position, arg in enumerate(launch.args):
            if isinstance(arg, cl.Buffer):
                uses.setdefault(id(arg), []).append((launch, position))
    counts = Counter(id(t.buffer) for t in (*inputs, *outputs))

    def own(tensor: DeviceTensor) -> bool:
        return counts[id(tensor.buffer)] == 1 and id(tensor.buffer) not in fixed

    ins = [uses.get(id(t.buffer), []) if own(t) else None for t in inputs]
    outs = [uses[id(t.buffer)] if own(t) and id(t.buffer) in uses and not checked else None
            for t in outputs]
    return ins, outs


def _fusion(graph: Graph, ops: dict[int, GpuOp]) -> tuple[dict[int, tuple[int, Scheduled]],
                                                              set[int]]:
    """producer node -> (the position it moves to, its Scheduled); the absorbed nodes."""
    readers: dict[int, list[int]] = {}
    for index in graph.execution_order:
        for t in graph.nodes[index].inputs:
            readers.setdefault(t.index, []).append(index)
    position = {index: p for p, index in enumerate(graph.execution_order)}
    model_outputs = {t.index for t in graph.outputs}
    fused: dict[int, tuple[int, Scheduled]] = {}
    absorbed: set[int] = set()
    for index in graph.execution_order:
        op = ops[index]
        if not op.accepts_epilogue or index in absorbed or len(op.node.outputs) != 1:
            continue
        out = op.node.outputs[0]
        users = readers.get(out.index, [])
        if out.index in model_outputs or len(users) != 1 or users[0] in absorbed:
            continue
        consumer = ops[users[0]]
        node = consumer.node
        ins = tuple(t.index for t in op.node.inputs)
        act = consumer.fusable_activation()
        if act is not None and node.inputs[0].index == out.index:
            entry = Scheduled(op, ins, (node.outputs[0].index,), None, act, users[0])
        elif (node.node_type == na.NODE_TYPE_ADD_FUSION and len(node.inputs) == 2
              and consumer.accepts_epilogue):
            other = node.inputs[1] if node.inputs[0].index == out.index else node.inputs[0]
            same = (other.index != out.index and other.shape == out.shape == node.outputs[0].shape
                    and DYNAMIC not in out.shape and other.dtype == out.dtype
                    and not other.is_constant)
            if not same:
                continue
            entry = Scheduled(op, ins, (node.outputs[0].index,), other.index,
                              Act(int(node.attrs.activationType)), users[0])
        else:
            continue
        fused[index] = (position[users[0]], entry)
        absorbed.add(users[0])
    return fused, absorbed


def _sync(queue: cl.CommandQueue, buffer: cl.Buffer, flags: int) -> None:
    """Map and unmap a window's wrapping: what OpenCL asks between host and device accesses
    to a `CL_MEM_USE_HOST_PTR` buffer (free where the device uses the host's memory; READ
    waits for the kernels that wrote it)."""
    mapped, _ = cl.enqueue_map_buffer(queue, buffer, flags, 0, (buffer.size,), np.uint8,
                                      is_blocking=True)
    mapped.base.release(queue)


class GpuPlan:
    def __init__(self, graph: Graph, runtime: ClRuntime, owner: str,
                 wire: Sequence[np.dtype] | None = None) -> None:
        """`wire`: the dtypes of the outputs as the client sees them, where they differ from
        the graph's (float16 mode: the graph is the float16 rewrite, the wire float32)."""
        self.graph = graph
        self.wire = None if wire is None else [np.dtype(d) for d in wire]
        self.runtime = runtime
        self.owner = owner
        ops = {i: create_op(graph.nodes[i]) for i in graph.execution_order}
        self.ops = [ops[i] for i in graph.execution_order]  # shape inference order
        fused, absorbed = _fusion(graph, ops)
        # Each entry at its node's position; a fused producer at the absorbed node's (the
        # positions stay distinct: the absorbed node has no entry of its own).
        placed: dict[int, Scheduled] = {}
        for p, index in enumerate(graph.execution_order):
            if index in absorbed:
                continue
            if index in fused:
                where, entry = fused[index]
                placed[where] = entry
            else:
                op = ops[index]
                placed[p] = Scheduled(op, tuple(t.index for t in op.node.inputs),
                                      tuple(t.index for t in op.node.outputs))
        self.schedule = [placed[p] for p in sorted(placed)]
        if fused:
            log.info("%s: %d epilogues fused (%s)", owner, len(fused), ", ".join(
                f"{graph.nodes[e.absorbed].name} into {e.op.node.name}"
                for _, e in fused.values()))
        self.constants = {t.index: t.constant for t in graph.tensors if t.is_constant}
        self.input_ids = tuple(t.index for t in graph.inputs)
        self.output_ids = tuple(t.index for t in graph.outputs)
        self.memory = DeviceMemory(runtime, owner)
        self.programs: set[str] = set()
        self._lock = threading.Lock()
        self._profiling_queue: cl.CommandQueue | None = None  # profiled runs' (_launch_timed)
        self._specialisations: OrderedDict[tuple[Shape, ...], Specialisation] = OrderedDict()
        try:
            self.dummy = self.memory.allocate(4, "placeholder")
            prep = Preparer(runtime, self.memory)
            for op in self.ops:
                op.load(prep)
            self._device_constants = self._upload_constants()
            self.dynamic = any(t.is_dynamic for t in graph.inputs)
            self.static_shapes: dict[int, Shape] | None = None
            if not self.dynamic:
                spec = self._specialise(tuple(t.shape for t in graph.inputs))
                self.static_shapes = spec.shapes
        except BaseException:
            self.close()
            raise

    def _upload_constants(self) -> dict[int, DeviceTensor]:
        """Constants read raw by some op (those an op keeps in its own layout are not)."""
        wanted: set[int] = set()
        for entry in self.schedule:
            for position, index in enumerate(entry.inputs):
                if index in self.constants and position not in entry.op.own_constants:
                    wanted.add(index)
        for index in self.output_ids:
            if index in self.constants:
                wanted.add(index)
        out = {}
        for index in sorted(wanted):
            array = self.constants[index]
            out[index] = DeviceTensor(self.memory.upload(array, f"constant {index}"),
                                      tuple(array.shape), array.dtype)
        return out

    def infer(self, input_shapes: Sequence[Shape]) -> dict[int, Shape]:
        return infer_graph_shapes(self.ops, dict(zip(self.input_ids, input_shapes)),
                                  self.constants)

    def output_shapes(self) -> list[Shape] | None:
        if self.static_shapes is None:
            return None
        shapes = [self.static_shapes[i] for i in self.output_ids]
        return None if any(DYNAMIC in s for s in shapes) else shapes

    def _specialise(self, input_shapes: tuple[Shape, ...]) -> Specialisation:
        spec = self._specialisations.get(input_shapes)
        if spec is not None:
            self._specialisations.move_to_end(input_shapes)
            return spec
        shapes = self.infer(input_shapes)
        if any(DYNAMIC in s for s in shapes.values()):
            raise DriverError(NNRT_FAILED, "a tensor's shape depends on input values, which "
                                           "the GPU driver does not compute")
        while len(self._specialisations) >= MAX_SPECIALISATIONS:
            _, old = self._specialisations.popitem(last=False)
            old.memory.release()
        memory = DeviceMemory(self.runtime, f"{self.owner} {[list(s) for s in input_shapes]}")
        try:
            spec = self._build(shapes, memory)
        except BaseException:
            memory.release()
            raise
        self._specialisations[input_shapes] = spec
        return spec

    def _build(self, shapes: dict[int, Shape], memory: DeviceMemory) -> Specialisation:
        tensors: dict[int, DeviceTensor] = dict(self._device_constants)

        def fresh(index: int) -> DeviceTensor:
            spec = self.graph.tensors[index]
            shape = shapes[index]
            size = int(np.prod(shape, dtype=np.int64)) * spec.dtype.itemsize
            tensor = DeviceTensor(memory.allocate(size, f"tensor {spec.name!r}"), shape,
                                  spec.dtype)
            tensors[index] = tensor
            return tensor

        inputs = [fresh(i) for i in self.input_ids]
        builder = Builder(self.runtime, memory, self.programs, self.dummy)
        launches: list[Launch] = []
        owners: list[tuple[int, ...]] = []
        for entry in self.schedule:
            op = entry.op
            ins = [None if (i in self.constants and p in op.own_constants) else tensors[i]
                   for p, i in enumerate(entry.inputs)]
            if op.alias_input is not None:
                source = tensors[entry.inputs[op.alias_input]]
                (out,) = entry.outputs
                tensors[out] = DeviceTensor(source.buffer, shapes[out], source.dtype)
                continue
            outs = [fresh(i) for i in entry.outputs]
            builder.half = op.half
            post = NO_EPILOGUE
            if entry.absorbed is not None:
                post = Epilogue(None if entry.residual is None else tensors[entry.residual],
                                entry.post_act or Act())
            built = op.build(builder, ins, outs, post)
            launches.extend(built)
            owners.extend([(op.node.index,) if entry.absorbed is None
                           else (op.node.index, entry.absorbed)] * len(built))
        outputs = [tensors[i] for i in self.output_ids]
        fixed = {id(t.buffer) for t in self._device_constants.values()} | {id(self.dummy)}
        input_uses, output_uses = _window_uses(inputs, outputs, launches, fixed,
                                               bool(builder.checks))
        return Specialisation(shapes, inputs, outputs, launches, memory, builder.checks,
                              input_uses, output_uses, owners=owners)

    def run(self, inputs: Sequence[np.ndarray], cancelled: CancelCheck,
            targets: Sequence[np.ndarray] | None = None,
            steps: list[StepTime] | None = None) -> list[np.ndarray]:
        """The outputs, copied from the device into `targets` when given (the client's
        output windows: no second copy), else into fresh arrays; on a host-unified device
        aligned windows are used in place (zero-copy)."""
        queue = self.runtime.queue
        windows = self.runtime.windows
        held: list[tuple[int, int, bool]] = []
        copied_in = copied_out = zero_copy = 0
        with self._lock:
            spec = self._specialise(tuple(tuple(a.shape) for a in inputs))
            try:
                try:
                    in_place: list[cl.Buffer] = []  # the windows read or written in place
                    for tensor, array, uses in zip(spec.inputs, inputs, spec.input_uses):
                        buffer = tensor.buffer
                        if uses is not None and windows.usable(array, tensor.dtype):
                            key, buffer = windows.acquire(array, writable=False)
                            held.append(key)
                            in_place.append(buffer)
                            zero_copy += tensor.nbytes
                        elif array.size:  # float16 mode: float32 on the wire, half here
                            cl.enqueue_copy(queue, tensor.buffer,
                                            np.ascontiguousarray(array, tensor.dtype),
                                            is_blocking=False)
                            copied_in += tensor.nbytes
                        if uses:
                            spec.rebind(tensor.buffer, uses, buffer)
                    written: list[tuple[cl.Buffer, DeviceTensor] | None] = []
                    for k, (tensor, uses) in enumerate(zip(spec.outputs, spec.output_uses)):
                        target = None if targets is None else targets[k]
                        if (uses is not None and target is not None
                                and target.flags.writeable and windows.usable(target,
                                                                               tensor.dtype)):
                            key, buffer = windows.acquire(target, writable=True)
                            held.append(key)
                            written.append((buffer, tensor))
                            zero_copy += tensor.nbytes
                        else:
                            buffer = tensor.buffer
                            written.append(None)
                        if uses:
                            spec.rebind(tensor.buffer, uses, buffer)
                    for buffer in in_place:  # the host wrote them: the device sees it now
                        _sync(queue, buffer, cl.map_flags.WRITE_INVALIDATE_REGION)
                    if steps is None:
                        self._launch(spec, cancelled)
                    else:
                        self._launch_timed(spec, cancelled, steps)
                    results, widen = [], []
                    for k, tensor in enumerate(spec.outputs):
                        wire = tensor.dtype if self.wire is None else self.wire[k]
                        out = np.empty(tensor.shape, wire) if targets is None else targets[k]
                        if written[k] is not None:
                            _sync(queue, written[k][0], cl.map_flags.READ)
                            results.append(out)
                            continue
                        landing = out if out.dtype == tensor.dtype else np.empty(tensor.shape,
                                                                                 tensor.dtype)
                        if out.size:
                            cl.enqueue_copy(queue, landing, tensor.buffer, is_blocking=False)
                            copied_out += tensor.nbytes
                        if landing is not out:
                            widen.append((out, landing))
                        results.append(out)
                    queue.finish()
                finally:
                    if held:
                        windows.release(held)
                    windows.count(copied_in, copied_out, zero_copy)
                for out, landing in widen:  # float16 mode: half on the device, float32 out
                    out[...] = landing
            except cl.Error as exc:
                raise cl_error(exc, f"{self.owner}: run")
        return results

    def _launch(self, spec: Specialisation, cancelled: CancelCheck) -> None:
        """Enqueue the launches in chunks (an abandoned run stops between two), then fail
        the run if a kernel set a check's flag."""
        queue = self.runtime.queue
        for check in spec.checks:
            cl.enqueue_copy(queue, check.flag, _ZERO, is_blocking=False)
        for chunk in iter_chunks(spec.launches, LAUNCHES_PER_CHUNK):
            if cancelled():
                queue.finish()
                log.info("%s: run abandoned: its caller gave up", self.owner)
                raise DriverError(NNRT_TIME_OUT, "run abandoned: its caller gave up")
            for launch in chunk:
                launch.enqueue(queue)
            if len(spec.launches) > LAUNCHES_PER_CHUNK:
                queue.finish()
        self._verify(spec.checks)

    def _launch_timed(self, spec: Specialisation, cancelled: CancelCheck,
                      steps: list[StepTime]) -> None:
        """`_launch` of a profiled run: each launch alone on a queue with profiling enabled
        (made at the first such run: the run queue has none, so unprofiled runs pay
        nothing), waited for, its OpenCL event's start-to-end time beside the host's; a
        node's launches summed into its step."""
        self.runtime.queue.finish()  # the inputs and the checks' flags are on the device
        if self._profiling_queue is None:
            self._profiling_queue = cl.CommandQueue(
                self.runtime.context, properties=cl.command_queue_properties.PROFILING_ENABLE)
        queue = self._profiling_queue
        for check in spec.checks:
            cl.enqueue_copy(queue, check.flag, _ZERO, is_blocking=False)
        queue.finish()
        by_node: dict[tuple[int, ...], StepTime] = {}
        for launch, owner in zip(spec.launches, spec.owners):
            if cancelled():
                log.info("%s: run abandoned: its caller gave up", self.owner)
                raise DriverError(NNRT_TIME_OUT, "run abandoned: its caller gave up")
            started = time.monotonic()
            event = launch.enqueue(queue)
            event.wait()
            ended = time.monotonic()
            step = by_node.get(owner)
            if step is None:
                nodes = [self.graph.nodes[n] for n in owner]  # an epilogue fused: both
                step = by_node[owner] = StepTime(" + ".join(n.name for n in nodes), owner,
                                                 started, 0.0, op_name(nodes[0]))
                steps.append(step)
            step.seconds = ended - step.start
            step.device += (event.profile.end - event.profile.start) * 1e-9
        self._verify(spec.checks)

    def _verify(self, checks: list[RunCheck]) -> None:
        """Fail the run (before any output is copied) if a kernel set a check's flag."""
        if not checks:
            return
        flags = np.zeros(len(checks), np.int32)
        for k, check in enumerate(checks):
            cl.enqueue_copy(self.runtime.queue, flags[k:k + 1], check.flag, is_blocking=False)
        self.runtime.queue.finish()
        for check, flag in zip(checks, flags):
            if flag:
                log.warning("%s: run failed: %s", self.owner, check.error.message)
                raise check.error

    def close(self) -> None:
        for spec in self._specialisations.values():
            spec.memory.release()
        self._specialisations.clear()
        self.memory.release()
