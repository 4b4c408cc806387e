"""Shared fixtures and helpers of the capi tests.

Fixtures:
* `capi_runtime` — the C API pointed at the module's shared CPU driver (NNRT_RUNTIME_DIR set,
  a fresh device registry, closed afterwards); yields the RunningDriver.
* `capi_runtime_module` — the same for a whole test module (one session, faster).
* `capi_no_device` — the C API pointed at an empty runtime directory (no device at all).
* `rt` — as `capi_runtime`, the registry closed in the background (the executor tests; a
  module that needs other devices defines its own `rt`); `ex` — an executor of the ADD model
  (util_capi.add_model) on it; `io` — an input tensor holding x and an output tensor for
  that model: (in, out, x).
* `graph` — a fresh `Graph` (util_capi).

Helpers: `run_lowered`, which prepares a finished model's lowering on a DriverClient and runs
it; `HDI_TYPES`. The model builders and descriptors live in util_capi.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from nnrt.client import capi
from nnrt.client.capi.model import OH_NNModel
from nnrt.client.core.driver import DriverClient
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.common.errors import NNRT_SUCCESS
from tests.client.capi.util_capi import NP_TYPES, Graph, use_runtime
from tests.client.capi.util_executor import make_executor, tensor

# OH_NN_DataType → HDI DataType (capi.md 3.9), for checking the lowering.
HDI_TYPES = {0: 0, 1: 30, 2: 32, 3: 33, 4: 34, 5: 35, 6: 37, 7: 38, 8: 39, 9: 40, 10: 42,
             11: 43, 12: 44}


@pytest.fixture
def graph() -> Graph:
    return Graph()


@pytest.fixture
def capi_runtime(shared_driver, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The module's CPU driver as the only device of the C API."""
    with use_runtime(monkeypatch, shared_driver.runtime_dir):
        yield shared_driver


@pytest.fixture(scope="module")
def capi_runtime_module(shared_driver) -> Iterator[Any]:
    """As `capi_runtime`, for a whole test module (one registry, one session: faster)."""
    with pytest.MonkeyPatch.context() as monkeypatch, \
            use_runtime(monkeypatch, shared_driver.runtime_dir):
        yield shared_driver


@pytest.fixture
def capi_no_device(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty runtime directory: no device at all."""
    directory = tmp_path / "empty-rt"
    directory.mkdir()
    with use_runtime(monkeypatch, directory):
        yield directory


@pytest.fixture
def rt(shared_driver, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The module's CPU driver as the only device; the registry closed in the background."""
    with use_runtime(monkeypatch, shared_driver.runtime_dir, close_in_background=True):
        yield shared_driver


@pytest.fixture
def ex(rt) -> Iterator[capi.OH_NNExecutor]:
    """An executor of the ADD model on `rt`."""
    executor = make_executor()
    yield executor
    capi.OH_NNExecutor_Destroy(executor)


@pytest.fixture
def io(rt) -> Iterator[tuple[capi.NN_Tensor, capi.NN_Tensor, np.ndarray]]:
    """An input tensor holding x and an output tensor for the ADD model: (in, out, x)."""
    x = np.random.default_rng(7).standard_normal((2, 3)).astype(np.float32)
    tin, tout = tensor([2, 3], x), tensor([2, 3])
    yield tin, tout, x
    capi.OH_NNTensor_Destroy(tin)
    capi.OH_NNTensor_Destroy(tout)


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
