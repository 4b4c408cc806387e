"""OH_NNExecutor: inference on a built compilation (capi.md 1.36–1.47).

An executor is bound to the prepared model its compilation left in the device's driver
session. Tensors (`NN_Tensor`) carry their own shared memory; a run sends the driver one
`IOTensor` per tensor (`tensor.io_tensor`; kept serialized with the tensor between runs,
`tensor.io_bytes`) and nothing else, so no tensor byte crosses the process boundary in a
message. What a run checks of unchanged tensors is kept as well (`_Ranges.accepted`, the
byte size in `_fits`), so a run whose tensors did not change since the last builds nothing.

Synchronous runs (`OH_NNExecutor_RunSync`) call the driver on the caller's thread: gRPC
fails the call the moment the driver's socket closes, so a run whose driver dies returns
OH_NN_CONNECTION_EXCEPTION promptly.

Asynchronous runs (`OH_NNExecutor_RunAsync`, which upstream refuses; ours follows the header
and the contract below) go to a pool of runtime threads. Every accepted run is an `_AsyncRun`
that completes exactly once, decided by whichever comes first:

* the driver's answer (worker thread) — SUCCESS or the code a synchronous run would give;
* its deadline (one scheduler thread for all runs) — OH_NN_TIMEOUT at the deadline; the
  driver was given the same deadline as the gRPC deadline and abandons the run itself;
* the death of the driver (the client's `on_death`, which fires when the session channel
  reaches end-of-file) — `NN_OnServiceDied(userData)` then
  `NN_OnRunDone(userData, OH_NN_CONNECTION_EXCEPTION, ...)`.

Callbacks never run inside `RunAsync`: on normal completion they run on the worker thread,
otherwise on a small callback pool, so user code never delays a deadline or a death notice.

Recovery (beyond upstream, which never recovers). After the driver dies, the executor's
calls that need it fail fast with OH_NN_CONNECTION_EXCEPTION while no driver of its device
serves (a failed connect is immediate). The first call once a driver of the same device
serves again — a new process of the same identity on the same socket name — prepares the
model there again, transparently (`OH_NNExecutor.session`):

* from the model cache blob the Build kept client-side (compilation.py exports it right
  after preparing), copied into a fresh shared buffer, when the driver supports a cache;
* from the lowered model otherwise, or when the driver refuses the blob.

Exactly one re-prepare per executor per new session, whatever the number of threads that
trigger it (`_session_lock`; no lock of a death callback is taken meanwhile). Tensors made
before the crash keep their mapping and their bytes; a run registers their memfd with the
new session on first use (`io_tensor(t, client)`, `SharedMemory.buffer_in`). Runs in flight
at the crash still complete as the contract above says.
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
from typing import Any

from nnrt.client.capi._objects import BuiltModel, Handle, live
from nnrt.common.hdi_model import IODesc, element_size
from nnrt.client.capi.enums import OH_NN_ReturnCode
from nnrt.client.capi.structs import c_count, c_int
from nnrt.client.capi.tensor import NN_Tensor, io_bytes
from nnrt.client.capi.tensor_desc import NN_TensorDesc, OH_NNTensorDesc_Create
from nnrt.client.hdi import BufferNotShared, DriverClient, DriverGone
from nnrt.common.hdi_model import PrepareError
from nnrt.common.errors import (
    HDF_ERR_NOT_SUPPORT,
    NNRT_NOT_SUPPORT,
    NNRT_OPERATION_FORBIDDEN,
    NNRT_SUCCESS,
    code_name,
)

__all__ = [
    "OH_NNExecutor",
    "OH_NNExecutor_Construct",
    "OH_NNExecutor_GetOutputShape",
    "OH_NNExecutor_Destroy",
    "OH_NNExecutor_GetInputCount",
    "OH_NNExecutor_GetOutputCount",
    "OH_NNExecutor_CreateInputTensorDesc",
    "OH_NNExecutor_CreateOutputTensorDesc",
    "OH_NNExecutor_GetInputDimRange",
    "OH_NNExecutor_SetOnRunDone",
    "OH_NNExecutor_SetOnServiceDied",
    "OH_NNExecutor_RunSync",
    "OH_NNExecutor_RunAsync",
]

log = logging.getLogger(__name__)

RC = OH_NN_ReturnCode
SUCCESS = RC.OH_NN_SUCCESS
FAILED = RC.OH_NN_FAILED
INVALID_PARAMETER = RC.OH_NN_INVALID_PARAMETER
OPERATION_FORBIDDEN = RC.OH_NN_OPERATION_FORBIDDEN
NULL_PTR = RC.OH_NN_NULL_PTR
TIMEOUT = RC.OH_NN_TIMEOUT
CONNECTION_EXCEPTION = RC.OH_NN_CONNECTION_EXCEPTION
UNAVAILABLE_DEVICE = RC.OH_NN_UNAVAILABLE_DEVICE

MAX_TENSORS = 200  # per RunSync / RunAsync call (capi.md 0.3)
MAX_OUTPUT_RANK = 10  # a returned output shape must be storable in an NN_TensorDesc
MAX_TIMEOUT_MS = 2**31 - 1  # int32_t
_UNSUPPORTED_CODES = (NNRT_NOT_SUPPORT, NNRT_OPERATION_FORBIDDEN, HDF_ERR_NOT_SUPPORT)
# How long a worker whose gRPC call failed waits for the session channel to confirm a death.
_DEATH_CONFIRM_S = 0.05


class _Ranges:
    """The answer to GetInputDimRanges, kept for the executor's lifetime (capi.md 1.43).

    `accepted[i]`: the last shape of input i found within the ranges (a run whose input
    shapes did not change checks nothing again).
    """

    __slots__ = ("status", "mins", "maxs", "accepted")
    OK, UNSUPPORTED, FAILED = "ok", "unsupported", "failed"

    def __init__(self, status: str, mins: list[list[int]] | None = None,
                 maxs: list[list[int]] | None = None) -> None:
        self.status = status
        self.mins = mins or []
        self.maxs = maxs or []
        self.accepted: list[list[int] | None] = [None] * len(self.mins)


class OH_NNExecutor(Handle):
    """An inference executor (capi.md 1.36). Thread-safe; runs may overlap."""

    def __init__(self, built: BuiltModel, client: DriverClient) -> None:
        super().__init__()
        # Holding the BuiltModel keeps the compilation's prepared model alive (compilation.py
        # releases it when nothing holds it any more); dropped when the executor is released.
        self.built: BuiltModel | None = built
        self.device = built.device
        self.inputs = [_copy_io(d) for d in built.inputs]
        self.outputs = [_copy_io(d) for d in built.outputs]
        self._build_ranges = (built.min_dims, built.max_dims)
        self.output_shapes: list[list[int]] = [list(d.shape) for d in built.outputs]
        self.on_run_done: Callable[..., Any] | None = None
        self.on_service_died: Callable[..., Any] | None = None
        self._client = client
        self._model_id = built.prepared_model_id
        self._own_model = False  # True once this executor prepared the model itself
        self._session_lock = threading.Lock()  # one re-prepare at a time
        self._state_lock = threading.Lock()  # the session swap against _release
        # One entry per re-prepare after a driver restart: "cache" or "model" (its source).
        self.recoveries: list[str] = []
        self._ranges: _Ranges | None = None
        self._active = 0  # runs using the executor's resources right now
        self._released = False
        # State of the deprecated API (deprecated.py): bindings and internal device buffers.
        self.bound_inputs: dict[int, Any] = {}
        self.bound_outputs: dict[int, Any] = {}
        self.input_buffers: dict[int, Any] = {}  # SetInput copies (SharedMemory)
        self.output_buffers: dict[int, Any] = {}  # SetOutput staging (SharedMemory)

    # -- the driver session ------------------------------------------------------------------

    def session(self) -> tuple[DriverClient, int]:
        """The live client and the prepared model id in its session; DriverGone if none.

        When the driver has died, a driver of the same device is looked for (a failed
        connect is immediate) and the model prepared there again — from the cache blob the
        Build kept when the driver supports a cache, else from the lowered model
        (compilation.prepare_again). Without either (an executor whose compilation kept
        neither) the executor stays unusable (the header: compile again).
        """
        client = self._client
        if client.alive:
            return client, self._model_id
        from nnrt.client.capi.compilation import can_prepare_again, prepare_again

        with self._session_lock:
            if self._client.alive:  # another thread recovered meanwhile
                return self._client, self._model_id
            built = self.built
            if built is None or self._released or not can_prepare_again(built):
                raise DriverGone(f"{self.device.name}: the driver session of this executor has "
                                 "ended; compile the model again")
            client = self.device.client()  # DriverGone at once while the driver is away
            started = time.monotonic()
            try:
                model_id, source = prepare_again(built, client)
            except PrepareError as exc:
                raise DriverGone(f"{self.device.name}: preparing the model again failed: "
                                 f"{exc}") from exc
            log.info("executor: model prepared again on %s after a driver restart (id %d, from "
                     "its %s, %.1f ms)", self.device.name, model_id, source,
                     (time.monotonic() - started) * 1000)
            # (not self.lock: SetInput holds it while it asks for the session)
            with self._state_lock:
                released = self._released  # destroyed meanwhile: give the model back
                if not released:
                    self._client, self._model_id, self._own_model = client, model_id, True
                    self._ranges = None
                    self.recoveries.append(source)
        if released:
            _release_model(client, model_id)
            raise DriverGone(f"{self.device.name}: the executor was destroyed")
        return client, model_id

    def dim_ranges(self) -> _Ranges:
        """GetInputDimRanges of the prepared model: from the Build, else asked once."""
        ranges = self._ranges
        if ranges is not None:
            return ranges
        mins, maxs = self._build_ranges
        if mins or maxs or not self.inputs:
            ranges = _Ranges(_Ranges.OK, [list(map(int, d)) for d in mins or []],
                             [list(map(int, d)) for d in maxs or []])
        else:
            try:
                client, model_id = self.session()
                reply = client.get_input_dim_ranges(model_id)
            except DriverGone as exc:
                log.warning("GetInputDimRanges on %s: %s", self.device.name, exc)
                return _Ranges(_Ranges.FAILED)  # not cached: the driver may come back
            if reply.returnCode == NNRT_SUCCESS:
                ranges = _Ranges(_Ranges.OK, [list(a.values) for a in reply.minInputDims],
                                 [list(a.values) for a in reply.maxInputDims])
            else:
                log.warning("GetInputDimRanges on %s failed: %s", self.device.name,
                            code_name(reply.returnCode))
                ranges = _Ranges(_Ranges.UNSUPPORTED if reply.returnCode in _UNSUPPORTED_CODES
                                 else _Ranges.FAILED)
        self._ranges = ranges
        return ranges

    # -- resource accounting (destroy while another thread runs) ----------------------------

    def enter(self) -> bool:
        """Count a run in; False if the executor is destroyed."""
        with self.lock:
            if self.destroyed:
                return False
            self._active += 1
            return True

    def leave(self) -> None:
        with self.lock:
            self._active -= 1
            release = self.destroyed and self._active == 0 and not self._released
            if release:
                self._released = True
        if release:
            self._release()

    def destroy_now(self) -> None:
        """Mark destroyed; release what it owns now, or when the last run leaves."""
        with self.lock:
            if self.destroyed:
                return
            self.destroyed = True
            release = self._active == 0 and not self._released
            if release:
                self._released = True
        if release:
            self._release()

    def _release(self) -> None:
        with self._state_lock:
            client, model_id, own = self._client, self._model_id, self._own_model
            self._own_model = False
        buffers = [*self.input_buffers.values(), *self.output_buffers.values()]
        self.input_buffers.clear()
        self.output_buffers.clear()
        self.bound_inputs.clear()
        self.bound_outputs.clear()
        for memory in buffers:
            release_memory(client, memory)
        if own:
            _release_model(client, model_id)
        self.built = None  # the compilation's prepared model goes once nobody holds it

    def store_output_shapes(self, outputs: Sequence[NN_Tensor] | None,
                            shapes: Sequence[Sequence[int]]) -> None:
        """Write the driver's output shapes into the output tensors and the executor."""
        if outputs is not None:
            for tensor, shape in zip(outputs, shapes):
                with tensor.lock:
                    desc = tensor.desc
                    if desc.shape != shape:  # (the same shape as last run: nothing to write)
                        desc.shape = list(shape)
        with self.lock:
            self.output_shapes = [list(s) for s in shapes]


def _copy_io(desc: IODesc) -> IODesc:
    return IODesc(desc.name, desc.data_type, list(desc.shape), desc.format)


def release_memory(client: DriverClient, memory: Any) -> None:
    """Unmap a SharedMemory and give it back to every live driver session that knows it
    (`client`'s if the memory does not say which made it; nothing to give if it died)."""
    if memory.client is None:
        memory.client = client
    memory.close()
    memory.release_in_sessions()


def _release_model(client: DriverClient, model_id: int) -> None:
    """ReleasePreparedModel of a model this executor prepared (nothing if the driver died)."""
    if not client.alive:
        return
    try:
        reply = client.release_prepared_model(model_id)
    except DriverGone:
        return
    if reply.returnCode != NNRT_SUCCESS:
        log.warning("ReleasePreparedModel %d failed: %s", model_id, code_name(reply.returnCode))


def _executor(obj: Any) -> OH_NNExecutor | None:
    return live(obj, OH_NNExecutor)


def _index(value: Any, count: int) -> int | None:
    """`value` as an index below `count`, None when it is not one (uint32/size_t in C)."""
    index = c_count(value)
    return index if index is not None and index < count else None


# -- 1.36 – 1.43: construction and queries -----------------------------------------------------


def OH_NNExecutor_Construct(compilation: Any) -> OH_NNExecutor | None:
    """capi.md 1.36: an executor for a built compilation, or None."""
    from nnrt.client.capi.compilation import OH_NNCompilation

    comp = live(compilation, OH_NNCompilation)
    if comp is None:
        return None
    with comp.lock:
        built = getattr(comp, "built", None)
    if built is None or not built.inputs or not built.outputs:
        return None
    client = built.extra.get("client")  # the session holding the prepared model
    if not isinstance(client, DriverClient) or not client.alive:
        try:
            current = built.device.client()
        except DriverGone as exc:
            log.warning("OH_NNExecutor_Construct: device %s is not available: %s",
                        built.device.name, exc)
            return None
        if not isinstance(client, DriverClient):
            client = current
        # else: the driver restarted since the Build; the first run prepares the model again
    return OH_NNExecutor(built, client)


def OH_NNExecutor_GetOutputShape(executor: OH_NNExecutor | None,
                                 outputIndex: int) -> tuple[int, list[int] | None]:
    """capi.md 1.37: (code, shape) of output `outputIndex` — the last run's, else compiled."""
    ex = _executor(executor)
    if ex is None:
        return INVALID_PARAMETER, None
    with ex.lock:
        index = _index(outputIndex, len(ex.output_shapes))
        if index is None:
            return INVALID_PARAMETER, None
        return SUCCESS, list(ex.output_shapes[index])


def OH_NNExecutor_Destroy(executor: OH_NNExecutor | None) -> None:
    """capi.md 1.38: release the executor; None, a destroyed or a foreign object: nothing.

    Runs in flight on other threads finish normally (each async run still gets its
    callback); the executor's own device buffers are released when the last of them ends.
    """
    ex = _executor(executor)
    if ex is not None:
        ex.destroy_now()


def OH_NNExecutor_GetInputCount(executor: OH_NNExecutor | None) -> tuple[int, int | None]:
    """capi.md 1.39: (code, number of model inputs)."""
    ex = _executor(executor)
    if ex is None:
        return INVALID_PARAMETER, None
    return SUCCESS, len(ex.inputs)


def OH_NNExecutor_GetOutputCount(executor: OH_NNExecutor | None) -> tuple[int, int | None]:
    """capi.md 1.40: (code, number of model outputs)."""
    ex = _executor(executor)
    if ex is None:
        return INVALID_PARAMETER, None
    return SUCCESS, len(ex.outputs)


def _new_desc(name: str, data_type: int, shape: Sequence[int], fmt: int) -> NN_TensorDesc | None:
    desc = OH_NNTensorDesc_Create()
    if desc is None:
        return None
    desc.name = name
    desc.data_type = data_type
    desc.shape = list(shape)
    desc.format = fmt
    return desc


def OH_NNExecutor_CreateInputTensorDesc(executor: OH_NNExecutor | None,
                                        index: int) -> NN_TensorDesc | None:
    """capi.md 1.41: a new descriptor of input `index` (dynamic dimensions are -1)."""
    ex = _executor(executor)
    if ex is None:
        return None
    i = _index(index, len(ex.inputs))
    if i is None:
        return None
    io = ex.inputs[i]
    return _new_desc(io.name, io.data_type, io.shape, io.format)


def OH_NNExecutor_CreateOutputTensorDesc(executor: OH_NNExecutor | None,
                                         index: int) -> NN_TensorDesc | None:
    """capi.md 1.42: a new descriptor of output `index` (after a run: its last shape)."""
    ex = _executor(executor)
    if ex is None:
        return None
    i = _index(index, len(ex.outputs))
    if i is None:
        return None
    io = ex.outputs[i]
    with ex.lock:
        shape = list(ex.output_shapes[i])
    return _new_desc(io.name, io.data_type, shape, io.format)


def OH_NNExecutor_GetInputDimRange(executor: OH_NNExecutor | None, index: int
                                   ) -> tuple[int, list[int] | None, list[int] | None]:
    """capi.md 1.43: (code, minInputDims, maxInputDims) of input `index`."""
    ex = _executor(executor)
    if ex is None:
        return INVALID_PARAMETER, None, None
    ranges = ex.dim_ranges()
    if ranges.status != _Ranges.OK:
        return OPERATION_FORBIDDEN, None, None
    if len(ranges.mins) != len(ranges.maxs) or \
            any(len(lo) != len(hi) for lo, hi in zip(ranges.mins, ranges.maxs)):
        return INVALID_PARAMETER, None, None
    i = _index(index, len(ranges.mins))
    if i is None:
        return INVALID_PARAMETER, None, None
    return SUCCESS, list(ranges.mins[i]), list(ranges.maxs[i])


# -- 1.44 / 1.45: callbacks ---------------------------------------------------------------------


def OH_NNExecutor_SetOnRunDone(executor: OH_NNExecutor | None,
                               onRunDone: Callable[[Any, int, list, int], Any] | None) -> int:
    """capi.md 1.44 (header contract): register the RunAsync completion callback."""
    ex = _executor(executor)
    if ex is None or onRunDone is None or not callable(onRunDone):
        return INVALID_PARAMETER
    with ex.lock:
        ex.on_run_done = onRunDone
    return SUCCESS


def OH_NNExecutor_SetOnServiceDied(executor: OH_NNExecutor | None,
                                   onServiceDied: Callable[[Any], Any] | None) -> int:
    """capi.md 1.45 (header contract): register the driver-death callback of RunAsync."""
    ex = _executor(executor)
    if ex is None or onServiceDied is None or not callable(onServiceDied):
        return INVALID_PARAMETER
    with ex.lock:
        ex.on_service_died = onServiceDied
    return SUCCESS


# -- 1.46 / 1.47: running -----------------------------------------------------------------------


def _count_ok(count: Any) -> bool:
    if type(count) is int:
        return 0 < count <= MAX_TENSORS
    value = c_count(count)
    return value is not None and 0 < value <= MAX_TENSORS


def _take(seq: Any, count: int) -> list | None:
    """The first `count` elements of a sequence; None if it is no sequence or too short."""
    try:
        if len(seq) < count:
            return None
        return list(seq[:count])
    except TypeError:
        return None


def _byte_size(desc: NN_TensorDesc) -> int | None:
    """The descriptor's byte size; 0 when dynamic (size unknown); None if not computable."""
    shape, size = desc.shape, element_size(desc.data_type)
    if shape is None or size == 0:
        return None
    if any(d < 0 for d in shape):
        return 0
    return math.prod(shape) * size


def _fits(tensor: NN_Tensor) -> bool:
    """Whether the tensor's mapped region holds its descriptor's bytes (the byte size is kept
    with the tensor while its shape and data type stay)."""
    memory = tensor.memory
    if memory is None or memory.closed:
        return False
    desc = tensor.desc
    known = tensor.run_size
    if known is not None and known[0] == desc.shape and known[1] == desc.data_type:
        need = known[2]
    else:
        shape = desc.shape
        need = _byte_size(desc)
        tensor.run_size = (None if shape is None else list(shape), desc.data_type, need)
    return need is not None and tensor.size - tensor.offset >= need


def _prepare_run(ex: OH_NNExecutor, inputTensor: Any, inputCount: Any, outputTensor: Any,
                 outputCount: Any, userData: Any = None, timeout: Any = None, *,
                 is_async: bool = False) -> tuple[int, list | None, list | None]:
    """The argument checks of 1.46 (and 1.47) in order: (code, inputs, outputs)."""
    fail = INVALID_PARAMETER, None, None
    if inputTensor is None or not _count_ok(inputCount):
        return fail
    inputs = _take(inputTensor, inputCount)
    if inputs is None:
        return fail
    if outputTensor is None or not _count_ok(outputCount):
        return fail
    outputs = _take(outputTensor, outputCount)
    if outputs is None:
        return fail
    if is_async:
        if userData is None:
            return fail
        timeout_ms = c_int(timeout, -(1 << 31), MAX_TIMEOUT_MS)
        if timeout_ms is None or timeout_ms <= 0:
            return fail
    if inputCount != len(ex.inputs) or outputCount != len(ex.outputs):
        return fail
    ranges = ex.dim_ranges()
    if ranges.status == _Ranges.OK:
        if len(ranges.mins) != inputCount or len(ranges.maxs) != inputCount:
            return fail
        accepted = ranges.accepted
        for i, tensor in enumerate(inputs):
            if tensor is None:
                return NULL_PTR, None, None
            if not isinstance(tensor, NN_Tensor) or tensor.destroyed:
                return fail
            shape = tensor.desc.shape or []
            if shape == accepted[i]:
                continue  # within the ranges at the last run already
            lows, highs = ranges.mins[i], ranges.maxs[i]
            if len(shape) != len(lows) or len(lows) != len(highs) or \
                    any(d < 0 or not lo <= d <= hi for d, lo, hi in zip(shape, lows, highs)):
                return fail
            accepted[i] = list(shape)
    else:
        for tensor in inputs:
            if not isinstance(tensor, NN_Tensor) or tensor.destroyed:
                return fail
    for tensor in outputs:
        if not isinstance(tensor, NN_Tensor) or tensor.destroyed:
            return fail
    for tensor in inputs:
        if not _fits(tensor):
            return FAILED, None, None
    for tensor in outputs:
        if not _fits(tensor):
            return FAILED, None, None
    return SUCCESS, inputs, outputs


def check_reply(reply: Any, output_count: int, what: str) -> tuple[int, list[list[int]] | None]:
    """capi.md 1.46 after the driver answered: (code, output shapes)."""
    if reply.returnCode != NNRT_SUCCESS or not reply.outputDims:
        log.warning("%s: the driver's Run failed: %s%s", what,
                    code_name(reply.returnCode) if reply.returnCode else "no output shapes",
                    f": {reply.reason}" if reply.reason else "")
        return UNAVAILABLE_DEVICE, None
    shapes = [list(d.values) for d in reply.outputDims]
    if len(shapes) != output_count:
        log.warning("%s: the driver returned %d output shapes for %d outputs", what,
                    len(shapes), output_count)
        return INVALID_PARAMETER, None
    for s in shapes:
        if not 0 < len(s) <= MAX_OUTPUT_RANK:
            log.warning("%s: the driver returned an unstorable output shape %s", what, shapes)
            return INVALID_PARAMETER, None
    return SUCCESS, shapes


def OH_NNExecutor_RunSync(executor: OH_NNExecutor | None, inputTensor: Sequence[NN_Tensor] | None,
                          inputCount: int, outputTensor: Sequence[NN_Tensor] | None,
                          outputCount: int) -> int:
    """capi.md 1.46: run once and wait; output tensors' shapes are updated on success."""
    return run_sync(executor, inputTensor, inputCount, outputTensor, outputCount, None)


def run_sync(executor: OH_NNExecutor | None, inputTensor: Sequence[NN_Tensor] | None,
             inputCount: int, outputTensor: Sequence[NN_Tensor] | None, outputCount: int,
             timeout: float | None) -> int:
    """RunSync with a deadline of `timeout` seconds (None: none), on the calling thread: the
    Pythonic API's Executor.run. TIMEOUT past it, and the driver abandons the run. (RunAsync
    would hand the run to a runtime thread and back: two thread hand-offs per run.)"""
    ex = _executor(executor)
    if ex is None:
        return INVALID_PARAMETER
    code, inputs, outputs = _prepare_run(ex, inputTensor, inputCount, outputTensor, outputCount)
    if code != SUCCESS:
        return code
    if not ex.enter():
        return INVALID_PARAMETER
    try:
        try:
            client, model_id = ex.session()
            # after a driver restart, the tensors' memfds are registered with the new session
            ios_in = [io_bytes(t, client) for t in inputs]
            ios_out = [io_bytes(t, client) for t in outputs]
            reply = client.run(model_id, ios_in, ios_out, timeout)
        except DriverGone as exc:
            log.warning("OH_NNExecutor_RunSync on %s: %s", ex.device.name, exc)
            return CONNECTION_EXCEPTION
        except TimeoutError:
            log.warning("OH_NNExecutor_RunSync on %s: no result within %g s; the driver was "
                        "told to abandon the run", ex.device.name, timeout)
            return TIMEOUT
        except BufferNotShared as exc:
            log.warning("OH_NNExecutor_RunSync on %s: a tensor's memory: %s", ex.device.name, exc)
            return FAILED
        code, shapes = check_reply(reply, len(outputs), "OH_NNExecutor_RunSync")
        if code == SUCCESS:
            ex.store_output_shapes(outputs, shapes)
        return code
    finally:
        ex.leave()


# -- asynchronous runs: the runtime's threads -----------------------------------------------------


class _AsyncRun:
    """One accepted RunAsync: completes exactly once."""

    __slots__ = ("executor", "client", "model_id", "inputs", "outputs", "ios_in", "ios_out",
                 "count", "deadline", "timeout_ms", "user_data", "on_done", "on_died",
                 "_lock", "done", "__weakref__")

    def __init__(self, executor: OH_NNExecutor, client: DriverClient, model_id: int,
                 inputs: list, outputs: list, count: int, timeout_ms: int,
                 user_data: Any, on_done: Callable | None, on_died: Callable | None) -> None:
        self.executor = executor
        self.client = client
        self.model_id = model_id
        self.inputs = inputs
        self.outputs = outputs  # the very handles passed in (identity holds)
        self.ios_in = [io_bytes(t, client) for t in inputs]
        self.ios_out = [io_bytes(t, client) for t in outputs]
        self.count = count
        self.timeout_ms = timeout_ms
        self.deadline = time.monotonic() + timeout_ms / 1000
        self.user_data = user_data
        self.on_done = on_done
        self.on_died = on_died
        self._lock = threading.Lock()
        self.done = False

    def claim(self) -> bool:
        """True for the one caller that decides the outcome."""
        with self._lock:
            if self.done:
                return False
            self.done = True
        _untrack(self)
        return True

    def deliver(self, code: int, died: bool = False) -> None:
        """Call the callbacks (once, after a successful claim) and let the executor go."""
        try:
            if died and self.on_died is not None:
                try:
                    self.on_died(self.user_data)
                except Exception:
                    log.exception("NN_OnServiceDied callback raised")
            if self.on_done is not None:
                try:
                    self.on_done(self.user_data, OH_NN_ReturnCode(code), self.outputs, self.count)
                except Exception:
                    log.exception("NN_OnRunDone callback raised")
        finally:
            self.executor.leave()

    # outcomes --------------------------------------------------------------------------

    def execute(self) -> None:
        """On a worker thread: the driver call, then completion unless already decided."""
        if self.done:
            return
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            return  # the deadline thread completes it
        try:
            reply = self.client.run(self.model_id, self.ios_in, self.ios_out, timeout=remaining)
        except TimeoutError:
            if self.claim():
                self._timed_out()
            return
        except DriverGone as exc:
            died = self.client.wait_dead(_DEATH_CONFIRM_S)
            if self.claim():
                log.warning("OH_NNExecutor_RunAsync on %s: %s", self.executor.device.name, exc)
                self.deliver(CONNECTION_EXCEPTION, died=died)
            return
        except Exception:
            log.exception("OH_NNExecutor_RunAsync: the run failed unexpectedly")
            if self.claim():
                self.deliver(UNAVAILABLE_DEVICE)
            return
        if not self.claim():
            return
        code, shapes = check_reply(reply, self.count, "OH_NNExecutor_RunAsync")
        if code == SUCCESS:
            self.executor.store_output_shapes(self.outputs, shapes)
        self.deliver(code)

    def expire(self) -> None:
        """On the deadline thread: the run is late."""
        if self.claim():
            _callbacks().submit(self._timed_out)

    def _timed_out(self) -> None:
        log.warning("OH_NNExecutor_RunAsync on %s: no result within %d ms; the driver was told "
                    "to abandon the run", self.executor.device.name, self.timeout_ms)
        self.deliver(TIMEOUT)

    def service_died(self) -> None:
        """On the client's watcher thread: the driver is gone."""
        if self.claim():
            _callbacks().submit(self.deliver, CONNECTION_EXCEPTION, True)


class _Deadlines:
    """One thread that expires runs at their deadlines."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, weakref.ref]] = []
        self._cond = threading.Condition()
        self._seq = itertools.count()
        self._thread: threading.Thread | None = None

    def add(self, run: _AsyncRun) -> None:
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
_in_flight: weakref.WeakKeyDictionary[DriverClient, set[_AsyncRun]] = weakref.WeakKeyDictionary()


def _track(run: _AsyncRun) -> None:
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


def _untrack(run: _AsyncRun) -> None:
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


def OH_NNExecutor_RunAsync(executor: OH_NNExecutor | None, inputTensor: Sequence[NN_Tensor] | None,
                           inputCount: int, outputTensor: Sequence[NN_Tensor] | None,
                           outputCount: int, timeout: int, userData: Any) -> int:
    """capi.md 1.47 (header contract): start a run and return at once.

    SUCCESS means the run was accepted: it then gets exactly one NN_OnRunDone call (if one
    is registered) on a runtime thread — SUCCESS, TIMEOUT(9) `timeout` ms after the call,
    CONNECTION_EXCEPTION(11) after NN_OnServiceDied if the driver dies, or the code
    RunSync would have returned. The callbacks in force at this call are the ones used.
    """
    ex = _executor(executor)
    if ex is None:
        return INVALID_PARAMETER
    code, inputs, outputs = _prepare_run(ex, inputTensor, inputCount, outputTensor, outputCount,
                                         userData, timeout, is_async=True)
    if code != SUCCESS:
        return code
    try:
        client, model_id = ex.session()
    except DriverGone as exc:
        log.warning("OH_NNExecutor_RunAsync on %s: %s", ex.device.name, exc)
        return CONNECTION_EXCEPTION
    with ex.lock:
        on_done, on_died = ex.on_run_done, ex.on_service_died
    if not ex.enter():
        return INVALID_PARAMETER
    try:
        run = _AsyncRun(ex, client, model_id, inputs, outputs, len(outputs), int(timeout),
                        userData, on_done, on_died)
    except DriverGone as exc:  # registering a tensor with a new driver session failed
        ex.leave()
        log.warning("OH_NNExecutor_RunAsync on %s: %s", ex.device.name, exc)
        return CONNECTION_EXCEPTION
    except BufferNotShared as exc:
        ex.leave()
        log.warning("OH_NNExecutor_RunAsync on %s: a tensor's memory: %s", ex.device.name, exc)
        return FAILED
    except Exception:
        ex.leave()
        log.exception("OH_NNExecutor_RunAsync: cannot describe the run's tensors")
        return FAILED
    _track(run)
    _deadlines.add(run)
    _workers.submit(run.execute)
    return SUCCESS
