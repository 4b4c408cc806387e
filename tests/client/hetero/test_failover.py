"""Failover over several devices, through real driver processes (client/core/hetero.py): the
preferred driver SIGKILLed in a loop of runs — no run fails, none is wrong, the run in flight
is retried on the devices left; back on the preferred device once its driver is back; an
asynchronous run in flight reports OnServiceDied and its result; failover turned off gives
the error."""

from __future__ import annotations

import signal
import threading
import time

import numpy as np
import pytest

from nnrt.client.core import execution
from nnrt.client.core.errors import NNRtError, OH_NN_CONNECTION_EXCEPTION, OH_NN_SUCCESS
from tests.client.capi.util_executor import use_runtime
from tests.conftest import start_driver, wait_until
from tests.helpers.hetero_models import mlp

RNG = np.random.default_rng(261)
GPU = ("gpu", "--cl-device", "any")


@pytest.fixture
def drivers(runtime_dir, monkeypatch):
    """A GPU and a CPU driver; the GPU's box lets a test replace it after a kill."""
    box = {"gpu": start_driver(runtime_dir, *GPU), "cpu": start_driver(runtime_dir, "cpu")}
    with use_runtime(monkeypatch, runtime_dir):
        yield box
    for driver in box.values():
        if driver.proc.poll() is None:
            driver.stop()


def test_sigkill_of_the_preferred_driver_in_a_loop_of_runs(drivers, runtime_dir):
    model, x, want = mlp(RNG)
    with model, model.compile(["gpu", "cpu"]) as compiled, compiled.executor() as ex:
        hetero = compiled.hetero
        preferred = hetero.preferred
        assert [s.device.hdi_device_type for s in preferred.steps] == [2]
        assert wait_until(lambda: len(hetero._plans) == 2, 20)  # the fallback, prepared
        failed = wrong = 0
        kill_to_good = back_at = None
        restarted_at = None
        for i in range(300):
            if i == 100:
                drivers["gpu"].stop(signal.SIGKILL)
                killed = time.monotonic()
            if i == 150:
                drivers["gpu"] = start_driver(runtime_dir, *GPU)
                restarted_at = time.monotonic()
            try:
                got = ex.run(x, timeout=10)
            except NNRtError:
                failed += 1
                continue
            if not np.allclose(got, want, rtol=1e-4, atol=1e-6):
                wrong += 1
            if i == 100:
                kill_to_good = time.monotonic() - killed
            if restarted_at is not None and back_at is None and hetero.current is preferred:
                back_at = time.monotonic() - restarted_at
            if i > 150 and back_at is None:
                time.sleep(0.01)  # the loop outlasts the return
        assert (failed, wrong) == (0, 0)
        assert ex.stats.failovers == 1
        assert kill_to_good is not None and kill_to_good < 2.0  # (the benchmark measures it)
        assert back_at is not None and back_at < 2.0, back_at
        assert ex.run(x).shape == (4, 10) and hetero.current is preferred


@pytest.mark.multiprocess
def test_an_async_run_in_flight_reports_the_death_and_its_result(runtime_dir, monkeypatch):
    slow_gpu = start_driver(runtime_dir, *GPU, "--fault-run-delay-ms", "1500")
    cpu = start_driver(runtime_dir, "cpu")
    try:
        with use_runtime(monkeypatch, runtime_dir):
            model, x, want = mlp(RNG)
            with model, model.compile(["gpu", "cpu"]) as compiled, compiled.executor() as ex:
                slot = ex._acquire(ex._arrays([x], {}))
                events: list[str] = []
                done = threading.Event()

                def on_done(user_data, code, outputs, count):
                    events.append(f"done:{int(code)}")
                    done.set()

                def on_died(user_data):
                    events.append("died")

                execution.start(ex.handle, slot.inputs, slot.outputs, 20_000, None, on_done,
                                on_died, execution.describe_binding)
                time.sleep(0.3)  # the GPU step is in flight (1.5 s)
                slow_gpu.stop(signal.SIGKILL)
                assert done.wait(15)
                time.sleep(0.3)  # nothing comes late
                assert events == ["died", f"done:{OH_NN_SUCCESS}"]
                got = slot.outputs[0].memory.array(np.float32, (4, 10)).copy()
                np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
                slot.busy = False
    finally:
        for driver in (slow_gpu, cpu):
            if driver.proc.poll() is None:
                driver.stop()


def test_without_failover_a_death_is_the_error(drivers, runtime_dir):
    model, x, want = mlp(RNG)
    with model, model.compile(["gpu", "cpu"], failover=False) as compiled, \
            compiled.executor() as ex:
        np.testing.assert_allclose(ex.run(x), want, rtol=1e-4, atol=1e-6)
        drivers["gpu"].stop(signal.SIGKILL)
        with pytest.raises(NNRtError) as info:
            ex.run(x)
        assert info.value.code == OH_NN_CONNECTION_EXCEPTION
        assert compiled.hetero.current is compiled.hetero.preferred
        # the same driver back: the executor recovers there, as on one device
        drivers["gpu"] = start_driver(runtime_dir, *GPU)
        np.testing.assert_allclose(ex.run(x), want, rtol=1e-4, atol=1e-6)
        assert ex.stats.failovers == 0
