"""`OH_NNModel`: building a model graph and lowering it to HDI (capi.md 2.6–2.16, Appendix A).

A model is BUILDING until `OH_NNModel_Finish`, then FINISHED: every mutating call returns
OH_NN_OPERATION_FORBIDDEN (including `AddTensorToModel`, capi.md 5.2). Finish lowers the
graph once (Appendix A) into a `LoweredModel`, which compilations prepare on a device:

1. parameter tensors (those some AddOperation took through `paramIndices`) are folded
   into their nodes' attributes (operations.py) and are not part of the device graph —
   all of them, unlike upstream, which leaks a few kinds;
2. every other tensor is emitted in index order and renumbered densely, named
   "Tensor: <original index>", with its HDI data type, format (`hdi_format`: NONE/ND stay
   untagged), quantization parameters and constant data;
3. one node per AddOperation, in call order, named "<prefix>:<position>";
4. model "NNR_Model" with one subgraph; inputs and outputs renumbered.

`OH_NNModel_GetAvailableOperations` sends that graph to a device's GetSupportedOperation.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from nnrt.client.capi._objects import Handle, live
from nnrt.common.hdi_model import DATA_TYPES, IODesc, LoweredModel, element_size, hdi_format
from nnrt.client.capi.enums import (
    OH_NN_CONNECTION_EXCEPTION,
    OH_NN_FAILED,
    OH_NN_FORMAT_NONE,
    OH_NN_INVALID_PARAMETER,
    OH_NN_OPERATION_FORBIDDEN,
    OH_NN_SUCCESS,
    OH_NN_TENSOR,
    OH_NN_ReturnCode,
)
from nnrt.client.capi.operations import ModelTensor, Operation, OperationError, check_operation
from nnrt.client.capi.quant_param import NN_QuantParam
from nnrt.client.capi.structs import (
    OH_NN_QuantParam,
    OH_NN_Tensor,
    OH_NN_UInt32Array,
    c_array,
    c_count,
    c_double,
    c_int,
    int32,
    uint32,
)
from nnrt.client.capi.tensor_desc import NN_TensorDesc
from nnrt.client.core.driver import DriverGone
from nnrt.common.hdi_model import HdiModelBuilder, PrepareError
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.common.errors import NNRT_SUCCESS, code_name

__all__ = [
    "OH_NNModel",
    "OH_NNModel_Construct",
    "OH_NNModel_AddTensorToModel",
    "OH_NNModel_SetTensorData",
    "OH_NNModel_SetTensorQuantParams",
    "OH_NNModel_SetTensorType",
    "OH_NNModel_AddOperation",
    "OH_NNModel_SpecifyInputsAndOutputs",
    "OH_NNModel_Finish",
    "OH_NNModel_Destroy",
    "OH_NNModel_GetAvailableOperations",
    "OH_NNModel_AddTensor",
]

log = logging.getLogger(__name__)

MAX_INDICES = 200  # capi.md 0.3: operator / model input and output indices
MAX_RANK = 200  # capi.md 0.3: maximum rank of a model tensor
UINT32_MAX = (1 << 32) - 1
TENSOR_TYPES = range(0, 163)
MODEL_NAME = "NNR_Model"


class OH_NNModel(Handle):
    """The opaque `OH_NNModel` handle.

    Once `finished`, `lowered()` gives the HDI graph and the input/output descriptions.
    """

    def __init__(self) -> None:
        super().__init__()
        self.tensors: list[ModelTensor] = []
        self.operations: list[Operation] = []
        self.inputs: list[int] | None = None
        self.outputs: list[int] | None = None
        self.finished = False
        self._lowered: LoweredModel | None = None

    def lowered(self) -> LoweredModel:
        """The lowered model of a finished model (ValueError while it is still building)."""
        with self.lock:
            if self._lowered is None:
                raise ValueError("the model is not finished")
            return self._lowered

    def __repr__(self) -> str:
        if self.destroyed:
            return "<OH_NNModel destroyed>"
        state = "finished" if self.finished else "building"
        return f"<OH_NNModel {state}: {len(self.tensors)} tensors, {len(self.operations)} operations>"


def _model(obj: Any) -> OH_NNModel | None:
    return live(obj, OH_NNModel)


def OH_NNModel_Construct() -> OH_NNModel:
    """capi.md 2.6: an empty model in the BUILDING state."""
    return OH_NNModel()


def _read_live(obj: Any, cls: type[Handle], read: Callable[[Any], tuple]) -> tuple | None:
    """read(h) under the lock of `obj`, a live handle of class `cls`: a copy of its values,
    taken once; None for NULL, a foreign object or a destroyed handle."""
    handle = live(obj, cls)
    if handle is None:
        return None
    with handle.lock:
        return None if handle.destroyed else read(handle)


def _edit(m: OH_NNModel, apply: Callable[[], OH_NN_ReturnCode]) -> OH_NN_ReturnCode:
    """Run `apply()` under the lock of a model still being built: a destroyed model →
    INVALID_PARAMETER, a finished one → OPERATION_FORBIDDEN (capi.md 5.2)."""
    with m.lock:
        if m.destroyed:
            return OH_NN_INVALID_PARAMETER
        if m.finished:
            return OH_NN_OPERATION_FORBIDDEN
        return apply()


def _edit_tensor(m: OH_NNModel, index: Any,
                 apply: Callable[[ModelTensor], OH_NN_ReturnCode]) -> OH_NN_ReturnCode:
    """`_edit` of tensor `index` (no such tensor → INVALID_PARAMETER)."""

    def edit() -> OH_NN_ReturnCode:
        t = _index(m, index)
        return OH_NN_INVALID_PARAMETER if t is None else apply(t)

    return _edit(m, edit)


# -- tensors ---------------------------------------------------------------------------------


def _check_dims(data_type: int, dims: list[int]) -> bool:
    """capi.md 2.7: rank ≤ 200, every dimension ≥ 1 or -1, static byte length ≤ UINT32_MAX."""
    if len(dims) > MAX_RANK or any(d == 0 or d < -1 for d in dims):
        return False
    return element_size(data_type) * math.prod(abs(d) for d in dims) <= UINT32_MAX


def _add(model: OH_NNModel, tensor: ModelTensor) -> None:
    if not tensor.name:
        tensor.name = f"Tensor: {len(model.tensors)}"
    model.tensors.append(tensor)


def OH_NNModel_AddTensorToModel(model: OH_NNModel | None,
                                tensorDesc: NN_TensorDesc | None) -> OH_NN_ReturnCode:
    """capi.md 2.7: append a tensor with the descriptor's data type, shape (none = scalar),
    format (kept, ours) and name (kept for the model's input/output descriptions when set)."""
    m = _model(model)
    values = _read_live(tensorDesc, NN_TensorDesc, lambda d: (
        d.data_type, d.format, d.name or "", [] if d.shape is None else list(d.shape)))
    if m is None or values is None:
        return OH_NN_INVALID_PARAMETER
    data_type, fmt, name, dims = values

    def add() -> OH_NN_ReturnCode:
        if not _check_dims(data_type, dims):
            return OH_NN_INVALID_PARAMETER
        _add(m, ModelTensor(data_type, dims, fmt, name))
        return OH_NN_SUCCESS

    return _edit(m, add)


def _index(m: OH_NNModel, index: Any) -> ModelTensor | None:
    i = c_int(index, 0, UINT32_MAX)
    return None if i is None or i >= len(m.tensors) else m.tensors[i]


def _byte_length(t: ModelTensor) -> int:
    return element_size(t.data_type) * math.prod(t.shape)


def OH_NNModel_SetTensorData(model: OH_NNModel | None, index: int, dataBuffer: Any,
                             length: int) -> OH_NN_ReturnCode:
    """capi.md 2.8: copy `length` bytes of constant data (exactly the tensor's byte length)."""
    m = _model(model)
    if m is None or dataBuffer is None:
        return OH_NN_INVALID_PARAMETER
    try:
        view = memoryview(dataBuffer)
    except TypeError:
        return OH_NN_INVALID_PARAMETER
    n = c_count(length)
    if n is None or n == 0:
        return OH_NN_INVALID_PARAMETER

    def set_data(t: ModelTensor) -> OH_NN_ReturnCode:
        if t.data is not None:
            return OH_NN_INVALID_PARAMETER
        if t.dynamic:
            return OH_NN_OPERATION_FORBIDDEN
        if n != _byte_length(t) or n > view.nbytes:
            return OH_NN_INVALID_PARAMETER
        raw = view.cast("B")[:n].tobytes() if view.c_contiguous else view.tobytes()[:n]
        dtype = DATA_TYPES[t.data_type][1]
        t.data = np.frombuffer(raw, dtype=dtype).reshape(t.shape).copy()
        return OH_NN_SUCCESS

    return _edit_tensor(m, index, set_data)


def OH_NNModel_SetTensorQuantParams(model: OH_NNModel | None, index: int,
                                    quantParam: NN_QuantParam | None) -> OH_NN_ReturnCode:
    """capi.md 2.9: copy the parameters (equal counts, every bit width 8; empty clears)."""
    m = _model(model)
    values = _read_live(quantParam, NN_QuantParam, lambda qp: (
        list(qp.scales), list(qp.zero_points), list(qp.num_bits)))
    if m is None or values is None:
        return OH_NN_INVALID_PARAMETER
    scales, zero_points, bits = values

    def set_quant(t: ModelTensor) -> OH_NN_ReturnCode:
        if not len(scales) == len(zero_points) == len(bits):
            return OH_NN_INVALID_PARAMETER
        if any(b != 8 for b in bits):
            t.quant = []
            return OH_NN_INVALID_PARAMETER
        t.quant = list(zip(bits, zero_points, scales))
        return OH_NN_SUCCESS

    return _edit_tensor(m, index, set_quant)


def OH_NNModel_SetTensorType(model: OH_NNModel | None, index: int,
                             tensorType: int) -> OH_NN_ReturnCode:
    """capi.md 2.10: OH_NN_TENSOR for data, an OH_NN_<OP>_<ATTR> value for a parameter."""
    m = _model(model)
    if m is None:
        return OH_NN_INVALID_PARAMETER
    kind = c_int(tensorType, 0, TENSOR_TYPES[-1])
    if kind is None:
        return OH_NN_INVALID_PARAMETER

    def set_type(t: ModelTensor) -> OH_NN_ReturnCode:
        t.tensor_type = kind
        return OH_NN_SUCCESS

    return _edit_tensor(m, index, set_type)


# -- operations ------------------------------------------------------------------------------


def _is_array(arr: Any) -> bool:
    return isinstance(arr, OH_NN_UInt32Array)


def _array_size(arr: OH_NN_UInt32Array) -> int | None:
    return c_int(arr.size, 0, UINT32_MAX)


def _array_values(arr: OH_NN_UInt32Array) -> list[int] | None:
    """Rule 4 of capi.md 2.11 (NULL iff empty) and the elements; None when invalid."""
    size = _array_size(arr)
    if size is None or (arr.data is None) != (size == 0):
        return None
    if size == 0:
        return []
    return c_array(arr.data, size, uint32)


def _operands(m: OH_NNModel, inputs: OH_NN_UInt32Array,
              outputs: OH_NN_UInt32Array) -> tuple[list[int], list[int]] | None:
    """Rules 3–7 of capi.md 2.11 (shared with SpecifyInputsAndOutputs); None when refused."""
    for arr in (inputs, outputs):
        size = _array_size(arr)
        if size is None or size == 0 or size > MAX_INDICES:
            return None
    ins, outs = _array_values(inputs), _array_values(outputs)
    if ins is None or outs is None:
        return None
    count = len(m.tensors)
    if any(i >= count for i in ins + outs):
        return None
    if any(m.tensors[i].tensor_type != OH_NN_TENSOR for i in ins + outs):
        return None
    if set(ins) & set(outs):
        return None
    return ins, outs


def OH_NNModel_AddOperation(model: OH_NNModel | None, op: int,
                            paramIndices: OH_NN_UInt32Array | None,
                            inputIndices: OH_NN_UInt32Array | None,
                            outputIndices: OH_NN_UInt32Array | None) -> OH_NN_ReturnCode:
    """capi.md 2.11: append an operation; its parameter tensors are read now."""
    m = _model(model)
    if m is None or not (_is_array(paramIndices) and _is_array(inputIndices)
                         and _is_array(outputIndices)):
        return OH_NN_INVALID_PARAMETER

    def add() -> OH_NN_ReturnCode:
        operands = _operands(m, inputIndices, outputIndices)
        if operands is None:
            return OH_NN_INVALID_PARAMETER
        params = _array_values(paramIndices)
        if params is None or any(i >= len(m.tensors) for i in params):
            return OH_NN_INVALID_PARAMETER
        try:
            operation = check_operation(op, m.tensors, params, *operands)
        except OperationError as exc:
            log.debug("AddOperation refused: %s", exc)
            return OH_NN_ReturnCode(exc.code)
        m.operations.append(operation)
        return OH_NN_SUCCESS

    return _edit(m, add)


def OH_NNModel_SpecifyInputsAndOutputs(model: OH_NNModel | None,
                                       inputIndices: OH_NN_UInt32Array | None,
                                       outputIndices: OH_NN_UInt32Array | None) -> OH_NN_ReturnCode:
    """capi.md 2.12: the model's inputs and outputs, in executor order (once)."""
    m = _model(model)
    if m is None or not (_is_array(inputIndices) and _is_array(outputIndices)):
        return OH_NN_INVALID_PARAMETER

    def specify() -> OH_NN_ReturnCode:
        if m.inputs is not None:
            return OH_NN_OPERATION_FORBIDDEN
        operands = _operands(m, inputIndices, outputIndices)
        if operands is None:
            return OH_NN_INVALID_PARAMETER
        m.inputs, m.outputs = operands
        return OH_NN_SUCCESS

    return _edit(m, specify)


# -- Finish: the lowering (Appendix A) -------------------------------------------------------


def _hdi_tensor(index: int, t: ModelTensor) -> ht.Tensor:
    return ht.Tensor(
        name=f"Tensor: {index}",
        dataType=DATA_TYPES[t.data_type][0],
        dims=t.shape,
        format=hdi_format(t.format),
        quantParams=[ht.QuantParam(numBits=b, zeroPoint=z, scale=s) for b, z, s in t.quant],
    )


def _io(t: ModelTensor) -> IODesc:
    return IODesc(name=t.name, data_type=t.data_type, shape=list(t.shape), format=t.format)


def lower(m: OH_NNModel) -> LoweredModel:
    """Appendix A: the HDI graph of a complete model (the caller holds its lock)."""
    assert m.inputs is not None and m.outputs is not None
    data_use = set(m.inputs) | set(m.outputs)
    param_use: set[int] = set()
    for op in m.operations:
        data_use.update(op.inputs)
        data_use.update(op.outputs)
        param_use.update(op.params)
    # Parameter tensors are folded into the attributes; one also used as data stays.
    renumber: dict[int, int] = {}
    hdi = HdiModelBuilder(MODEL_NAME)
    rewritten: dict[int, np.ndarray] = {}
    for op in m.operations:
        rewritten.update(op.constants)
    for index, t in enumerate(m.tensors):
        if index in param_use and index not in data_use:
            continue
        renumber[index] = len(hdi.tensors)
        hdi.tensors.append(_hdi_tensor(index, t))
        data = rewritten.get(index, t.data)
        if data is not None:
            hdi.constants[renumber[index]] = np.ascontiguousarray(data)
    hdi.nodes = [op.node(position, renumber) for position, op in enumerate(m.operations)]
    hdi.inputs = [renumber[i] for i in m.inputs]
    hdi.outputs = [renumber[i] for i in m.outputs]
    return LoweredModel(hdi=hdi, inputs=[_io(m.tensors[i]) for i in m.inputs],
                        outputs=[_io(m.tensors[i]) for i in m.outputs])


def OH_NNModel_Finish(model: OH_NNModel | None) -> OH_NN_ReturnCode:
    """capi.md 2.13: freeze the model and lower it (Appendix A)."""
    m = _model(model)
    if m is None:
        return OH_NN_INVALID_PARAMETER

    def finish() -> OH_NN_ReturnCode:
        if not m.tensors or not m.operations or m.inputs is None:
            return OH_NN_OPERATION_FORBIDDEN
        for position, op in enumerate(m.operations):
            if op.finish_error is not None:
                code, why = op.finish_error
                log.info("Finish: operation %d: %s", position, why)
                return OH_NN_ReturnCode(code)
        m._lowered = lower(m)
        m.finished = True
        return OH_NN_SUCCESS

    return _edit(m, finish)


def OH_NNModel_Destroy(model: OH_NNModel | None) -> None:
    """capi.md 2.14: free the model; NULL, foreign or already destroyed: nothing happens."""
    m = _model(model)
    if m is not None:
        with m.lock:
            m.destroy()


def OH_NNModel_GetAvailableOperations(model: OH_NNModel | None,
                                      deviceID: int) -> tuple[OH_NN_ReturnCode, list[bool] | None]:
    """capi.md 2.15: `(code, isSupported)`, one flag per AddOperation, asked of the device.

    Unknown device or a driver failure → OH_NN_FAILED; a driver that cannot be reached →
    OH_NN_CONNECTION_EXCEPTION (capi.md 0.5).
    """
    from nnrt.client.core.device import registry  # noqa: PLC0415 - imported when first needed

    m = _model(model)
    if m is None:
        return OH_NN_INVALID_PARAMETER, None
    device_id = c_int(deviceID, 0, (1 << 64) - 1)
    if device_id is None:
        return OH_NN_INVALID_PARAMETER, None
    with m.lock:
        if m.destroyed:
            return OH_NN_INVALID_PARAMETER, None
        if not m.finished:
            return OH_NN_OPERATION_FORBIDDEN, None
        lowered = m._lowered
        count = len(m.operations)
    assert lowered is not None
    try:
        device = registry().get(device_id)
        if device is None:
            log.warning("GetAvailableOperations: no device %d", device_id)
            return OH_NN_FAILED, None
        client = device.client()
        with lowered.hdi.packed(client) as hdi_model:
            reply = client.get_supported_operation(hdi_model)
    except DriverGone as exc:
        log.warning("GetAvailableOperations: driver unreachable: %s", exc)
        return OH_NN_CONNECTION_EXCEPTION, None
    except PrepareError as exc:
        log.warning("GetAvailableOperations: %s", exc)
        return OH_NN_FAILED, None
    if reply.returnCode != NNRT_SUCCESS:
        log.warning("GetAvailableOperations: GetSupportedOperation failed: %s",
                    code_name(reply.returnCode))
        return OH_NN_FAILED, None
    if len(reply.ops) != count:
        log.warning("GetAvailableOperations: %d answers for %d operations", len(reply.ops), count)
        return OH_NN_FAILED, None
    return OH_NN_SUCCESS, [bool(v) for v in reply.ops]


# -- deprecated ------------------------------------------------------------------------------


def _quant(qp: OH_NN_QuantParam) -> list[tuple[int, int, float]] | None:
    """The entries of a deprecated OH_NN_QuantParam; None when refused."""
    if qp.numBits is None or qp.scale is None or qp.zeroPoint is None:
        return None
    n = c_count(qp.quantCount)
    if n is None or n > UINT32_MAX:
        return None
    bits = c_array(qp.numBits, n, uint32)
    scales = c_array(qp.scale, n, c_double)
    zero_points = c_array(qp.zeroPoint, n, int32)
    if bits is None or scales is None or zero_points is None:
        return None
    return list(zip(bits, zero_points, scales))


def OH_NNModel_AddTensor(model: OH_NNModel | None, tensor: OH_NN_Tensor | None) -> OH_NN_ReturnCode:
    """capi.md 2.16 (deprecated): AddTensorToModel + tensor type + quant params in one call.

    The struct has no format: the tensor is untagged (OH_NN_FORMAT_NONE, as nnrt keeps
    graph tensors without a layout, `hdi_format`).
    """
    m = _model(model)
    if m is None or not isinstance(tensor, OH_NN_Tensor):
        return OH_NN_INVALID_PARAMETER

    def add() -> OH_NN_ReturnCode:
        data_type = c_int(tensor.dataType, 0, 12)
        kind = c_int(tensor.type, 0, TENSOR_TYPES[-1])
        rank = c_int(tensor.dimensionCount, 0, UINT32_MAX)
        if data_type is None or kind is None or rank is None:
            return OH_NN_INVALID_PARAMETER
        if (tensor.dimensions is None) != (rank == 0):
            return OH_NN_INVALID_PARAMETER
        dims = [] if rank == 0 else c_array(tensor.dimensions, rank, int32)
        if dims is None or not _check_dims(data_type, dims):
            return OH_NN_INVALID_PARAMETER
        quant: list[tuple[int, int, float]] = []
        if tensor.quantParam is not None:
            if not isinstance(tensor.quantParam, OH_NN_QuantParam):
                return OH_NN_INVALID_PARAMETER
            entries = _quant(tensor.quantParam)
            if entries is None or any(b != 8 for b, _, _ in entries):
                return OH_NN_INVALID_PARAMETER
            quant = entries
        _add(m, ModelTensor(data_type, dims, OH_NN_FORMAT_NONE, "", kind, quant))
        return OH_NN_SUCCESS

    return _edit(m, add)

