"""The deprecated executor API of neural_network_runtime.h (capi.md 2.17–2.25).

Bindings live on the `OH_NNExecutor` (executor.py) until the next `OH_NNExecutor_Run`:

* `SetInput` copies the caller's bytes into a device buffer the executor keeps per input
  (reused while it is big enough); `SetOutput` registers a caller buffer and a device buffer
  the executor keeps per output, copied into the caller's buffer when `Run` succeeds.
* `SetInputWithMemory` / `SetOutputWithMemory` bind memory from
  `AllocateInputMemory` / `AllocateOutputMemory` (zero copy).

An `OH_NN_Memory` handed out here is known to the runtime until it is destroyed with
`DestroyInputMemory` / `DestroyOutputMemory` (same executor, same index); afterwards its
`data` view is released and every call given it answers OH_NN_INVALID_PARAMETER. As
upstream, destroying the executor does not free memory that was never destroyed.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from nnrt.common.hdi_model import DATA_TYPES, element_size, hdi_format
from nnrt.client.capi.enums import (OH_NN_CONNECTION_EXCEPTION, OH_NN_INVALID_PARAMETER,
                                     OH_NN_MEMORY_ERROR, OH_NN_SUCCESS, OH_NN_UNAVAILABLE_DEVICE)
from nnrt.client.capi.executor import OH_NNExecutor, _executor
from nnrt.client.core import execution
from nnrt.client.core.errors import NNRtError
from nnrt.client.core.buffer import release_memory
from nnrt.client.core.prepared_model import DimRanges
from nnrt.client.capi.structs import OH_NN_Memory, OH_NN_Tensor, c_count, c_int
from nnrt.client.core.driver import DriverGone
from nnrt.client.core.buffer import BufferNotShared, SharedMemory
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.common.errors import NNRT_SUCCESS, code_name

__all__ = [
    "OH_NNExecutor_SetInput",
    "OH_NNExecutor_SetOutput",
    "OH_NNExecutor_Run",
    "OH_NNExecutor_AllocateInputMemory",
    "OH_NNExecutor_AllocateOutputMemory",
    "OH_NNExecutor_DestroyInputMemory",
    "OH_NNExecutor_DestroyOutputMemory",
    "OH_NNExecutor_SetInputWithMemory",
    "OH_NNExecutor_SetOutputWithMemory",
]

log = logging.getLogger(__name__)


MAX_RANK = 200
MAX_TENSOR_BYTES = (1 << 32) - 1  # UINT32_MAX
MAX_DATA_TYPE = 12
MAX_TENSOR_TYPE = 162
OH_NN_TENSOR = 0


@dataclass
class _Input:
    """What Run sends for one input."""

    data_type: int  # OH_NN_DataType
    dims: list[int]
    memory: SharedMemory
    length: int
    user_memory: OH_NN_Memory | None = None  # SetInputWithMemory: must still be alive at Run


@dataclass
class _Output:
    memory: SharedMemory
    length: int
    caller: memoryview | None = None  # SetOutput: where Run copies the result
    user_memory: OH_NN_Memory | None = None


@dataclass
class _Allocated:
    memory: SharedMemory
    executor: OH_NNExecutor
    is_input: bool
    index: int


# Every OH_NN_Memory handed out and not yet destroyed, by identity.
_allocations: dict[int, tuple[OH_NN_Memory, _Allocated]] = {}
_alloc_lock = threading.Lock()


def _allocated(memory: Any) -> _Allocated | None:
    if not isinstance(memory, OH_NN_Memory):
        return None
    with _alloc_lock:
        entry = _allocations.get(id(memory))
    return entry[1] if entry is not None and entry[0] is memory else None


# -- OH_NN_Tensor checks (as OH_NNModel_AddTensor, capi.md 2.16) -----------------------------


def _dims_of(tensor: OH_NN_Tensor) -> list[int] | None:
    """The tensor's dimensions as a list; None when dimensions/dimensionCount disagree."""
    count = c_count(tensor.dimensionCount)
    if count is None:
        return None
    if tensor.dimensions is None:
        return [] if count == 0 else None
    if count == 0:
        return None
    try:
        if count > len(tensor.dimensions):
            return None
        dims = [c_int(tensor.dimensions[i], -(1 << 31), (1 << 31) - 1) for i in range(count)]
    except TypeError:
        return None
    return None if any(d is None for d in dims) else dims


def _tensor_valid(tensor: OH_NN_Tensor) -> bool:
    """The OH_NN_Tensor checks of 2.16: data type, tensor type, dimensions, quant params."""
    data_type = c_int(tensor.dataType, 0, MAX_DATA_TYPE)
    if data_type is None or c_int(tensor.type, 0, MAX_TENSOR_TYPE) is None:
        return False
    dims = _dims_of(tensor)
    if dims is None or len(dims) > MAX_RANK or any(d == 0 or d < -1 for d in dims):
        return False
    if all(d > 0 for d in dims) and math.prod(dims) * element_size(data_type) > MAX_TENSOR_BYTES:
        return False
    quant = tensor.quantParam
    if quant is not None:
        fields = (getattr(quant, "numBits", None), getattr(quant, "scale", None),
                  getattr(quant, "zeroPoint", None))
        if any(f is None for f in fields):
            return False
        count = c_count(getattr(quant, "quantCount", None))
        try:
            if count is None or any(count > len(f) for f in fields):
                return False
            if any(fields[0][i] != 8 for i in range(count)):
                return False
        except TypeError:
            return False
    return True


def _check_input(ex: OH_NNExecutor, inputIndex: Any, tensor: OH_NN_Tensor) -> tuple[int, int]:
    """The checks 2.17 and 2.24 share after their NULL checks: (code, index)."""
    dims = _dims_of(tensor)
    ranges = ex.dim_ranges()
    if ranges.status == DimRanges.FAILED:
        log.warning("SetInput on %s: the input-range query failed", ex.device.name)
        return OH_NN_UNAVAILABLE_DEVICE, -1
    if ranges.status == DimRanges.OK:
        index = c_count(inputIndex)
        if index is None or index >= len(ranges.mins) or index >= len(ranges.maxs) or \
                dims is None:
            return OH_NN_INVALID_PARAMETER, -1
        lows, highs = ranges.mins[index], ranges.maxs[index]
        if len(dims) != len(lows) or len(lows) != len(highs) or \
                any(d < 0 or not lo <= d <= hi for d, lo, hi in zip(dims, lows, highs)):
            return OH_NN_INVALID_PARAMETER, -1
    index = c_count(inputIndex)
    if index is None or index >= len(ex.inputs):
        return OH_NN_INVALID_PARAMETER, -1
    if not _tensor_valid(tensor) or any(d < 0 for d in dims):
        return OH_NN_INVALID_PARAMETER, -1
    compiled = ex.inputs[index]
    if tensor.dataType != compiled.data_type or len(dims) != len(compiled.shape) or \
            any(want >= 0 and d != want for d, want in zip(dims, compiled.shape)) or \
            tensor.type != OH_NN_TENSOR:
        return OH_NN_INVALID_PARAMETER, -1
    return OH_NN_SUCCESS, index


def _buffer(obj: Any, writable: bool) -> memoryview | None:
    """A flat byte view of a buffer-protocol object; None for NULL or unusable objects."""
    if obj is None:
        return None
    try:
        view = memoryview(obj)
    except TypeError:
        return None
    if writable and view.readonly:
        return None
    try:
        return view.cast("B") if view.format != "B" or view.ndim != 1 else view
    except TypeError:  # non-contiguous
        return None


def _output_bytes(ex: OH_NNExecutor, index: int) -> int:
    """Compiled byte size of output `index` (0 when dynamic); -1 if not computable."""
    io = ex.outputs[index]
    size = element_size(io.data_type)
    if size == 0:
        return -1
    if any(d < 0 for d in io.shape):
        return 0
    return math.prod(io.shape) * size


def _io_index(ex: OH_NNExecutor, value: Any, is_input: bool) -> int | None:
    """An input (or output) index argument of the executor; None when there is no such one."""
    index = c_count(value)
    if index is None or index >= len(ex.inputs if is_input else ex.outputs):
        return None
    return index


def _bind(ex: OH_NNExecutor, bound: dict, index: int, binding: _Input | _Output) -> int:
    """Keep `binding` for `index` until Run, unless the executor was destroyed meanwhile."""
    with ex.lock:
        if ex.destroyed:
            return OH_NN_INVALID_PARAMETER
        bound[index] = binding
    return OH_NN_SUCCESS


# -- 2.17 / 2.18: copy bindings ---------------------------------------------------------------


def _caller_bytes(obj: Any, length: Any, writable: bool) -> tuple[memoryview, int] | None:
    """(the caller's buffer, `length`) for a copy binding: at least one byte, at most the
    buffer's size; None when refused."""
    data = _buffer(obj, writable)
    size = c_count(length)
    if data is None or size is None or size == 0 or size > data.nbytes:
        return None
    return data, size


def _device_buffer(ex: OH_NNExecutor, store: dict, index: int, length: int
                   ) -> tuple[int, SharedMemory | None]:
    """The executor's buffer for `index`, reused when big enough, else a new one."""
    current = store.get(index)
    if current is not None and not current.closed and current.size >= length:
        return OH_NN_SUCCESS, current
    try:
        client, _ = ex.session()
        code, memory = client.allocate_buffer(length)
    except DriverGone as exc:
        log.warning("device buffer on %s: %s", ex.device.name, exc)
        return OH_NN_CONNECTION_EXCEPTION, None
    if code != NNRT_SUCCESS:
        log.warning("AllocateBuffer(%d) on %s failed: %s", length, ex.device.name,
                    code_name(code))
        return OH_NN_MEMORY_ERROR, None
    store[index] = memory
    if current is not None:
        release_memory(client, current)
    return OH_NN_SUCCESS, memory


def _bind_copy(ex: OH_NNExecutor, buffers: dict, bound: dict, index: int, size: int,
               binding: Callable[[SharedMemory], _Input | _Output]) -> int:
    """`_bind` of the binding made over the executor's device buffer for `index`."""
    with ex.lock:
        if ex.destroyed:
            return OH_NN_INVALID_PARAMETER
        code, memory = _device_buffer(ex, buffers, index, size)
        if code != OH_NN_SUCCESS:
            return code
        bound[index] = binding(memory)
    return OH_NN_SUCCESS


def OH_NNExecutor_SetInput(executor: OH_NNExecutor | None, inputIndex: int,
                           tensor: OH_NN_Tensor | None, dataBuffer: Any, length: int) -> int:
    """capi.md 2.17: bind input `inputIndex`, copying `length` bytes of `dataBuffer` now."""
    ex = _executor(executor)
    if ex is None or not isinstance(tensor, OH_NN_Tensor):
        return OH_NN_INVALID_PARAMETER
    caller = _caller_bytes(dataBuffer, length, writable=False)
    if caller is None:
        return OH_NN_INVALID_PARAMETER
    data, size = caller
    code, index = _check_input(ex, inputIndex, tensor)
    if code != OH_NN_SUCCESS:
        return code
    dims = _dims_of(tensor)
    if size < math.prod(dims) * element_size(tensor.dataType):
        return OH_NN_INVALID_PARAMETER

    def copied(memory: SharedMemory) -> _Input:
        memory.view(0, size)[:] = data[:size]
        return _Input(tensor.dataType, dims, memory, size)

    return _bind_copy(ex, ex.input_buffers, ex.bound_inputs, index, size, copied)


def OH_NNExecutor_SetOutput(executor: OH_NNExecutor | None, outputIndex: int, dataBuffer: Any,
                            length: int) -> int:
    """capi.md 2.18: `dataBuffer` (writable) receives output `outputIndex` after Run."""
    ex = _executor(executor)
    if ex is None:
        return OH_NN_INVALID_PARAMETER
    caller = _caller_bytes(dataBuffer, length, writable=True)
    if caller is None:
        return OH_NN_INVALID_PARAMETER
    data, size = caller
    index = _io_index(ex, outputIndex, is_input=False)
    if index is None:
        return OH_NN_INVALID_PARAMETER
    need = _output_bytes(ex, index)
    if need < 0 or size < need:
        return OH_NN_INVALID_PARAMETER
    return _bind_copy(ex, ex.output_buffers, ex.bound_outputs, index, size,
                      lambda memory: _Output(memory, size, data[:size]))


# -- 2.19: Run --------------------------------------------------------------------------------


def OH_NNExecutor_Run(executor: OH_NNExecutor | None) -> int:
    """capi.md 2.19: run with the bindings of 2.17/2.18/2.24/2.25."""
    ex = _executor(executor)
    if ex is None:
        return OH_NN_INVALID_PARAMETER
    with ex.lock:
        inputs = [ex.bound_inputs.get(i) for i in range(len(ex.inputs))]
        outputs = [ex.bound_outputs.get(i) for i in range(len(ex.outputs))]
    if any(b is None for b in inputs) or any(b is None for b in outputs):
        return OH_NN_INVALID_PARAMETER
    for binding in (*inputs, *outputs):
        if binding.memory.closed or (binding.user_memory is not None and
                                     _allocated(binding.user_memory) is None):
            return OH_NN_INVALID_PARAMETER  # not (or no longer) runtime shared memory
    if not ex.enter():
        return OH_NN_INVALID_PARAMETER
    try:
        try:
            client, model_id = ex.session()
            # memory made before a driver restart is registered with the new session
            ios_in = [ht.IOTensor(name=io.name, dataType=DATA_TYPES[b.data_type][0],
                                  dimensions=b.dims, format=hdi_format(io.format),
                                  data=b.memory.descriptor_in(client, 0, b.length))
                      for io, b in zip(ex.inputs, inputs)]
            ios_out = [ht.IOTensor(name=io.name, dataType=DATA_TYPES.get(io.data_type, (0,))[0],
                                   dimensions=shape, format=hdi_format(io.format),
                                   data=b.memory.descriptor_in(client, 0, b.length))
                       for io, shape, b in zip(ex.outputs, ex.output_shapes, outputs)]
            reply = client.run(model_id, ios_in, ios_out)
        except DriverGone as exc:
            log.warning("OH_NNExecutor_Run on %s: %s", ex.device.name, exc)
            return OH_NN_CONNECTION_EXCEPTION
        except BufferNotShared as exc:
            log.warning("OH_NNExecutor_Run on %s: %s", ex.device.name, exc)
            return OH_NN_MEMORY_ERROR
        try:
            shapes = execution.output_shapes(reply, len(outputs))
        except NNRtError as exc:
            log.warning("OH_NNExecutor_Run: %s", exc.message)
            return exc.code
        produced = []
        for io, shape, binding in zip(ex.outputs, shapes, outputs):
            if len(shape) != len(io.shape) or any(d < 0 for d in shape):
                return OH_NN_INVALID_PARAMETER
            nbytes = math.prod(shape) * element_size(io.data_type)
            if nbytes > binding.length:
                return OH_NN_INVALID_PARAMETER
            produced.append(nbytes)
        for binding, nbytes in zip(outputs, produced):
            if binding.caller is not None:
                try:
                    binding.caller[:nbytes] = binding.memory.view(0, nbytes)
                except (ValueError, TypeError) as exc:
                    log.warning("OH_NNExecutor_Run: copying an output failed: %s", exc)
                    return OH_NN_MEMORY_ERROR
        ex.store_output_shapes(None, shapes)
        return OH_NN_SUCCESS
    finally:
        ex.leave()


# -- 2.20 – 2.23: runtime memory --------------------------------------------------------------


def _allocate(executor: Any, index_value: Any, length: Any, is_input: bool) -> OH_NN_Memory | None:
    ex = _executor(executor)
    size = c_count(length)
    if ex is None or size is None or size == 0:
        return None
    index = _io_index(ex, index_value, is_input)
    if index is None:
        return None
    try:
        client, _ = ex.session()
        code, memory = client.allocate_buffer(size)
    except DriverGone as exc:
        log.warning("Allocate%sMemory on %s: %s", "Input" if is_input else "Output",
                    ex.device.name, exc)
        return None
    if code != NNRT_SUCCESS:
        log.warning("Allocate%sMemory(%d) on %s failed: %s", "Input" if is_input else "Output",
                    size, ex.device.name, code_name(code))
        return None
    handle = OH_NN_Memory(data=memory.view(0, size), length=size)
    with _alloc_lock:
        _allocations[id(handle)] = (handle, _Allocated(memory, ex, is_input, index))
    return handle


def OH_NNExecutor_AllocateInputMemory(executor: OH_NNExecutor | None, inputIndex: int,
                                      length: int) -> OH_NN_Memory | None:
    """capi.md 2.20: `length` bytes of device shared memory for input `inputIndex`."""
    return _allocate(executor, inputIndex, length, True)


def OH_NNExecutor_AllocateOutputMemory(executor: OH_NNExecutor | None, outputIndex: int,
                                       length: int) -> OH_NN_Memory | None:
    """capi.md 2.21: `length` bytes of device shared memory for output `outputIndex`."""
    return _allocate(executor, outputIndex, length, False)


def _destroy(executor: Any, index_value: Any, memory: Any, is_input: bool) -> None:
    ex = _executor(executor)
    what = "DestroyInputMemory" if is_input else "DestroyOutputMemory"
    if ex is None:
        log.info("OH_NNExecutor_%s: no executor", what)
        return
    if memory is None:
        log.info("OH_NNExecutor_%s: no memory", what)
        return
    index = _io_index(ex, index_value, is_input)
    if index is None:
        return
    with _alloc_lock:
        entry = _allocations.get(id(memory))
        if entry is None or entry[0] is not memory or entry[1].executor is not ex or \
                entry[1].is_input != is_input or entry[1].index != index:
            return
        del _allocations[id(memory)]
    allocated = entry[1]
    client = ex._client
    if isinstance(memory.data, memoryview):
        memory.data.release()
    release_memory(client, allocated.memory)


def OH_NNExecutor_DestroyInputMemory(executor: OH_NNExecutor | None, inputIndex: int,
                                     memory: OH_NN_Memory | None) -> None:
    """capi.md 2.22: release memory from AllocateInputMemory (same executor and index)."""
    _destroy(executor, inputIndex, memory, True)


def OH_NNExecutor_DestroyOutputMemory(executor: OH_NNExecutor | None, outputIndex: int,
                                      memory: OH_NN_Memory | None) -> None:
    """capi.md 2.23: release memory from AllocateOutputMemory (same executor and index)."""
    _destroy(executor, outputIndex, memory, False)


# -- 2.24 / 2.25: zero-copy bindings -----------------------------------------------------------


def _memory_length(memory: OH_NN_Memory, allocated: _Allocated, need: int) -> int | None:
    """The `length` of runtime memory bound to an input or output that needs `need` bytes:
    at least one byte and `need`, at most the memory's size; None when refused."""
    length = c_count(memory.length)
    if not length or length > allocated.memory.size or length < need:
        return None
    return length


def OH_NNExecutor_SetInputWithMemory(executor: OH_NNExecutor | None, inputIndex: int,
                                     tensor: OH_NN_Tensor | None,
                                     memory: OH_NN_Memory | None) -> int:
    """capi.md 2.24: bind input `inputIndex` to runtime memory (zero copy)."""
    ex = _executor(executor)
    allocated = _allocated(memory)
    if ex is None or not isinstance(tensor, OH_NN_Tensor) or allocated is None:
        return OH_NN_INVALID_PARAMETER
    code, index = _check_input(ex, inputIndex, tensor)
    if code != OH_NN_SUCCESS:
        return code
    dims = _dims_of(tensor)
    length = _memory_length(memory, allocated, math.prod(dims) * element_size(tensor.dataType))
    if length is None:
        return OH_NN_INVALID_PARAMETER
    return _bind(ex, ex.bound_inputs, index,
                 _Input(tensor.dataType, dims, allocated.memory, length, memory))


def OH_NNExecutor_SetOutputWithMemory(executor: OH_NNExecutor | None, outputIndex: int,
                                      memory: OH_NN_Memory | None) -> int:
    """capi.md 2.25: the device writes output `outputIndex` straight into `memory`."""
    ex = _executor(executor)
    allocated = _allocated(memory)
    if ex is None or allocated is None:
        return OH_NN_INVALID_PARAMETER
    index = _io_index(ex, outputIndex, is_input=False)
    if index is None:
        return OH_NN_INVALID_PARAMETER
    need = _output_bytes(ex, index)
    length = None if need < 0 else _memory_length(memory, allocated, need)
    if length is None:
        return OH_NN_INVALID_PARAMETER
    return _bind(ex, ex.bound_outputs, index, _Output(allocated.memory, length, None, memory))

