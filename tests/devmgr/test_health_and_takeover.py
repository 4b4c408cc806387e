"""Health with meaning and a device manager that supervises for real (issue 14, item 7).

A driver says NOT_SERVING when its session channel is down or wedged (never for a run that
takes long: issue 25, tests/server/security/test_operation_abuse.py); the device manager's
shipped probe settings find a wedge within 5 s and restart the driver; drivers die with their device manager, a
new one takes over their leftovers;
`failed` is retried after a cool-down, backoff resets after healthy uptime, and the status
never shows `ready` without a live process."""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from types import SimpleNamespace

import pytest
from grpc_health.v1 import health_pb2
from nnrt.client.core.driver import DriverClient
from nnrt.drivers.cpu.device import CpuDevice
from nnrt.devmgr.config import Settings, load_config
from nnrt.common.devmgr_ctl import DevmgrUnavailable
from nnrt.server.host import DriverHost
from nnrt.common.runtime_dir import grpc_socket
from nnrt.server.channel_server import SessionChannelServer
from nnrt.server.stats import RunStats

from tests.conftest import health_status, start_driver, wait_until
from tests.devmgr.util import pid_alive, processes_using, start_devmgr
from tests.helpers.admin import set_faults
from tests.helpers.hdi_models import add_model, io

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
DEPLOY_CONFIG = os.path.join(os.path.dirname(__file__), "..", "..", "deploy",
                             "devmgr.toml")


def _wait_health(path, wanted: int, timeout: float) -> float | None:
    """Seconds until `path` answers `wanted`, None if it does not within `timeout`."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if health_status(path, timeout=0.5) == wanted:
            return time.monotonic() - started
        time.sleep(0.02)
    return None


# -- the stall clock (no processes) ----------------------------------------------------------


def test_the_stall_clock_counts_only_movement_of_the_execution_path():
    stats = RunStats()
    now = time.monotonic()
    assert stats.stalled_for(now + 100) == 0.0  # idle is never stalled
    stats.started()
    assert stats.stalled_for(time.monotonic()) < 0.5  # just became busy: not stalled
    assert stats.stalled_for(time.monotonic() + 5) >= 4.9
    stats.progress()  # an operator boundary
    assert stats.stalled_for(time.monotonic() + 1) < 1.5
    stats.started(), stats.finished(succeeded=False, abandoned=False)  # a refusal: no movement
    assert stats.stalled_for(time.monotonic() + 3) >= 2.9
    stats.started(), stats.finished(succeeded=True, abandoned=False)  # a completion moves it
    assert stats.stalled_for(time.monotonic() + 1) < 1.5
    stats.finished(succeeded=False, abandoned=True)
    assert stats.stalled_for(time.monotonic() + 100) == 0.0


# -- a driver's health -----------------------------------------------------------------------


@pytest.mark.multiprocess
def test_slow_and_hung_runs_leave_the_driver_serving(runtime_dir):
    driver = start_driver(runtime_dir, "cpu", "--fault-injection", "--grace", "0.5")
    try:
        with driver.client() as client:
            model_id = add_model().prepare(client)
            _, x = client.allocate_buffer(16)
            _, y = client.allocate_buffer(16)

            # A slow run: SERVING throughout.
            assert set_faults(driver, runDelayMs=2600).returnCode == 0
            seen = []
            slow = threading.Thread(target=lambda: client.run(
                model_id, [io(x, 4)], [io(y, 4)], timeout=10))
            slow.start()
            while slow.is_alive():
                seen.append(health_status(driver.grpc_path))
                time.sleep(0.1)
            slow.join()
            assert len(seen) > 15 and set(seen) == {SERVING}

            # A run that hangs is its caller's business (its deadline): SERVING past the
            # 2 s stall timeout, the episode logged once for the operator.
            assert set_faults(driver, runHang=True).returnCode == 0
            hung = time.monotonic()
            with pytest.raises(TimeoutError):
                client.run(model_id, [io(x, 4)], [io(y, 4)], timeout=0.3)
            seen = []
            while time.monotonic() - hung < 3.0:
                seen.append(health_status(driver.grpc_path, timeout=0.5))
                time.sleep(0.1)
            assert set(seen) == {SERVING}, seen
            assert re.search(r"runs in flight without progress for 2\.\d s \(1 in flight: a "
                             r"long operator, or a hung device\): still SERVING", driver.log()), \
                driver.log()
            assert "NOT_SERVING" not in driver.log()
            x.close(), y.close()
        assert driver.stop(timeout=10) == 0  # the hung run does not hold the process
    finally:
        if driver.proc.poll() is None:
            driver.stop(signal.SIGKILL)


def test_health_follows_the_session_channel_not_the_runs(tmp_path, monkeypatch):
    directory = tmp_path / "rt"
    host = DriverHost(CpuDevice(), directory, "cpu", stall_timeout=0.4)
    host.start()
    try:
        path = host.grpc_path
        assert health_status(path) == SERVING
        host.stats.started()  # a run in flight that does not move: still serving
        assert _wait_health(path, NOT_SERVING, 1.5) is None
        assert host.unhealthy_reason is None
        host.stats.finished(succeeded=True, abandoned=False)

        # The session channel's thread wedged (it does not come round when woken).
        release = threading.Event()
        original = SessionChannelServer._once

        def wedged_once(self) -> None:
            release.wait(10)
            original(self)

        monkeypatch.setattr(SessionChannelServer, "_once", wedged_once)
        host._channel.poke()  # it enters the wedged turn
        assert (took := _wait_health(path, NOT_SERVING, 3)) is not None and took >= 0.3
        assert "the session channel is wedged" in host.unhealthy_reason
        monkeypatch.setattr(SessionChannelServer, "_once", original)
        release.set()
        assert _wait_health(path, SERVING, 3) is not None
        assert host.unhealthy_reason is None

        # The session channel's thread gone: nobody can open a session or run.
        monkeypatch.setattr(SessionChannelServer, "serving", property(lambda self: False))
        assert _wait_health(path, NOT_SERVING, 3) is not None
        assert host.unhealthy_reason == "the session channel is down"
        monkeypatch.undo()
        assert _wait_health(path, SERVING, 3) is not None
    finally:
        host.stop(0.5)
    assert not any(t.name == "health-watchdog" for t in threading.enumerate())


# -- the device manager -----------------------------------------------------------------------


def test_shipped_probe_settings_find_a_wedge_within_5_s():
    shipped = load_config(DEPLOY_CONFIG).settings
    assert shipped == Settings()  # the file shows the defaults (test_deploy: and the built-in)
    # a driver that answers nothing: probe_failures probes, each waited for in full
    assert shipped.probe_failures * (shipped.probe_interval + shipped.probe_timeout) <= 5
    # a wedged session channel: its stall timeout, a watchdog tick, then the probes
    assert 2.0 + 0.25 + shipped.probe_failures * shipped.probe_interval <= 5


def test_drivers_exit_with_their_devmgr_and_a_new_one_takes_over_leftovers(tmp_path, devmgrs):
    config = """
        [devmgr]
        stop_timeout = 5
        [drivers.cpu0]
        kind = "cpu"
        [drivers.cpu1]
        kind = "cpu"
    """
    first = start_devmgr(tmp_path / "first", config)
    devmgrs.append(first)
    directory = first.runtime_dir
    drivers = first.wait_ready("cpu0", "cpu1")
    # cpu0 is stopped (SIGSTOP): it cannot notice its device manager die and stays behind,
    # holding its sockets, as a driver of an older device manager would.
    os.kill(drivers["cpu0"]["pid"], signal.SIGSTOP)
    first.proc.kill()
    first.proc.wait(5)
    assert wait_until(lambda: not pid_alive(drivers["cpu1"]["pid"]), 5)  # its lifeline
    assert pid_alive(drivers["cpu0"]["pid"])
    assert not grpc_socket(directory, "cpu1").exists()  # a graceful stop: sockets removed

    second = start_devmgr(tmp_path / "second", config, args=("--runtime-dir", str(directory)))
    second.runtime_dir = directory  # the later --runtime-dir wins
    devmgrs.append(second)
    taken = second.wait_ready("cpu0", "cpu1")
    assert not pid_alive(drivers["cpu0"]["pid"])
    assert taken["cpu0"]["pid"] != drivers["cpu0"]["pid"]
    assert taken["cpu0"]["restarts"] == 0 and taken["cpu0"]["last_exit"] is None
    log = second.log()
    assert f"driver cpu0: pid {drivers['cpu0']['pid']}, left by a device manager that is " \
           "gone, holds its sockets: stopping it" in log, log
    assert "left by" not in log.split("driver cpu1", 1)[1].split("\n", 1)[0]
    assert health_status(grpc_socket(directory, "cpu0")) == SERVING
    assert second.stop() == 0
    assert processes_using(directory) == []


FAST = """
[devmgr]
stop_timeout = 5
probe_interval = 0.2
[defaults]
backoff_initial = 0.1
backoff_max = 0.2
crash_loop_window = 30
"""


def test_failed_is_retried_after_its_cool_down_and_unlimited_never_fails(tmp_path, devmgrs):
    devmgr = start_devmgr(tmp_path, FAST + """
        [drivers.bad]
        kind = "accel"
        crash_loop_failures = 2
        failed_retry_after = 1.5
        options = { spec = "/nonexistent/npu-sim.toml" }    # exits 1 at once
        [drivers.forever]
        kind = "accel"
        crash_loop_failures = 0                # no limit
        options = { spec = "/nonexistent/npu-sim.toml" }
    """)
    devmgrs.append(devmgr)
    failed = devmgr.wait_drivers(lambda ds: ds["bad"]["state"] == "failed", "bad failed")
    assert 0 < failed["bad"]["next_start_in"] <= 1.5
    assert failed["bad"]["reason"].startswith("crash loop: 2 failures within 30 s")
    # after the cool-down: a fresh start (two more tries), failed again
    devmgr.wait_drivers(lambda ds: ds["bad"]["restarts"] >= 3 and ds["bad"]["state"] == "failed",
                        "bad retried and failed again", timeout=15)
    log = devmgr.log()
    assert "driver bad: crash loop: 2 failures within 30 s (last: exit 1); marked failed, " \
           "a fresh start in 1.5 s" in log
    assert "driver bad: 1.5 s cool-down over: a fresh start" in log
    assert log.count("driver bad (accel): started") >= 3
    # the unlimited one never fails: it keeps being restarted with the capped backoff
    drivers = devmgr.wait_drivers(lambda ds: ds["forever"]["restarts"] >= 6, "forever restarts")
    assert drivers["forever"]["state"] != "failed"
    assert re.search(r"driver forever: restarting in 0\.20 s \(failure \d+ no limit within 30 s\)",
                     devmgr.log())
    assert devmgr.stop() == 0


def test_backoff_resets_after_healthy_uptime(tmp_path, devmgrs):
    devmgr = start_devmgr(tmp_path, FAST + """
        [drivers.cpu]
        kind = "cpu"
        crash_loop_failures = 3
        backoff_reset_after = 1
    """)
    devmgrs.append(devmgr)
    for n in (1, 2):  # two failures in a row: the backoff grows
        pid = devmgr.wait_ready("cpu")["cpu"]["pid"]
        os.kill(pid, signal.SIGKILL)
        devmgr.wait_drivers(lambda ds, n=n: ds["cpu"]["restarts"] == n
                            and ds["cpu"]["state"] == "ready", f"restart {n}")
    assert wait_until(lambda: "earlier failure(s) forgotten" in devmgr.log(), 5), devmgr.log()
    assert devmgr.drivers()["cpu"]["failures"] == 0
    # a third failure: without the reset it would be the crash-loop limit
    os.kill(devmgr.drivers()["cpu"]["pid"], signal.SIGKILL)
    drivers = devmgr.wait_drivers(
        lambda ds: ds["cpu"]["restarts"] == 3 and ds["cpu"]["state"] == "ready", "restart 3")
    assert drivers["cpu"]["state"] == "ready"
    delays = re.findall(r"driver cpu: restarting in ([0-9.]+) s \(failure (\d)", devmgr.log())
    assert delays == [("0.10", "1"), ("0.20", "2"), ("0.10", "1")], devmgr.log()
    assert "driver cpu: ready for 1 s: 2 earlier failure(s) forgotten, backoff reset" \
        in devmgr.log()
    assert devmgr.stop() == 0


def test_status_never_shows_ready_without_a_live_process(tmp_path, devmgrs):
    devmgr = start_devmgr(tmp_path, FAST + """
        [drivers.cpu]
        kind = "cpu"
        restart = "always"
        crash_loop_failures = 0
    """)
    devmgrs.append(devmgr)
    kills: dict[int, float] = {}
    bad: list[tuple[float, dict]] = []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            asked = time.monotonic()
            try:
                driver = devmgr.drivers()["cpu"]
            except (DevmgrUnavailable, KeyError):  # between two states of the socket: ask again
                continue
            pid, state = driver["pid"], driver["state"]
            if (state == "ready" and pid is None) \
                    or (pid is not None and state not in ("starting", "ready")) \
                    or (pid in kills and asked > kills[pid] + 0.05):  # a pid known dead
                bad.append((asked, driver))

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        for n in range(3):
            pid = devmgr.wait_ready("cpu")["cpu"]["pid"]
            os.kill(pid, signal.SIGKILL)
            kills[pid] = time.monotonic()
            devmgr.wait_drivers(lambda ds, n=n: ds["cpu"]["restarts"] == n + 1,
                                f"restart {n + 1}")
        devmgr.wait_ready("cpu")
    finally:
        done.set()
        watcher.join(10)
    assert bad == []
    assert devmgr.stop() == 0
