"""Running a PreparedModel: one synchronous run on the caller's thread (`run`), and the
runtime of asynchronous runs (`AsyncRun`: worker threads, one deadline thread, death
tracking per driver session).

Synchronous runs call the driver on the caller's thread: gRPC fails the call the moment the
driver's socket closes, so a run whose driver dies fails promptly with ConnectionLost.

Every accepted asynchronous run completes exactly once, decided by whichever comes first:

* the driver's answer (worker thread) — OH_NN_SUCCESS or the code a synchronous run would give;
* its deadline (one scheduler thread for all runs) — OH_NN_TIMEOUT at the deadline; the
  driver was given the same deadline as the gRPC deadline and abandons the run itself;
* the death of the driver (the client's `on_death`, which fires when the session channel
  reaches end-of-file) — `on_died(userData)` then `on_done(userData,
  OH_NN_CONNECTION_EXCEPTION, ...)`.

Callbacks never run inside the call that starts the run: on normal completion they run on
the worker thread, otherwise on a small callback pool, so user code never delays a deadline
or a death notice.

Tensors are described to the driver by the front end (`describe(tensor, client)`: the
serialized IOTensor of a tensor in that driver session), so this module runs any kind of
shared-memory tensor.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import math
import queue
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nnrt.common.errors import (NNRT_INSUFFICIENT_BUFFER, NNRT_SUCCESS, NNRT_TIME_OUT,
                               code_name)
from nnrt.common.hdi_model import DATA_TYPES, hdi_format
from nnrt.protos import hdi_types_pb2 as ht

from .buffer import BufferNotShared, SharedMemory, allocate, release_memory
from .accepted_run import AcceptedRun
from .driver import DriverClient, DriverGone, RunTicket
from .errors import (OH_NN_CONNECTION_EXCEPTION, OH_NN_SUCCESS, OH_NN_TIMEOUT,
                     OH_NN_UNAVAILABLE_DEVICE, ConnectionLost, DeviceUnavailable, Failed,
                     InvalidParameter, NNRtError, RunCancelled,
                     RunTimeout)
from .prepared_model import PreparedModel

log = logging.getLogger(__name__)

MAX_OUTPUT_RANK = 10  # a returned output shape must be storable in an NN_TensorDesc
# How long a worker whose gRPC call failed waits for the session channel to confirm a death.
_DEATH_CONFIRM_S = 0.05

Describe = Callable[[Any, DriverClient], bytes]


class OutputsTooSmall(DeviceUnavailable):
    """An output window was too small for what the run produced (the driver's
    NNRT_INSUFFICIENT_BUFFER): `shapes` are the true output shapes, so a front end that
    sizes its own outputs can resize them and run again. Nothing was written."""

    def __init__(self, message: str, shapes: list[list[int]], *, reason: str = "") -> None:
        super().__init__(message, reason=reason)
        self.shapes = shapes


@dataclass(eq=False)
class Binding:
    """A tensor of a run: a window of shared memory and what the driver must know of it
    (the HDI IOTensor), described for whichever driver session runs it — after a driver
    restart the memfd is registered with the new session (`SharedMemory.descriptor_in`)."""

    memory: SharedMemory
    name: str
    data_type: int  # HDI DataType
    dims: list[int]
    format: int  # HDI Format
    length: int | None = None  # bytes from offset 0; None: the whole buffer
    shape: list[int] | None = None  # an output's, as the driver reported it after a run
    _wire: tuple[DriverClient, bytes] | None = field(default=None, repr=False)

    def take_shape(self, shape: Sequence[int]) -> None:
        self.shape = list(shape)

    def forget(self) -> None:
        """Describe it again at the next run (its dims or length changed)."""
        self._wire = None

    def describe(self, client: DriverClient) -> bytes:
        """The serialized IOTensor in `client`'s session (kept while the session is)."""
        wire = self._wire
        if wire is not None and wire[0] is client:
            return wire[1]
        data = ht.IOTensor(name=self.name, dataType=self.data_type, dimensions=self.dims,
                           format=self.format,
                           data=self.memory.descriptor_in(client, 0, self.length)
                           ).SerializeToString()
        self._wire = (client, data)
        return data


def describe_binding(binding: Binding, client: DriverClient) -> bytes:
    return binding.describe(client)


def output_shapes(reply: Any, output_count: int) -> list[list[int]]:
    """The output shapes of a Run reply (capi.md 1.46 after the driver answered); the
    failure as an NNRtError otherwise."""
    if reply.returnCode != NNRT_SUCCESS or not reply.outputDims:
        what = code_name(reply.returnCode) if reply.returnCode else "no output shapes"
        message = f"the driver's Run failed: {what}"
        if reply.returnCode == NNRT_TIME_OUT:  # the driver abandoned the run: not a failure
            # of the device (a deadline the HDI client already turned into TimeoutError)
            raise RunTimeout(f"{message}: the driver abandoned the run", reason=reply.reason)
        if reply.returnCode == NNRT_INSUFFICIENT_BUFFER and len(reply.outputDims) == output_count:
            raise OutputsTooSmall(message, [list(d.values) for d in reply.outputDims],
                                  reason=reply.reason)
        raise DeviceUnavailable(message, reason=reply.reason)
    shapes = [list(d.values) for d in reply.outputDims]
    if len(shapes) != output_count:
        raise InvalidParameter(f"the driver returned {len(shapes)} output shapes for "
                               f"{output_count} outputs")
    for s in shapes:
        if not 0 < len(s) <= MAX_OUTPUT_RANK:
            raise InvalidParameter(f"the driver returned an unstorable output shape {shapes}")
    return shapes


def run(model: PreparedModel, inputs: Sequence[Any], outputs: Sequence[Any],
        timeout: float | None, describe: Describe,
        ticket: RunTicket | None = None, profile: list | None = None) -> list[list[int]]:
    """Run once on the calling thread and wait, with a deadline of `timeout` seconds (None:
    none; RunTimeout past it, and the driver abandons the run). The tensors are checked by the
    caller. Returns the output shapes (also stored in the output tensors and the model).
    `ticket.cancel()` from another thread: RunCancelled once the driver has abandoned it.
    `profile`: the driver times the run step by step; its RunProfile is appended (on one
    device: a run over several appends none)."""
    if not model.enter():
        raise InvalidParameter("the model is closed")
    try:
        if model.hetero is not None:  # over several devices: its steps
            return model.hetero.run(model, inputs, outputs, timeout, describe, ticket)
        try:
            client, model_id = model.session()
            # after a driver restart, the tensors' memfds are registered with the new session
            ios_in = [describe(t, client) for t in inputs]
            ios_out = [describe(t, client) for t in outputs]
            reply = client.run(model_id, ios_in, ios_out, timeout, ticket,
                               profile=profile is not None)
        except DriverGone as exc:
            raise ConnectionLost(f"{model.device.name}: {exc}") from None
        except TimeoutError:
            raise RunTimeout(f"{model.device.name}: no result within {timeout:g} s; the driver "
                             "was told to abandon the run") from None
        except BufferNotShared as exc:
            raise Failed(f"{model.device.name}: a tensor's memory: {exc}") from None
        if ticket is not None and ticket.cancelled and reply.returnCode != NNRT_SUCCESS:
            raise RunCancelled(f"{model.device.name}: the run was cancelled")
        known = model.reply_shapes
        if known is not None and known[0] is reply and len(known[1]) == len(outputs):
            shapes = [list(s) for s in known[1]]  # the caller's own lists, as below
        else:
            shapes = output_shapes(reply, len(outputs))
            model.reply_shapes = (reply, [list(s) for s in shapes])
        model.store_output_shapes(outputs, shapes)
        if profile is not None and reply.HasField("profile"):
            profile.append(reply.profile)
        return shapes
    finally:
        model.leave()


class Execution:
    """Runs of a PreparedModel over shared buffers of its own: inputs copied in once from
    arrays, outputs sized from the compiled shapes (a dynamic dimension: 1) and resized to
    the shapes the driver reports when they were too small; a run waits on the calling
    thread (`run`) and can be cancelled from another (`cancel`). What `nnrt run` and
    `nnrt bench` run; the C and Pythonic APIs bind tensors of their own."""

    def __init__(self, model: PreparedModel, arrays: Sequence[np.ndarray],
                 output_sizes: Sequence[int] | None = None) -> None:
        self.model = model
        self.client, _ = model.session()
        self.memories: list[SharedMemory] = []
        self.inputs: list[Binding] = []
        self.outputs: list[Binding] = []
        self.output_dtypes = [DATA_TYPES[d.data_type][1] for d in model.outputs]
        self._ticket: RunTicket | None = None
        try:
            for desc, array in zip(model.inputs, arrays):
                memory = self._allocate(array.nbytes)
                if array.nbytes:
                    memory.view(0, array.nbytes)[:] = array.reshape(-1).view(np.uint8)
                self.inputs.append(Binding(memory, desc.name, DATA_TYPES[desc.data_type][0],
                                           list(array.shape), hdi_format(desc.format),
                                           array.nbytes))
            self._make_outputs(output_sizes or [
                max(1, math.prod(d for d in desc.shape if d >= 0)) * dtype.itemsize
                for desc, dtype in zip(model.outputs, self.output_dtypes)])
        except BaseException:
            self.close()
            raise

    def _allocate(self, size: int) -> SharedMemory:
        memory = allocate(self.client, size, self.model.device.name)
        self.memories.append(memory)
        return memory

    def _make_outputs(self, sizes: Sequence[int]) -> None:
        self.outputs = [Binding(self._allocate(size), desc.name, DATA_TYPES[desc.data_type][0],
                                list(desc.shape), hdi_format(desc.format))
                        for desc, size in zip(self.model.outputs, sizes)]

    @property
    def output_sizes(self) -> list[int]:
        return [b.memory.size for b in self.outputs]

    def run(self, timeout: float | None, profile: list | None = None) -> list[list[int]]:
        """One run (deadline `timeout` seconds); the output shapes. Outputs too small are
        made the size of the driver's shapes and the run made again, once. `profile`: as
        `run` has it."""
        self._ticket = ticket = RunTicket()
        try:
            return run(self.model, self.inputs, self.outputs, timeout, describe_binding, ticket,
                       profile)
        except OutputsTooSmall as exc:
            sizes = [math.prod(s) * dtype.itemsize
                     for s, dtype in zip(exc.shapes, self.output_dtypes)]
        self._release([b.memory for b in self.outputs])
        self._make_outputs(sizes)
        return run(self.model, self.inputs, self.outputs, timeout, describe_binding, ticket,
                   profile)

    def cancel(self) -> None:
        """Have the driver abandon the run in flight (its `run` raises RunCancelled)."""
        ticket = self._ticket
        if ticket is not None:
            ticket.cancel()

    def results(self, shapes: Sequence[Sequence[int]]) -> list[np.ndarray]:
        """Copies of the outputs of the last run, in `shapes` (what `run` returned)."""
        return [b.memory.array(dtype, shape).copy()
                for b, dtype, shape in zip(self.outputs, self.output_dtypes, shapes)]

    def _release(self, memories: Sequence[SharedMemory]) -> None:
        for memory in memories:
            release_memory(self.client, memory)
            self.memories.remove(memory)

    def close(self) -> None:
        self._release(list(self.memories))


# -- asynchronous runs: the runtime's threads -----------------------------------------------------


class AsyncRun(AcceptedRun):
    """One accepted asynchronous run on one device (accepted_run.AcceptedRun)."""

    __slots__ = ("client", "model_id", "ios_in", "ios_out")

    def __init__(self, executor: PreparedModel, client: DriverClient, model_id: int,
                 inputs: list, outputs: list, count: int, timeout_ms: int,
                 user_data: Any, on_done: Callable | None, on_died: Callable | None,
                 describe: Describe) -> None:
        super().__init__(executor, inputs, outputs, timeout_ms, user_data, on_done, on_died)
        self.count = count
        self.client = client
        self.model_id = model_id
        self.ios_in = [describe(t, client) for t in inputs]
        self.ios_out = [describe(t, client) for t in outputs]

    def claimed(self) -> None:
        _untrack(self)

    # outcomes --------------------------------------------------------------------------

    def execute(self) -> None:
        """On a worker thread: the driver call, then completion unless already decided."""
        remaining = self.time_left()
        if remaining is None:
            return
        try:
            reply = self.client.run(self.model_id, self.ios_in, self.ios_out, timeout=remaining,
                                    ticket=self.ticket)
        except TimeoutError:
            if self.claim():
                self._timed_out()
            return
        except DriverGone as exc:
            died = self.client.wait_dead(_DEATH_CONFIRM_S)
            if self.claim():
                log.warning("OH_NNExecutor_RunAsync on %s: %s", self.executor.device.name, exc)
                self.deliver(OH_NN_CONNECTION_EXCEPTION, died=died,
                             error=ConnectionLost(f"{self.executor.device.name}: {exc}"))
            return
        except Exception:
            log.exception("OH_NNExecutor_RunAsync: the run failed unexpectedly")
            if self.claim():
                self.deliver(OH_NN_UNAVAILABLE_DEVICE)
            return
        if not self.claim():
            return
        try:
            shapes = output_shapes(reply, self.count)
        except NNRtError as exc:
            if self.ticket.cancelled:
                exc = RunCancelled(f"{self.executor.device.name}: the run was cancelled")
            log.warning("OH_NNExecutor_RunAsync: %s", exc.message)
            self.deliver(exc.code, error=exc)
            return
        self.executor.store_output_shapes(self.outputs, shapes)
        self.deliver(OH_NN_SUCCESS)

    def expire(self) -> None:
        """On the deadline thread: the run is late."""
        if self.claim():
            _callbacks().submit(self._timed_out)

    def _timed_out(self) -> None:
        message = (f"{self.executor.device.name}: no result within {self.timeout_ms} ms; the "
                   "driver was told to abandon the run")
        log.warning("OH_NNExecutor_RunAsync on %s", message)
        self.deliver(OH_NN_TIMEOUT, error=RunTimeout(message))

    def service_died(self) -> None:
        """On the client's watcher thread: the driver is gone."""
        if self.claim():
            _callbacks().submit(self.deliver, OH_NN_CONNECTION_EXCEPTION, True,
                                ConnectionLost(f"{self.executor.device.name}: the driver died"))


class _Deadlines:
    """One thread that expires runs at their deadlines."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, weakref.ref]] = []
        self._cond = threading.Condition()
        self._seq = itertools.count()
        self._thread: threading.Thread | None = None

    def add(self, run: AsyncRun) -> None:
        with self._cond:
            heapq.heappush(self._heap, (run.deadline, next(self._seq), weakref.ref(run)))
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="nnrt-deadlines",
                                                daemon=True)
                self._thread.start()
            elif self._heap[0][2]() is run:
                self._cond.notify()

    def _loop(self) -> None:
        while True:
            with self._cond:
                while True:
                    while self._heap:
                        run = self._heap[0][2]()
                        if run is not None and not run.done:
                            break
                        heapq.heappop(self._heap)
                    now = time.monotonic()
                    if self._heap and self._heap[0][0] <= now:
                        run = heapq.heappop(self._heap)[2]()
                        break
                    self._cond.wait(self._heap[0][0] - now if self._heap else None)
            if run is not None:
                run.expire()


class _Pool:
    """Daemon worker threads, started on demand up to `size`, kept while there is work.

    (Not concurrent.futures: its workers are joined at interpreter exit, so a run stuck in
    a wedged driver would keep the process from exiting.)
    """

    def __init__(self, name: str, size: int) -> None:
        self._name = name
        self._size = size
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        self._queue.put((fn, args))
        with self._lock:
            if self._idle > 0 or self._threads >= self._size:
                return
            self._threads += 1
            number = self._threads
        threading.Thread(target=self._work, name=f"{self._name}-{number}", daemon=True).start()

    def _work(self) -> None:
        while True:
            with self._lock:
                self._idle += 1
            try:
                fn, args = self._queue.get(timeout=30)
            except queue.Empty:
                with self._lock:
                    self._idle -= 1
                    if self._queue.empty():
                        self._threads -= 1
                        return
                continue
            with self._lock:
                self._idle -= 1
            try:
                fn(*args)
            except Exception:
                log.exception("%s: a task failed", self._name)


WORKERS = 64  # runs the runtime keeps in flight at once; more wait their turn (deadline intact)
_workers = _Pool("nnrt-run", WORKERS)
_callback_pool = _Pool("nnrt-callback", 8)
_deadlines = _Deadlines()


def _callbacks() -> _Pool:
    return _callback_pool


# Runs in flight per driver session, failed together when it dies.
_watch_lock = threading.Lock()
_in_flight: weakref.WeakKeyDictionary[DriverClient, set[AsyncRun]] = weakref.WeakKeyDictionary()


def _track(run: AsyncRun) -> None:
    client = run.client
    with _watch_lock:
        runs = _in_flight.get(client)
        fresh = runs is None
        if fresh:
            runs = _in_flight[client] = set()
        runs.add(run)
    if fresh:
        ref = weakref.ref(client)
        client.on_death(lambda: _client_died(ref))


def _untrack(run: AsyncRun) -> None:
    with _watch_lock:
        runs = _in_flight.get(run.client)
        if runs is not None:
            runs.discard(run)


def _client_died(ref: weakref.ref) -> None:
    client = ref()
    if client is None:
        return
    with _watch_lock:
        runs = _in_flight.pop(client, set())
    if runs:
        log.warning("driver %s died with %d asynchronous run(s) in flight",
                    client.grpc_path.name, len(runs))
    for run in runs:
        run.service_died()


def start(model: PreparedModel, inputs: list, outputs: list, timeout_ms: int, user_data: Any,
          on_done: Callable | None, on_died: Callable | None, describe: Describe) -> AsyncRun:
    """Accept an asynchronous run and hand it to the runtime (tracked for its driver's death,
    timed, queued); it completes exactly once through `on_done`. Refused at once with
    ConnectionLost (no driver of the device serves), InvalidParameter (the model is closed)
    or Failed (a tensor's memory cannot be shared with the driver's session)."""
    name = model.device.name
    if model.hetero is not None:  # over several devices: its steps, on a worker
        if not model.enter():
            raise InvalidParameter("the model is closed")
        try:
            return model.hetero.start(model, inputs, outputs, timeout_ms, user_data, on_done,
                                      on_died, describe)
        except BaseException:
            model.leave()
            raise
    try:
        client, model_id = model.session()
    except DriverGone as exc:
        raise ConnectionLost(f"{name}: {exc}") from None
    if not model.enter():
        raise InvalidParameter("the model is closed")
    try:
        run = AsyncRun(model, client, model_id, inputs, outputs, len(outputs), timeout_ms,
                       user_data, on_done, on_died, describe)
    except DriverGone as exc:  # registering a tensor with a new driver session failed
        model.leave()
        raise ConnectionLost(f"{name}: {exc}") from None
    except BufferNotShared as exc:
        model.leave()
        raise Failed(f"{name}: a tensor's memory: {exc}") from None
    except BaseException:
        model.leave()
        raise
    _track(run)
    _deadlines.add(run)
    _workers.submit(run.execute)
    return run
