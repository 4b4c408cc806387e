"""The device manager (`nnrt devmgr`): configuration, and supervision of real driver
processes — readiness, systemd notifications, restarts, crash loops, reload, stop."""

from __future__ import annotations

import os
import re
import signal
import socket
import stat
import time
from pathlib import Path

import pytest
from grpc_health.v1 import health_pb2

from nnrt.client import cli
from nnrt.server.sd_notify import Notifier
from nnrt.devmgr.config import (ConfigError, DriverSpec, RestartPolicy, Settings,
                                       parse_config)
from nnrt.common.devmgr_ctl import ctl_path, request
from nnrt.common.runtime_dir import driver_names, grpc_socket, session_socket
from tests.conftest import health_status, start_driver, wait_until
from tests.devmgr.util import (FAST_CONFIG, WAIT, NotifyListener, config_text, pid_alive,
                               processes_using, start_devmgr)

SERVING = health_pb2.HealthCheckResponse.SERVING


# -- configuration (no processes) -------------------------------------------------------------


def test_config_defaults_overrides_and_options():
    config = parse_config("""
        [devmgr]
        probe_interval = 0.5
        probe_failures = 4
        [defaults]
        restart = "always"
        backoff_initial = 1
        [drivers.cpu]
        [drivers.fast]
        kind = "cpu"
        restart = "never"
        crash_loop_failures = 2
        [drivers.fast.options]
        grace = 2.0
        fault_run_delay_ms = 50
        fault-run-hang = true
        log-level = "WARNING"
        fault-device-busy = false
    """)
    assert config.settings == Settings(probe_interval=0.5, probe_failures=4)
    assert [d.name for d in config.drivers] == ["cpu", "fast"]
    cpu, fast = config.drivers
    assert cpu.kind == "cpu" and cpu.options == ()
    assert cpu.policy == RestartPolicy(restart="always", backoff_initial=1.0)
    assert fast.policy == RestartPolicy(restart="never", backoff_initial=1.0, crash_loop_failures=2)
    assert fast.option_args() == ["--fault-run-delay-ms", "50", "--fault-run-hang",
                                  "--grace", "2", "--log-level", "WARNING"]
    assert config.driver("fast") is fast and config.driver("nope") is None
    # a policy change alone keeps the process; a changed option does not
    assert fast.same_process(DriverSpec("fast", "cpu", fast.options, RestartPolicy()))
    assert not fast.same_process(DriverSpec("fast", "cpu", (), fast.policy))


def test_backoff_grows_and_is_capped():
    policy = RestartPolicy(backoff_initial=0.5, backoff_max=3)
    assert [policy.delay(n) for n in range(1, 6)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    assert policy.delay(500) == 3.0


@pytest.mark.parametrize("text, message", [
    ("[drivers.x]\nkind = 'gpu9'", "unknown kind 'gpu9'"),
    ("[drivers.cpu]\nrestart = 'sometimes'", "restart must be one of"),
    ("[drivers.cpu]\nkindd = 'cpu'", "unknown key(s) kindd"),
    ("[devmgr]\nprobe_interval = 0", "probe_interval must be > 0"),
    ("[devmgr]\nprobe_failures = 1.5", "probe_failures must be an integer"),
    ("[defaults]\nbackoff_max = 'long'", "backoff_max must be a number"),
    ("[drivers.cpu]\noptions = { name = 'x' }", "is set by the device manager"),
    ("[drivers.cpu]\noptions = { grace = { a = 1 } }", "unsupported type"),
    ("[drivers.'a b']\nkind = 'cpu'", "a driver name is"),
    ("[surprise]", "unknown key(s) surprise"),
    ("[drivers.cpu\n", "devmgr.toml"),
])
def test_config_errors_say_where_and_why(text, message):
    with pytest.raises(ConfigError) as error:
        parse_config(text, Path("/etc/nnrt/devmgr.toml"))
    assert message in str(error.value)
    assert "/etc/nnrt/devmgr.toml" in str(error.value)


def test_notifier_sends_datagrams_to_abstract_and_path_sockets(tmp_path):
    for abstract in (True, False):
        listener = NotifyListener(tmp_path, abstract=abstract)
        notifier = Notifier({"NOTIFY_SOCKET": listener.address, "WATCHDOG_USEC": "3000000"})
        notifier.send("READY=1", "STATUS=all good")
        assert listener.wait_for("STATUS=all good", timeout=5)
        assert notifier.watchdog_interval == 1.5
        notifier.close()
        listener.close()
    # WATCHDOG_PID names another process: the watchdog is not ours
    assert Notifier({"WATCHDOG_USEC": "3000000", "WATCHDOG_PID": "1"}).watchdog_interval is None
    assert not Notifier({}).enabled


# -- real processes -------------------------------------------------------------------------


def test_starts_drivers_notifies_systemd_and_stops_everything(tmp_path, devmgrs):
    notify = NotifyListener(tmp_path, abstract=True)
    devmgr = start_devmgr(tmp_path, config_text("""
        [drivers.cpu0]
        kind = "cpu"
        [drivers.cpu1]
        kind = "cpu"
        options = { grace = 2 }
    """), notify=notify, env={"WATCHDOG_USEC": "300000"}, journal=True)
    devmgrs.append(devmgr)

    assert notify.wait_for("READY=1"), devmgr.log()
    drivers = devmgr.drivers()  # READY=1 only once every driver is up
    assert {n: d["state"] for n, d in drivers.items()} == {"cpu0": "ready", "cpu1": "ready"}
    for name, driver in drivers.items():
        assert pid_alive(driver["pid"])
        assert health_status(grpc_socket(devmgr.runtime_dir, name)) == SERVING
        assert driver["restarts"] == 0 and driver["last_exit"] is None
        assert driver["identity"]["device_name"] == "nnrt-cpu"
    assert any(f.startswith("STATUS=2 driver(s): 2 ready") for f in notify.fields())
    assert notify.wait_for("WATCHDOG=1", timeout=5, count=3)  # every 0.15 s
    assert stat.S_IMODE(os.stat(ctl_path(devmgr.runtime_dir)).st_mode) == 0o660
    status = devmgr.status()["devmgr"]
    assert status["pid"] == devmgr.proc.pid and status["state"] == "running"
    assert status["config"] == str(devmgr.config_path)

    assert devmgr.stop() == 0
    assert notify.wait_for("STOPPING=1", timeout=5)
    assert processes_using(devmgr.runtime_dir) == []
    assert not any(pid_alive(d["pid"]) for d in drivers.values())
    assert sorted(os.listdir(devmgr.runtime_dir)) == []  # sockets and devmgr.ctl removed
    # journald format: a syslog priority, no timestamp (journald adds its own)
    log = devmgr.log()
    assert re.search(r"^<6>driver cpu0 \(cpu\): started, pid \d+$", log, re.M), log
    assert re.search(r"^<6>device manager stopped$", log, re.M), log
    assert "driver cpu1: stopped (exit 0)" in log


def test_a_driver_that_ignores_sigterm_is_killed_at_stop(tmp_path, devmgrs):
    header = FAST_CONFIG.replace("stop_timeout = 5", "stop_timeout = 1") \
                        .replace("probe_interval = 0.2", "probe_interval = 60")
    devmgr = start_devmgr(tmp_path, config_text("""
        [drivers.cpu]
        kind = "cpu"
    """, header))
    devmgrs.append(devmgr)
    pid = devmgr.wait_ready("cpu")["cpu"]["pid"]
    os.kill(pid, signal.SIGSTOP)  # SIGTERM stays pending; only SIGKILL ends it
    started = time.monotonic()
    assert devmgr.stop() == 0
    assert 1.0 <= time.monotonic() - started < 10
    assert "driver cpu: still running 1 s after SIGTERM: SIGKILL" in devmgr.log()
    assert "driver cpu: stopped (SIGKILL)" in devmgr.log()
    assert not pid_alive(pid) and processes_using(devmgr.runtime_dir) == []
    assert os.listdir(devmgr.runtime_dir) == []  # the dead driver's sockets removed too


def test_killed_or_wedged_driver_is_restarted(tmp_path, devmgrs):
    devmgr = start_devmgr(tmp_path, config_text("""
        [drivers.cpu0]
        kind = "cpu"
        [drivers.cpu1]
        kind = "cpu"
    """))
    devmgrs.append(devmgr)
    before = devmgr.wait_ready("cpu0", "cpu1")

    # A second device manager on the same runtime directory is refused (exit 3).
    second = start_devmgr(tmp_path / "second", config_text(""),
                          args=("--runtime-dir", str(devmgr.runtime_dir)))
    assert second.proc.wait(WAIT) == 3
    assert "already listens" in second.log()

    # SIGKILL: restarted after backoff, the restart counted, the other driver untouched.
    os.kill(before["cpu0"]["pid"], signal.SIGKILL)
    after = devmgr.wait_drivers(
        lambda ds: ds["cpu0"]["state"] == "ready" and ds["cpu0"]["restarts"] == 1,
        "cpu0 restarted")
    assert after["cpu0"]["pid"] != before["cpu0"]["pid"]
    assert after["cpu0"]["last_exit"] == -signal.SIGKILL
    assert after["cpu1"]["pid"] == before["cpu1"]["pid"] and after["cpu1"]["restarts"] == 0
    assert health_status(grpc_socket(devmgr.runtime_dir, "cpu0")) == SERVING

    # A wedged driver (SIGSTOP: alive, but answers nothing) fails its probes and is replaced.
    wedged = after["cpu0"]["pid"]
    os.kill(wedged, signal.SIGSTOP)
    again = devmgr.wait_drivers(
        lambda ds: ds["cpu0"]["state"] == "ready" and ds["cpu0"]["restarts"] == 2,
        "wedged cpu0 replaced")
    assert again["cpu0"]["pid"] != wedged and not pid_alive(wedged)
    assert "driver cpu0: not answering health probes: killing pid" in devmgr.log()
    assert again["cpu1"]["pid"] == before["cpu1"]["pid"]

    # A driver that stops cleanly on its own (exit 0) is not restarted under on-failure.
    os.kill(again["cpu1"]["pid"], signal.SIGTERM)
    stopped = devmgr.wait_drivers(lambda ds: ds["cpu1"]["state"] == "stopped", "cpu1 stopped")
    assert stopped["cpu1"]["last_exit"] == 0 and stopped["cpu1"]["pid"] is None
    assert devmgr.stop() == 0
    assert processes_using(devmgr.runtime_dir) == []


def test_crash_loop_marks_the_device_failed(tmp_path, devmgrs, capsys):
    notify = NotifyListener(tmp_path)
    devmgr = start_devmgr(tmp_path, config_text("""
        [drivers.cpu]
        kind = "cpu"
        [drivers.bad]
        kind = "accel"
        options = { spec = "/nonexistent/npu-sim.toml" }   # the driver exits 1 at once
    """), notify=notify)
    devmgrs.append(devmgr)

    assert notify.wait_for("READY=1"), devmgr.log()  # settled: one ready, one failed
    drivers = devmgr.drivers()
    bad = drivers["bad"]
    assert drivers["cpu"]["state"] == "ready"
    assert bad["state"] == "failed" and bad["pid"] is None
    assert bad["restarts"] == 2 and bad["last_exit"] == 1  # 3 failures = the limit
    assert bad["reason"].startswith("crash loop: 3 failures within 30 s")
    assert "STATUS=2 driver(s): 1 ready, 1 failed (failed: bad)" in notify.fields()
    log = devmgr.log()
    delays = [float(d) for d in re.findall(r"driver bad: restarting in ([0-9.]+) s", log)]
    assert delays == [0.1, 0.2], log  # growing
    assert "driver bad: crash loop: 3 failures within 30 s" in log
    time.sleep(0.5)  # not restarted again
    assert devmgr.log().count("driver bad (accel): started") == 3

    # `nnrt devices` shows it failed; `nnrt status` reports the failure in its exit code.
    capsys.readouterr()
    assert cli.main(["devices", "--runtime-dir", str(devmgr.runtime_dir)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["ID", "NAME", "DRIVER", "VENDOR", "TYPE", "STATUS", "HDI",
                                "UPTIME", "RESTARTS"]
    row = next(line.split() for line in lines if " bad " in line)
    assert row == ["-", "-", "bad", "-", "-", "failed", "-", "-", "2"]
    assert cli.main(["status", "--runtime-dir", str(devmgr.runtime_dir)]) == 1
    out = capsys.readouterr()
    assert "bad: crash loop: 3 failures" in out.out and "not healthy: bad" in out.err
    assert devmgr.stop() == 0


def test_a_name_another_driver_serves_is_failed_never_ready(tmp_path, devmgrs):
    foreign = start_driver(tmp_path / "rt", name="cpu")  # started by hand, not ours
    try:
        devmgr = start_devmgr(tmp_path, config_text("""
            [drivers.cpu]
            kind = "cpu"
        """))
        devmgrs.append(devmgr)
        drivers = devmgr.wait_drivers(lambda ds: ds["cpu"]["state"] == "failed", "cpu failed")
        assert drivers["cpu"]["last_exit"] == 3
        log = devmgr.log()
        assert "(another driver already serves this name)" in log
        assert "driver cpu: ready" not in log  # the foreign driver's SERVING is not ours
        assert devmgr.stop() == 0
        # the foreign driver and its sockets are untouched
        assert foreign.proc.poll() is None
        assert health_status(foreign.grpc_path) == SERVING and foreign.session_path.exists()
    finally:
        foreign.stop()


def test_sighup_applies_the_difference_only(tmp_path, devmgrs):
    notify = NotifyListener(tmp_path)
    devmgr = start_devmgr(tmp_path, config_text("""
        [drivers.keep]
        kind = "cpu"
        [drivers.change]
        kind = "cpu"
        [drivers.drop]
        kind = "cpu"
    """), notify=notify)
    devmgrs.append(devmgr)
    assert notify.wait_for("READY=1"), devmgr.log()
    before = devmgr.wait_ready("keep", "change", "drop")

    devmgr.config_path.write_text(config_text("""
        [drivers.keep]
        kind = "cpu"
        restart = "always"            # a policy change alone: applied in place
        [drivers.change]
        kind = "cpu"
        options = { grace = 3 }       # a new command line: restarted
        [drivers.add]
        kind = "cpu"
    """))
    devmgr.proc.send_signal(signal.SIGHUP)
    assert notify.wait_for("RELOADING=1"), devmgr.log()
    assert notify.wait_for("READY=1", count=2), devmgr.log()
    after = devmgr.wait_drivers(
        lambda ds: set(ds) == {"keep", "change", "add"} and
        all(d["state"] == "ready" for d in ds.values()) and
        ds["change"]["pid"] != before["change"]["pid"], "reload applied")
    assert list(after) == ["keep", "change", "add"]
    assert after["keep"]["pid"] == before["keep"]["pid"]
    assert after["keep"]["restart_policy"] == "always"
    assert not pid_alive(before["change"]["pid"]) and not pid_alive(before["drop"]["pid"])
    assert wait_until(lambda: "drop" not in driver_names(devmgr.runtime_dir), 5)
    assert not session_socket(devmgr.runtime_dir, "drop").exists()
    assert "added add; removed drop; restarted (changed) change; retried (failed/stopped) " \
           "none; unchanged keep" in devmgr.log()

    # A configuration that does not parse is refused; nothing changes.
    devmgr.config_path.write_text("[drivers.keep\n")
    devmgr.proc.send_signal(signal.SIGHUP)
    assert notify.wait_for("READY=1", count=3), devmgr.log()
    assert "reload refused, the running configuration stays" in devmgr.log()
    still = devmgr.drivers()
    assert {n: d["pid"] for n, d in still.items()} == {n: d["pid"] for n, d in after.items()}
    assert devmgr.stop() == 0
    assert processes_using(devmgr.runtime_dir) == []


@pytest.mark.multiprocess
def test_unusable_configuration_exits_1(tmp_path):
    devmgr = start_devmgr(tmp_path, "[drivers.cpu]\nkind = 'tpu'\n")
    assert devmgr.proc.wait(WAIT) == 1
    assert "bad configuration" in devmgr.log() and "unknown kind 'tpu'" in devmgr.log()
    assert not ctl_path(devmgr.runtime_dir).exists()
    missing = start_devmgr(tmp_path / "missing", "", args=("--config", str(tmp_path / "nope")))
    assert missing.proc.wait(WAIT) == 1
    assert "cannot read" in missing.log()


def test_control_socket_answers_bad_requests(tmp_path, devmgrs):
    devmgr = start_devmgr(tmp_path, config_text(""))
    devmgrs.append(devmgr)
    assert wait_until(lambda: ctl_path(devmgr.runtime_dir).exists(), WAIT), devmgr.log()
    assert devmgr.status()["drivers"] == []
    assert request(devmgr.runtime_dir, {"cmd": "explode"})["ok"] is False
    with socket.socket(socket.AF_UNIX) as raw:
        raw.settimeout(5)
        raw.connect(str(ctl_path(devmgr.runtime_dir)))
        raw.sendall(b"not json\n")
        assert b'"ok": false' in raw.recv(4096)
    assert devmgr.stop() == 0
