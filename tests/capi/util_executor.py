"""Helpers for the executor, async, deprecated-API and Pythonic-API tests.

Models are built through the C API itself (OH_NNModel_* → OH_NNCompilation_* →
OH_NNExecutor_Construct) and run by a real CPU driver process.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

import nnrt.client.devices as devices_module
from nnrt.client import capi

F32 = capi.OH_NN_FLOAT32
W = np.array([[0.5, -1.0, 2.0], [3.0, 0.25, -4.0]], np.float32)  # the constant of ADD_MODEL


@contextlib.contextmanager
def use_runtime(monkeypatch: pytest.MonkeyPatch, runtime_dir: Path) -> Iterator[None]:
    """Point the C API at `runtime_dir` with a fresh device registry; close it afterwards.

    The registry is closed on a helper thread: closing a gRPC channel takes ~0.2 s of
    waiting inside grpc, which would otherwise dominate these short tests.
    """
    monkeypatch.setenv("NNRT_RUNTIME_DIR", str(runtime_dir))
    monkeypatch.setattr(devices_module, "_registry", None)
    try:
        yield
    finally:
        registry = devices_module._registry
        if registry is not None:
            threading.Thread(target=registry.close, name="close-registry", daemon=True).start()


def desc(shape: Sequence[int] | None, data_type: int = F32, name: str = "",
         fmt: int = capi.OH_NN_FORMAT_NONE) -> capi.NN_TensorDesc:
    d = capi.OH_NNTensorDesc_Create()
    assert capi.OH_NNTensorDesc_SetDataType(d, data_type) == 0
    if shape is not None:
        assert capi.OH_NNTensorDesc_SetShape(d, list(shape), len(shape)) == 0
    assert capi.OH_NNTensorDesc_SetFormat(d, fmt) == 0
    if name:
        assert capi.OH_NNTensorDesc_SetName(d, name) == 0
    return d


def u32(values: Sequence[int]) -> capi.OH_NN_UInt32Array:
    return capi.OH_NN_UInt32Array(data=list(values), size=len(values))


class ModelBuilder:
    """A thin test-side wrapper over OH_NNModel_* (asserting every code)."""

    def __init__(self) -> None:
        self.model = capi.OH_NNModel_Construct()
        self.count = 0

    def tensor(self, shape: Sequence[int] | None, data_type: int = F32,
               data: np.ndarray | None = None, tensor_type: int | None = None) -> int:
        d = desc(shape, data_type)
        assert capi.OH_NNModel_AddTensorToModel(self.model, d) == 0
        capi.OH_NNTensorDesc_Destroy(d)
        index = self.count
        self.count += 1
        if tensor_type is not None:
            assert capi.OH_NNModel_SetTensorType(self.model, index, tensor_type) == 0
        if data is not None:
            data = np.ascontiguousarray(data)
            assert capi.OH_NNModel_SetTensorData(self.model, index, data, data.nbytes) == 0
        return index

    def op(self, op: int, inputs: Sequence[int], outputs: Sequence[int],
           params: Sequence[int] = ()) -> None:
        assert capi.OH_NNModel_AddOperation(self.model, op, u32(params), u32(inputs),
                                            u32(outputs)) == 0

    def finish(self, inputs: Sequence[int], outputs: Sequence[int]) -> capi.OH_NNModel:
        assert capi.OH_NNModel_SpecifyInputsAndOutputs(self.model, u32(inputs), u32(outputs)) == 0
        assert capi.OH_NNModel_Finish(self.model) == 0
        return self.model


def add_model(shape: Sequence[int] = (2, 3)) -> capi.OH_NNModel:
    """y = x + W (x: `shape`, float32; a -1 first dimension makes the batch dynamic)."""
    b = ModelBuilder()
    x = b.tensor(shape)
    w = b.tensor([3], data=np.array([0.5, -1.0, 2.0], np.float32)) if shape[0] == -1 else \
        b.tensor(list(shape), data=W)
    act = b.tensor(None, capi.OH_NN_INT8, np.array([0], np.int8), capi.OH_NN_ADD_ACTIVATIONTYPE)
    y = b.tensor(shape)
    b.op(capi.OH_NN_OPS_ADD, [x, w], [y], [act])
    return b.finish([x], [y])


def two_output_model() -> capi.OH_NNModel:
    """a + b and a * b of two [2, 3] inputs."""
    b = ModelBuilder()
    x1, x2 = b.tensor([2, 3]), b.tensor([2, 3])
    act = b.tensor(None, capi.OH_NN_INT8, np.array([0], np.int8), capi.OH_NN_ADD_ACTIVATIONTYPE)
    act2 = b.tensor(None, capi.OH_NN_INT8, np.array([0], np.int8), capi.OH_NN_MUL_ACTIVATION_TYPE)
    s, p = b.tensor([2, 3]), b.tensor([2, 3])
    b.op(capi.OH_NN_OPS_ADD, [x1, x2], [s], [act])
    b.op(capi.OH_NN_OPS_MUL, [x1, x2], [p], [act2])
    return b.finish([x1, x2], [s, p])


def compile_model(model: capi.OH_NNModel, device_id: int = 0) -> capi.OH_NNCompilation:
    compilation = capi.OH_NNCompilation_Construct(model)
    assert compilation is not None
    assert capi.OH_NNCompilation_SetDevice(compilation, device_id) == 0
    code = capi.OH_NNCompilation_Build(compilation)
    assert code == 0, code
    return compilation


def make_executor(model: capi.OH_NNModel | None = None) -> capi.OH_NNExecutor:
    """An executor of `model` (default: the ADD model) on the first device."""
    model = add_model() if model is None else model
    compilation = compile_model(model)
    executor = capi.OH_NNExecutor_Construct(compilation)
    assert executor is not None
    capi.OH_NNCompilation_Destroy(compilation)
    capi.OH_NNModel_Destroy(model)
    return executor


def tensor(shape: Sequence[int], values: np.ndarray | None = None,
           data_type: int = F32) -> capi.NN_Tensor:
    d = desc(shape, data_type)
    t = capi.OH_NNTensor_Create(0, d)
    capi.OH_NNTensorDesc_Destroy(d)
    assert t is not None
    if values is not None:
        array(t)[...] = values
    return t


def array(t: capi.NN_Tensor, dtype=np.float32) -> np.ndarray:
    """The tensor's data as an array over its shared memory, in its descriptor's shape."""
    _, shape = capi.OH_NNTensorDesc_GetShape(capi.OH_NNTensor_GetTensorDesc(t))
    view = capi.OH_NNTensor_GetDataBuffer(t)
    count = int(np.prod(shape))
    return np.frombuffer(view, dtype, count=count).reshape(shape)


@dataclass
class Callbacks:
    """Records NN_OnRunDone / NN_OnServiceDied calls with their time and thread."""

    events: list[tuple] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    cond: threading.Condition = field(init=False)

    def __post_init__(self) -> None:
        self.cond = threading.Condition(self.lock)

    def on_done(self, user_data, code, outputs, count) -> None:
        with self.cond:
            self.events.append(("done", user_data, code, outputs, count, time.monotonic(),
                                threading.current_thread()))
            self.cond.notify_all()

    def on_died(self, user_data) -> None:
        with self.cond:
            self.events.append(("died", user_data, time.monotonic(),
                                threading.current_thread()))
            self.cond.notify_all()

    def done(self) -> list[tuple]:
        with self.lock:
            return [e for e in self.events if e[0] == "done"]

    def wait_done(self, count: int, timeout: float) -> list[tuple]:
        """The first `count` completions; fails the test after `timeout` s (never hangs)."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while sum(e[0] == "done" for e in self.events) < count:
                left = deadline - time.monotonic()
                assert left > 0, f"only {self.events} after {timeout} s"
                self.cond.wait(left)
            return [e for e in self.events if e[0] == "done"]


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
