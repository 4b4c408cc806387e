"""OH_NNExecutor: inference on a built compilation (capi.md 1.36–1.47).

An executor is bound to the prepared model its compilation left in the device's driver
session. Tensors (`NN_Tensor`) carry their own shared memory; a run sends the driver one
`IOTensor` per tensor (`tensor.io_tensor`; kept serialized with the tensor between runs,
`tensor.io_bytes`) and nothing else, so no tensor byte crosses the process boundary in a
message. What a run checks of unchanged tensors is kept as well (`DimRanges.accepted`, the
byte size in `_fits`), so a run whose tensors did not change since the last builds nothing.

The executor is the core's PreparedModel (client/core/prepared_model.py) as a handle; the
functions here check the C arguments in the order capi.md gives and translate the core's
exceptions into return codes. Runs themselves, synchronous and asynchronous (`RunAsync`,
which upstream refuses; ours follows the header), are the core's (client/core/execution.py:
the contract of exactly one completion per accepted run, deadlines, death notices).

Recovery (beyond upstream, which never recovers). After the driver dies, the executor's
calls that need it fail fast with OH_NN_CONNECTION_EXCEPTION while no driver of its device
serves (a failed connect is immediate). The first call once a driver of the same device
serves again — a new process of the same identity on the same socket name — prepares the
model there again, transparently (`PreparedModel.session`):

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

import logging
import math
from collections.abc import Callable, Sequence
from typing import Any

from nnrt.client.capi._objects import Handle, live
from nnrt.client.core.prepared_model import BuiltModel
from nnrt.client.capi.structs import c_count, c_int
from nnrt.client.capi.tensor import NN_Tensor, RunSize, io_bytes
from nnrt.client.capi.tensor_desc import NN_TensorDesc, OH_NNTensorDesc_Create
from nnrt.client.capi.enums import (OH_NN_FAILED, OH_NN_INVALID_PARAMETER, OH_NN_NULL_PTR,
                                     OH_NN_OPERATION_FORBIDDEN, OH_NN_SUCCESS)
from nnrt.client.core import execution
from nnrt.client.core.buffer import release_memory
from nnrt.client.core.driver import DriverClient, DriverGone
from nnrt.client.core.errors import NNRtError
from nnrt.client.core.prepared_model import DimRanges, PreparedModel
from nnrt.common.hdi_model import element_size

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


MAX_TENSORS = 200  # per RunSync / RunAsync call (capi.md 0.3)
MAX_TIMEOUT_MS = 2**31 - 1  # int32_t


class OH_NNExecutor(PreparedModel, Handle):
    """An inference executor (capi.md 1.36): the core's PreparedModel as a C handle (as
    NNAPI's handles are its builders), plus what only the C API has — the RunAsync callbacks
    and the deprecated API's bindings. Thread-safe; runs may overlap."""

    def __init__(self, built: BuiltModel, client: DriverClient) -> None:
        super().__init__(built, client)
        self.on_run_done: Callable[..., Any] | None = None
        self.on_service_died: Callable[..., Any] | None = None
        # State of the deprecated API (deprecated.py): bindings and internal device buffers.
        self.bound_inputs: dict[int, Any] = {}
        self.bound_outputs: dict[int, Any] = {}
        self.input_buffers: dict[int, Any] = {}  # SetInput copies (SharedMemory)
        self.output_buffers: dict[int, Any] = {}  # SetOutput staging (SharedMemory)

    def release_extra(self, client: DriverClient) -> None:
        buffers = [*self.input_buffers.values(), *self.output_buffers.values()]
        self.input_buffers.clear()
        self.output_buffers.clear()
        self.bound_inputs.clear()
        self.bound_outputs.clear()
        for memory in buffers:
            release_memory(client, memory)


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
    client = built.client  # the session holding the prepared model
    if client is None or not client.alive:
        try:
            current = built.device.client()
        except DriverGone as exc:
            log.warning("OH_NNExecutor_Construct: device %s is not available: %s",
                        built.device.name, exc)
            return None
        if client is None:
            client = current
        # else: the driver restarted since the Build; the first run prepares the model again
    return OH_NNExecutor(built, client)


def OH_NNExecutor_GetOutputShape(executor: OH_NNExecutor | None,
                                 outputIndex: int) -> tuple[int, list[int] | None]:
    """capi.md 1.37: (code, shape) of output `outputIndex` — the last run's, else compiled."""
    ex = _executor(executor)
    if ex is None:
        return OH_NN_INVALID_PARAMETER, None
    with ex.lock:
        index = _index(outputIndex, len(ex.output_shapes))
        if index is None:
            return OH_NN_INVALID_PARAMETER, None
        return OH_NN_SUCCESS, list(ex.output_shapes[index])


def OH_NNExecutor_Destroy(executor: OH_NNExecutor | None) -> None:
    """capi.md 1.38: release the executor; None, a destroyed or a foreign object: nothing.

    Runs in flight on other threads finish normally (each async run still gets its
    callback); the executor's own device buffers are released when the last of them ends.
    """
    ex = _executor(executor)
    if ex is not None:
        ex.close()


def OH_NNExecutor_GetInputCount(executor: OH_NNExecutor | None) -> tuple[int, int | None]:
    """capi.md 1.39: (code, number of model inputs)."""
    ex = _executor(executor)
    if ex is None:
        return OH_NN_INVALID_PARAMETER, None
    return OH_NN_SUCCESS, len(ex.inputs)


def OH_NNExecutor_GetOutputCount(executor: OH_NNExecutor | None) -> tuple[int, int | None]:
    """capi.md 1.40: (code, number of model outputs)."""
    ex = _executor(executor)
    if ex is None:
        return OH_NN_INVALID_PARAMETER, None
    return OH_NN_SUCCESS, len(ex.outputs)


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
        return OH_NN_INVALID_PARAMETER, None, None
    ranges = ex.dim_ranges()
    if ranges.status != DimRanges.OK:
        return OH_NN_OPERATION_FORBIDDEN, None, None
    if len(ranges.mins) != len(ranges.maxs) or \
            any(len(lo) != len(hi) for lo, hi in zip(ranges.mins, ranges.maxs)):
        return OH_NN_INVALID_PARAMETER, None, None
    i = _index(index, len(ranges.mins))
    if i is None:
        return OH_NN_INVALID_PARAMETER, None, None
    return OH_NN_SUCCESS, list(ranges.mins[i]), list(ranges.maxs[i])


# -- 1.44 / 1.45: callbacks ---------------------------------------------------------------------


def OH_NNExecutor_SetOnRunDone(executor: OH_NNExecutor | None,
                               onRunDone: Callable[[Any, int, list, int], Any] | None) -> int:
    """capi.md 1.44 (header contract): register the RunAsync completion callback."""
    ex = _executor(executor)
    if ex is None or onRunDone is None or not callable(onRunDone):
        return OH_NN_INVALID_PARAMETER
    with ex.lock:
        ex.on_run_done = onRunDone
    return OH_NN_SUCCESS


def OH_NNExecutor_SetOnServiceDied(executor: OH_NNExecutor | None,
                                   onServiceDied: Callable[[Any], Any] | None) -> int:
    """capi.md 1.45 (header contract): register the driver-death callback of RunAsync."""
    ex = _executor(executor)
    if ex is None or onServiceDied is None or not callable(onServiceDied):
        return OH_NN_INVALID_PARAMETER
    with ex.lock:
        ex.on_service_died = onServiceDied
    return OH_NN_SUCCESS


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
    if known is not None and known.shape == desc.shape and known.data_type == desc.data_type:
        need = known.nbytes
    else:
        shape = desc.shape
        need = _byte_size(desc)
        tensor.run_size = RunSize(None if shape is None else list(shape), desc.data_type, need)
    return need is not None and tensor.size - tensor.offset >= need


def _prepare_run(ex: OH_NNExecutor, inputTensor: Any, inputCount: Any, outputTensor: Any,
                 outputCount: Any, userData: Any = None, timeout: Any = None, *,
                 is_async: bool = False) -> tuple[int, list | None, list | None]:
    """The argument checks of 1.46 (and 1.47) in order: (code, inputs, outputs)."""
    fail = OH_NN_INVALID_PARAMETER, None, None
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
    if ranges.status == DimRanges.OK:
        if len(ranges.mins) != inputCount or len(ranges.maxs) != inputCount:
            return fail
        accepted = ranges.accepted
        for i, tensor in enumerate(inputs):
            if tensor is None:
                return OH_NN_NULL_PTR, None, None
            if not isinstance(tensor, NN_Tensor) or tensor.destroyed:
                return fail
            shape = tensor.desc.shape or []
            if shape == accepted[i]:
                continue  # within the ranges at the last run already
            why = ranges.violation(i, shape)
            if why is not None:
                log.warning("OH_NNExecutor_Run: input %d: %s", i, why)
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
            return OH_NN_FAILED, None, None
    for tensor in outputs:
        if not _fits(tensor):
            return OH_NN_FAILED, None, None
    return OH_NN_SUCCESS, inputs, outputs


def OH_NNExecutor_RunSync(executor: OH_NNExecutor | None, inputTensor: Sequence[NN_Tensor] | None,
                          inputCount: int, outputTensor: Sequence[NN_Tensor] | None,
                          outputCount: int) -> int:
    """capi.md 1.46: run once and wait; output tensors' shapes are updated on success. The C
    checks, then the core's run (client/core/execution.py), its exception as the code."""
    ex = _executor(executor)
    if ex is None:
        return OH_NN_INVALID_PARAMETER
    code, inputs, outputs = _prepare_run(ex, inputTensor, inputCount, outputTensor, outputCount)
    if code != OH_NN_SUCCESS:
        return code
    try:
        execution.run(ex, inputs, outputs, None, io_bytes)
    except NNRtError as exc:
        log.warning("OH_NNExecutor_RunSync: %s", exc.message)
        return exc.code
    return OH_NN_SUCCESS


def OH_NNExecutor_RunAsync(executor: OH_NNExecutor | None, inputTensor: Sequence[NN_Tensor] | None,
                           inputCount: int, outputTensor: Sequence[NN_Tensor] | None,
                           outputCount: int, timeout: int, userData: Any) -> int:
    """capi.md 1.47 (header contract): start a run and return at once.

    OH_NN_SUCCESS means the run was accepted: it then gets exactly one NN_OnRunDone call (if one
    is registered) on a runtime thread — OH_NN_SUCCESS, OH_NN_TIMEOUT(9) `timeout` ms after the call,
    OH_NN_CONNECTION_EXCEPTION(11) after NN_OnServiceDied if the driver dies, or the code
    RunSync would have returned. The callbacks in force at this call are the ones used.
    """
    ex = _executor(executor)
    if ex is None:
        return OH_NN_INVALID_PARAMETER
    code, inputs, outputs = _prepare_run(ex, inputTensor, inputCount, outputTensor, outputCount,
                                         userData, timeout, is_async=True)
    if code != OH_NN_SUCCESS:
        return code
    with ex.lock:
        on_done, on_died = ex.on_run_done, ex.on_service_died
    try:
        execution.start(ex, inputs, outputs, int(timeout), userData, on_done, on_died, io_bytes)
    except NNRtError as exc:
        log.warning("OH_NNExecutor_RunAsync: %s", exc.message)
        return exc.code
    except Exception:
        log.exception("OH_NNExecutor_RunAsync: cannot describe the run's tensors")
        return OH_NN_FAILED
    return OH_NN_SUCCESS
