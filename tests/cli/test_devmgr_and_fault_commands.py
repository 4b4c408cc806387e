"""`nnrt devmgr stop|start|restart DRIVER` and `nnrt fault set|clear|show DRIVER`, against
real processes: a device manager and its drivers, and drivers started by hand, in private
runtime directories. Every wait is bounded."""

from __future__ import annotations

import json
import os
import signal
import socket
import time

import pytest
from grpc_health.v1 import health_pb2
from nnrt.client import cli
from nnrt.client.commands.control import FAULT_HELP, _fault_fields
from nnrt.common.devmgr_ctl import request
from nnrt.common.faults import PLAIN_FIELDS
from nnrt.common.runtime_dir import grpc_socket

from tests.conftest import health_status, start_driver
from tests.devmgr.util import config_text, pid_alive, processes_using, start_devmgr

SERVING = health_pb2.HealthCheckResponse.SERVING


def nnrt(capsys, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = cli.main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


# -- nnrt devmgr stop | start | restart ------------------------------------------------------


def test_stop_start_restart_a_managed_driver(tmp_path, devmgrs, capsys):
    devmgr = start_devmgr(tmp_path, config_text("""
        [drivers.cpu]
        kind = "cpu"
        [drivers.other]
        kind = "cpu"
        options = { fault-injection = true }
    """))
    devmgrs.append(devmgr)
    rt = devmgr.runtime_dir
    drivers = devmgr.wait_ready("cpu", "other")
    first, other = drivers["cpu"]["pid"], drivers["other"]["pid"]

    # stop: the driver goes and stays stopped (not restarted by supervision)
    code, out, err = nnrt(capsys, "devmgr", "stop", "cpu", "--runtime-dir", rt)
    assert (code, out, err) == (0, "cpu: stopped\n", "")
    assert not pid_alive(first)
    time.sleep(1.0)  # well past the backoff (0.1 s): still stopped
    cpu = devmgr.drivers()["cpu"]
    assert (cpu["state"], cpu["pid"], cpu["operator_stopped"]) == ("stopped", None, True)
    assert cpu["reason"] == "stopped by nnrt devmgr stop" and cpu["restarts"] == 0
    assert not grpc_socket(rt, "cpu").exists()
    assert devmgr.drivers()["other"]["pid"] == other  # untouched
    code, out, _ = nnrt(capsys, "devmgr", "stop", "cpu", "--runtime-dir", rt)
    assert (code, out) == (0, "cpu: already stopped\n")
    # `nnrt status` says why; its exit code says "not every driver is up"
    code, out, _ = nnrt(capsys, "status", "--runtime-dir", rt)
    assert code == 1 and "  cpu: stopped by nnrt devmgr stop" in out
    # faults cannot be set on a stopped driver: nothing serves its name
    code, _, err = nnrt(capsys, "fault", "set", "cpu", "--device-busy", "--runtime-dir", rt)
    assert code == 3
    assert err == "nnrt: fault set: driver 'cpu' is not running (device manager state: stopped)\n"

    # a reload keeps it stopped
    devmgr.proc.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 20
    while "kept stopped (nnrt devmgr stop) cpu" not in devmgr.log():
        assert time.monotonic() < deadline, devmgr.log()
        time.sleep(0.05)
    assert devmgr.drivers()["cpu"]["state"] == "stopped"

    # start: ready again, under a new pid, no restart counted
    code, out, err = nnrt(capsys, "devmgr", "start", "cpu", "--runtime-dir", rt)
    assert code == 0, err
    cpu = devmgr.drivers()["cpu"]
    assert out.startswith(f"cpu: ready, pid {cpu['pid']} (")
    assert cpu["state"] == "ready" and cpu["pid"] not in (None, first)
    assert cpu["restarts"] == 0 and cpu["operator_stopped"] is False
    assert health_status(grpc_socket(rt, "cpu")) == SERVING
    code, out, _ = nnrt(capsys, "devmgr", "start", "cpu", "--runtime-dir", rt)
    assert (code, out) == (0, f"cpu: already running (ready), pid {cpu['pid']}\n")

    # restart: a new process, counted; --json says how it went
    second = cpu["pid"]
    code, out, err = nnrt(capsys, "devmgr", "restart", "cpu", "--json", "--runtime-dir", rt)
    assert code == 0, err
    answer = json.loads(out)
    assert (answer["action"], answer["outcome"], answer["message"]) == \
        ("restart", "done", "restarting")
    assert answer["status"]["state"] == "ready" and answer["status"]["restarts"] == 1
    assert answer["status"]["pid"] not in (first, second) and not pid_alive(second)
    assert devmgr.drivers()["other"]["pid"] == other  # still untouched

    # --no-wait: answered at once, the device manager does the rest
    code, out, _ = nnrt(capsys, "devmgr", "stop", "other", "--no-wait", "--runtime-dir", rt)
    assert (code, out) == (0, "other: stopping\n")
    devmgr.wait_drivers(lambda ds: ds["other"]["state"] == "stopped", "other stopped")
    assert not pid_alive(other)
    log = devmgr.log()
    assert "driver cpu: stop asked on the control socket: stopping" in log
    assert "driver cpu: restart asked on the control socket: restarting" in log
    assert devmgr.stop() == 0
    assert processes_using(rt) == []


def test_a_failed_driver_can_be_started_again_and_a_bad_one_says_why(tmp_path, devmgrs,
                                                                      capsys):
    devmgr = start_devmgr(tmp_path, config_text("""
        [drivers.cpu]
        kind = "cpu"
        restart = "never"
        [drivers.bad]
        kind = "accel"
        restart = "never"
        options = { spec = "/nonexistent/npu-sim.toml" }   # passes the checks, exits 1
    """))
    devmgrs.append(devmgr)
    rt = devmgr.runtime_dir
    pid = devmgr.wait_ready("cpu")["cpu"]["pid"]
    os.kill(pid, signal.SIGKILL)  # restart = never: failed, and it stays so
    devmgr.wait_drivers(lambda ds: ds["cpu"]["state"] == "failed"
                        and ds["bad"]["state"] == "failed", "both failed")
    code, out, err = nnrt(capsys, "devmgr", "start", "cpu", "--runtime-dir", rt)
    assert code == 0, err
    assert devmgr.drivers()["cpu"]["state"] == "ready"
    # one that fails again: exit 1, one line with its state and why
    code, out, err = nnrt(capsys, "devmgr", "start", "bad", "--runtime-dir", rt)
    assert (code, out) == (1, "")
    assert err == "nnrt: devmgr start: bad did not come up: failed: exit 1\n"
    # a start that does not finish in time: exit 1 too
    code, _, err = nnrt(capsys, "devmgr", "restart", "cpu", "--timeout", "0.01",
                        "--runtime-dir", rt)
    assert code == 1 and err.startswith("nnrt: devmgr restart: cpu not ready within 0.01 s "
                                        "(state starting")
    devmgr.wait_ready("cpu")
    assert devmgr.stop() == 0


def test_unknown_driver_no_devmgr_and_bad_usage(tmp_path, devmgrs, capsys, runtime_dir):
    # no device manager in the directory: 3, one line
    for action in ("stop", "start", "restart"):
        code, out, err = nnrt(capsys, "devmgr", action, "cpu", "--runtime-dir", runtime_dir)
        assert (code, out) == (3, "")
        assert err == f"nnrt: devmgr {action}: no device manager runs in {runtime_dir}\n"
    # the runtime directory may come before the action too
    code, _, err = nnrt(capsys, "devmgr", "--runtime-dir", runtime_dir, "stop", "cpu")
    assert code == 3 and str(runtime_dir) in err
    # usage: no driver named, a bad timeout, an unknown action
    for argv in (["devmgr", "restart"], ["devmgr", "stop", "cpu", "--timeout", "0"],
                 ["devmgr", "reboot", "cpu"]):
        with pytest.raises(SystemExit) as exit_:
            cli.main(argv)
        assert exit_.value.code == 2

    devmgr = start_devmgr(tmp_path / "d", config_text('[drivers.cpu]\nkind = "cpu"\n'))
    devmgrs.append(devmgr)
    devmgr.wait_ready("cpu")
    for action in ("stop", "start", "restart"):
        code, out, err = nnrt(capsys, "devmgr", action, "nope", "--runtime-dir",
                              devmgr.runtime_dir)
        assert (code, out) == (3, "")
        assert err == (f"nnrt: devmgr {action}: no driver 'nope' in the device manager's "
                       "configuration (known: cpu)\n")
    # the control socket refuses what it does not know, without taking the daemon down
    assert request(devmgr.runtime_dir, {"cmd": "restart"}) == {
        "ok": False, "error": "restart: needs a driver name ('driver')", "code": "bad-request"}
    assert request(devmgr.runtime_dir, {"cmd": "reboot"})["code"] == "bad-request"
    assert devmgr.drivers()["cpu"]["state"] == "ready"
    assert devmgr.stop() == 0


@pytest.mark.parametrize("argv", [["devmgr", a] for a in ("stop", "start", "restart")]
                         + [["fault"], ["fault", "set"], ["fault", "clear"], ["fault", "show"]])
def test_help_of_the_control_commands(argv, capsys):
    from tests.helpers.cli import SOURCE_NAMES

    with pytest.raises(SystemExit) as exit_:
        cli.main([*argv, "--help"])
    assert exit_.value.code == 0
    text = capsys.readouterr().out
    assert text.startswith(f"usage: nnrt {' '.join(argv)}")
    assert not SOURCE_NAMES.search(text), SOURCE_NAMES.search(text)


def test_the_devmgr_daemon_still_parses_without_an_action():
    args = cli.build_parser().parse_args(["devmgr", "--config", "x.toml", "--runtime-dir", "/r"])
    assert args.devmgr_action is None and str(args.runtime_dir) == "/r"
    assert cli._daemon(args) and cli._level(args) == "INFO"
    args = cli.build_parser().parse_args(["devmgr", "restart", "cpu"])
    assert not cli._daemon(args) and cli._level(args) == "WARNING"


# -- nnrt fault set | clear | show -------------------------------------------------------------


def test_fault_options_are_those_of_set_faults():
    assert {name for name, _ in _fault_fields()} == set(PLAIN_FIELDS) == set(FAULT_HELP)


@pytest.mark.multiprocess
def test_fault_set_clear_show_on_a_driver_started_by_hand(runtime_dir, capsys):
    driver = start_driver(runtime_dir, "cpu", "--fault-injection")
    try:
        rt = str(runtime_dir)
        code, out, err = nnrt(capsys, "fault", "set", "cpu", "--device-busy",
                              "--device-status", "offline", "--runtime-dir", rt)
        assert code == 0, err
        assert out == ("cpu: faults in force: device status reported as OFFLINE, Prepare* and "
                       "Run answer NNRT_DEVICE_BUSY\n")
        # in force in the driver: its own device status says so to any client
        code, out, _ = nnrt(capsys, "status", "--runtime-dir", rt, "--json")
        (entry,) = json.loads(out)["drivers"]
        assert entry["device_status"] == "offline" and entry["fault_injection"] is True
        code, out, _ = nnrt(capsys, "fault", "show", "cpu", "--json", "--runtime-dir", rt)
        shown = json.loads(out)
        assert code == 0 and shown["fault_injection"] is True
        assert shown["faults"]["device_busy"] is True
        assert shown["faults"]["device_status"] == "offline"
        assert shown["faults"]["run_delay_ms"] == 0
        # set replaces: what is not given is off
        code, out, _ = nnrt(capsys, "fault", "set", "cpu", "--run-delay-ms", "5",
                            "--runtime-dir", rt)
        assert (code, out) == (0, "cpu: faults in force: Run delayed 5 ms\n")
        code, out, _ = nnrt(capsys, "fault", "clear", "cpu", "--runtime-dir", rt)
        assert (code, out) == (0, "cpu: faults in force: none\n")
        code, out, _ = nnrt(capsys, "status", "--runtime-dir", rt, "--json")
        assert json.loads(out)["drivers"][0]["device_status"] == "available"
        assert "FAULT INJECTION SET at runtime" in driver.log()

        # errors: nothing to set (2), out of range (argparse: 2), unknown driver (3)
        code, _, err = nnrt(capsys, "fault", "set", "cpu", "--runtime-dir", rt)
        assert (code, err) == (2, ("nnrt: fault set: no fault given (nnrt fault clear "
                                   "DRIVER removes them)\n"))
        for bad in (["--exit-on-run-probability", "2"], ["--run-delay-ms", "-1"],
                    ["--device-status", "asleep"]):
            with pytest.raises(SystemExit) as exit_:
                cli.main(["fault", "set", "cpu", *bad, "--runtime-dir", rt])
            assert exit_.value.code == 2
        code, _, err = nnrt(capsys, "fault", "clear", "nope", "--runtime-dir", rt)
        assert (code, err) == (3, f"nnrt: fault clear: no driver 'nope' in {rt} (known: cpu)\n")
    finally:
        assert driver.stop() == 0


def test_fault_set_is_refused_without_fault_injection_and_unreachable_is_3(driver, capsys,
                                                                           runtime_dir):
    rt = str(runtime_dir)
    code, out, err = nnrt(capsys, "fault", "set", "cpu", "--device-busy", "--runtime-dir", rt)
    assert (code, out) == (1, "")
    assert err == ("nnrt: fault set: driver 'cpu' refuses: fault injection is not enabled "
                   "(start it with --fault-injection; in the device manager's configuration: "
                   "options = { fault-injection = true })\n")
    code, out, _ = nnrt(capsys, "fault", "show", "cpu", "--runtime-dir", rt)
    assert code == 0 and "fault injection not enabled" in out
    # something on the socket that never answers: unreachable, within the bound
    ghost = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    ghost.bind(str(grpc_socket(runtime_dir, "ghost")))
    ghost.listen(1)  # connections queue, nothing is ever said
    try:
        started = time.monotonic()
        code, _, err = nnrt(capsys, "fault", "clear", "ghost", "--runtime-dir", rt)
        assert code == 3 and err.startswith("nnrt: fault clear: driver 'ghost' does not answer")
        assert time.monotonic() - started < 15
    finally:
        ghost.close()
