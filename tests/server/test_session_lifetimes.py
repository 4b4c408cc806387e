"""Sessions across processes: resources die with their client, clients notice a dead driver."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

from nnrt.client.core.driver import DriverGone
from nnrt.common.errors import NNRT_INVALID_MODEL, NNRT_SUCCESS
from tests.conftest import memfd_mappings, open_fds, start_driver, wait_until
from tests.helpers.hdi_models import add_model, expect_run_abandoned, io

CLIENT_SCRIPT = textwrap.dedent("""
    import sys, time
    import numpy as np
    from nnrt.client.core.driver import DriverClient
    from tests.helpers.hdi_models import add_model, io
    client = DriverClient.connect(sys.argv[2], sys.argv[1])
    model_id = add_model(1024).prepare(client)
    buffers = [client.allocate_buffer(4096)[1] for _ in range(8)]
    buffers[0].array(np.float32, [1024])[:] = 1
    assert client.run(model_id, [io(buffers[0], 1024)], [io(buffers[1], 1024)]).returnCode == 0
    print("ready", flush=True)
    if sys.argv[3] == "close":
        client.close()
        print("closed", flush=True)
    time.sleep(60)
""")


def _client_process(driver, mode: str) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", CLIENT_SCRIPT, str(driver.runtime_dir), driver.name, mode],
        stdout=subprocess.PIPE, text=True,
    )
    line = proc.stdout.readline()
    assert line.strip() == "ready", line
    return proc


def _back_to(pid: int, fds_before: set[str], maps_before: list[str]) -> bool:
    """No fd the process did not have before (the health probe's may have closed since), and
    exactly the memfd mappings it had."""
    return open_fds(pid) <= fds_before and memfd_mappings(pid) == maps_before


@pytest.mark.parametrize("mode", ["sigkill", "close"])
def test_driver_frees_everything_of_a_client_that_goes_away(driver, mode):
    fds_before, maps_before = open_fds(driver.pid), memfd_mappings(driver.pid)
    proc = _client_process(driver, mode)
    try:
        if mode == "close":
            assert proc.stdout.readline().strip() == "closed"
        else:
            assert len(memfd_mappings(driver.pid)) >= 8 + len(maps_before)
            proc.send_signal(signal.SIGKILL)
        assert wait_until(lambda: _back_to(driver.pid, fds_before, maps_before), 5.0), (
            open_fds(driver.pid) - fds_before, memfd_mappings(driver.pid))
    finally:
        proc.kill()
        proc.wait(10)
    assert "freed 1 prepared models, 8 buffers" in driver.log()
    with driver.client() as client:  # and it keeps serving
        assert client.get_device_name().returnCode == NNRT_SUCCESS


def test_sessions_cannot_name_each_others_models(client, shared_driver):
    model_id = add_model().prepare(client)
    with shared_driver.client() as other:
        assert other.get_input_dim_ranges(model_id).returnCode == NNRT_INVALID_MODEL
        assert other.release_prepared_model(model_id).returnCode == NNRT_INVALID_MODEL
    assert client.get_input_dim_ranges(model_id).returnCode == NNRT_SUCCESS


@pytest.mark.multiprocess
def test_client_notices_a_sigkilled_driver_at_once(runtime_dir):
    driver = start_driver(runtime_dir)
    client = driver.client()
    died = threading.Event()
    client.on_death(died.set)
    killed = time.monotonic()
    driver.stop(signal.SIGKILL)
    assert died.wait(1.0)
    noticed = time.monotonic() - killed
    started = time.monotonic()
    with pytest.raises(DriverGone, match="gone"):
        client.get_device_name()
    assert time.monotonic() - started < 0.1
    assert noticed < 1.0 and not client.alive
    client.close()


@pytest.mark.multiprocess
def test_a_run_in_flight_fails_promptly_when_the_driver_dies(runtime_dir):
    driver = start_driver(runtime_dir, "cpu", "--fault-run-hang")
    client = driver.client()
    model_id = add_model().prepare(client)
    _, x = client.allocate_buffer(16)
    _, y = client.allocate_buffer(16)
    errors = []

    def run():
        try:
            client.run(model_id, [io(x, 4)], [io(y, 4)])
        except DriverGone as exc:
            errors.append((time.monotonic(), exc))

    worker = threading.Thread(target=run)
    worker.start()
    time.sleep(0.3)
    killed = time.monotonic()
    driver.stop(signal.SIGKILL)
    worker.join(5)
    assert not worker.is_alive() and errors
    assert errors[0][0] - killed < 1.0
    x.close(), y.close()  # the client's mappings outlive the driver
    client.close()


@pytest.mark.multiprocess
@pytest.mark.parametrize("option, action", [("--fault-exit-on-run", "run"),
                                            ("--fault-exit-on-prepare", "prepare")])
def test_fault_injection_exits_abruptly(runtime_dir, option, action):
    driver = start_driver(runtime_dir, "cpu", option, "2")
    assert "FAULT INJECTION ENABLED" in driver.log()
    client = driver.client()
    model_id = add_model().prepare(client)
    _, x = client.allocate_buffer(16)
    _, y = client.allocate_buffer(16)
    x.array(np.float32, [4])[:] = 0
    if action == "run":
        assert client.run(model_id, [io(x, 4)], [io(y, 4)]).returnCode == NNRT_SUCCESS
        with pytest.raises(DriverGone):
            client.run(model_id, [io(x, 4)], [io(y, 4)])
    else:
        with pytest.raises(DriverGone):
            add_model().prepare(client)
    assert driver.proc.wait(5) == -signal.SIGKILL
    assert client.wait_dead(1.0)
    client.close()


@pytest.mark.multiprocess
def test_a_run_past_its_deadline_is_abandoned_by_the_driver(runtime_dir):
    driver = start_driver(runtime_dir, "cpu", "--fault-run-delay-ms", "3000")
    try:
        with driver.client() as client:
            expect_run_abandoned(driver, client)
            # The abandoned run stopped early: the same worker serves the next call promptly.
            assert client.get_device_name().returnCode == NNRT_SUCCESS
    finally:
        assert driver.stop() == 0


@pytest.mark.multiprocess
def test_sigterm_with_a_hung_run_still_exits_within_the_grace(runtime_dir):
    driver = start_driver(runtime_dir, "cpu", "--fault-run-hang", "--grace", "0.5")
    client = driver.client()
    model_id = add_model().prepare(client)
    _, x = client.allocate_buffer(16)
    _, y = client.allocate_buffer(16)
    worker = threading.Thread(target=lambda: pytest.raises(
        (DriverGone, TimeoutError), client.run, model_id, [io(x, 4)], [io(y, 4)], timeout=10))
    worker.start()
    time.sleep(0.3)
    started = time.monotonic()
    assert driver.stop(signal.SIGTERM, timeout=10) == 0
    assert time.monotonic() - started < 5
    worker.join(10)
    client.close()


def test_a_buffer_allocated_as_its_session_ends_is_not_leaked():
    # The race between AllocateBuffer and session end, made deterministic in-process.
    from nnrt.server.buffers import BufferTable, SharedRegion
    from nnrt.common.errors import NNRT_OPERATION_FORBIDDEN, DriverError

    table = BufferTable()
    table.close()
    region = SharedRegion.allocate(64)
    fd = region.fd
    with pytest.raises(DriverError) as refused:
        table.add(region)
    assert refused.value.code == NNRT_OPERATION_FORBIDDEN
    try:  # closed with the region (the number may have been reused by another file since)
        target = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        target = ""
    assert "nnrt-buffer" not in target
