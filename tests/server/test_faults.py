"""Fault injection of real driver processes: the `--fault-*` options and SetFaults at runtime."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from grpc_health.v1 import health_pb2

from nnrt.client.core.driver import DriverGone
from nnrt.protos import admin_pb2 as apb
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.common.errors import (
    NNRT_DEVICE_BUSY,
    NNRT_INVALID_MODEL_CACHE,
    NNRT_SUCCESS,
)
from tests.conftest import health_status, start_driver, wait_until
from tests.helpers.admin import set_faults, status
from tests.helpers.hdi_models import add_model, io
from tests.helpers.model_cache import exported_blobs, prepare_from


def _ready_to_run(client):
    """A prepared AddFusion model and its input/output buffers."""
    model_id = add_model().prepare(client)
    _, x = client.allocate_buffer(16)
    _, y = client.allocate_buffer(16)
    x.array(np.float32, [4])[:] = 1
    return model_id, x, y


def _run(client, model_id, x, y):
    return client.run(model_id, [io(x, 4)], [io(y, 4)], timeout=10)


def _assert_killed(driver, client) -> None:
    assert driver.proc.wait(5) == -signal.SIGKILL
    assert client.wait_dead(1.0)
    client.close()


@pytest.mark.multiprocess
def test_exit_on_run_probability_1_kills_at_the_first_run(runtime_dir):
    driver = start_driver(runtime_dir, "cpu", "--fault-exit-on-run-probability", "1")
    client = driver.client()
    model_id, x, y = _ready_to_run(client)
    with pytest.raises(DriverGone):
        _run(client, model_id, x, y)
    _assert_killed(driver, client)
    assert "probability 1" in driver.log()


@pytest.mark.multiprocess
def test_exit_on_run_probability_is_reproducible_with_a_seed(runtime_dir):
    seed, p = 0, 0.5
    draws = random.Random(seed)
    fatal = next(n for n in range(1, 100) if draws.random() < p)  # one draw per Run
    assert fatal >= 2  # the seed was chosen so that some runs survive first
    driver = start_driver(runtime_dir, "cpu", "--fault-exit-on-run-probability", str(p),
                          "--fault-seed", str(seed))
    client = driver.client()
    model_id, x, y = _ready_to_run(client)
    for _ in range(fatal - 1):
        assert _run(client, model_id, x, y).returnCode == NNRT_SUCCESS
    with pytest.raises(DriverGone):
        _run(client, model_id, x, y)
    _assert_killed(driver, client)
    assert f"Run #{fatal} (probability 0.5)" in driver.log()


@pytest.mark.multiprocess
def test_exit_on_export_cache(runtime_dir):
    driver = start_driver(runtime_dir, "cpu", "--fault-exit-on-export-cache")
    client = driver.client()
    model_id = add_model().prepare(client)
    assert client.export_model_cache(model_id + 1).returnCode != NNRT_SUCCESS  # no model: no export
    with pytest.raises(DriverGone):
        client.export_model_cache(model_id)
    _assert_killed(driver, client)
    assert "SIGKILL) at ExportModelCache" in driver.log()


@pytest.mark.multiprocess
def test_device_status_is_what_the_fault_says(runtime_dir):
    driver = start_driver(runtime_dir, "cpu", "--fault-device-status", "offline")
    try:
        reply = status(driver)  # any --fault-* option enables injection
        assert reply.faultInjectionEnabled and reply.faults.deviceStatus == ht.OFFLINE + 1
        with driver.client() as client:
            assert client.get_device_status().status == ht.OFFLINE
            for code in (ht.UNKNOWN, ht.BUSY, ht.AVAILABLE):
                assert set_faults(driver, deviceStatus=code + 1).returnCode == 0
                assert client.get_device_status().status == code
            assert client.get_device_name().returnCode == NNRT_SUCCESS  # the rest still works
    finally:
        assert driver.stop() == 0


@pytest.mark.multiprocess
def test_device_busy_refuses_prepare_and_run(runtime_dir):
    driver = start_driver(runtime_dir, "cpu", "--fault-device-busy")
    try:
        with driver.client() as client:
            model = add_model()
            with model.packed(client) as packed:
                assert client.prepare_model(packed).returnCode == NNRT_DEVICE_BUSY
            _, blob = client.allocate_buffer(64)
            assert client.prepare_model_from_model_cache([blob.descriptor()]).returnCode == \
                NNRT_DEVICE_BUSY
            assert client.prepare_offline_model([blob.descriptor()]).returnCode == NNRT_DEVICE_BUSY
            assert set_faults(driver).returnCode == 0  # no fault: the device works again
            model_id, x, y = _ready_to_run(client)
            assert set_faults(driver, deviceBusy=True).returnCode == 0
            assert _run(client, model_id, x, y).returnCode == NNRT_DEVICE_BUSY
            assert client.get_device_name().returnCode == NNRT_SUCCESS  # queries still answer
            assert set_faults(driver).returnCode == 0
            assert _run(client, model_id, x, y).returnCode == NNRT_SUCCESS
            np.testing.assert_array_equal(y.array(np.float32, [4]), [1, 2, 3, 4])
            assert status(driver).runsFailed == 1
            blob.close(), x.close(), y.close()
    finally:
        assert driver.stop() == 0


@pytest.mark.multiprocess
def test_corrupt_exported_cache_is_refused_when_prepared_from(runtime_dir):
    driver = start_driver(runtime_dir, "cpu", "--fault-corrupt-exported-cache")
    try:
        with driver.client() as client:
            corrupted = exported_blobs(client, add_model().prepare(client))
            assert prepare_from(client, corrupted).returnCode == NNRT_INVALID_MODEL_CACHE
            assert set_faults(driver).returnCode == 0
            sound = exported_blobs(client, add_model().prepare(client))
            assert prepare_from(client, sound).returnCode == NNRT_SUCCESS
            for good, bad in zip(sound, corrupted, strict=True):  # each blob: one flipped byte
                assert len(good) == len(bad)
                assert sum(a != b for a, b in zip(good, bad)) == 1
    finally:
        assert driver.stop() == 0


def _driver_process(runtime_dir, *args) -> tuple[subprocess.Popen, Path]:
    """A driver process that start_driver would wait for; its log file."""
    runtime_dir.mkdir(parents=True, exist_ok=True)
    log_path = runtime_dir.parent / "driver.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "nnrt.server", "cpu", "--runtime-dir", str(runtime_dir), *args],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    return proc, log_path


@pytest.mark.multiprocess
def test_slow_start_serves_late(runtime_dir):
    launched = time.monotonic()
    proc, log_path = _driver_process(runtime_dir, "--fault-slow-start-ms", "1500")
    sock = runtime_dir / "cpu.sock"
    try:
        assert wait_until(lambda: "before serving" in log_path.read_text(), 10.0)
        time.sleep(max(0.0, launched + 1.0 - time.monotonic()))
        assert proc.poll() is None
        assert not sock.exists() and not (runtime_dir / "cpu.session").exists()
        assert health_status(sock) is None
        assert wait_until(lambda: health_status(sock) == health_pb2.HealthCheckResponse.SERVING,
                          15.0, interval=0.05)
        assert time.monotonic() - launched >= 1.5
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0
    text = log_path.read_text()
    assert text.index("waiting 1500 ms before serving") < text.index("serving cpu device")


@pytest.mark.multiprocess
def test_sigterm_during_slow_start_exits_0_without_serving(runtime_dir):
    proc, log_path = _driver_process(runtime_dir, "--fault-slow-start-ms", "60000")
    try:
        assert wait_until(lambda: "before serving" in log_path.read_text(), 10.0)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(5) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    assert not (runtime_dir / "cpu.sock").exists()
    assert "stopped before serving" in log_path.read_text()


@pytest.mark.multiprocess
def test_exit_on_run_counts_from_when_set_faults_applies_it(runtime_dir):
    driver = start_driver(runtime_dir, "cpu", "--fault-injection", "--fault-exit-on-run", "3")
    client = driver.client()
    model_id, x, y = _ready_to_run(client)
    for _ in range(2):  # runs 1 and 2 of the first count
        assert _run(client, model_id, x, y).returnCode == NNRT_SUCCESS
    reply = set_faults(driver, exitOnRun=2)
    assert reply.returnCode == 0 and reply.faults == apb.FaultConfig(exitOnRun=2)
    assert _run(client, model_id, x, y).returnCode == NNRT_SUCCESS  # #1 from now (#3 in all)
    with pytest.raises(DriverGone):
        _run(client, model_id, x, y)  # #2 from now
    _assert_killed(driver, client)
    assert "SIGKILL) at Run #2" in driver.log()


@pytest.mark.multiprocess
def test_exit_on_prepare_set_at_runtime(runtime_dir):
    driver = start_driver(runtime_dir, "cpu", "--fault-injection")
    client = driver.client()
    add_model().prepare(client)
    assert set_faults(driver, exitOnPrepare=1).returnCode == 0
    with pytest.raises(DriverGone):
        add_model().prepare(client)
    _assert_killed(driver, client)


@pytest.mark.multiprocess
@pytest.mark.parametrize("args", [["--fault-exit-on-run-probability", "1.5"],
                                  ["--fault-slow-start-ms", "-1"],
                                  ["--fault-device-status", "on-fire"]])
def test_bad_fault_options_exit_2(runtime_dir, args):
    proc = subprocess.run([sys.executable, "-m", "nnrt.server", "cpu", "--runtime-dir",
                           str(runtime_dir), *args], capture_output=True, timeout=30)
    assert proc.returncode == 2
