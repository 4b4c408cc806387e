"""onnxruntime's IOBinding over nnrt (`InferenceSession.io_binding()`, client/session.py):
inputs and outputs bound once to tensors in the shared memory the driver reads and
writes, then `run_with_iobinding` with no copy; `SharedTensor`, a bound output as
onnxruntime's OrtValue shows one."""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from nnrt.client.core import execution
from nnrt.client.core.buffer import allocate, release_memory
from nnrt.client.core.driver import DriverGone
from nnrt.client.core.errors import ConnectionLost
from nnrt.client.core.execution import Binding, OutputsTooSmall, describe_binding
from nnrt.common.hdi_model import DATA_TYPES, hdi_format

from .onnx_import import as_fed, as_given

if TYPE_CHECKING:
    from .session import InferenceSession, NodeArg, RunOptions

_HDI_TYPE = {dtype: hdi for hdi, dtype in DATA_TYPES.values() if dtype is not None}


class SharedTensor:
    """A bound output, as onnxruntime's OrtValue shows one: over the shared pages."""

    def __init__(self, array: np.ndarray, binding: IOBinding) -> None:
        self._array = array
        self._binding = binding  # its memory stays mapped while this is held

    def numpy(self) -> np.ndarray:
        """The tensor's data in place (no copy), valid until the next run or clear."""
        return self._array

    def shape(self) -> list[int]:
        return list(self._array.shape)

    def data_type(self) -> str:
        return _type_name(self._array.dtype)

    def element_type(self) -> type:
        return self._array.dtype.type

    def device_name(self) -> str:
        return "cpu"  # host memory, shared with the driver

    def is_tensor(self) -> bool:
        return True

    def has_value(self) -> bool:
        return True


class IOBinding:
    """onnxruntime's IOBinding over nnrt's shared memory (see the module docstring): one
    tensor per bound name, in the session's driver session, reused from run to run."""

    def __init__(self, session: InferenceSession) -> None:
        self._session = session
        self._lock = threading.RLock()
        self._inputs: dict[str, Binding] = {}
        self._outputs: dict[str, Binding] = {}
        self._bound_outputs: list[str] = []  # those the caller bound, in that order
        self._shapes: dict[str, tuple[int, ...]] = {}  # each output's, from the last run

    # -- what the model takes -------------------------------------------------------------

    def _io(self, name: str, output: bool) -> tuple[NodeArg, Any]:
        """The session's NodeArg and the executor's tensor description of `name`."""
        args = self._session._outputs if output else self._session._inputs
        ios = self._session._live_executor().outputs if output else \
            self._session._live_executor().inputs
        for arg, io in zip(args, ios):
            if arg.name == name:
                return arg, io
        raise ValueError(f"no {'output' if output else 'input'} named {name!r} (the model's: "
                         f"{[a.name for a in args]})")

    def _binding(self, old: Binding | None, io: Any, shape: Sequence[int],
                 output: bool) -> Binding:
        """`old` reshaped when its memory holds `shape`, else a fresh tensor in the
        session's driver session (`old` released)."""
        need = max(1, math.prod(shape) * io.dtype.itemsize)
        length = None if output else need
        if old is not None:
            if not old.memory.closed and old.memory.size >= need:
                old.dims, old.length, old.shape = list(shape), length, None
                old.forget()
                return old
            _release(old)
        handle = self._session._live_executor().handle
        try:
            client, _ = handle.session()
        except DriverGone as exc:
            raise ConnectionLost(f"{handle.device.name}: {exc}") from None
        memory = allocate(client, need, handle.device.name)
        return Binding(memory, io.name, _HDI_TYPE[io.dtype], list(shape), hdi_format(io.format),
                       length)

    # -- onnxruntime's API ----------------------------------------------------------------

    def bind_cpu_input(self, name: str, arr_on_cpu: Any) -> None:
        """Copy `arr_on_cpu` into the input's shared tensor, once: every run reads it there."""
        arg, io = self._io(name, output=False)
        array = as_fed(arg, arr_on_cpu)
        fixed = [d for d in io.shape]
        if array.ndim != len(fixed) or any(0 <= d != n for d, n in zip(fixed, array.shape)):
            raise ValueError(f"input {name!r}: shape {array.shape}, the model takes "
                             f"{tuple(None if d < 0 else d for d in fixed)}")
        if not np.can_cast(array.dtype, io.dtype, "same_kind"):
            raise ValueError(f"input {name!r}: {array.dtype} cannot become {io.dtype}")
        with self._lock:
            binding = self._binding(self._inputs.get(name), io, array.shape, output=False)
            self._inputs[name] = binding
            np.copyto(binding.memory.array(io.dtype, array.shape), array, casting="same_kind")

    def input_array(self, name: str) -> np.ndarray:
        """A bound input's tensor in place (nnrt's): write the next run's data into it."""
        _, io = self._io(name, output=False)
        with self._lock:
            binding = self._inputs.get(name)
            if binding is None:
                raise ValueError(f"input {name!r} is not bound (bind_cpu_input first)")
            return binding.memory.array(io.dtype, binding.dims)

    def bind_output(self, name: str, device_type: str = "cpu", device_id: int = 0,
                    element_type: Any = None, shape: Sequence[int] | None = None,
                    buffer_ptr: int | None = None) -> None:
        """Give the output a shared tensor (of `shape`, else the model's, a dynamic
        dimension 1 until a run says more); its result is in get_outputs() after a run."""
        arg, io = self._io(name, output=True)
        if device_type.lower() != "cpu" or device_id != 0:
            raise ValueError(f"output {name!r}: nnrt binds host memory the driver maps "
                             f"(device_type 'cpu', device_id 0), not {device_type}:{device_id}")
        if buffer_ptr is not None:
            raise ValueError(f"output {name!r}: nnrt allocates the shared memory itself; "
                             f"bind without buffer_ptr")
        if element_type is not None and np.dtype(element_type) != io.dtype:
            raise ValueError(f"output {name!r} is {io.dtype}, not {np.dtype(element_type)}")
        dims = list(shape) if shape is not None else [d if d >= 0 else 1 for d in io.shape]
        with self._lock:
            self._outputs[name] = self._binding(self._outputs.get(name), io, dims, output=True)
            if name not in self._bound_outputs:
                self._bound_outputs.append(name)

    def get_outputs(self) -> list[SharedTensor]:
        """The bound outputs of the last run, over the shared pages (no copy)."""
        with self._lock:
            args = [self._io(name, output=True)[0] for name in self._bound_outputs]
            return [SharedTensor(a, self) for a in self._arrays(args, copy=False)]

    def copy_outputs_to_cpu(self) -> list[np.ndarray]:
        """The bound outputs of the last run, copied."""
        with self._lock:
            args = [self._io(name, output=True)[0] for name in self._bound_outputs]
            return self._arrays(args, copy=True)

    def get_outputs_names(self) -> list[str]:
        return list(self._bound_outputs)

    def synchronize_inputs(self) -> None:
        """Nothing to wait for: the device reads the same pages the application wrote."""

    def synchronize_outputs(self) -> None:
        """Nothing to wait for: a run returns once the device has written the outputs."""

    def clear_binding_inputs(self) -> None:
        with self._lock:
            inputs, self._inputs = list(self._inputs.values()), {}
        for binding in inputs:
            _release(binding)

    def clear_binding_outputs(self) -> None:
        with self._lock:
            outputs, self._outputs = list(self._outputs.values()), {}
            self._bound_outputs, self._shapes = [], {}
        for binding in outputs:
            _release(binding)

    # -- running --------------------------------------------------------------------------

    def _arrays(self, args: Sequence[NodeArg], copy: bool) -> list[np.ndarray]:
        arrays = []
        for arg in args:
            if arg.name not in self._shapes:
                raise ValueError(f"output {arg.name!r}: no run since it was bound")
            _, io = self._io(arg.name, output=True)
            array = as_given(arg, self._outputs[arg.name].memory.array(io.dtype,
                                                                       self._shapes[arg.name]))
            arrays.append(array.copy() if copy else array)
        return arrays

    def _run(self, run_options: RunOptions | None, timeout: float) -> None:
        executor = self._session._live_executor()
        ticket = run_options._begin() if run_options is not None else None
        try:
            with self._lock:
                missing = [a.name for a in self._session._inputs if a.name not in self._inputs]
                if missing:
                    raise ValueError(f"inputs not bound: {missing} (bind_cpu_input)")
                for arg, io in zip(self._session._outputs, executor.outputs):
                    if arg.name not in self._outputs:  # the device writes every output
                        self.bind_output(arg.name)
                        self._bound_outputs.remove(arg.name)
                inputs = [self._inputs[a.name] for a in self._session._inputs]
                outputs = [self._outputs[a.name] for a in self._session._outputs]
                handle = executor.handle
                try:
                    shapes = execution.run(handle, inputs, outputs, timeout, describe_binding,
                                           ticket)
                except OutputsTooSmall as exc:  # sized to the driver's shapes, run again
                    for arg, io, dims in zip(self._session._outputs, executor.outputs,
                                             exc.shapes):
                        self._outputs[arg.name] = self._binding(self._outputs[arg.name], io,
                                                                dims, output=True)
                    outputs = [self._outputs[a.name] for a in self._session._outputs]
                    shapes = execution.run(handle, inputs, outputs, timeout, describe_binding,
                                           ticket)
                self._shapes = {a.name: tuple(s) for a, s in zip(self._session._outputs,
                                                                 shapes)}
        finally:
            if ticket is not None:
                run_options._end(ticket)

    def __del__(self) -> None:
        """Dropped without a clear: unmap here (no call to the driver from a collector,
        which may run on any thread at any moment); the driver frees the buffers when the
        session closes or the process ends."""
        for binding in (*self._inputs.values(), *self._outputs.values()):
            binding.memory.close()


def _release(binding: Binding) -> None:
    """Unmap a tensor's memory and give it back to every driver session that knows it."""
    release_memory(binding.memory.client, binding.memory)


def _type_name(dtype: np.dtype) -> str:
    names = {"float32": "float", "float64": "double", "bool": "bool"}
    return f"tensor({names.get(dtype.name, dtype.name)})"
