"""Fixtures that run real driver processes in a private runtime directory."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from grpc_health.v1 import health_pb2

from nnrt.client.core.driver import DriverClient
from nnrt.devmgr.probes import health_status  # the device manager's probe, shared by the tests
from nnrt.common.runtime_dir import grpc_socket, session_socket

# Tests point the client at drivers they start themselves; a test that exercises the
# embedded default drivers removes this from its environment.
os.environ["NNRT_NO_EMBEDDED"] = "1"

START_TIMEOUT = 20.0
STOP_TIMEOUT = 15.0  # past it, a stop is waited for only while the driver still progresses
STOP_CAP = 120.0  # and never longer than this


def cpu_ticks(pid: int) -> int | None:
    """utime + stime of a process (clock ticks), None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[11]) + int(fields[12])


def wait_while_progressing(proc: subprocess.Popen, timeout: float,
                           cap: float = STOP_CAP, quiet_s: float = 5.0) -> int:
    """Wait for `proc` to exit: `timeout` seconds, then for as long as it keeps computing
    (its CPU time grew in the last `quiet_s`), up to `cap`. On a busy machine a driver's
    clean stop can outlast a fixed guess while doing exactly what it should; one that sits
    idle without exiting is stuck (subprocess.TimeoutExpired)."""
    started = time.monotonic()
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        pass
    last, last_change = cpu_ticks(proc.pid), time.monotonic()
    while time.monotonic() - started < cap:
        try:
            return proc.wait(0.5)
        except subprocess.TimeoutExpired:
            ticks = cpu_ticks(proc.pid)
            if ticks != last:
                last, last_change = ticks, time.monotonic()
            elif time.monotonic() - last_change > quiet_s:
                break
    raise subprocess.TimeoutExpired(proc.args, time.monotonic() - started)


@dataclass
class RunningDriver:
    proc: subprocess.Popen
    runtime_dir: Path
    name: str
    log_path: Path

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def grpc_path(self) -> Path:
        return grpc_socket(self.runtime_dir, self.name)

    @property
    def session_path(self) -> Path:
        return session_socket(self.runtime_dir, self.name)

    def client(self, timeout: float = 5.0) -> DriverClient:
        return DriverClient.connect(self.name, self.runtime_dir, timeout=timeout)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = STOP_TIMEOUT) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return wait_while_progressing(self.proc, timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
            raise


def start_driver(runtime_dir: Path, kind: str = "cpu", *args: str, name: str | None = None,
                 timeout: float = START_TIMEOUT) -> RunningDriver:
    """Start `nnrt-driver` and wait (bounded) until it reports SERVING."""
    name = name or kind
    runtime_dir.mkdir(parents=True, exist_ok=True)
    log_path = runtime_dir.parent / f"{name}-{time.monotonic_ns()}.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "nnrt.server", kind, "--name", name,
             "--runtime-dir", str(runtime_dir), *args],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )
    driver = RunningDriver(proc, runtime_dir, name, log_path)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"driver exited with {proc.returncode}:\n{driver.log()}")
        if driver.session_path.exists() and health_status(driver.grpc_path) == \
                health_pb2.HealthCheckResponse.SERVING:
            return driver
        time.sleep(0.05)
    proc.kill()
    proc.wait(5)
    raise RuntimeError(f"driver not ready within {timeout} s:\n{driver.log()}")


@pytest.fixture
def runtime_dir(tmp_path: Path) -> Path:
    path = tmp_path / "rt"
    path.mkdir()
    return path


@pytest.fixture
def driver(runtime_dir: Path) -> Iterator[RunningDriver]:
    """A CPU driver of its own for one test."""
    running = start_driver(runtime_dir)
    yield running
    running.stop()


@pytest.fixture(scope="module")
def shared_driver(tmp_path_factory) -> Iterator[RunningDriver]:
    """One CPU driver for a whole test module (tests that do not crash or stop it)."""
    running = start_driver(tmp_path_factory.mktemp("shared") / "rt")
    yield running
    running.stop()


@pytest.fixture
def client(shared_driver: RunningDriver) -> Iterator[DriverClient]:
    """A fresh session with the module's shared driver."""
    with shared_driver.client() as session:
        yield session


@pytest.fixture(scope="module")
def cpu_runtime(tmp_path_factory) -> Iterator[Path]:
    """A runtime directory with one CPU driver for a whole test module."""
    runtime = tmp_path_factory.mktemp("onnx") / "rt"
    driver = start_driver(runtime, "cpu")
    yield runtime
    driver.stop()


@pytest.fixture
def runtime(cpu_runtime: Path, monkeypatch) -> Iterator[Path]:
    """cpu_runtime as the client's runtime directory (NNRT_RUNTIME_DIR) for one test."""
    from tests.client.capi.util_capi import use_runtime

    with use_runtime(monkeypatch, cpu_runtime):
        yield cpu_runtime


@pytest.fixture
def devmgrs():
    """Device managers started by a test (tests/devmgr/util.start_devmgr); everything they
    ran is gone after it."""
    started = []
    yield started
    for devmgr in started:
        devmgr.kill_everything()


def admin_details(driver: RunningDriver) -> dict[str, str]:
    """What a driver's device reports in its admin status (`details`)."""
    import grpc
    from google.protobuf import empty_pb2

    from nnrt.protos import admin_pb2_grpc

    with grpc.insecure_channel(f"unix:{driver.grpc_path}") as channel:
        return dict(admin_pb2_grpc.NnrtAdminStub(channel).GetStatus(
            empty_pb2.Empty(), timeout=5).details)


def open_fds(pid: int) -> set[str]:
    """What a process's fds point at (from /proc)."""
    fd_dir = Path(f"/proc/{pid}/fd")
    targets = set()
    for fd in os.listdir(fd_dir):
        try:
            targets.add(f"{fd}->{os.readlink(fd_dir / fd)}")
        except OSError:
            pass
    return targets


def memfd_mappings(pid: int) -> list[str]:
    """The memfd mappings of a process (from /proc/<pid>/maps)."""
    return [line for line in Path(f"/proc/{pid}/maps").read_text().splitlines()
            if "memfd:" in line]


def in_threads(target: Callable[..., object], args: Iterable[tuple],
               timeout: float | None = None) -> list[threading.Thread]:
    """Run target(*a) for each `a` of `args` in threads of their own, all at once, and join
    them (each for at most `timeout` s); the threads, to check that none is still alive."""
    threads = [threading.Thread(target=target, args=a) for a in args]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
    return threads


def wait_until(predicate, timeout: float, interval: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


def pytest_terminal_summary(terminalreporter) -> None:
    """How many operator test cases the differential suites compared (tests/drivers/gpu,
    tests/drivers/cpu/ort)."""
    from tests.drivers.gpu import differential

    if differential.compared or differential.refused:
        terminalreporter.write_line(
            f"GPU differential: {sum(differential.compared.values())} operator test cases "
            f"compared with the CPU driver over {len(differential.compared)} node types; "
            f"{sum(differential.refused.values())} cases of nodes the GPU refuses")
    from tests.drivers.cpu.ort import differential as ort_differential

    if ort_differential.compared or ort_differential.kept_on_numpy:
        terminalreporter.write_line(
            f"onnxruntime engine differential: {sum(ort_differential.compared.values())} "
            f"operator test cases compared with the numpy kernels over "
            f"{len(ort_differential.compared)} node types; "
            f"{sum(ort_differential.kept_on_numpy.values())} cases of nodes kept on numpy")


# -- the multiprocess marker ------------------------------------------------------------------
# `pytest -m "not multiprocess"` runs the unit tests alone (no process started), `-m
# multiprocess` the tests that start drivers, a device manager or the CLI. A test is marked
# when it uses a fixture that starts a driver, or explicitly; one that starts a process
# without the marker fails, so the marker stays true.

# The fixtures that start processes, here and in test modules (a test using one, directly or
# through another fixture, is marked).
PROCESS_FIXTURES = frozenset({
    "driver", "shared_driver", "cpu_runtime", "devmgrs", "accel", "accel_driver",
    "broken_drivers", "drivers", "feature", "feature_driver", "gpu_driver", "injecting_driver",
    "kinds", "slow_driver", "slow_rt", "small_driver", "two_cpu_drivers", "two_drivers",
})
_spawned: list[object] = []
_popen_init = subprocess.Popen.__init__


def _recording_popen_init(self, *args, **kwargs) -> None:
    _spawned.append(args[0] if args else kwargs.get("args"))
    _popen_init(self, *args, **kwargs)


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "multiprocess: starts processes (drivers, a device "
                                       "manager, the nnrt command); -m 'not multiprocess' "
                                       "runs the unit tests alone")
    subprocess.Popen.__init__ = _recording_popen_init


def pytest_collection_modifyitems(items) -> None:
    for item in items:
        if PROCESS_FIXTURES & set(item.fixturenames):
            item.add_marker(pytest.mark.multiprocess)


def _check_unmarked_spawns(item, phase: str):
    before = len(_spawned)
    yield
    if len(_spawned) > before and item.get_closest_marker("multiprocess") is None:
        started = [str(a)[:80] for a in _spawned[before:]]
        pytest.fail(f"{phase} started processes ({started}) but the test is not marked "
                    f"multiprocess", pytrace=False)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    yield from _check_unmarked_spawns(item, "setup")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    yield from _check_unmarked_spawns(item, "the test")
