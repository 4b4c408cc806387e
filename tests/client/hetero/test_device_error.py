"""Failover on a step's device error (client/core/hetero.py), through real driver processes:
a CPU driver whose device is "lost" while a flag file exists (its Run answers
NNRT_DEVICE_ERROR and GetDeviceStatus OFFLINE, the process alive), preferred to a healthy
CPU driver. The run that meets the error gets its result from the other device; the lost
device is held out, then taken back once it says AVAILABLE; a bad input (NNRT_INVALID_SHAPE
from a healthy device) fails that run and evicts nothing; without failover the device
error is the run's (OH_NN_UNAVAILABLE_DEVICE); NNRT_DEVICE_BUSY evicts nothing either."""

from __future__ import annotations

import asyncio
import logging
import time

import numpy as np
import pytest

from nnrt.client.core import hetero as hetero_module
from nnrt.client.core.device import DeviceRegistry
from nnrt.client.core.errors import NNRtError, OH_NN_UNAVAILABLE_DEVICE
from nnrt.client.core.execution import Execution
from nnrt.client.core.hetero import HeteroCompilation
from nnrt.client.core.prepared_model import PreparedModel
from nnrt.protos import hdi_types_pb2 as ht
from tests.client.capi.util_executor import use_runtime
from tests.conftest import start_driver, wait_until
from tests.helpers.admin import set_faults
from tests.helpers.patched_driver import start_patched_driver
from tests.helpers.hetero_models import mlp

pytestmark = pytest.mark.multiprocess

RNG = np.random.default_rng(2612)

# A CPU driver whose device is lost while $NNRT_TEST_DEVICE_LOST exists: the hooks the
# driver's fault injection calls at every Run and GetDeviceStatus (server/faults.py),
# replaced in that process alone.
LOST_DEVICE = """
import os
from nnrt.common.errors import DriverError, NNRT_DEVICE_ERROR
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.server import faults
flag = os.environ["NNRT_TEST_DEVICE_LOST"]
on_run, device_status = faults.FaultInjection.on_run, faults.FaultInjection.device_status
def lost_on_run(self, cancelled):
    if os.path.exists(flag):
        raise DriverError(NNRT_DEVICE_ERROR, "the device is lost (test)")
    return on_run(self, cancelled)
def lost_status(self, real):
    return ht.OFFLINE if os.path.exists(flag) else device_status(self, real)
faults.FaultInjection.on_run = lost_on_run
faults.FaultInjection.device_status = lost_status
"""


@pytest.fixture
def drivers(tmp_path, monkeypatch):
    runtime = tmp_path / "rt"
    flag = tmp_path / "device-lost"
    lost = start_patched_driver(runtime, "lost", LOST_DEVICE, "cpu", "--fault-injection",
                                NNRT_TEST_DEVICE_LOST=str(flag))
    healthy = start_driver(runtime, "cpu")
    # a short hold, so that the return is seen within the test
    monkeypatch.setattr(hetero_module, "ERROR_HOLD_S", 0.3)
    with use_runtime(monkeypatch, runtime):
        yield {"runtime": runtime, "flag": flag, "lost": lost, "cpu": healthy}
    for driver in (lost, healthy):
        driver.stop()


def drivers_of(plan) -> list[str]:
    return [s.device.driver for s in plan.steps]


def test_a_device_error_moves_the_run_and_the_device_comes_back(drivers, caplog):
    model, x, want = mlp(RNG)
    with model, model.compile(["lost", "cpu"]) as compiled, compiled.executor() as ex:
        hetero = compiled.hetero
        preferred = hetero.preferred
        assert drivers_of(preferred) == ["lost"]
        np.testing.assert_allclose(ex.run(x, timeout=10), want, rtol=1e-4, atol=1e-6)
        drivers["flag"].touch()
        with caplog.at_level(logging.WARNING, logger="nnrt.client.core.hetero"):
            started = time.monotonic()
            got = ex.run(x, timeout=10)  # met the device error, answered by the other CPU
            took = time.monotonic() - started
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
        assert ex.stats.failovers == 1
        assert drivers_of(hetero.current) == ["cpu"]
        assert drivers["lost"].proc.poll() is None  # alive: not a death
        assert any("reported a device error (NNRT_DEVICE_ERROR: the device is lost (test))"
                   in r.getMessage() for r in caplog.records)
        # held out, then still OFFLINE: runs stay on the CPU, none fails
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            np.testing.assert_allclose(ex.run(x, timeout=10), want, rtol=1e-4, atol=1e-6)
            time.sleep(0.02)
        assert hetero.current is not preferred and ex.stats.failovers == 1
        drivers["flag"].unlink()  # the device is back: AVAILABLE
        back = time.monotonic()
        assert wait_until(lambda: hetero.current is preferred, 10)
        back_s = time.monotonic() - back
        np.testing.assert_allclose(ex.run(x, timeout=10), want, rtol=1e-4, atol=1e-6)
        print(f"device error -> result on the other device {took * 1000:.1f} ms; "
              f"AVAILABLE again -> back on the preferred plan {back_s * 1000:.0f} ms")
        # a second error within a minute holds it out twice as long
        drivers["flag"].touch()
        np.testing.assert_allclose(ex.run(x, timeout=10), want, rtol=1e-4, atol=1e-6)
        held_until, count, _ = hetero._errored[0]
        assert count == 2 and held_until - time.monotonic() > 0.3


def test_a_bad_input_evicts_no_device(drivers):
    """A tensor the healthy preferred device refuses (NNRT_INVALID_SHAPE): that run fails
    with the single-device code, the plan stays, the next good run is on the same plan."""
    model, x, want = mlp(RNG)
    with model:
        lowered = model.handle.lowered()
    registry = DeviceRegistry(drivers["runtime"])
    try:
        devices = [next(d for d in registry.devices() if d.driver == name)
                   for name in ("lost", "cpu")]
        compilation = HeteroCompilation(devices, lowered, ht.ModelConfig(), failover=True)
        built = compilation.build()
        prepared = PreparedModel(built, built.client)
        preferred = compilation.preferred
        bad = Execution(prepared, [np.zeros((4, 17), np.float32)])  # 17 columns, not 16
        good = Execution(prepared, [x])
        try:
            with pytest.raises(NNRtError) as caught:
                bad.run(10)
            assert caught.value.code == OH_NN_UNAVAILABLE_DEVICE
            assert "NNRT_INVALID_SHAPE" in caught.value.message
            assert compilation.current is preferred and not compilation._errored
            assert prepared.hetero.stats.failovers == 0
            shapes = good.run(10)
            np.testing.assert_allclose(good.results(shapes)[0], want, rtol=1e-4, atol=1e-6)
            assert compilation.current is preferred
        finally:
            bad.close()
            good.close()
            prepared.close()
            built.release()
    finally:
        registry.close()


def test_device_busy_evicts_no_device(drivers):
    """NNRT_DEVICE_BUSY (the driver's flow control) fails the run as on one device."""
    model, x, _ = mlp(RNG)
    with model, model.compile(["lost", "cpu"]) as compiled, compiled.executor() as ex:
        preferred = compiled.hetero.preferred
        set_faults(drivers["lost"], deviceBusy=True)
        try:
            with pytest.raises(NNRtError) as caught:
                ex.run(x, timeout=10)
            assert caught.value.code == OH_NN_UNAVAILABLE_DEVICE
            assert "NNRT_DEVICE_BUSY" in caught.value.message
        finally:
            set_faults(drivers["lost"])
        assert compiled.hetero.current is preferred and ex.stats.failovers == 0


def test_without_failover_the_device_error_is_the_runs(drivers):
    model, x, want = mlp(RNG)
    with model, model.compile(["lost", "cpu"], failover=False) as compiled, \
            compiled.executor() as ex:
        drivers["flag"].touch()
        with pytest.raises(NNRtError) as caught:
            ex.run(x, timeout=10)
        assert caught.value.code == OH_NN_UNAVAILABLE_DEVICE
        assert "NNRT_DEVICE_ERROR" in caught.value.message
        assert compiled.hetero.current is compiled.hetero.preferred
        drivers["flag"].unlink()
        np.testing.assert_allclose(ex.run(x, timeout=10), want, rtol=1e-4, atol=1e-6)


def test_an_async_run_meeting_a_device_error_gets_its_result(drivers):
    """From asyncio: the result, no service-death notice (the driver did not die)."""
    model, x, want = mlp(RNG)
    with model, model.compile(["lost", "cpu"]) as compiled, compiled.executor() as ex:
        drivers["flag"].touch()
        got = asyncio.run(ex.run_async(x, timeout=10))
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
        assert ex.stats.failovers == 1
