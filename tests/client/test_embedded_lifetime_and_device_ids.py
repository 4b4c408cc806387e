"""Issue 14, items 5 and 6, from the application's side: the embedded default driver dies with
its application and does not hold its stdio; it never races a driver or device manager that
is starting; two drivers of one kind are two devices (IDs unique per driver instance, stable
across restarts); listing devices keeps no session open in any driver."""

from __future__ import annotations

import os
import selectors
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import grpc
import numpy as np
import pytest
from google.protobuf import empty_pb2
from nnrt.client import capi
from nnrt.client.core import embedded as embedded_module
from nnrt.client.core.device import device_id_of
from nnrt.protos import admin_pb2_grpc

from tests.client.capi.util_capi import W, add_model, desc, use_runtime
from tests.conftest import RunningDriver, start_driver, wait_until

CPU_NAME = "nnrt-cpu_nnrt_v2_1"
SUCCESS = capi.OH_NN_SUCCESS

# An application that makes the client start the embedded driver, says where and which pids,
# then exits without atexit handlers ("exit") or waits to be killed ("wait").
APP = textwrap.dedent("""
    import os, sys, time
    from nnrt.client import capi
    from nnrt.client.core import device
    code, ids = capi.OH_NNDevice_GetAllDevicesID()
    assert code == 0 and len(ids) == 1, (code, ids)
    embedded = device.registry()._embedded
    print(embedded.directory, *embedded.pids, flush=True)
    if sys.argv[1] == "exit":
        os._exit(0)
    time.sleep(300)
""")


def _app_env(runtime_dir: Path, tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "NNRT_NO_EMBEDDED"}
    env["NNRT_RUNTIME_DIR"] = str(runtime_dir)
    env["TMPDIR"] = str(tmp)  # the private directory lands here, for the sweep below
    return env


def _running(pid: int) -> bool:
    """Alive and not a zombie (an orphan's zombie may wait for a reaper that never comes)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _read_line(proc: subprocess.Popen, timeout: float) -> str:
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        assert sel.select(timeout), "the application printed nothing"
    return proc.stdout.readline().decode()


def _admin_status(driver: RunningDriver):
    with grpc.insecure_channel(f"unix:{driver.grpc_path}") as channel:
        return admin_pb2_grpc.NnrtAdminStub(channel).GetStatus(empty_pb2.Empty(), timeout=5)


# -- the embedded driver's lifetime and stdio ----------------------------------------------------


@pytest.mark.multiprocess
def test_sigkilled_application_takes_its_embedded_driver_along(runtime_dir, tmp_path):
    app = subprocess.Popen([sys.executable, "-c", APP, "wait"], env=_app_env(runtime_dir, tmp_path),
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                           stdin=subprocess.DEVNULL)
    try:
        private, *pids = _read_line(app, 60).split()
        private, pids = Path(private), [int(p) for p in pids]
        assert pids and all(_running(pid) for pid in pids)
        for pid in pids:  # stdio not inherited: /dev/null, and stderr into the private dir
            assert os.readlink(f"/proc/{pid}/fd/0") == os.readlink(f"/proc/{pid}/fd/1") \
                == "/dev/null"
            assert os.readlink(f"/proc/{pid}/fd/2") == str(private / "cpu.log")
        app.send_signal(signal.SIGKILL)
        app.wait(10)
        started = time.monotonic()
        assert wait_until(lambda: not any(_running(pid) for pid in pids), 10), \
            (private / "cpu.log").read_text()
        elapsed = time.monotonic() - started
        assert app.stdout.read() == b""  # EOF: no driver holds the application's stdout
        assert "the parent process is gone" in (private / "cpu.log").read_text()
        assert elapsed < 10
        assert list(runtime_dir.iterdir()) == []
        # The directory the killed application could not remove goes at the next start.
        assert private.is_dir() and not list(private.glob("*.sock"))
        assert embedded_module.sweep_leftovers(tmp_path) == [private]
        assert not private.exists()
    finally:
        if app.poll() is None:
            app.kill()
            app.wait(5)
        app.stdout.close()


@pytest.mark.multiprocess
def test_a_parent_capturing_the_output_does_not_hang(runtime_dir, tmp_path):
    """The application ends without running its atexit handlers: before, its driver kept the
    captured stdout and stderr open and `subprocess.run` waited forever."""
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", APP, "exit"], env=_app_env(runtime_dir, tmp_path),
                          capture_output=True, text=True, timeout=60, check=False)
    elapsed = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr
    assert elapsed < 30
    pids = [int(p) for p in proc.stdout.split()[1:]]
    assert pids and wait_until(lambda: not any(_running(pid) for pid in pids), 10)


@pytest.mark.multiprocess
def test_the_lifeline_option_needs_an_open_fd():
    proc = subprocess.run([sys.executable, "-m", "nnrt.server", "cpu", "--lifeline-fd", "987"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2 and "--lifeline-fd 987 is not an open file descriptor" in \
        proc.stderr


# -- when the embedded driver starts ----------------------------------------------------------


def _listening(path: Path, kind: int = socket.SOCK_STREAM) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, kind)
    sock.bind(str(path))
    sock.listen()
    return sock


def _stale(path: Path, kind: int = socket.SOCK_STREAM) -> None:
    sock = socket.socket(socket.AF_UNIX, kind)
    sock.bind(str(path))
    sock.close()  # the file stays, nobody listens: a dead process's socket


def test_embed_only_in_a_directory_with_no_sign_of_a_driver(tmp_path):
    assert embedded_module.may_embed(tmp_path / "missing", wait=5)
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("not a sign")
    assert embedded_module.may_embed(empty, wait=5)


def test_stale_sockets_mean_that_directory_without_waiting(runtime_dir):
    _stale(runtime_dir / "cpu.sock")
    _stale(runtime_dir / "cpu.session", socket.SOCK_SEQPACKET)
    started = time.monotonic()
    assert not embedded_module.may_embed(runtime_dir, wait=5)
    assert time.monotonic() - started < 2


@pytest.mark.parametrize("sign", ["devmgr", "half-bound driver", "held lock", "live pid"])
def test_a_starting_driver_or_device_manager_is_waited_for_not_raced(runtime_dir, sign):
    held = []
    if sign == "devmgr":
        held.append(_listening(runtime_dir / "devmgr.ctl"))
    elif sign == "half-bound driver":
        held.append(_listening(runtime_dir / "cpu.sock"))  # its .session not there yet
    elif sign == "held lock":
        import fcntl
        f = open(runtime_dir / "cpu.lock", "w")  # noqa: SIM115 (held until the finally)
        fcntl.flock(f, fcntl.LOCK_EX)
        held.append(f)
    else:
        (runtime_dir / "cpu.pid").write_text(f"{os.getpid()}\n")
    try:
        started = time.monotonic()
        assert not embedded_module.may_embed(runtime_dir, wait=0.5)  # bounded, then that dir
        assert 0.5 <= time.monotonic() - started < 3
    finally:
        for thing in held:
            thing.close()


@pytest.mark.multiprocess
def test_dead_pid_and_free_lock_files_are_stale(runtime_dir):
    dead = subprocess.Popen(["true"])
    dead.wait()
    (runtime_dir / "cpu.pid").write_text(f"{dead.pid}\n")
    (runtime_dir / "npu.lock").write_text("")
    started = time.monotonic()
    assert not embedded_module.may_embed(runtime_dir, wait=5)
    assert time.monotonic() - started < 2


@pytest.mark.multiprocess
def test_waiting_ends_when_the_driver_serves(runtime_dir):
    ctl = _listening(runtime_dir / "devmgr.ctl")
    try:
        driver = start_driver(runtime_dir, "cpu", "--fault-slow-start-ms", "300")
        try:
            started = time.monotonic()
            assert not embedded_module.may_embed(runtime_dir, wait=20)
            assert time.monotonic() - started < 5
        finally:
            driver.stop()
    finally:
        ctl.close()


# -- device IDs: unique per driver instance, stable across restarts -------------------------------


def _run_add(device_id: int, x: np.ndarray) -> np.ndarray:
    """Build the ADD model on `device_id` and run it once through the C API."""
    model = add_model()
    compilation = capi.OH_NNCompilation_Construct(model)
    try:
        assert capi.OH_NNCompilation_SetDevice(compilation, device_id) == SUCCESS
        assert capi.OH_NNCompilation_Build(compilation) == SUCCESS
        executor = capi.OH_NNExecutor_Construct(compilation)
        assert executor is not None
    finally:
        capi.OH_NNCompilation_Destroy(compilation)
        capi.OH_NNModel_Destroy(model)
    tensors = []
    try:
        for _ in range(2):
            d = desc(x.shape)
            tensors.append(capi.OH_NNTensor_Create(device_id, d))
            capi.OH_NNTensorDesc_Destroy(d)
        tin, tout = tensors
        assert tin is not None and tout is not None
        np.frombuffer(capi.OH_NNTensor_GetDataBuffer(tin), np.float32)[...] = x.ravel()
        assert capi.OH_NNExecutor_RunSync(executor, [tin], 1, [tout], 1) == SUCCESS
        return np.frombuffer(capi.OH_NNTensor_GetDataBuffer(tout), np.float32).reshape(
            x.shape).copy()
    finally:
        for t in tensors:
            capi.OH_NNTensor_Destroy(t)
        capi.OH_NNExecutor_Destroy(executor)


@pytest.fixture
def two_cpu_drivers(runtime_dir):
    """The configuration example of docs/operations.md: two CPU drivers, `cpu` and `flaky`."""
    drivers = {"cpu": start_driver(runtime_dir, name="cpu")}
    try:
        drivers["flaky"] = start_driver(runtime_dir, name="flaky")
        yield drivers
    finally:
        for driver in drivers.values():
            driver.stop()


def test_two_drivers_of_one_kind_are_two_usable_devices(two_cpu_drivers, runtime_dir,
                                                        monkeypatch):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    with use_runtime(monkeypatch, runtime_dir):
        code, ids = capi.OH_NNDevice_GetAllDevicesID()
        assert code == SUCCESS
        assert ids == [device_id_of(CPU_NAME, "cpu"), device_id_of(CPU_NAME, "flaky")]
        assert len(set(ids)) == 2
        for device_id in ids:
            assert capi.OH_NNDevice_GetName(device_id) == (SUCCESS, CPU_NAME)
            assert capi.OH_NNDevice_GetType(device_id) == (SUCCESS, capi.OH_NN_CPU)
        for device_id, name in zip(ids, ("cpu", "flaky")):
            before = {n: _admin_status(d).runsCompleted for n, d in two_cpu_drivers.items()}
            np.testing.assert_allclose(_run_add(device_id, x), x + W)
            after = {n: _admin_status(d).runsCompleted for n, d in two_cpu_drivers.items()}
            # The run went to that device's driver, and only there.
            assert {n: after[n] - before[n] for n in after} == \
                {n: int(n == name) for n in after}


def test_ids_survive_a_driver_restart(two_cpu_drivers, runtime_dir, monkeypatch):
    x = np.ones((2, 3), np.float32)
    with use_runtime(monkeypatch, runtime_dir):
        code, before = capi.OH_NNDevice_GetAllDevicesID()
        assert code == SUCCESS and len(before) == 2
        two_cpu_drivers["flaky"].stop(signal.SIGKILL)
        assert capi.OH_NNDevice_GetAllDevicesID() == (SUCCESS, before[:1])  # gone: not listed
        two_cpu_drivers["flaky"] = start_driver(runtime_dir, name="flaky")
        assert capi.OH_NNDevice_GetAllDevicesID() == (SUCCESS, before)
        np.testing.assert_allclose(_run_add(before[1], x), x + W)


def test_listing_keeps_no_session_open(two_cpu_drivers, runtime_dir, monkeypatch):
    with use_runtime(monkeypatch, runtime_dir):
        for _ in range(3):
            code, ids = capi.OH_NNDevice_GetAllDevicesID()
            assert code == SUCCESS and len(ids) == 2
            for device_id in ids:
                assert capi.OH_NNDevice_GetName(device_id)[0] == SUCCESS
                assert capi.OH_NNDevice_GetType(device_id)[0] == SUCCESS
        for driver in two_cpu_drivers.values():
            assert list(_admin_status(driver).sessions) == []  # no session, now or before
            assert "opened by pid" not in driver.log()
        # Using a device opens its session (one, kept for the process), and only there.
        np.testing.assert_allclose(_run_add(ids[0], np.zeros((2, 3), np.float32)), W)
        assert [s.peerPid for s in _admin_status(two_cpu_drivers["cpu"]).sessions] == \
            [os.getpid()]
        assert list(_admin_status(two_cpu_drivers["flaky"]).sessions) == []
        assert capi.OH_NNDevice_GetAllDevicesID() == (SUCCESS, ids)
        assert len(_admin_status(two_cpu_drivers["cpu"]).sessions) == 1
