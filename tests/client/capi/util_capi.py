"""What the capi tests and their helper modules (conftest, util_compilation, util_executor)
share: pointing the C API at a runtime directory (`use_runtime`), building descriptors and
arrays (`desc`, `u32`, `NP_TYPES`), and models built through the OH_NNModel_* functions
themselves (`Graph`, `add_model`).

It imports none of them, so that each can import it.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import nnrt.client.core.device as devices_module
from nnrt.client.capi import enums as E
from nnrt.client.capi.model import (
    OH_NNModel,
    OH_NNModel_AddOperation,
    OH_NNModel_AddTensorToModel,
    OH_NNModel_Construct,
    OH_NNModel_Finish,
    OH_NNModel_SetTensorData,
    OH_NNModel_SetTensorQuantParams,
    OH_NNModel_SetTensorType,
    OH_NNModel_SpecifyInputsAndOutputs,
)
from nnrt.client.capi.quant_param import (
    OH_NNQuantParam_Create,
    OH_NNQuantParam_Destroy,
    OH_NNQuantParam_SetNumBits,
    OH_NNQuantParam_SetScales,
    OH_NNQuantParam_SetZeroPoints,
)
from nnrt.client.capi.structs import OH_NN_UInt32Array
from nnrt.client.capi.tensor_desc import (
    NN_TensorDesc,
    OH_NNTensorDesc_Create,
    OH_NNTensorDesc_Destroy,
    OH_NNTensorDesc_SetDataType,
    OH_NNTensorDesc_SetFormat,
    OH_NNTensorDesc_SetName,
    OH_NNTensorDesc_SetShape,
)

F32 = E.OH_NN_FLOAT32
W = np.array([[0.5, -1.0, 2.0], [3.0, 0.25, -4.0]], np.float32)  # the constant of add_model

# OH_NN_DataType → numpy dtype (written here, independently of _objects.DATA_TYPES).
NP_TYPES = {
    E.OH_NN_BOOL: np.bool_, E.OH_NN_INT8: np.int8, E.OH_NN_INT16: np.int16,
    E.OH_NN_INT32: np.int32, E.OH_NN_INT64: np.int64, E.OH_NN_UINT8: np.uint8,
    E.OH_NN_UINT16: np.uint16, E.OH_NN_UINT32: np.uint32, E.OH_NN_UINT64: np.uint64,
    E.OH_NN_FLOAT16: np.float16, E.OH_NN_FLOAT32: np.float32, E.OH_NN_FLOAT64: np.float64,
}


# -- pointing the C API at a runtime directory -------------------------------------------------


@contextlib.contextmanager
def use_runtime(monkeypatch: pytest.MonkeyPatch, runtime_dir: Path, *,
                close_in_background: bool = False) -> Iterator[None]:
    """NNRT_RUNTIME_DIR = runtime_dir and a fresh device registry, closed afterwards.

    With `close_in_background` the registry is closed on a helper thread: closing a gRPC
    channel takes ~0.2 s of waiting inside grpc, which would otherwise dominate short tests.
    """
    monkeypatch.setenv("NNRT_RUNTIME_DIR", str(runtime_dir))
    monkeypatch.setattr(devices_module, "_registry", None)
    try:
        yield
    finally:
        registry = devices_module._registry
        if registry is not None:
            if close_in_background:
                threading.Thread(target=registry.close, name="close-registry",
                                 daemon=True).start()
            else:
                registry.close()
        devices_module._registry = None


# -- descriptors and arrays --------------------------------------------------------------------


def u32(values: Sequence[int] | None) -> OH_NN_UInt32Array:
    """An OH_NN_UInt32Array of `values` (None or empty: data NULL, size 0)."""
    if values is None:
        return OH_NN_UInt32Array(data=None, size=0)
    values = list(values)
    return OH_NN_UInt32Array(data=values if values else None, size=len(values))


def desc(shape: Sequence[int] | None = None, data_type: int = F32, name: str | None = None,
         fmt: int = E.OH_NN_FORMAT_NONE) -> NN_TensorDesc:
    """A tensor descriptor (shape None: a scalar), asserting every setter succeeds."""
    d = OH_NNTensorDesc_Create()
    assert OH_NNTensorDesc_SetDataType(d, data_type) == 0
    if shape is not None:
        assert OH_NNTensorDesc_SetShape(d, list(shape), len(shape)) == 0
    assert OH_NNTensorDesc_SetFormat(d, fmt) == 0
    if name is not None:
        assert OH_NNTensorDesc_SetName(d, name) == 0
    return d


# -- models through the C API ------------------------------------------------------------------


class Graph:
    """Builds an OH_NNModel through the C API, asserting every call succeeds."""

    def __init__(self) -> None:
        self.model: OH_NNModel = OH_NNModel_Construct()
        self.count = 0

    def tensor(self, data_type: int = E.OH_NN_FLOAT32, shape: Sequence[int] | None = None,
               data: Any = None, *, tensor_type: int = E.OH_NN_TENSOR, fmt: int = 0,
               name: str | None = None,
               quant: Sequence[tuple[int, int, float]] | None = None) -> int:
        """Add a tensor (shape None: a scalar); returns its index."""
        d = desc(shape, data_type, name, fmt)
        assert OH_NNModel_AddTensorToModel(self.model, d) == 0
        assert OH_NNTensorDesc_Destroy(d) == 0
        index = self.count
        self.count += 1
        if tensor_type != E.OH_NN_TENSOR:
            assert OH_NNModel_SetTensorType(self.model, index, tensor_type) == 0
        if quant:
            qp = OH_NNQuantParam_Create()
            bits, zps, scales = zip(*quant)
            assert OH_NNQuantParam_SetNumBits(qp, list(bits), len(bits)) == 0
            assert OH_NNQuantParam_SetZeroPoints(qp, list(zps), len(zps)) == 0
            assert OH_NNQuantParam_SetScales(qp, list(scales), len(scales)) == 0
            assert OH_NNModel_SetTensorQuantParams(self.model, index, qp) == 0
            assert OH_NNQuantParam_Destroy(qp) == 0
        if data is not None:
            array = np.array(data, dtype=NP_TYPES[data_type], order="C")
            assert OH_NNModel_SetTensorData(self.model, index, array, array.nbytes) == 0
        return index

    def constant(self, array: np.ndarray, data_type: int = E.OH_NN_FLOAT32, **kw: Any) -> int:
        array = np.asarray(array)
        return self.tensor(data_type, list(array.shape), array, **kw)

    def param(self, tensor_type: int, data_type: int, values: Any,
              shape: Sequence[int] | None = ...) -> int:  # type: ignore[assignment]
        """A parameter tensor (shape default: [n] for the n values)."""
        array = np.asarray(values, dtype=NP_TYPES[data_type]).reshape(-1)
        if shape is ...:
            shape = [array.size]
        return self.tensor(data_type, shape, array, tensor_type=tensor_type)

    def op(self, op_type: int, inputs: Sequence[int], outputs: Sequence[int],
           params: Sequence[int] = ()) -> int:
        """AddOperation; returns its code."""
        return OH_NNModel_AddOperation(self.model, op_type, u32(params), u32(inputs), u32(outputs))

    def add_op(self, op_type: int, inputs: Sequence[int], outputs: Sequence[int],
               params: Sequence[int] = ()) -> None:
        code = self.op(op_type, inputs, outputs, params)
        assert code == 0, f"AddOperation {op_type!r}: {code!r}"

    def specify(self, inputs: Sequence[int], outputs: Sequence[int]) -> OH_NNModel:
        assert OH_NNModel_SpecifyInputsAndOutputs(self.model, u32(inputs), u32(outputs)) == 0
        return self.model

    def finish(self, inputs: Sequence[int], outputs: Sequence[int]) -> OH_NNModel:
        self.specify(inputs, outputs)
        code = OH_NNModel_Finish(self.model)
        assert code == 0, code
        return self.model


def add_model(shape: Sequence[int] = (2, 3), w: np.ndarray = W,
              finish: bool = True) -> OH_NNModel:
    """y = x + w, float32, x of `shape` (a -1 first dimension makes the batch dynamic, w is
    then W's first row, broadcast), finished unless `finish` is False."""
    g = Graph()
    x = g.tensor(F32, shape)
    if shape[0] == -1:
        c = g.tensor(F32, [3], np.array([0.5, -1.0, 2.0], np.float32))
    else:
        c = g.tensor(F32, list(shape), np.asarray(w, np.float32))
    act = g.param(E.OH_NN_ADD_ACTIVATIONTYPE, E.OH_NN_INT8, [0], shape=None)
    y = g.tensor(F32, shape)
    g.add_op(E.OH_NN_OPS_ADD, [x, c], [y], [act])
    return g.finish([x], [y]) if finish else g.specify([x], [y])
