"""The Pythonic API of nnrt: models from numpy in a few lines, compiled for a device, run with
numpy arrays — built on the OH_NN* C API (`nnrt.client.capi`), the same core.

    import numpy as np
    from nnrt.client import Model

    with Model() as m:
        x = m.input([None, 4])                       # None / -1: a dynamic dimension
        w = m.constant(np.random.rand(3, 4).astype(np.float32))
        y = m.softmax(m.fully_connected(x, w, activation="relu"))
        m.outputs(y)
        with m.compile("cpu") as compiled, compiled.executor() as ex:
            probs = ex.run(np.random.rand(8, 4).astype(np.float32))   # numpy in, numpy out
            probs = await ex.run_async(batch, timeout=1.0)            # from asyncio

* Errors raise `NNRtError(code, message)`; `code` is the `OH_NN_ReturnCode`.
* Every object is a context manager; `close()` releases what it holds (handles, shared
  memory, prepared models).
* Inputs are copied once, into the shared memory the driver reads; outputs come back as
  numpy arrays over the shared memory the driver wrote (no copy). An executor never
  overwrites arrays it has handed out while they are alive: a run whose previous results
  are still referenced gets fresh tensors, released once those arrays are gone.
* A driver that crashes fails the runs in flight (`NNRtError(OH_NN_CONNECTION_EXCEPTION)`)
  and every run while it is down; once a driver of the same device serves again, the next
  run prepares the model there again and succeeds, with the same executor and tensors.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nnrt.client import capi
from nnrt.client.capi.enums import (
    OH_NN_DataType,
    OH_NN_DeviceType,
    OH_NN_Format,
    OH_NN_OperationType,
    OH_NN_PerformanceMode,
    OH_NN_Priority,
    OH_NN_ReturnCode,
)
from nnrt.client.capi.operation_table import OPERATIONS, ParamSpec
from nnrt.client.capi._objects import last_failure
from nnrt.client.core import execution
from nnrt.client.core.device import find_device, registry
from nnrt.client.core.hetero import device_list
from nnrt.client.core.driver import DriverGone
from nnrt.client.core.buffer import allocate, release_memory
from nnrt.client.core.errors import ConnectionLost, InvalidParameter, NNRtError
from nnrt.client.core.execution import Binding, OutputsTooSmall, describe_binding
from nnrt.common.hdi_model import DATA_TYPES, hdi_format
from nnrt.client.core.prepared_model import DimRanges

__all__ = [
    "NNRtError",
    "DeviceInfo",
    "list_devices",
    "Model",
    "Operand",
    "Compiled",
    "Executor",
]

log = logging.getLogger(__name__)

_DTYPES: dict[int, np.dtype] = {
    OH_NN_DataType.OH_NN_BOOL: np.dtype(np.bool_),
    OH_NN_DataType.OH_NN_INT8: np.dtype(np.int8),
    OH_NN_DataType.OH_NN_INT16: np.dtype(np.int16),
    OH_NN_DataType.OH_NN_INT32: np.dtype(np.int32),
    OH_NN_DataType.OH_NN_INT64: np.dtype(np.int64),
    OH_NN_DataType.OH_NN_UINT8: np.dtype(np.uint8),
    OH_NN_DataType.OH_NN_UINT16: np.dtype(np.uint16),
    OH_NN_DataType.OH_NN_UINT32: np.dtype(np.uint32),
    OH_NN_DataType.OH_NN_UINT64: np.dtype(np.uint64),
    OH_NN_DataType.OH_NN_FLOAT16: np.dtype(np.float16),
    OH_NN_DataType.OH_NN_FLOAT32: np.dtype(np.float32),
    OH_NN_DataType.OH_NN_FLOAT64: np.dtype(np.float64),
}
_OH_TYPES = {dtype: oh for oh, dtype in _DTYPES.items()}
_FUSE = {None: 0, "none": 0, "relu": 1, "relu6": 2}
_FORMATS = {None: OH_NN_Format.OH_NN_FORMAT_NONE, "NCHW": OH_NN_Format.OH_NN_FORMAT_NCHW,
            "NHWC": OH_NN_Format.OH_NN_FORMAT_NHWC, "ND": OH_NN_Format.OH_NN_FORMAT_ND}
_MAX_TIMEOUT_MS = 2**31 - 1
# Executor.run's default deadline, s. Decision: a run that no driver answers (a wedged device)
# must not hold a caller forever, so there is one by default — generous, as `nnrt run`'s.
# The run waits on the calling thread with that deadline (the session channel carries it to
# the driver, which abandons the run past it): no runtime thread in between.
DEFAULT_RUN_TIMEOUT = 60.0
_SPARE_SLOTS = 4  # idle tensor sets an executor keeps for reuse


# -- errors --------------------------------------------------------------------------------------


def _call(what: str, fn: Callable[..., Any], *args: Any) -> Any:
    """Call a C API function; raise NNRtError (with the C API's reason) on a failure code.

    Functions returning a tuple give back its out-values; functions returning a handle give
    it back (None → NNRtError(OH_NN_FAILED)).
    """
    last_failure()  # forget an earlier call's
    result = fn(*args)
    if isinstance(result, tuple):
        code, *values = result
        if code != OH_NN_ReturnCode.OH_NN_SUCCESS:
            raise NNRtError(code, _failed(what))
        return values[0] if len(values) == 1 else tuple(values)
    if isinstance(result, int) and not isinstance(result, bool):
        if result != OH_NN_ReturnCode.OH_NN_SUCCESS:
            raise NNRtError(result, _failed(what))
        return None
    if result is None:
        raise NNRtError(OH_NN_ReturnCode.OH_NN_FAILED, _failed(what))
    return result


def _failed(what: str) -> str:
    reason = last_failure()
    return f"{what} failed: {reason}" if reason else f"{what} failed"


def _check(code: int, what: str) -> None:
    if code != OH_NN_ReturnCode.OH_NN_SUCCESS:
        raise NNRtError(code, f"{what} failed")


# -- devices -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DeviceInfo:
    """A device the runtime knows: its OH_NN device ID, name and type."""

    id: int
    name: str
    type: OH_NN_DeviceType


def list_devices() -> list[DeviceInfo]:
    """Every device whose driver answers now (OH_NNDevice_GetAllDevicesID order)."""
    found = []
    for device_id in _call("OH_NNDevice_GetAllDevicesID", capi.OH_NNDevice_GetAllDevicesID):
        code, name = capi.OH_NNDevice_GetName(device_id)
        kind_code, kind = capi.OH_NNDevice_GetType(device_id)
        if code == 0 and kind_code == 0:
            found.append(DeviceInfo(device_id, name, kind))
    return found


def _devices(device: Any) -> list[Any] | None:
    """The core's devices of a preference list, "gpu,cpu" or "auto" (core/hetero.py
    `device_list`); None: one device is named."""
    return device_list(registry().devices(), device)


def _device_id(device: int | str | OH_NN_DeviceType | DeviceInfo | None) -> int:
    """The ID of the device an ID, a name, a type, a DeviceInfo or None (the first) names,
    by the core's rules (core/device.py `find_device`, as the CLI's --device)."""
    if isinstance(device, DeviceInfo):
        return device.id
    return find_device(registry().devices(), device).id


# -- shapes ----------------------------------------------------------------------------------------

Shape = tuple[int, ...]


def _shape(dims: Sequence[int | None] | int) -> Shape:
    if isinstance(dims, int):
        dims = (dims,)
    return tuple(-1 if d is None else int(d) for d in dims)


def _broadcast(*shapes: Shape) -> Shape:
    rank = max(len(s) for s in shapes)
    out = []
    for axis in range(rank):
        dims = [s[axis - rank + len(s)] for s in shapes if axis - rank + len(s) >= 0]
        known = [d for d in dims if d not in (-1, 1)]
        if known:
            out.append(max(known))
        elif -1 in dims:
            out.append(-1)
        else:
            out.append(1)
    return tuple(out)


def _prod(dims: Sequence[int]) -> int:
    return -1 if any(d < 0 for d in dims) else math.prod(dims)


def _window(size: int, kernel: int, stride: int, dilation: int, pads: tuple[int, int],
            same: bool) -> int:
    if size < 0:
        return -1
    if same:
        return -(-size // stride)
    return (size + pads[0] + pads[1] - dilation * (kernel - 1) - 1) // stride + 1


# -- the model ---------------------------------------------------------------------------------------


@dataclass(eq=False)
class Operand:
    """A tensor of a `Model`: an input, a constant, or an operation's result."""

    model: Model
    index: int
    shape: Shape
    dtype: np.dtype
    value: np.ndarray | None = field(default=None, repr=False)  # constants

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __add__(self, other: Any) -> Operand:
        return self.model.add(self, other)

    def __radd__(self, other: Any) -> Operand:
        return self.model.add(other, self)

    def __sub__(self, other: Any) -> Operand:
        return self.model.sub(self, other)

    def __rsub__(self, other: Any) -> Operand:
        return self.model.sub(other, self)

    def __mul__(self, other: Any) -> Operand:
        return self.model.mul(self, other)

    def __rmul__(self, other: Any) -> Operand:
        return self.model.mul(other, self)

    def __truediv__(self, other: Any) -> Operand:
        return self.model.div(self, other)

    def __matmul__(self, other: Any) -> Operand:
        return self.model.matmul(self, other)


@dataclass
class _Step:
    """One recorded operation, for computing concrete output shapes at run time."""

    op: int
    inputs: list[int]
    outputs: list[int]
    params: dict[str, Any]


class Model:
    """A model built with numpy constants; wraps an OH_NNModel.

    Operations take operands (or numpy values, which become constants); each returns its
    result operand(s) with an inferred shape (pass `shape=` to an operation whose shape the
    builder cannot infer). Finish with `outputs(...)`, then `compile(device)`.
    """

    def __init__(self) -> None:
        self._handle: capi.OH_NNModel | None = capi.OH_NNModel_Construct()
        self._operands: list[Operand] = []
        self._inputs: list[Operand] = []
        self._outputs: list[Operand] = []
        self._steps: list[_Step] = []
        self._finished = False

    # -- life cycle ---------------------------------------------------------------------------

    @property
    def handle(self) -> capi.OH_NNModel:
        if self._handle is None:
            raise NNRtError(OH_NN_ReturnCode.OH_NN_INVALID_PARAMETER, "the model is closed")
        return self._handle

    def close(self) -> None:
        """Release the OH_NNModel (compilations made from it stay valid)."""
        if self._handle is not None:
            capi.OH_NNModel_Destroy(self._handle)
            self._handle = None

    def __enter__(self) -> Model:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @classmethod
    def load(cls, path: str | os.PathLike, **options: Any) -> Model:
        """A finished model from a file, ready to compile (and save):

        * `.onnx`: imported by `nnrt.client.onnx_import.import_onnx` (`options` go there,
          e.g. `input_shapes={"x": [1, 3, 224, 224]}`); inputs and outputs keep the ONNX
          names and layout; OnnxImportError (a ValueError) names what cannot be mapped.
        * `.nnrt` (or any file starting with its magic): a saved model
          (`common/model_file.py`), as it was saved. It carries no builder history, so
          operations cannot be added, and the output shapes of dynamic inputs are left to
          the device.

        ValueError for another kind of file, OSError when it cannot be read."""
        from nnrt.common import model_file  # noqa: PLC0415 - loaded on use

        with open(path, "rb") as f:
            head = f.read(len(model_file.MAGIC))
        if head == model_file.MAGIC:
            if options:
                raise TypeError(f"options {sorted(options)} apply to .onnx models only")
            return cls._from_lowered(model_file.load(path))
        if os.fspath(path).lower().endswith(".onnx"):
            from nnrt.client.onnx_import import import_onnx  # noqa: PLC0415

            return import_onnx(path, **options)
        raise ValueError(f"{os.fspath(path)}: not a model file this nnrt reads (.onnx or "
                         f".nnrt)")

    @classmethod
    def _from_lowered(cls, lowered: Any) -> Model:
        """A finished Model over an already lowered graph (a loaded saved model)."""
        model = cls()
        handle = model.handle
        with handle.lock:
            handle._lowered = lowered
            handle.finished = True
        descs = [*lowered.inputs, *lowered.outputs]
        operands = [Operand(model, i, tuple(d.shape), _DTYPES[d.data_type])
                    for i, d in enumerate(descs)]
        model._operands = operands
        model._inputs = operands[:len(lowered.inputs)]
        model._outputs = operands[len(lowered.inputs):]
        model._finished = True
        return model

    # -- tensors -----------------------------------------------------------------------------------

    def _tensor(self, shape: Shape | None, dtype: np.dtype, *, name: str = "",
                fmt: int = OH_NN_Format.OH_NN_FORMAT_NONE, data: np.ndarray | None = None,
                tensor_type: int | None = None) -> int:
        if dtype not in _OH_TYPES:
            raise TypeError(f"dtype {dtype} has no OH_NN_DataType")
        desc = capi.OH_NNTensorDesc_Create()
        try:
            _call("OH_NNTensorDesc_SetDataType", capi.OH_NNTensorDesc_SetDataType, desc,
                  _OH_TYPES[dtype])
            if shape:
                _call("OH_NNTensorDesc_SetShape", capi.OH_NNTensorDesc_SetShape, desc,
                      list(shape), len(shape))
            _call("OH_NNTensorDesc_SetFormat", capi.OH_NNTensorDesc_SetFormat, desc, fmt)
            if name:
                _call("OH_NNTensorDesc_SetName", capi.OH_NNTensorDesc_SetName, desc, name)
            _call("OH_NNModel_AddTensorToModel", capi.OH_NNModel_AddTensorToModel, self.handle,
                  desc)
        finally:
            capi.OH_NNTensorDesc_Destroy(desc)
        index = len(self._operands)
        if tensor_type is not None:
            _call("OH_NNModel_SetTensorType", capi.OH_NNModel_SetTensorType, self.handle, index,
                  tensor_type)
        if data is not None:
            _call("OH_NNModel_SetTensorData", capi.OH_NNModel_SetTensorData, self.handle, index,
                  data, data.nbytes)
        return index

    def _operand(self, shape: Shape, dtype: np.dtype, index: int,
                 value: np.ndarray | None = None) -> Operand:
        operand = Operand(self, index, shape, dtype, value)
        self._operands.append(operand)
        return operand

    def input(self, shape: Sequence[int | None] | int, dtype: Any = np.float32, *,
              name: str = "", format: str | None = None) -> Operand:
        """A model input; None or -1 marks a dynamic dimension."""
        dims, dt = _shape(shape), np.dtype(dtype)
        index = self._tensor(dims, dt, name=name, fmt=_FORMATS[format])
        operand = self._operand(dims, dt, index)
        self._inputs.append(operand)
        return operand

    def constant(self, value: Any, dtype: Any = None, *, format: str | None = None) -> Operand:
        """A constant tensor holding a copy of `value`."""
        data = np.ascontiguousarray(value, dtype=dtype)
        if data.dtype == np.float64 and dtype is None and not isinstance(value, np.ndarray):
            data = data.astype(np.float32)  # Python floats: float32, the usual model type
        dims = tuple(data.shape)
        index = self._tensor(dims, data.dtype, data=data, fmt=_FORMATS[format])
        return self._operand(dims, data.dtype, index, data)

    def _as_operand(self, value: Any, like: Operand | None = None) -> Operand:
        if isinstance(value, Operand):
            if value.model is not self:
                raise ValueError("an operand of another model")
            return value
        if isinstance(value, (np.ndarray, np.generic)):
            return self.constant(value)  # numpy values keep their dtype
        return self.constant(value, like.dtype if like is not None else None)  # Python numbers

    # -- operations --------------------------------------------------------------------------------

    def op(self, op: int | str, *inputs: Any, shape: Sequence[int | None] | None = None,
           shapes: Sequence[Sequence[int | None]] | None = None, dtype: Any = None,
           outputs: int = 1, names: Sequence[str] | None = None,
           **params: Any) -> Operand | tuple[Operand, ...]:
        """Any OH_NN operation: `op` is an OH_NN_OperationType or its name ("ADD",
        "OH_NN_OPS_ADD"); parameters by attribute name (`activationType=1`, `axis=...`) or
        by tensor-type name (`OH_NN_ADD_ACTIVATIONTYPE=1`). The result shape is inferred
        where the builder knows how, else taken from `shape=` (or `shapes=` for several
        outputs), else the first input's. `names` names the result tensors (what a model
        output is called in its I/O descriptors; "" leaves one unnamed)."""
        op_type = _op_type(op)
        spec = OPERATIONS[op_type]
        first = next((i for i in inputs if isinstance(i, Operand)), None)
        operands = [self._as_operand(i, first) for i in inputs]
        param_values = _param_values(spec.params, params)
        if shapes is None and shape is not None:
            shapes = [shape]
        if shapes is not None:
            out_shapes = [_shape(s) for s in shapes]
        else:
            inferred = _infer(op_type, [o.shape for o in operands], operands, param_values)
            out_shapes = inferred or [operands[0].shape] * outputs
        out_dtype = np.dtype(dtype) if dtype is not None else _result_dtype(op_type, operands)
        param_indices = []
        for p, value in param_values:
            data = _param_array(p, value)
            param_indices.append(self._tensor(
                None if p.kind == "scalar_0d" else tuple(data.shape), data.dtype, data=data,
                tensor_type=p.tensor_type))
            self._operands.append(Operand(self, param_indices[-1], tuple(data.shape),
                                          data.dtype, data))
        results = []
        for k, s in enumerate(out_shapes):
            index = self._tensor(s, out_dtype, name=names[k] if names and k < len(names) else "")
            results.append(self._operand(s, out_dtype, index))
        _call(spec.name, capi.OH_NNModel_AddOperation, self.handle, op_type,
              _u32(param_indices), _u32([o.index for o in operands]),
              _u32([r.index for r in results]))
        self._steps.append(_Step(op_type, [o.index for o in operands],
                                 [r.index for r in results],
                                 {p.field: v for p, v in param_values}))
        return results[0] if len(results) == 1 else tuple(results)

    # element-wise and linear algebra
    def add(self, a: Any, b: Any, activation: str | None = None) -> Operand:
        return self.op("ADD", a, b, activationType=_fuse(activation))

    def sub(self, a: Any, b: Any, activation: str | None = None) -> Operand:
        return self.op("SUB", a, b, activationType=_fuse(activation))

    def mul(self, a: Any, b: Any, activation: str | None = None) -> Operand:
        return self.op("MUL", a, b, activationType=_fuse(activation))

    def div(self, a: Any, b: Any, activation: str | None = None) -> Operand:
        return self.op("DIV", a, b, activationType=_fuse(activation))

    def maximum(self, a: Any, b: Any) -> Operand:
        return self.op("MAXIMUM", a, b)

    def minimum(self, a: Any, b: Any) -> Operand:
        return self.op("MINIMUM", a, b)

    def matmul(self, a: Any, b: Any, transpose_a: bool = False, transpose_b: bool = False,
               activation: str | None = None) -> Operand:
        return self.op("MATMUL", a, b, transposeA=transpose_a, transposeB=transpose_b,
                       activationType=_fuse(activation))

    def fully_connected(self, x: Any, weight: Any, bias: Any = None,
                        activation: str | None = None) -> Operand:
        """y = x · weightᵀ + bias, weight [out, in]."""
        if bias is None:
            return self.op("FULL_CONNECTION", x, weight, activationType=_fuse(activation))
        return self.op("FULL_CONNECTION", x, weight, bias, activationType=_fuse(activation),
                       hasBias=True)

    # activations and other shape-preserving operations
    def relu(self, x: Operand) -> Operand:
        return self.op("RELU", x)

    def relu6(self, x: Operand) -> Operand:
        return self.op("RELU6", x)

    def sigmoid(self, x: Operand) -> Operand:
        return self.op("SIGMOID", x)

    def tanh(self, x: Operand) -> Operand:
        return self.op("TANH", x)

    def sqrt(self, x: Operand) -> Operand:
        return self.op("SQRT", x)

    def exp(self, x: Operand) -> Operand:
        return self.op("EXP", x)

    def softmax(self, x: Operand, axis: int = -1) -> Operand:
        return self.op("SOFTMAX", x, axis=[axis])

    # layout
    def reshape(self, x: Operand, shape: Sequence[int]) -> Operand:
        return self.op("RESHAPE", x, np.asarray(shape, np.int64))

    def transpose(self, x: Operand, perm: Sequence[int]) -> Operand:
        return self.op("TRANSPOSE", x, np.asarray(perm, np.int64))

    def concat(self, xs: Sequence[Operand], axis: int = 0) -> Operand:
        return self.op("CONCAT", *xs, axis=axis)

    # convolution and pooling (NHWC; weights [out, kH, kW, in/group])
    def conv2d(self, x: Operand, weight: Any, bias: Any = None, *, stride: int | Sequence[int] = 1,
               padding: str | int | Sequence[int] = "valid", dilation: int | Sequence[int] = 1,
               group: int = 1, activation: str | None = None) -> Operand:
        w = self._as_operand(weight, x)
        b = self._as_operand(bias if bias is not None else np.zeros(w.shape[0], x.dtype), x)
        pad = _padding(padding)
        return self.op("CONV2D", x, w, b, stride=_pair(stride, "stride"),
                       dilation=_pair(dilation, "dilation"), group=group,
                       activationType=_fuse(activation), **pad)

    def max_pool(self, x: Operand, kernel: int | Sequence[int], stride: int | Sequence[int] | None = None,
                 padding: str | int | Sequence[int] = "valid") -> Operand:
        return self.op("MAX_POOL", x, kernelSize=_pair(kernel, "kernel"),
                       strides=_pair(stride if stride is not None else kernel, "stride"),
                       **_padding(padding, pool=True))

    def avg_pool(self, x: Operand, kernel: int | Sequence[int], stride: int | Sequence[int] | None = None,
                 padding: str | int | Sequence[int] = "valid") -> Operand:
        return self.op("AVG_POOL", x, kernelSize=_pair(kernel, "kernel"),
                       strides=_pair(stride if stride is not None else kernel, "stride"),
                       **_padding(padding, pool=True))

    # -- finishing ---------------------------------------------------------------------------------

    def outputs(self, *outputs: Operand) -> Model:
        """Declare the outputs (the inputs are those made by `input`) and finish the model."""
        if self._finished:
            raise NNRtError(OH_NN_ReturnCode.OH_NN_OPERATION_FORBIDDEN, "the model is finished")
        outs = [self._as_operand(o) for o in outputs]
        _call("OH_NNModel_SpecifyInputsAndOutputs", capi.OH_NNModel_SpecifyInputsAndOutputs,
              self.handle, _u32([i.index for i in self._inputs]), _u32([o.index for o in outs]))
        _call("OH_NNModel_Finish", capi.OH_NNModel_Finish, self.handle)
        self._outputs = outs
        self._finished = True
        return self

    def compile(self, device: Any = None, *,
                performance: OH_NN_PerformanceMode | int | None = None,
                priority: OH_NN_Priority | int | None = None, float16: bool = False,
                cache_dir: str | None = None, cache_version: int = 0,
                extensions: Mapping[str, bytes] | None = None,
                failover: bool = True) -> Compiled:
        """Compile the finished model for a device (by ID, name, type, or the first one),
        or for several: a list in order of preference (`["gpu", "cpu"]`) or `"auto"` (every
        device, accelerators before GPUs before CPUs). Over several devices each node runs on
        the first device that supports it, and when a driver dies the runs go on over the
        devices left (`failover=False`: they fail with OH_NN_CONNECTION_EXCEPTION instead)."""
        if not self._finished:
            raise NNRtError(OH_NN_ReturnCode.OH_NN_INVALID_PARAMETER,
                            "the model is not finished: call outputs(...) first")
        devices = _devices(device)
        handle = _call("OH_NNCompilation_Construct", capi.OH_NNCompilation_Construct, self.handle)
        if devices is not None:
            with handle.lock:
                handle.devices, handle.failover = devices, bool(failover)
        return Compiled._build(handle, device if devices is None else None, self._shape_plan(),
                               performance=performance, priority=priority, float16=float16,
                               cache_dir=cache_dir, cache_version=cache_version,
                               extensions=extensions)

    def _shape_plan(self) -> _ShapePlan:
        return _ShapePlan(
            [o.index for o in self._inputs], [o.index for o in self._outputs],
            {o.index: o.shape for o in self._operands},
            {o.index: o.value for o in self._operands if o.value is not None},
            list(self._steps))


def _op_type(op: int | str) -> int:
    if isinstance(op, str):
        name = op.upper()
        return OH_NN_OperationType[name if name.startswith("OH_NN_OPS_") else f"OH_NN_OPS_{name}"]
    return OH_NN_OperationType(op)


def _u32(values: Sequence[int]) -> capi.OH_NN_UInt32Array:
    values = list(values)
    return capi.OH_NN_UInt32Array(data=values or None, size=len(values))


def _bad_argument(why: str) -> NNRtError:
    return NNRtError(OH_NN_ReturnCode.OH_NN_INVALID_PARAMETER, why)


def _ints(value: Any, what: str) -> list[int]:
    """An int or a sequence of ints (numpy integers too) as a list; NNRtError otherwise."""
    items = [value] if isinstance(value, (int, np.integer)) else value
    try:
        out = [int(v) for v in items]
        if any(not isinstance(v, (int, np.integer)) or isinstance(v, bool) for v in items):
            raise TypeError
    except TypeError:
        raise _bad_argument(f"{what} must be an int or a sequence of ints, not {value!r}") \
            from None
    return out


def _pair(value: int | Sequence[int], what: str = "value") -> list[int]:
    """An int (both axes) or (height, width), as PyTorch and ONNX users write them."""
    values = _ints(value, what)
    if len(values) == 1:
        values = values * 2
    if len(values) != 2 or min(values) < 1:
        raise _bad_argument(f"{what} must be a positive int or two (height, width), not {value!r}")
    return values


def _padding(padding: str | int | Sequence[int], pool: bool = False) -> dict[str, Any]:
    """`"same"` / `"valid"` → a pad mode; an int → that padding on every side; (h, w) → h
    above and below, w left and right (PyTorch's form); 4 ints → [top, bottom, left,
    right]."""
    if isinstance(padding, str):
        modes = {"same": 0, "valid": 1}
        if padding.lower() not in modes:
            raise _bad_argument(f"padding {padding!r}: 'same', 'valid', an int, (h, w) or "
                                f"(top, bottom, left, right)")
        return {"padMode": modes[padding.lower()]}
    values = _ints(padding, "padding")
    if len(values) == 1:
        values = values * 4
    elif len(values) == 2:
        values = [values[0], values[0], values[1], values[1]]
    if len(values) != 4 or min(values) < 0:
        raise _bad_argument(f"padding {padding!r}: 'same', 'valid', an int, (h, w) or "
                            f"(top, bottom, left, right), none negative")
    return {"pad" if pool else "padList": values}


def _fuse(activation: str | None) -> int:
    """The fused activation's code; NNRtError naming the ones there are."""
    key = activation.lower() if isinstance(activation, str) else activation
    if key not in _FUSE:
        known = ", ".join(repr(k) for k in _FUSE if k is not None)
        raise _bad_argument(f"activation {activation!r} cannot be fused; one of {known} or "
                            f"None (others: a separate op, e.g. Model.op('GELU', x))")
    return _FUSE[key]


def _param_values(specs: Mapping[int, ParamSpec],
                  given: Mapping[str, Any]) -> list[tuple[ParamSpec, Any]]:
    by_name: dict[str, ParamSpec] = {}
    for p in specs.values():
        by_name[p.field] = p
        by_name[p.name] = p
    out: list[tuple[ParamSpec, Any]] = []
    for key, value in given.items():
        p = by_name.get(key)
        if p is None:
            known = sorted({s.field for s in specs.values()})
            raise TypeError(f"unknown parameter {key!r} (this operation takes {known})")
        if value is not None:
            out.append((p, value))
    return out


def _param_array(p: ParamSpec, value: Any) -> np.ndarray:
    dtype = _DTYPES[p.dtype]
    data = np.asarray(value, dtype=dtype)
    if p.kind == "pairs_2d4":
        return data.reshape(2, 2)
    return data.reshape(-1) if data.ndim != 1 else data


def _result_dtype(op_type: int, operands: Sequence[Operand]) -> np.dtype:
    name = OPERATIONS[op_type].name
    if name in ("OH_NN_OPS_EQUAL", "OH_NN_OPS_NOT_EQUAL", "OH_NN_OPS_LESS", "OH_NN_OPS_LESS_EQUAL",
                "OH_NN_OPS_GREATER", "OH_NN_OPS_GREATER_EQUAL", "OH_NN_OPS_LOGICAL_AND",
                "OH_NN_OPS_LOGICAL_OR", "OH_NN_OPS_LOGICAL_NOT"):
        return np.dtype(np.bool_)
    if name == "OH_NN_OPS_SHAPE":
        return np.dtype(np.int64)
    return operands[0].dtype


_ELEMENTWISE = {"ADD", "SUB", "MUL", "DIV", "MAXIMUM", "MINIMUM", "POW", "SQUARED_DIFFERENCE",
                "EQUAL", "NOT_EQUAL", "LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL",
                "LOGICAL_AND", "LOGICAL_OR", "MOD", "BIAS_ADD", "PRELU"}
_SAME_SHAPE = {"RELU", "RELU6", "SIGMOID", "TANH", "HSWISH", "SWISH", "HARD_SIGMOID", "GELU",
               "ABS", "ERF", "EXP", "SQRT", "RSQRT", "SQUARE", "NEG", "RECIPROCAL", "SIN", "COS",
               "LOG", "CEIL", "FLOOR", "ROUND", "LOGICAL_NOT", "SOFTMAX", "LOG_SOFTMAX",
               "LEAKY_RELU", "CLIP", "LAYER_NORM", "BATCH_NORM", "INSTANCE_NORM",
               "L2_NORMALIZE", "LRN"}


def _infer(op_type: int, shapes: list[Shape], operands: Sequence[Operand | Any],
           params: Mapping[str, Any] | Sequence[tuple[ParamSpec, Any]]) -> list[Shape] | None:
    """Output shapes (-1 where unknown) from input shapes; None when not known here.

    `operands` may be the Operands at build time or the constant values (None for
    non-constants) at run time; `params` are (ParamSpec, value) pairs or a field → value map.
    """
    name = OPERATIONS[op_type].name[len("OH_NN_OPS_"):]
    fields = dict(params) if isinstance(params, Mapping) else {p.field: v for p, v in params}

    def const(i: int) -> np.ndarray | None:
        o = operands[i]
        return o.value if isinstance(o, Operand) else o

    try:
        if name in _ELEMENTWISE:
            return [_broadcast(*shapes)]
        if name in _SAME_SHAPE:
            return [shapes[0]]
        if name == "MATMUL":
            a, b = list(shapes[0]), list(shapes[1])
            if fields.get("transposeA"):
                a[-2:] = a[-1], a[-2]
            if fields.get("transposeB"):
                b[-2:] = b[-1], b[-2]
            vector_a, vector_b = len(a) == 1, len(b) == 1
            if vector_a:
                a = [1, *a]
            if vector_b:
                b = [*b, 1]
            batch = _broadcast(tuple(a[:-2]), tuple(b[:-2])) if len(a) > 2 or len(b) > 2 else ()
            rows = () if vector_a else (a[-2],)
            cols = () if vector_b else (b[-1],)
            return [(*batch, *rows, *cols)]  # numpy's rules for 1-D operands
        if name == "FULL_CONNECTION":
            x, w = shapes[0], shapes[1]
            return [(_prod(x[:-1]), w[0])]
        if name == "RESHAPE":
            target = [int(d) for d in const(1).reshape(-1)]
            total = _prod(shapes[0])
            if -1 in target and total >= 0:
                known = math.prod(d for d in target if d != -1)
                target[target.index(-1)] = total // known if known else 0
            return [tuple(target)]
        if name == "TRANSPOSE":
            perm = [int(p) for p in const(1).reshape(-1)]
            return [tuple(shapes[0][p] for p in perm)]
        if name == "CONCAT":
            axis = int(np.asarray(fields.get("axis", 0)).reshape(-1)[0])
            axis %= len(shapes[0])
            out = list(shapes[0])
            sizes = [s[axis] for s in shapes]
            out[axis] = -1 if any(d < 0 for d in sizes) else sum(sizes)
            return [tuple(out)]
        if name in ("CONV2D", "MAX_POOL", "AVG_POOL"):
            n, h, w, c = shapes[0]
            if name == "CONV2D":
                out_c, kh, kw = shapes[1][0], shapes[1][1], shapes[1][2]
                strides = fields.get("stride") or [1, 1]
                dilation = fields.get("dilation") or [1, 1]
                pads = fields.get("padList")
            else:
                out_c = c
                kh, kw = fields["kernelSize"]
                strides = fields.get("strides") or [kh, kw]
                dilation = [1, 1]
                pads = fields.get("pad")
            same = fields.get("padMode") == 0
            pads = list(pads) if pads is not None and len(pads) == 4 else [0, 0, 0, 0]
            return [(n, _window(h, kh, strides[0], dilation[0], pads[0:2], same),
                     _window(w, kw, strides[1], dilation[1], pads[2:4], same), out_c)]
    except (TypeError, ValueError, IndexError, KeyError, AttributeError, ZeroDivisionError):
        return None
    return None


@dataclass
class _ShapePlan:
    """What a Compiled keeps of its Model to size output tensors for given input shapes."""

    inputs: list[int]
    outputs: list[int]
    shapes: dict[int, Shape]
    constants: dict[int, np.ndarray]
    steps: list[_Step]

    def output_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        known = dict(self.shapes)
        known.update(zip(self.inputs, input_shapes))
        if all(d >= 0 for i in self.outputs for d in known[i]):
            return [known[i] for i in self.outputs]
        for step in self.steps:
            inferred = _infer(step.op, [known[i] for i in step.inputs],
                              [self.constants.get(i) for i in step.inputs], step.params)
            if inferred is not None:
                for index, shape in zip(step.outputs, inferred):
                    declared = self.shapes[index]
                    known[index] = tuple(d if d >= 0 else s for d, s in zip(declared, shape)) \
                        if len(declared) == len(shape) else shape
        return [known[i] for i in self.outputs]


# -- compilation -------------------------------------------------------------------------------------


class Compiled:
    """A model compiled for a device (wraps an OH_NNCompilation); makes executors."""

    def __init__(self, handle: capi.OH_NNCompilation, plan: _ShapePlan | None) -> None:
        self._handle: capi.OH_NNCompilation | None = handle
        self._plan = plan
        self._executor: Executor | None = None
        self._executors: weakref.WeakSet[Executor] = weakref.WeakSet()
        self._lock = threading.Lock()

    @classmethod
    def _build(cls, handle: capi.OH_NNCompilation, device: Any, plan: _ShapePlan | None, *,
               performance: Any = None, priority: Any = None, float16: bool = False,
               cache_dir: str | None = None, cache_version: int = 0,
               extensions: Mapping[str, bytes] | None = None) -> Compiled:
        try:
            if handle.devices is None:
                _call("OH_NNCompilation_SetDevice", capi.OH_NNCompilation_SetDevice, handle,
                      _device_id(device))
            if performance is not None:
                _call("OH_NNCompilation_SetPerformanceMode",
                      capi.OH_NNCompilation_SetPerformanceMode, handle, performance)
            if priority is not None:
                _call("OH_NNCompilation_SetPriority", capi.OH_NNCompilation_SetPriority, handle,
                      priority)
            if float16:
                _call("OH_NNCompilation_EnableFloat16", capi.OH_NNCompilation_EnableFloat16,
                      handle, True)
            if cache_dir is not None:
                _call("OH_NNCompilation_SetCache", capi.OH_NNCompilation_SetCache, handle,
                      str(cache_dir), cache_version)
            for key, value in (extensions or {}).items():
                _call("OH_NNCompilation_AddExtensionConfig",
                      capi.OH_NNCompilation_AddExtensionConfig, handle, key, value, len(value))
            _call("OH_NNCompilation_Build", capi.OH_NNCompilation_Build, handle)
        except BaseException:
            capi.OH_NNCompilation_Destroy(handle)
            raise
        return cls(handle, plan)

    @classmethod
    def from_cache(cls, cache: bytes, device: Any = None) -> Compiled:
        """Restore a compilation from `export_cache()` bytes (on the same kind of device)."""
        handle = _call("OH_NNCompilation_ConstructForCache", capi.OH_NNCompilation_ConstructForCache)
        try:
            _call("OH_NNCompilation_ImportCacheFromBuffer",
                  capi.OH_NNCompilation_ImportCacheFromBuffer, handle, cache, len(cache))
        except BaseException:
            capi.OH_NNCompilation_Destroy(handle)
            raise
        return cls._build(handle, device, None)

    @classmethod
    def from_offline(cls, model: Any, device: Any = None, *,
                     performance: OH_NN_PerformanceMode | int | None = None,
                     priority: OH_NN_Priority | int | None = None,
                     extensions: Mapping[str, bytes] | None = None) -> Compiled:
        """Prepare an offline model — the device's own compiled binary, e.g. an `.npubin`
        from `nnrt compile` — given as bytes (OH_NNCompilation_ConstructWithOfflineModelBuffer)
        or as a file path, str or os.PathLike (...ConstructWithOfflineModelFile, read at
        Build). Its inputs and outputs are those the driver describes."""
        if isinstance(model, (bytes, bytearray, memoryview)):
            data = bytes(model)
            handle = _call("OH_NNCompilation_ConstructWithOfflineModelBuffer",
                           capi.OH_NNCompilation_ConstructWithOfflineModelBuffer, data, len(data))
        else:
            handle = _call("OH_NNCompilation_ConstructWithOfflineModelFile",
                           capi.OH_NNCompilation_ConstructWithOfflineModelFile, model)
        return cls._build(handle, device, None, performance=performance, priority=priority,
                          extensions=extensions)

    @property
    def handle(self) -> capi.OH_NNCompilation:
        if self._handle is None:
            raise NNRtError(OH_NN_ReturnCode.OH_NN_INVALID_PARAMETER, "the compilation is closed")
        return self._handle

    @property
    def hetero(self) -> Any:
        """Over several devices, the core's HeteroCompilation (its plans); else None."""
        built = self.handle.built
        return built.hetero if built is not None else None

    def explain(self) -> str:
        """The plan in words (over several devices): each step's device and nodes, why
        nodes went where, the boundary tensors and their bytes."""
        hetero = self.hetero
        if hetero is None:
            return f"one device: {self.handle.built.device.name}"
        return hetero.explain()

    def export_cache(self) -> bytes:
        """The compiled model as bytes (OH_NNCompilation_ExportCacheToBuffer)."""
        probe = bytearray(1)  # too small: the call reports the size it needs
        code, size = capi.OH_NNCompilation_ExportCacheToBuffer(self.handle, probe, 1)
        if code == OH_NN_ReturnCode.OH_NN_SUCCESS:
            return bytes(probe[:size])
        if code != OH_NN_ReturnCode.OH_NN_INVALID_PARAMETER or not size:
            raise NNRtError(code, "OH_NNCompilation_ExportCacheToBuffer failed")
        buffer = bytearray(size)
        code, size = capi.OH_NNCompilation_ExportCacheToBuffer(self.handle, buffer, len(buffer))
        _check(code, "OH_NNCompilation_ExportCacheToBuffer")
        return bytes(buffer[:size])

    def executor(self) -> Executor:
        """A new executor (each has its own tensors; several may run at once)."""
        executor = Executor(self)
        self._executors.add(executor)
        return executor

    def run(self, *inputs: Any, **named: Any) -> Any:
        """Run on this compilation's default executor (see `Executor.run`)."""
        return self._default().run(*inputs, **named)

    async def run_async(self, *inputs: Any, **named: Any) -> Any:
        """Await a run on this compilation's default executor (see `Executor.run_async`)."""
        return await self._default().run_async(*inputs, **named)

    def _default(self) -> Executor:
        with self._lock:
            if self._executor is None:
                self._executor = self.executor()
            return self._executor

    def close(self) -> None:
        """Close its executors and release the compilation."""
        for executor in list(self._executors):
            executor.close()
        if self._handle is not None:
            capi.OH_NNCompilation_Destroy(self._handle)
            self._handle = None

    def __enter__(self) -> Compiled:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


# -- execution ----------------------------------------------------------------------------------------


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
