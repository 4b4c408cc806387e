"""`nnrt-driver` as a process: sockets, health, reflection, SIGTERM, refusing a second copy."""

from __future__ import annotations

import signal
import stat
import subprocess
import sys
import threading
import time

import grpc
import numpy as np
import pytest
from grpc_health.v1 import health_pb2
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from nnrt.protos import hdi_types_pb2 as ht
from nnrt.common.errors import NNRT_SUCCESS
from tests.conftest import health_status, start_driver
from tests.helpers.hdi_models import add_model, io


@pytest.mark.multiprocess
def test_sockets_are_0660_and_named_after_the_driver(runtime_dir):
    driver = start_driver(runtime_dir, name="cpu7")
    try:
        for path in (runtime_dir / "cpu7.sock", runtime_dir / "cpu7.session"):
            mode = path.stat().st_mode
            assert stat.S_ISSOCK(mode)
            assert stat.S_IMODE(mode) == 0o660
    finally:
        assert driver.stop() == 0


def test_health_and_reflection_are_served(shared_driver):
    assert health_status(shared_driver.grpc_path) == health_pb2.HealthCheckResponse.SERVING
    with grpc.insecure_channel(f"unix:{shared_driver.grpc_path}") as channel:
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        replies = stub.ServerReflectionInfo(
            iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=5)
        names = {s.name for reply in replies for s in reply.list_services_response.service}
    assert {"ohos.hdi.nnrt.v2_1.INnrtDevice", "ohos.hdi.nnrt.v2_1.IPreparedModel",
            "grpc.health.v1.Health"} <= names


def test_device_queries_answer_truthfully(client):
    assert client.get_version().major == 2 and client.get_version().minor == 1
    assert client.get_device_name().name == "nnrt-cpu"
    assert client.get_vendor_name().name == "nnrt"
    assert client.get_device_type().deviceType == ht.CPU
    assert client.get_device_status().status == ht.AVAILABLE
    assert client.is_dynamic_input_supported().isSupported is True
    assert client.is_float16_precision_supported().isSupported is True
    assert client.is_model_cache_supported().isSupported is True
    assert client.is_priority_supported().isSupported is False


@pytest.mark.multiprocess
def test_sigterm_removes_sockets_and_exits_0(runtime_dir):
    driver = start_driver(runtime_dir)
    assert driver.stop(signal.SIGTERM) == 0
    assert not driver.grpc_path.exists() and not driver.session_path.exists()
    assert "stopped" in driver.log()


@pytest.mark.multiprocess
def test_sigterm_lets_a_run_in_flight_finish(runtime_dir):
    driver = start_driver(runtime_dir, "cpu", "--fault-run-delay-ms", "800")
    client = driver.client()
    model_id = add_model().prepare(client)
    _, x = client.allocate_buffer(16)
    _, y = client.allocate_buffer(16)
    x.array(np.float32, [4])[:] = 1
    result = {}

    def run():
        result["reply"] = client.run(model_id, [io(x, 4)], [io(y, 4)], timeout=10)

    worker = threading.Thread(target=run)
    worker.start()
    time.sleep(0.3)  # the run is now inside its injected delay
    driver.proc.send_signal(signal.SIGTERM)
    worker.join(10)
    assert driver.proc.wait(10) == 0
    assert result["reply"].returnCode == NNRT_SUCCESS
    np.testing.assert_array_equal(y.array(np.float32, [4]), [1, 2, 3, 4])
    client.close()


def test_a_second_driver_on_the_same_socket_is_refused(shared_driver):
    proc = subprocess.run(
        [sys.executable, "-m", "nnrt.server", "cpu", "--runtime-dir", str(shared_driver.runtime_dir)],
        capture_output=True, timeout=30,
    )
    assert proc.returncode == 3
    # stopped by the name lock (common/runtime_dir.py) before it loads anything
    assert b"another driver named 'cpu' is running or starting" in proc.stderr
    assert f"is locked by pid {shared_driver.pid}".encode() in proc.stderr
    assert health_status(shared_driver.grpc_path) == health_pb2.HealthCheckResponse.SERVING


@pytest.mark.multiprocess
def test_stale_sockets_of_a_killed_driver_are_replaced(runtime_dir):
    first = start_driver(runtime_dir)
    first.stop(signal.SIGKILL)
    assert first.grpc_path.exists()  # SIGKILL leaves them behind
    second = start_driver(runtime_dir)
    try:
        with second.client() as client:
            assert client.get_device_name().returnCode == NNRT_SUCCESS
        assert "removing stale socket" in second.log()
    finally:
        assert second.stop() == 0


@pytest.mark.multiprocess
@pytest.mark.parametrize("args", [["gpu-that-does-not-exist"], ["cpu", "--fault-exit-on-run", "-1"]])
def test_bad_usage_exits_2(args, runtime_dir):
    proc = subprocess.run([sys.executable, "-m", "nnrt.server", *args, "--runtime-dir",
                           str(runtime_dir)], capture_output=True, timeout=30)
    assert proc.returncode == 2
