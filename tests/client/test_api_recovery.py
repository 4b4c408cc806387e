"""The Pythonic API across a driver crash: an Executor (and its Compiled's default executor)
keeps working once a driver of the same device serves again — no recompilation, same
results; while the driver is down, runs raise NNRtError(OH_NN_CONNECTION_EXCEPTION)."""

from __future__ import annotations

import asyncio
import signal

import numpy as np
import pytest

from nnrt.client import NNRtError
from nnrt.client.capi import OH_NN_CONNECTION_EXCEPTION
from tests.client.capi.util_executor import use_runtime
from tests.helpers.api_models import mlp_model
from tests.conftest import start_driver, wait_until

RNG = np.random.default_rng(29)


@pytest.fixture
def driver(runtime_dir, monkeypatch):
    box = [start_driver(runtime_dir)]
    with use_runtime(monkeypatch, runtime_dir):
        yield box
    if box[0].proc.poll() is None:
        box[0].stop()


def test_executor_keeps_working_across_a_restart(driver, runtime_dir):
    w1 = RNG.standard_normal((32, 16)).astype(np.float32)
    b1 = RNG.standard_normal(32).astype(np.float32)
    w2 = RNG.standard_normal((10, 32)).astype(np.float32)
    x = RNG.standard_normal((4, 16)).astype(np.float32)
    with mlp_model(w1, b1, w2) as model, model.compile("cpu") as compiled, \
            compiled.executor() as ex:
        before = ex.run(x).copy()
        default_before = compiled.run(x).copy()
        driver[0].stop(signal.SIGKILL)
        assert wait_until(lambda: not ex.handle._client.alive, 2)
        with pytest.raises(NNRtError) as info:
            ex.run(x)
        assert info.value.code == OH_NN_CONNECTION_EXCEPTION
        driver[0] = start_driver(runtime_dir)
        np.testing.assert_array_equal(ex.run(x), before)
        np.testing.assert_array_equal(compiled.run(x), default_before)
        np.testing.assert_array_equal(asyncio.run(ex.run_async(x, timeout=5)), before)
        assert ex.handle.recoveries == ["cache"]
        assert ex.run(x[:2]).shape == (2, 10)  # dynamic batch, as before
