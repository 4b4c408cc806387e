"""Shared fixtures and helpers of the capi tests.

Fixtures:
* `capi_runtime` — the C API pointed at the module's shared CPU driver (NNRT_RUNTIME_DIR set,
  a fresh device registry, closed afterwards); yields the RunningDriver.
* `capi_runtime_module` — the same for a whole test module (one session, faster).
* `capi_no_device` — the C API pointed at an empty runtime directory (no device at all).
* `graph` — a fresh `Graph` (below).

Helpers (import from `tests.capi.conftest`): `Graph`, a thin wrapper building models
through the OH_NNModel_* functions and asserting every code; `u32`; `NP_TYPES`;
`run_lowered`, which prepares a finished model's lowering on a DriverClient and runs it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import nnrt.client.devices as devices_module
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
    OH_NNTensorDesc_Create,
    OH_NNTensorDesc_Destroy,
    OH_NNTensorDesc_SetDataType,
    OH_NNTensorDesc_SetFormat,
    OH_NNTensorDesc_SetName,
    OH_NNTensorDesc_SetShape,
)
from nnrt.client.hdi import DriverClient
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.server.errors import NNRT_SUCCESS

# OH_NN_DataType → numpy dtype (written here, independently of _objects.DATA_TYPES).
NP_TYPES = {
    E.OH_NN_BOOL: np.bool_, E.OH_NN_INT8: np.int8, E.OH_NN_INT16: np.int16,
    E.OH_NN_INT32: np.int32, E.OH_NN_INT64: np.int64, E.OH_NN_UINT8: np.uint8,
    E.OH_NN_UINT16: np.uint16, E.OH_NN_UINT32: np.uint32, E.OH_NN_UINT64: np.uint64,
    E.OH_NN_FLOAT16: np.float16, E.OH_NN_FLOAT32: np.float32, E.OH_NN_FLOAT64: np.float64,
}
# OH_NN_DataType → HDI DataType (capi.md 3.9), for checking the lowering.
HDI_TYPES = {0: 0, 1: 30, 2: 32, 3: 33, 4: 34, 5: 35, 6: 37, 7: 38, 8: 39, 9: 40, 10: 42,
             11: 43, 12: 44}


def u32(values: Sequence[int] | None) -> OH_NN_UInt32Array:
    """An OH_NN_UInt32Array of `values` (None: data NULL, size 0)."""
    if values is None:
        return OH_NN_UInt32Array(data=None, size=0)
    values = list(values)
    return OH_NN_UInt32Array(data=values if values else None, size=len(values))


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
        desc = OH_NNTensorDesc_Create()
        assert OH_NNTensorDesc_SetDataType(desc, data_type) == 0
        if shape is not None:
            assert OH_NNTensorDesc_SetShape(desc, list(shape), len(shape)) == 0
        assert OH_NNTensorDesc_SetFormat(desc, fmt) == 0
        if name is not None:
            assert OH_NNTensorDesc_SetName(desc, name) == 0
        assert OH_NNModel_AddTensorToModel(self.model, desc) == 0
        assert OH_NNTensorDesc_Destroy(desc) == 0
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

    def finish(self, inputs: Sequence[int], outputs: Sequence[int]) -> OH_NNModel:
        assert OH_NNModel_SpecifyInputsAndOutputs(self.model, u32(inputs), u32(outputs)) == 0
        code = OH_NNModel_Finish(self.model)
        assert code == 0, code
        return self.model


@pytest.fixture
def graph() -> Graph:
    return Graph()


def _use_runtime(monkeypatch: pytest.MonkeyPatch, directory: Path) -> None:
    monkeypatch.setenv("NNRT_RUNTIME_DIR", str(directory))
    monkeypatch.setattr(devices_module, "_registry", None)


def _close_registry() -> None:
    registry = devices_module._registry
    if registry is not None:
        registry.close()


@pytest.fixture
def capi_runtime(shared_driver, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The module's CPU driver as the only device of the C API."""
    _use_runtime(monkeypatch, shared_driver.runtime_dir)
    yield shared_driver
    _close_registry()


@pytest.fixture(scope="module")
def capi_runtime_module(shared_driver) -> Iterator[Any]:
    """As `capi_runtime`, for a whole test module (one registry, one session: faster)."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        _use_runtime(monkeypatch, shared_driver.runtime_dir)
        yield shared_driver
        _close_registry()


@pytest.fixture
def capi_no_device(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty runtime directory: no device at all."""
    directory = tmp_path / "empty-rt"
    directory.mkdir()
    _use_runtime(monkeypatch, directory)
    yield directory
    _close_registry()


def run_lowered(client: DriverClient, model: OH_NNModel, inputs: Sequence[np.ndarray],
                timeout: float = 10.0) -> list[np.ndarray]:
    """Prepare `model.lowered().hdi` on `client`, run it once, return its outputs.

    Inputs and outputs are described by the lowered model's IODescs (static shapes).
    """
    lowered = model.lowered()
    model_id = lowered.hdi.prepare(client)
    memories = []
    try:
        ins, outs = [], []
        for desc, array in zip(lowered.inputs, inputs):
            array = np.array(array, dtype=NP_TYPES[desc.data_type], order="C")  # keeps rank 0
            code, memory = client.allocate_buffer(max(array.nbytes, 1))
            assert code == NNRT_SUCCESS
            memories.append(memory)
            memory.view(0, array.nbytes)[:] = array.reshape(-1).view(np.uint8)
            ins.append(ht.IOTensor(dataType=HDI_TYPES[desc.data_type], dimensions=array.shape,
                                   format=_io_format(desc.format),
                                   data=memory.descriptor(0, array.nbytes)))
        out_arrays = []
        for desc in lowered.outputs:
            dtype = np.dtype(NP_TYPES[desc.data_type])
            nbytes = int(np.prod(desc.shape)) * dtype.itemsize
            code, memory = client.allocate_buffer(max(nbytes, 1))
            assert code == NNRT_SUCCESS
            memories.append(memory)
            outs.append(ht.IOTensor(dataType=HDI_TYPES[desc.data_type], dimensions=desc.shape,
                                    format=_io_format(desc.format),
                                    data=memory.descriptor(0, nbytes)))
            out_arrays.append((memory, dtype, desc.shape))
        reply = client.run(model_id, ins, outs, timeout=timeout)
        assert reply.returnCode == NNRT_SUCCESS, reply.returnCode
        return [m.array(dt, shape).copy() for m, dt, shape in out_arrays]
    finally:
        for memory in memories:
            memory.close()
            client.release_buffer(memory)
        client.release_prepared_model(model_id)


def _io_format(oh_format: int) -> int:
    return {1: ht.FORMAT_NCHW, 2: ht.FORMAT_NHWC}.get(oh_format, ht.FORMAT_NONE)
