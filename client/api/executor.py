"""`Executor`: runs a compiled model on numpy arrays, synchronously or from asyncio, over
tensors in shared memory it reuses."""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from nnrt.client import capi
from nnrt.client.capi.enums import OH_NN_ReturnCode
from nnrt.client.core import execution
from nnrt.client.core.buffer import allocate, release_memory
from nnrt.client.core.driver import DriverGone
from nnrt.client.core.errors import ConnectionLost, InvalidParameter, NNRtError
from nnrt.client.core.execution import Binding, describe_binding, OutputsTooSmall
from nnrt.client.core.prepared_model import DimRanges
from nnrt.common.hdi_model import DATA_TYPES, hdi_format

from .calls import _call
from .dtypes import Shape, _DTYPES, _OH_TYPES

if TYPE_CHECKING:
    from .compiled import Compiled

log = logging.getLogger(__name__)


_MAX_TIMEOUT_MS = 2**31 - 1
# Executor.run's default deadline, s. Decision: a run that no driver answers (a wedged device)
# must not hold a caller forever, so there is one by default — generous, as `nnrt run`'s.
# The run waits on the calling thread with that deadline (the session channel carries it to
# the driver, which abandons the run past it): no runtime thread in between.
DEFAULT_RUN_TIMEOUT = 60.0
_SPARE_SLOTS = 4  # idle tensor sets an executor keeps for reuse


@dataclass(eq=False)
class _Inputs:
    """Inputs of a run, and what runs with the same input shapes and data types need not
    work out again: one memo per executor, the last inputs seen (others replace it)."""

    arrays: list[np.ndarray]
    key: tuple[tuple[Shape, np.dtype], ...]  # (shape, dtype) of each input, accepted
    output_shapes: list[Shape] | None = None  # planned, or the driver's after a resize
    ranges: DimRanges | None = None  # the device ranges these shapes were found within

    @property
    def shapes(self) -> tuple[Shape, ...]:
        return tuple([shape for shape, _ in self.key])


class _Slot:
    """One set of input and output tensors (the core's Bindings over shared memory of the
    executor's driver session); reused while nobody holds its results."""

    def __init__(self) -> None:
        self.inputs: list[Binding] = []
        self.outputs: list[Binding] = []
        self.busy = False
        self.results: list[weakref.ref] = []
        # The input shapes its tensors were last sized for (None: size them again).
        self.fitted: tuple[Shape, ...] | None = None

    def free(self) -> bool:
        if self.busy:
            return False
        for r in self.results:
            if r() is not None:
                return False
        return True

    def destroy_when_unused(self) -> None:
        """Destroy now, or once the result arrays still referenced are gone."""
        alive = [a for a in (r() for r in self.results) if a is not None]
        if not alive:
            self.destroy()
            return
        remaining = [len(alive)]
        lock = threading.Lock()

        def one_gone() -> None:
            with lock:
                remaining[0] -= 1
                last = remaining[0] == 0
            if last:
                self.destroy()

        for holder in alive:
            weakref.finalize(holder, one_gone).atexit = False  # at exit the session ends

    def destroy(self) -> None:
        for binding in (*self.inputs, *self.outputs):
            _release(binding)
        self.inputs, self.outputs = [], []
        self.fitted = None


@dataclass
class _IO:
    name: str
    dtype: np.dtype
    shape: Shape
    format: int


class _Pending:
    """An awaited RunAsync: its future, loop and tensors."""

    __slots__ = ("future", "loop", "slot", "executor", "run")

    def __init__(self, future: asyncio.Future, loop: asyncio.AbstractEventLoop, slot: _Slot,
                 executor: Executor) -> None:
        self.future, self.loop, self.slot, self.executor = future, loop, slot, executor
        self.run: execution.AsyncRun | None = None


class Executor:
    """Runs a compiled model with numpy arrays (wraps an OH_NNExecutor). Thread-safe."""

    def __init__(self, compiled: Compiled) -> None:
        self._compiled = compiled
        self._plan = compiled._plan
        self._handle: capi.OH_NNExecutor | None = _call(
            "OH_NNExecutor_Construct", capi.OH_NNExecutor_Construct, compiled.handle)
        self.inputs = self._ios(capi.OH_NNExecutor_GetInputCount,
                                capi.OH_NNExecutor_CreateInputTensorDesc)
        self.outputs = self._ios(capi.OH_NNExecutor_GetOutputCount,
                                 capi.OH_NNExecutor_CreateOutputTensorDesc)
        self._slots: list[_Slot] = []
        self._lock = threading.Lock()
        self._memo: _Inputs | None = None  # the last inputs accepted (see _Inputs)

    def _ios(self, count_fn: Callable, desc_fn: Callable) -> list[_IO]:
        ios = []
        for i in range(_call(count_fn.__name__, count_fn, self._handle)):
            desc = _call(desc_fn.__name__, desc_fn, self._handle, i)
            try:
                ios.append(_IO(capi.OH_NNTensorDesc_GetName(desc)[1] or "",
                               _DTYPES[capi.OH_NNTensorDesc_GetDataType(desc)[1]],
                               tuple(capi.OH_NNTensorDesc_GetShape(desc)[1]),
                               capi.OH_NNTensorDesc_GetFormat(desc)[1]))
            finally:
                capi.OH_NNTensorDesc_Destroy(desc)
        return ios

    @property
    def stats(self) -> Any:
        """Over several devices, what its runs did (hetero.RunStats: steps, boundary bytes,
        bytes copied between steps, failovers); None on one device."""
        runner = self.handle.hetero
        return runner.stats if runner is not None else None

    @property
    def handle(self) -> capi.OH_NNExecutor:
        if self._handle is None:
            raise NNRtError(OH_NN_ReturnCode.OH_NN_INVALID_PARAMETER, "the executor is closed")
        return self._handle

    # -- tensors -----------------------------------------------------------------------------------

    def _arrays(self, inputs: Sequence[Any], named: Mapping[str, Any]) -> _Inputs:
        values = list(inputs)
        if named:
            names = [io.name for io in self.inputs]
            values += [None] * (len(names) - len(values))
            for key, value in named.items():
                if key not in names:
                    raise TypeError(f"no input named {key!r} (inputs: {names})")
                values[names.index(key)] = value
        if len(values) != len(self.inputs) or _has_none(values):
            raise NNRtError(OH_NN_ReturnCode.OH_NN_INVALID_PARAMETER,
                            f"the model takes {len(self.inputs)} input(s), got {len(values)}")
        arrays = [v if type(v) is np.ndarray else np.asarray(v) for v in values]
        key = tuple([(a.shape, a.dtype) for a in arrays])
        memo = self._memo
        if memo is not None and memo.key == key:  # what the last run accepted
            return _Inputs(arrays, key, memo.output_shapes, memo.ranges)
        for i, (io, a) in enumerate(zip(self.inputs, arrays)):
            if a.ndim != len(io.shape) or any(d >= 0 and d != n for d, n in zip(io.shape, a.shape)):
                raise NNRtError(OH_NN_ReturnCode.OH_NN_INVALID_PARAMETER,
                                f"input {i} ({io.name}): shape {a.shape}, the model takes "
                                f"{tuple(None if d < 0 else d for d in io.shape)}")
            if not np.can_cast(a.dtype, io.dtype, "same_kind"):
                raise NNRtError(OH_NN_ReturnCode.OH_NN_INVALID_PARAMETER,
                                f"input {i} ({io.name}): {a.dtype} cannot become {io.dtype}")
        inputs = _Inputs(arrays, key)
        self._memo = inputs
        return inputs

    def _remember(self, inputs: _Inputs) -> None:
        """Keep what was worked out for these inputs for the next run with the same ones."""
        memo = self._memo
        if memo is not None and memo.key == inputs.key:
            memo.output_shapes, memo.ranges = inputs.output_shapes, inputs.ranges

    def _output_shapes(self, inputs: _Inputs) -> list[Shape]:
        """The output shapes to size for these inputs, worked out once per input shapes."""
        if inputs.output_shapes is None:
            inputs.output_shapes = self._infer_output_shapes(inputs.arrays)
            self._remember(inputs)
        return inputs.output_shapes

    def _infer_output_shapes(self, arrays: Sequence[np.ndarray]) -> list[Shape]:
        """A first size for the outputs: the compiled shapes, dynamic dimensions from the
        model's own shape inference where it has one, else 1. Only a size to start from:
        the driver reports the true shapes, and a run whose outputs were too small is run
        again with outputs of those shapes (`_run`)."""
        shapes = [io.shape for io in self.outputs]
        if self._plan is not None:
            planned = self._plan.output_shapes([a.shape for a in arrays])
            shapes = [tuple(d if d >= 0 else p for d, p in zip(s, ps)) if len(s) == len(ps) else s
                      for s, ps in zip(shapes, planned)]
        return [tuple(d if d >= 0 else 1 for d in s) for s in shapes]

    def _acquire(self, inputs: _Inputs) -> _Slot:
        """A free slot with its inputs filled (the one copy) and outputs sized."""
        with self._lock:
            if self._handle is None:
                raise NNRtError(OH_NN_ReturnCode.OH_NN_INVALID_PARAMETER, "the executor is closed")
            free = [s for s in self._slots if s.free()]
            for extra in free[_SPARE_SLOTS:]:
                self._slots.remove(extra)
                extra.destroy()
            slot = free[0] if free else _Slot()
            if not free:
                self._slots.append(slot)
            slot.busy = True
            slot.results = []
        try:
            arrays, key = inputs.arrays, inputs.shapes
            fitted = slot.fitted == key  # its tensors are sized for these input shapes
            if not fitted:
                slot.fitted = None
                slot.inputs = [self._fit(slot.inputs, i, io, a.shape)
                               for i, (io, a) in enumerate(zip(self.inputs, arrays))]
            for b, io, a in zip(slot.inputs, self.inputs, arrays):
                np.copyto(_view(b, io.dtype, a.shape), a, casting="same_kind")
            shapes = self._output_shapes(inputs)
            if not fitted:
                slot.outputs = [self._fit(slot.outputs, i, io, s, output=True)
                                for i, (io, s) in enumerate(zip(self.outputs, shapes))]
                slot.fitted = key
        except BaseException:
            slot.busy = False
            raise
        return slot

    def _fit(self, bindings: list[Binding], i: int, io: _IO, shape: Shape,
             output: bool = False) -> Binding:
        """Tensor `i` of a slot, reshaped to `shape`, replaced when it is too small. An
        input's window is its bytes; an output's the whole buffer (room for the driver)."""
        need = max(1, math.prod(shape) * io.dtype.itemsize)
        length = None if output else need
        b = bindings[i] if i < len(bindings) else None
        if b is not None:
            if not b.memory.closed and b.memory.size >= need:
                b.dims, b.length, b.shape = list(shape), length, None
                b.forget()
                return b
            _release(b)
        handle = self.handle
        try:
            client, _ = handle.session()  # the memory lives in the model's driver session
        except DriverGone as exc:
            raise ConnectionLost(f"{handle.device.name}: {exc}") from None
        memory = allocate(client, need, handle.device.name)
        return Binding(memory, io.name, DATA_TYPES[_OH_TYPES[io.dtype]][0], list(shape),
                       hdi_format(io.format), length)

    def _results(self, slot: _Slot) -> Any:
        """Arrays over the output tensors' shared memory (no copy), in their actual shapes."""
        arrays = []
        for b, io in zip(slot.outputs, self.outputs):
            if b.memory.closed:  # released meanwhile: the executor was closed
                raise InvalidParameter("the executor is closed")
            shape = tuple(b.shape if b.shape is not None else b.dims)
            arrays.append(_view(b, io.dtype, shape))
        # Track what holds the shared pages: numpy's own memoryview under each array (it
        # outlives the array while slices or views of it exist, and lets the mapping go
        # the moment it dies).
        slot.results = [weakref.ref(_holder(a)) for a in arrays]
        slot.busy = False
        return arrays[0] if len(arrays) == 1 else tuple(arrays)

    # -- running -------------------------------------------------------------------------------------

    def run(self, *inputs: Any, timeout: float | None = DEFAULT_RUN_TIMEOUT,
            **named: Any) -> Any:
        """Run once: numpy arrays (or anything numpy converts) in, by position or input name;
        one array out, or a tuple for several outputs. `timeout` in seconds, default
        DEFAULT_RUN_TIMEOUT (60): NNRtError(OH_NN_TIMEOUT) past it; None: no deadline."""
        given = self._arrays(inputs, named)
        slot = self._acquire(given)
        try:
            self._run(slot, given, timeout)
        except BaseException:
            slot.busy = False
            raise
        return self._results(slot)

    def _run(self, slot: _Slot, inputs: _Inputs, timeout: float | None) -> None:
        """The core's run of a filled slot; outputs too small for what the driver computed
        are resized to the shapes it reported and the run made again, once."""
        handle = self.handle
        self._check_ranges(handle, inputs)
        try:
            execution.run(handle, slot.inputs, slot.outputs, timeout, describe_binding)
            return
        except OutputsTooSmall as exc:
            shapes = [tuple(s) for s in exc.shapes]
        log.debug("outputs resized to the driver's shapes %s; running again", shapes)
        slot.outputs = [self._fit(slot.outputs, i, io, s, output=True)
                        for i, (io, s) in enumerate(zip(self.outputs, shapes))]
        inputs.output_shapes = shapes
        self._remember(inputs)
        execution.run(handle, slot.inputs, slot.outputs, timeout, describe_binding)

    def _check_ranges(self, handle: capi.OH_NNExecutor, inputs: _Inputs) -> None:
        """Input shapes within the ranges the device publishes (InvalidParameter naming the
        dimension otherwise); what passed once is not checked again."""
        ranges = handle.dim_ranges()
        if inputs.ranges is ranges:
            return
        found = ranges.first_violation(inputs.shapes)
        if found is not None:
            i, why = found
            raise InvalidParameter(f"input {i} ({self.inputs[i].name}): {why}")
        inputs.ranges = ranges
        self._remember(inputs)

    async def run_async(self, *inputs: Any, timeout: float | None = None, **named: Any) -> Any:
        """`await` a run from asyncio (the core's asynchronous runtime, as RunAsync); the
        event loop is free while the device computes. `timeout` in seconds: RunTimeout past
        it. Cancelling the awaiting task has the driver abandon the run; its tensors are
        reused only once the driver has answered. Outputs too small for what the driver
        computed are resized to the shapes it reported and the run made again, once."""
        given = self._arrays(inputs, named)
        try:
            return await self._run_async(given, timeout)
        except OutputsTooSmall as exc:
            given.output_shapes = [tuple(s) for s in exc.shapes]  # the driver's, from now on
            self._remember(given)
            with self._lock:  # slots sized for these input shapes are too small
                for slot in self._slots:
                    if slot.fitted == given.shapes:
                        slot.fitted = None
            return await self._run_async(given, timeout)

    async def _run_async(self, inputs: _Inputs, timeout: float | None) -> Any:
        loop = asyncio.get_running_loop()
        slot = self._acquire(inputs)
        future: asyncio.Future = loop.create_future()
        pending = _Pending(future, loop, slot, self)
        try:
            handle = self.handle
            self._check_ranges(handle, inputs)
            pending.run = execution.start(handle, slot.inputs, slot.outputs, _ms(timeout),
                                          pending, _on_run_done, _on_service_died,
                                          describe_binding)
        except BaseException:
            slot.busy = False
            raise
        try:
            return await future
        except asyncio.CancelledError:
            pending.run.cancel()
            raise

    __call__ = run

    # -- life cycle ----------------------------------------------------------------------------------

    def close(self) -> None:
        """Release the executor and its tensors (arrays still referenced stay readable)."""
        with self._lock:
            handle, self._handle = self._handle, None
            slots, self._slots = self._slots, []
        if handle is not None:
            capi.OH_NNExecutor_Destroy(handle)
        for slot in slots:
            slot.destroy_when_unused()  # arrays handed out stay valid while referenced

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _has_none(values: Sequence[Any]) -> bool:
    for v in values:
        if v is None:
            return True
    return False


def _ms(timeout: float | None) -> int:
    if timeout is None:
        return _MAX_TIMEOUT_MS
    return max(1, min(_MAX_TIMEOUT_MS, math.ceil(timeout * 1000)))


def _view(binding: Binding, dtype: np.dtype, shape: Shape) -> np.ndarray:
    count = math.prod(shape)
    view = binding.memory.view(0, count * dtype.itemsize)
    return np.frombuffer(view, dtype, count=count).reshape(shape)


def _release(binding: Binding) -> None:
    """Unmap a tensor's memory and give it back to every driver session that knows it."""
    release_memory(binding.memory.client, binding.memory)


def _holder(array: np.ndarray) -> Any:
    """The memoryview at the bottom of an array's base chain (what exports the mapping)."""
    base: Any = array
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    return base


def _on_run_done(user_data: Any, code: int, outputs: list, count: int) -> None:
    """NN_OnRunDone of every Executor: completes the awaiting future (on its loop)."""
    if not isinstance(user_data, _Pending):
        return
    pending = user_data

    def complete() -> None:
        slot = pending.slot
        if pending.future.cancelled():
            slot.busy = False
            return
        if code == OH_NN_ReturnCode.OH_NN_SUCCESS:
            try:
                pending.future.set_result(pending.executor._results(slot))
            except Exception as exc:  # e.g. the executor was closed meanwhile
                slot.busy = False
                pending.future.set_exception(exc)
        else:
            slot.busy = False
            run = pending.run
            error = run.error if run is not None and run.error is not None else \
                NNRtError(code, "the run failed")
            pending.future.set_exception(error)

    try:
        pending.loop.call_soon_threadsafe(complete)
    except RuntimeError:  # the loop is closed: nobody waits any more
        pending.slot.busy = False


def _on_service_died(user_data: Any) -> None:
    log.warning("the driver of a run in flight died; the executor prepares its model again "
                "on its next run once the driver is back")
