"""Whole models through the client on a CPU and a GPU driver at once (real processes; the GPU
driver on PoCL): the two agree on every model family; one client process holds executors
on both; a SIGKILLed GPU driver leaves the CPU executors working and calls back only the
GPU executors' NN_OnServiceDied."""

from __future__ import annotations

import numpy as np
import pytest

from nnrt.client import capi, zoo
from nnrt.client.capi.enums import OH_NN_DeviceType
from tests.client.capi.util_capi import W, add_model, desc, use_runtime
from tests.client.capi.util_executor import Callbacks, array, compile_model
from tests.conftest import start_driver

OK = 0
CONNECTION_EXCEPTION = 11


@pytest.fixture(scope="module")
def two_drivers(tmp_path_factory):
    runtime = tmp_path_factory.mktemp("two") / "rt"
    cpu = start_driver(runtime, "cpu")
    gpu = start_driver(runtime, "gpu", "--cl-device", "any")
    yield runtime, cpu, gpu
    for driver in (gpu, cpu):
        driver.stop()


@pytest.fixture
def runtime(two_drivers, monkeypatch):
    runtime_dir = two_drivers[0]
    with use_runtime(monkeypatch, runtime_dir):
        yield runtime_dir


def _outputs(result) -> list[np.ndarray]:
    return list(result) if isinstance(result, (list, tuple)) else [result]


@pytest.mark.parametrize("family", zoo.FAMILIES)
@pytest.mark.parametrize("batch", [1, 3])
def test_cpu_and_gpu_drivers_agree(runtime, family, batch):
    model, x = zoo.build(family, batch=batch)
    compiled = {device: model.compile(device) for device in ("cpu", "gpu")}
    executors = {device: c.executor() for device, c in compiled.items()}  # both held at once
    try:
        results = {device: _outputs(e.run(x)) for device, e in executors.items()}
        for cpu, gpu in zip(results["cpu"], results["gpu"]):
            assert cpu.shape == gpu.shape
            np.testing.assert_allclose(gpu, cpu, rtol=1e-4, atol=1e-4)
    finally:
        for device in executors:
            executors[device].close()
            compiled[device].close()


def device_tensor(device_id: int, values: np.ndarray) -> capi.NN_Tensor:
    d = desc(values.shape)
    t = capi.OH_NNTensor_Create(device_id, d)
    capi.OH_NNTensorDesc_Destroy(d)
    array(t)[...] = values
    return t


def _device_id(kind: OH_NN_DeviceType) -> int:
    code, ids = capi.OH_NNDevice_GetAllDevicesID()
    assert code == OK
    for device_id in ids:
        code, device_type = capi.OH_NNDevice_GetType(device_id)
        if code == OK and device_type == kind:
            return device_id
    raise AssertionError(f"no {kind.name} device")


@pytest.mark.multiprocess
def test_killing_the_gpu_driver_leaves_the_cpu_executors_working(tmp_path, monkeypatch):
    runtime_dir = tmp_path / "rt"
    cpu = start_driver(runtime_dir, "cpu")
    gpu = start_driver(runtime_dir, "gpu", "--cl-device", "any", "--fault-run-delay-ms", "5000")
    try:
        with use_runtime(monkeypatch, runtime_dir):
            ids = {kind: _device_id(kind) for kind in (OH_NN_DeviceType.OH_NN_CPU,
                                                       OH_NN_DeviceType.OH_NN_GPU)}
            executors, callbacks, outs = {}, {}, {}
            x = np.arange(6, dtype=np.float32).reshape(2, 3)
            for kind, device_id in ids.items():
                compilation = compile_model(add_model(), device_id)
                executors[kind] = capi.OH_NNExecutor_Construct(compilation)
                capi.OH_NNCompilation_Destroy(compilation)
                callbacks[kind] = Callbacks()
                capi.OH_NNExecutor_SetOnRunDone(executors[kind], callbacks[kind].on_done)
                capi.OH_NNExecutor_SetOnServiceDied(executors[kind], callbacks[kind].on_died)
                tin = device_tensor(device_id, x)
                outs[kind] = device_tensor(device_id, np.zeros_like(x))
                assert capi.OH_NNExecutor_RunAsync(executors[kind], [tin], 1, [outs[kind]], 1,
                                                   20_000, kind.name) == OK
            cpu_done = callbacks[OH_NN_DeviceType.OH_NN_CPU].wait_done(1, 10)
            assert cpu_done[0][2] == OK  # the GPU run is still in flight (5 s delay)
            gpu.stop(9)
            gpu_done = callbacks[OH_NN_DeviceType.OH_NN_GPU].wait_done(1, 10)
            assert gpu_done[0][2] == CONNECTION_EXCEPTION
            assert [e[0] for e in callbacks[OH_NN_DeviceType.OH_NN_GPU].events] == \
                ["died", "done"]
            # the CPU executor runs on, and was never told of a death
            cpu_exec = executors[OH_NN_DeviceType.OH_NN_CPU]
            tin = device_tensor(ids[OH_NN_DeviceType.OH_NN_CPU], x)
            assert capi.OH_NNExecutor_RunSync(cpu_exec, [tin], 1,
                                              [outs[OH_NN_DeviceType.OH_NN_CPU]], 1) == OK
            np.testing.assert_allclose(array(outs[OH_NN_DeviceType.OH_NN_CPU]), x + W)
            assert not any(e[0] == "died" for e in callbacks[OH_NN_DeviceType.OH_NN_CPU].events)
            for executor in executors.values():
                capi.OH_NNExecutor_Destroy(executor)
    finally:
        cpu.stop()
        if gpu.proc.poll() is None:
            gpu.stop()
