"""The model builder: `Model` (inputs, constants, operations, outputs; loading,
compiling)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from nnrt.client import capi
from nnrt.client.capi.enums import (OH_NN_Format, OH_NN_OperationType, OH_NN_PerformanceMode,
                                    OH_NN_Priority, OH_NN_ReturnCode)
from nnrt.client.capi.operation_table import OPERATIONS, ParamSpec
from nnrt.client.core.errors import NNRtError

from .calls import _call
from .compiled import Compiled
from .devices import _devices
from .dtypes import Shape, _DTYPES, _OH_TYPES
from .operand import Operand
from .shapes import _infer, _shape, _ShapePlan, _Step


# Readers of the model files `Model.load` takes besides saved models, by suffix. A reader
# builds a Model, so it sits above this module and registers itself: the ONNX importer
# (".onnx", nnrt.client.onnx_import), which nnrt.client.api imports.
READERS: dict[str, Callable[..., Model]] = {}
_FUSE = {None: 0, "none": 0, "relu": 1, "relu6": 2}
_FORMATS = {None: OH_NN_Format.OH_NN_FORMAT_NONE, "NCHW": OH_NN_Format.OH_NN_FORMAT_NCHW,
            "NHWC": OH_NN_Format.OH_NN_FORMAT_NHWC, "ND": OH_NN_Format.OH_NN_FORMAT_ND}


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
        reader = next((read for suffix, read in READERS.items()
                       if os.fspath(path).lower().endswith(suffix)), None)
        if reader is not None:
            return reader(path, **options)
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
