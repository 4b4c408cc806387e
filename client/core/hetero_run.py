"""The runs of a compilation over several devices (client/core/hetero.py, decision 12).

Runs (`HeteroRunner`, one per executor): the steps run in order on the calling thread (sync)
or on a worker (async), under one deadline for the whole run and one cancel ticket. A tensor
one step writes and a later step reads (a boundary) lives in one memfd: allocated in the
producer's session, registered with the consumer's (`SharedMemory.descriptor_in`, the
driver's import of an fd), so the producer's output window is the consumer's input window and
no byte is copied between steps (`RunStats.copied_bytes` counts any that were: none). The
consumer reads the shape the producer reported: dynamic dimensions cross a boundary as the
driver computed them. A boundary window too small for what the producer computed (the
driver's NNRT_INSUFFICIENT_BUFFER with the true shapes) is made that size and the step run
again; the sizes are kept for later runs.

A run whose step's driver dies, or whose device errs, is made again on the
compilation's fallback plan (failover: client/core/hetero.py).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from nnrt.common.dtypes import numpy_dtype
from nnrt.common.errors import NNRT_SUCCESS, code_name
from nnrt.protos import hdi_types_pb2 as ht

from .accepted_run import AcceptedRun, notify
from .buffer import BufferNotShared, SharedMemory, allocate, release_memory
from .device import Device
from .driver import DriverClient, DriverGone, RunTicket
from .errors import (OH_NN_FAILED, OH_NN_SUCCESS, OH_NN_TIMEOUT, ConnectionLost,
                     DeviceUnavailable, Failed, InvalidParameter, NNRtError, RunCancelled,
                     RunTimeout)
from .partition import Step
from .prepared_model import DimRanges, PreparedModel

if TYPE_CHECKING:
    from .hetero import HeteroCompilation, PreparedPlan, PreparedStep

log = logging.getLogger(__name__)

# Run codes that say the device failed, not the run's tensors: only these move a run to
# another plan. NNRT_DEVICE_BUSY is the driver's flow control (a session over its runs in
# flight) and the invalid-input codes, NNRT_FAILED and NNRT_OUT_OF_MEMORY can follow from the
# run's own inputs and values: they fail the run and leave the plan as it is.
DEVICE_ERROR_CODES = frozenset({ht.NNRT_DEVICE_ERROR})


@dataclass
class RunStats:
    """What the runs of one executor did (`PreparedModel.hetero.stats`)."""

    runs: int = 0
    steps: int = 0
    boundary_bytes: int = 0  # bytes that crossed a partition boundary, in shared memory
    copied_bytes: int = 0  # bytes copied between steps (a window the consumer cannot map)
    step_reruns: int = 0  # steps run again with a boundary window made larger
    failovers: int = 0  # runs made again on another plan after a driver died


@dataclass(eq=False)
class _Boundary:
    """One boundary tensor's memory in one set: written by its producer, read by the
    consumers (the same pages: `SharedMemory.descriptor_in` registers them there)."""

    memory: SharedMemory
    shape: list[int] = field(default_factory=list)  # as the producer reported it
    wires: dict[tuple[DriverClient, bool], bytes] = field(default_factory=dict)  # (session,
    # as an input): the IOTensor there, kept while the shape is


class _BoundarySet:
    """The boundary tensors of one run in flight (a set is used by one run at a time)."""

    def __init__(self) -> None:
        self.tensors: dict[int, _Boundary] = {}

    def release(self) -> None:
        for boundary in self.tensors.values():
            release_memory(boundary.memory.client, boundary.memory)
        self.tensors = {}


Describe = Callable[[Any, DriverClient], bytes]


class HeteroRunner:
    """The runs of one executor over a HeteroCompilation (module docstring)."""

    def __init__(self, compilation: HeteroCompilation) -> None:
        self.compilation = compilation
        self.stats = RunStats()
        self._lock = threading.Lock()
        self._free: dict[int, list[_BoundarySet]] = {}  # by id of the PreparedPlan
        self._sizes: dict[int, int] = {}  # boundary tensor -> the largest bytes seen
        self._closed = False

    def session(self) -> tuple[DriverClient, int]:
        """A live session of the current plan (where the front end allocates its tensors)."""
        plan = self.compilation.current
        if plan is not None:
            for prepared in plan.steps:
                try:
                    return prepared.model.session()[0], 0
                except DriverGone:
                    continue
        return self.compilation.group.client(), 0

    def dim_ranges(self) -> DimRanges:
        """The model inputs' ranges: of each input, what every step reading it accepts."""
        plan = self.compilation.current
        model = self.compilation.lowered.hdi
        mins: list[list[int] | None] = [None] * len(model.inputs)
        maxs: list[list[int] | None] = [None] * len(model.inputs)
        for prepared in plan.steps if plan is not None else ():
            ranges = prepared.model.dim_ranges()
            if ranges.status != DimRanges.OK or len(ranges.mins) != len(prepared.step.inputs):
                continue
            for position, t in enumerate(prepared.step.inputs):
                if t not in model.inputs:
                    continue
                k = model.inputs.index(t)
                low, high = ranges.mins[position], ranges.maxs[position]
                if mins[k] is None:
                    mins[k], maxs[k] = list(low), list(high)
                elif len(mins[k]) == len(low):
                    mins[k] = [max(a, b) for a, b in zip(mins[k], low)]
                    maxs[k] = [min(a, b) for a, b in zip(maxs[k], high)]
        if any(m is None for m in mins):
            return DimRanges(DimRanges.UNSUPPORTED)
        return DimRanges(DimRanges.OK, mins, maxs)

    # -- boundary memory ---------------------------------------------------------------------

    def _acquire(self, plan: PreparedPlan) -> _BoundarySet:
        with self._lock:
            free = self._free.get(id(plan))
            if free:
                return free.pop()
        return _BoundarySet()

    def _give_back(self, plan: PreparedPlan, boundaries: _BoundarySet) -> None:
        with self._lock:
            if not self._closed and (self.compilation.current is plan or
                                     plan is self.compilation.preferred):
                self._free.setdefault(id(plan), []).append(boundaries)
                return
        boundaries.release()

    def _window(self, boundaries: _BoundarySet, t: int, client: DriverClient,
                device: Device, need: int) -> _Boundary:
        """Boundary `t` with room for `need` bytes, allocated in the producer's session."""
        boundary = boundaries.tensors.get(t)
        if boundary is not None and boundary.memory.size >= need and \
                boundary.memory.client is not None and boundary.memory.client.alive:
            return boundary
        if boundary is not None:
            release_memory(boundary.memory.client, boundary.memory)
        with self._lock:
            size = max(need, self._sizes.get(t, 0))
            self._sizes[t] = size
        boundary = _Boundary(allocate(client, size, device.name))
        boundaries.tensors[t] = boundary
        return boundary

    # -- one run ----------------------------------------------------------------------------

    def run(self, model: PreparedModel, inputs: Sequence[Any], outputs: Sequence[Any],
            timeout: float | None, describe: Describe, ticket: RunTicket | None = None,
            on_died: Callable[[], None] | None = None) -> list[list[int]]:
        """Every step in order, within `timeout` seconds in all; the output shapes (stored in
        the output tensors and the model). Failover as the module docstring says: `on_died`
        is called when a driver dies under the run and the run goes on elsewhere."""
        deadline = None if timeout is None else time.monotonic() + timeout
        ticket = ticket or RunTicket()
        compilation = self.compilation
        plan = compilation.current
        while True:
            if plan is None or compilation.closed:
                raise InvalidParameter("the compilation is closed")
            try:
                shapes = self._run_plan(plan, inputs, outputs, deadline, describe, ticket)
            except _StepLost as lost:
                if not compilation.failover:
                    raise lost.error() from None
                if lost.error_code is None and on_died is not None:
                    on_died()  # a death (a device error is no service death)
                plan = compilation.fail_over(plan, lost.index, lost.reason())
                with self._lock:
                    self.stats.failovers += 1
                continue
            model.store_output_shapes(outputs, shapes)
            with self._lock:
                self.stats.runs += 1
            return shapes

    def _run_plan(self, plan: PreparedPlan, inputs: Sequence[Any], outputs: Sequence[Any],
                  deadline: float | None, describe: Describe,
                  ticket: RunTicket) -> list[list[int]]:
        model = self.compilation.lowered.hdi
        position_in = {t: k for k, t in enumerate(model.inputs)}
        position_out = {t: k for k, t in enumerate(model.outputs)}
        out_shapes: list[list[int] | None] = [None] * len(outputs)
        boundaries = self._acquire(plan)
        try:
            for prepared in plan.steps:
                if ticket.cancelled:
                    raise RunCancelled(f"{prepared.device.name}: the run was cancelled")
                self._run_step(prepared, plan, boundaries, inputs, outputs, position_in,
                               position_out, out_shapes, deadline, describe, ticket)
        except BaseException:
            boundaries.release()
            raise
        self._give_back(plan, boundaries)
        return [s if s is not None else [] for s in out_shapes]

    def _run_step(self, prepared: PreparedStep, plan: PreparedPlan, boundaries: _BoundarySet,
                  inputs: Sequence[Any], outputs: Sequence[Any], position_in: dict[int, int],
                  position_out: dict[int, int], out_shapes: list[list[int] | None],
                  deadline: float | None, describe: Describe, ticket: RunTicket) -> None:
        step, device, model = prepared.step, prepared.device, self.compilation.lowered.hdi
        try:
            client, model_id = prepared.model.session()
        except DriverGone as exc:
            raise _StepLost(step.device, device, exc) from None
        for attempt in range(2):
            try:
                ios_in = [self._input(t, client, device, boundaries, inputs, outputs,
                                      position_in, position_out, out_shapes, describe)
                          for t in step.inputs]
                ios_out = [describe(outputs[position_out[t]], client) if t in position_out
                           else self._output(t, client, device, boundaries)
                           for t in step.outputs]
            except DriverGone as exc:
                raise _StepLost(step.device, device, exc) from None
            except BufferNotShared as exc:
                raise Failed(f"{device.name}: a tensor's memory: {exc}") from None
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise RunTimeout(f"{self.compilation.group.name}: no result within the "
                                 f"deadline (before step {prepared.number})")
            try:
                reply = client.run(model_id, ios_in, ios_out, remaining, ticket)
            except DriverGone as exc:
                client.wait_dead(0.05)
                raise _StepLost(step.device, device, exc) from None
            except TimeoutError:
                raise RunTimeout(f"{device.name}: no result within the deadline (step "
                                 f"{prepared.number}); the driver was told to abandon the "
                                 "run") from None
            if ticket.cancelled and reply.returnCode != NNRT_SUCCESS:
                raise RunCancelled(f"{device.name}: the run was cancelled")
            if reply.returnCode in DEVICE_ERROR_CODES:
                raise _StepLost(step.device, device, None, reply.returnCode, reply.reason)
            with self._lock:
                self.stats.steps += 1
            if reply.returnCode == ht.NNRT_INSUFFICIENT_BUFFER and \
                    len(reply.outputDims) == len(step.outputs):
                shapes = [list(d.values) for d in reply.outputDims]
                self._too_small(step, shapes, model, outputs, position_out, out_shapes)
                for t, shape in zip(step.outputs, shapes):
                    if t not in position_out:
                        need = _bytes_of(model.tensors[t].dataType, shape)
                        self._window(boundaries, t, client, device, need)
                        boundaries.tensors[t].shape = shape
                        boundaries.tensors[t].wires.clear()
                with self._lock:
                    self.stats.step_reruns += 1
                continue
            from .execution import output_shapes  # (execution builds on this module)

            shapes = output_shapes(reply, len(step.outputs))
            for t, shape in zip(step.outputs, shapes):
                if t in position_out:
                    out_shapes[position_out[t]] = shape
                if t in boundaries.tensors and t not in position_out:
                    boundary = boundaries.tensors[t]
                    if boundary.shape != shape:
                        boundary.shape = shape
                        boundary.wires.clear()
                    with self._lock:
                        self.stats.boundary_bytes += _bytes_of(model.tensors[t].dataType, shape)
            return
        raise Failed(f"{device.name}: step {prepared.number} reported too small windows twice")

    def _too_small(self, step: Step, shapes: list[list[int]], model: Any,
                   outputs: Sequence[Any], position_out: dict[int, int],
                   out_shapes: list[list[int] | None]) -> None:
        """A model output too small: the front end sizes those (OutputsTooSmall with every
        output's shape: the driver's for this step's, the tensors' own for the others)."""
        small = [t for t in step.outputs if t in position_out]
        if not small:
            return
        from .execution import OutputsTooSmall

        known = {position_out[t]: s for t, s in zip(step.outputs, shapes) if t in position_out}
        every = [known.get(k, out_shapes[k] or _dims_of(o)) for k, o in enumerate(outputs)]
        raise OutputsTooSmall(f"{self.compilation.group.name}: the outputs are too small",
                              every)

    def _output(self, t: int, client: DriverClient, device: Device,
                boundaries: _BoundarySet) -> bytes:
        tensor = self.compilation.lowered.hdi.tensors[t]
        dims = [d if d >= 0 else 1 for d in tensor.dims]
        boundary = self._window(boundaries, t, client, device,
                                _bytes_of(tensor.dataType, dims))
        key = (client, False)
        wire = boundary.wires.get(key)
        if wire is None:
            wire = ht.IOTensor(name=tensor.name, dataType=tensor.dataType,
                               dimensions=boundary.shape or dims, format=tensor.format,
                               data=boundary.memory.descriptor_in(client)).SerializeToString()
            boundary.wires[key] = wire
        return wire

    def _input(self, t: int, client: DriverClient, device: Device, boundaries: _BoundarySet,
               inputs: Sequence[Any], outputs: Sequence[Any], position_in: dict[int, int],
               position_out: dict[int, int], out_shapes: list[list[int] | None],
               describe: Describe) -> bytes:
        if t in position_in:
            return describe(inputs[position_in[t]], client)
        tensor = self.compilation.lowered.hdi.tensors[t]
        if t in position_out:  # a model output a later step reads: that tensor's window
            shape = out_shapes[position_out[t]] or []
            io = ht.IOTensor.FromString(describe(outputs[position_out[t]], client))
            io.dimensions[:] = shape
            io.data.dataSize = _bytes_of(tensor.dataType, shape)
            return io.SerializeToString()
        boundary = boundaries.tensors[t]
        key = (client, True)
        wire = boundary.wires.get(key)
        if wire is None:
            wire = ht.IOTensor(name=tensor.name, dataType=tensor.dataType,
                               dimensions=boundary.shape, format=tensor.format,
                               data=boundary.memory.descriptor_in(
                                   client, 0, _bytes_of(tensor.dataType, boundary.shape))
                               ).SerializeToString()
            boundary.wires[key] = wire
        return wire

    def close(self) -> None:
        with self._lock:
            self._closed = True
            sets = [s for free in self._free.values() for s in free]
            self._free = {}
        for boundaries in sets:
            boundaries.release()

    # -- asynchronous runs ------------------------------------------------------------------

    def start(self, model: PreparedModel, inputs: list, outputs: list, timeout_ms: int,
              user_data: Any, on_done: Callable | None, on_died: Callable | None,
              describe: Describe) -> HeteroAsyncRun:
        """Accept an asynchronous run (the model counted in by the caller): it completes
        exactly once through `on_done` — the steps' result, its deadline, a cancel, or a
        death without failover; with failover a death is `on_died` and the run goes on."""
        from . import execution

        run = HeteroAsyncRun(self, model, inputs, outputs, timeout_ms, user_data, on_done,
                             on_died, describe)
        execution._deadlines.add(run)
        execution._workers.submit(run.execute)
        return run


class _StepLost(Exception):
    """A step's device is lost to the run: its driver died (or could not be reached:
    `cause`), or it answered a device error (`error_code`, with the driver's reason)."""

    def __init__(self, index: int, device: Device, cause: BaseException | None,
                 error_code: int | None = None, driver_reason: str = "") -> None:
        super().__init__(str(cause) if cause is not None else code_name(error_code))
        self.index = index
        self.device = device
        self.cause = cause
        self.error_code = error_code
        self.driver_reason = driver_reason

    def reason(self) -> str | None:
        """A device error in words (None for a death)."""
        if self.error_code is None:
            return None
        return code_name(self.error_code) + (f": {self.driver_reason}"
                                             if self.driver_reason else "")

    def error(self) -> NNRtError:
        """What the run raises without failover: as on one device."""
        if self.error_code is None:
            return ConnectionLost(f"{self.device.name}: {self.cause}")
        return DeviceUnavailable(f"{self.device.name}: the driver's Run failed: "
                                 f"{code_name(self.error_code)}", reason=self.driver_reason)


class HeteroAsyncRun(AcceptedRun):
    """One accepted asynchronous run over steps (accepted_run.AcceptedRun); a driver's death
    under it is reported once, before OnRunDone, whichever step met it."""

    def __init__(self, runner: HeteroRunner, model: PreparedModel, inputs: list, outputs: list,
                 timeout_ms: int, user_data: Any, on_done: Callable | None,
                 on_died: Callable | None, describe: Describe) -> None:
        super().__init__(model, inputs, outputs, timeout_ms, user_data, on_done, on_died)
        self.runner = runner
        self.describe = describe
        self.died = False

    @property
    def label(self) -> str:
        return self.runner.compilation.group.name

    def _service_died(self) -> None:
        """A driver died under the run (reported once, before OnRunDone)."""
        with self._lock:
            if self.died:
                return
            self.died = True
        notify(self.on_died, "NN_OnServiceDied", self.user_data)

    def execute(self) -> None:
        remaining = self.time_left()
        if remaining is None:
            return
        try:
            self.runner.run(self.executor, self.inputs, self.outputs, remaining, self.describe,
                            self.ticket, on_died=self._service_died)
        except NNRtError as exc:
            if isinstance(exc, ConnectionLost):
                self._service_died()
            if isinstance(exc, RunTimeout):
                exc = RunTimeout(f"{self.runner.compilation.group.name}: no result within "
                                 f"{self.timeout_ms} ms; the driver was told to abandon the run")
            if self.claim():
                log.warning("OH_NNExecutor_RunAsync: %s", exc.message)
                self.deliver(exc.code, error=exc)
            return
        except Exception as exc:
            log.exception("OH_NNExecutor_RunAsync over steps failed unexpectedly")
            if self.claim():
                self.deliver(OH_NN_FAILED, error=Failed(f"the run failed: {exc}"))
            return
        if self.claim():
            self.deliver(OH_NN_SUCCESS)

    def expire(self) -> None:
        """On the deadline thread: late. The step in flight is abandoned (the ticket), the
        callback runs on the callback pool."""
        if self.claim():
            self.ticket.cancel()
            from .execution import _callbacks

            _callbacks().submit(self.deliver, OH_NN_TIMEOUT, False, RunTimeout(
                f"{self.label}: no result within {self.timeout_ms} ms"))


def _bytes_of(data_type: int, shape: Sequence[int]) -> int:
    dtype = numpy_dtype(data_type)
    return math.prod(max(d, 0) for d in shape) * (dtype.itemsize if dtype is not None else 1)


def _dims_of(tensor: Any) -> list[int]:
    """A front end tensor's current dims (Binding.dims, or the C API's descriptor)."""
    dims = getattr(tensor, "dims", None)
    if dims is None:
        desc = getattr(tensor, "desc", None)
        dims = getattr(desc, "shape", None) or []
    return list(dims)
