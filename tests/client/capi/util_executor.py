"""Helpers for the executor, async, deprecated-API and Pythonic-API tests.

Models are built through the C API itself (OH_NNModel_* → OH_NNCompilation_* →
OH_NNExecutor_Construct) and run by a real CPU driver process.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from nnrt.client import capi
from tests.client.capi import util_capi
from tests.client.capi.util_capi import F32, Graph, add_model, desc


def use_runtime(monkeypatch: pytest.MonkeyPatch,
                runtime_dir: Path) -> contextlib.AbstractContextManager[None]:
    """util_capi.use_runtime with the registry closed in the background: closing a gRPC
    channel takes ~0.2 s, which would otherwise dominate these short tests."""
    return util_capi.use_runtime(monkeypatch, runtime_dir, close_in_background=True)


def two_output_model() -> capi.OH_NNModel:
    """a + b and a * b of two [2, 3] inputs."""
    g = Graph()
    x1, x2 = g.tensor(F32, [2, 3]), g.tensor(F32, [2, 3])
    act = g.param(capi.OH_NN_ADD_ACTIVATIONTYPE, capi.OH_NN_INT8, [0], shape=None)
    act2 = g.param(capi.OH_NN_MUL_ACTIVATION_TYPE, capi.OH_NN_INT8, [0], shape=None)
    s, p = g.tensor(F32, [2, 3]), g.tensor(F32, [2, 3])
    g.add_op(capi.OH_NN_OPS_ADD, [x1, x2], [s], [act])
    g.add_op(capi.OH_NN_OPS_MUL, [x1, x2], [p], [act2])
    return g.finish([x1, x2], [s, p])


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
