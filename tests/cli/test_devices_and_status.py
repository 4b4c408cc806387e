"""`nnrt devices` and `nnrt status`: tables, --json shapes and exit codes, against real
driver processes, with and without a device manager."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from nnrt.client import cli
from nnrt.client.commands.status import format_run_queue
from nnrt.client.core.device import DeviceRegistry
from tests.devmgr.util import WAIT, config_text, processes_using, start_devmgr

DEVICE_KEYS = {"id", "name", "driver", "kind", "device_name", "vendor", "type", "status",
               "hdi_version", "pid", "uptime_seconds", "restarts", "managed", "details"}
DRIVER_KEYS = {"name", "kind", "managed", "pid", "state", "health", "restarts", "last_exit",
               "reason", "uptime_seconds", "device_status", "in_flight_runs", "runs",
               "sessions", "memory_bytes", "fault_injection", "standby", "takeovers",
               "budgets", "run_queue"}
SESSION_KEYS = {"session_id", "peer_pid", "buffers", "buffer_bytes", "prepared_models",
                "prepared_model_names", "run_mailbox", "mailbox_runs"}
DEVMGR_KEYS = {"pid", "uptime", "state", "config", "runtime_dir", "status"}


def nnrt(capsys, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = cli.main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_nothing_running_exits_3(runtime_dir, capsys):
    rt = str(runtime_dir)
    code, out, err = nnrt(capsys, "devices", "--runtime-dir", rt)
    assert (code, out) == (3, "")
    assert f"no devices: no device manager and no driver in {rt}" in err
    code, out, err = nnrt(capsys, "devices", "--runtime-dir", rt, "--json")
    assert code == 3
    assert json.loads(out) == {"runtime_dir": rt, "devmgr": False, "devices": []}
    code, out, err = nnrt(capsys, "status", "--runtime-dir", rt, "--json")
    assert code == 3
    assert json.loads(out) == {"runtime_dir": rt, "devmgr": None, "drivers": [],
                               "healthy": False}
    assert "nothing running" in err
    code, _, _ = nnrt(capsys, "status", "--runtime-dir", str(runtime_dir / "missing"))
    assert code == 3


def test_usage_errors_exit_2(capsys):
    for argv in ([], ["devices", "--no-such-flag"], ["status", "extra"], ["frobnicate"]):
        with pytest.raises(SystemExit) as exit_:
            cli.main(argv)
        assert exit_.value.code == 2


def test_devices_and_status_of_a_driver_without_devmgr(driver, capsys):
    rt = str(driver.runtime_dir)
    registry = DeviceRegistry(driver.runtime_dir)
    expected_id = registry.devices()[0].id
    registry.close()
    with driver.client() as session:
        _, memory = session.allocate_buffer(4096)
        code, out, _ = nnrt(capsys, "devices", "--runtime-dir", rt, "--json")
        assert code == 0
        listing = json.loads(out)
        assert listing["devmgr"] is False
        (device,) = listing["devices"]
        assert set(device) == DEVICE_KEYS
        assert device["id"] == expected_id  # the stable ID of client/core/device.py
        assert device | {"uptime_seconds": None, "details": None} == {
            "id": expected_id, "name": "nnrt-cpu_nnrt_v2_1", "driver": "cpu", "kind": "cpu",
            "device_name": "nnrt-cpu", "vendor": "nnrt", "type": "CPU", "status": "available",
            "hdi_version": "2.1", "pid": driver.pid, "uptime_seconds": None,
            "restarts": None, "managed": False, "details": None}
        # the CPU device's details: its engine and what runs on it
        assert device["details"]["engine"] in ("ort", "numpy")
        assert device["details"]["nodes_numpy"] == "0"
        assert device["uptime_seconds"] > 0  # from the driver's admin GetStatus

        code, out, _ = nnrt(capsys, "status", "--runtime-dir", rt, "--json")
        assert code == 0
        status = json.loads(out)
        assert status["devmgr"] is None and status["healthy"] is True
        (entry,) = status["drivers"]
        assert set(entry) == DRIVER_KEYS
        assert (entry["state"], entry["health"], entry["pid"], entry["managed"]) == \
               ("running", "SERVING", driver.pid, False)
        assert entry["runs"] == {"completed": 0, "failed": 0, "abandoned": 0}
        assert entry["in_flight_runs"] == 0 and entry["fault_injection"] is False
        ours = [s for s in entry["sessions"] if s["peer_pid"] == os.getpid()]
        assert len(ours) == 1 and set(ours[0]) == SESSION_KEYS
        assert ours[0]["buffers"] == 1 and ours[0]["buffer_bytes"] >= 4096
        assert entry["memory_bytes"] >= 4096
        cores = len(os.sched_getaffinity(0))
        if device["details"]["engine"] == "ort":  # a core budget: its run queue, idle
            assert entry["run_queue"] == {"cores": cores, "cores_in_use": 0, "queued": 0,
                                          "waited": 0, "wait_seconds": 0, "gave_up": 0}
        else:
            assert entry["run_queue"] is None

        code, out, _ = nnrt(capsys, "status", "--runtime-dir", rt, "--wide")
        assert code == 0
        assert "devmgr:   not running" in out
        assert f"cpu session {ours[0]['session_id']} (pid {os.getpid()}): 1 buffer, 4.0 KiB" in out
        if entry["run_queue"]:
            assert f"  cpu run queue: {cores} core{'s' if cores != 1 else ''}, 0 in use, 0 runs " \
                   "waiting\n" in out
        code, out, _ = nnrt(capsys, "devices", "--runtime-dir", rt)
        assert code == 0
        header, row, *details = out.splitlines()
        assert len(details) == 1 and details[0].startswith("  cpu: engine ")
        assert header.split()[:3] == ["ID", "NAME", "DRIVER"]
        assert row.split()[:7] == [str(expected_id), "nnrt-cpu_nnrt_v2_1", "cpu", "nnrt", "CPU",
                                   "available", "2.1"]
        assert row.split()[-1] == "-"  # restarts: unknown without a device manager
        memory.close()


def test_unreachable_driver_is_shown_and_fails_status(runtime_dir, capsys):
    for suffix, kind in ((".sock", socket.SOCK_STREAM), (".session", socket.SOCK_SEQPACKET)):
        with socket.socket(socket.AF_UNIX, kind) as dead:  # left behind by a killed driver
            dead.bind(str(runtime_dir / f"ghost{suffix}"))
    code, out, _ = nnrt(capsys, "devices", "--runtime-dir", str(runtime_dir), "--json")
    assert code == 0
    (device,) = json.loads(out)["devices"]
    assert (device["driver"], device["status"], device["id"]) == ("ghost", "unreachable", None)
    code, out, err = nnrt(capsys, "status", "--runtime-dir", str(runtime_dir), "--json")
    assert code == 1
    (entry,) = json.loads(out)["drivers"]
    assert (entry["state"], entry["health"], entry["sessions"]) == \
           ("unreachable", "unreachable", None)


@pytest.mark.multiprocess
def test_devices_and_status_with_devmgr(tmp_path):
    devmgr = start_devmgr(tmp_path, config_text("""
        [drivers.cpu]
        kind = "cpu"
    """))
    try:
        drivers = devmgr.wait_ready("cpu")
        env = {**os.environ, "NNRT_RUNTIME_DIR": str(devmgr.runtime_dir)}

        def run(*args):
            done = subprocess.run([sys.executable, "-m", "nnrt.client.cli", *args], env=env,
                                  capture_output=True, text=True, timeout=WAIT)
            return done.returncode, done.stdout, done.stderr

        code, out, err = run("devices", "--json")
        assert code == 0, err
        listing = json.loads(out)
        assert listing["devmgr"] is True
        (device,) = listing["devices"]
        assert set(device) == DEVICE_KEYS
        assert (device["managed"], device["restarts"], device["pid"], device["status"]) == \
               (True, 0, drivers["cpu"]["pid"], "available")
        assert device["uptime_seconds"] >= 0 and device["id"] is not None

        code, out, err = run("status", "--json")
        assert code == 0, err
        status = json.loads(out)
        assert set(status) == {"runtime_dir", "devmgr", "drivers", "clients", "healthy"}
        assert set(status["devmgr"]) == DEVMGR_KEYS
        assert (status["devmgr"]["pid"], status["devmgr"]["state"]) == (devmgr.proc.pid, "running")
        assert status["devmgr"]["status"] == "1 driver(s): 1 ready"
        (entry,) = status["drivers"]
        assert set(entry) == DRIVER_KEYS
        assert (entry["state"], entry["health"], entry["restarts"], entry["managed"]) == \
               ("ready", "SERVING", 0, True)

        code, out, err = run("status")
        assert code == 0, err
        assert out.startswith(f"devmgr:   running, pid {devmgr.proc.pid}, up ")
        assert "1 driver(s): 1 ready" in out
        assert devmgr.stop() == 0
        code, _, err = run("devices")
        assert code == 3 and "no devices" in err
    finally:
        devmgr.kill_everything()
    assert processes_using(devmgr.runtime_dir) == []


def test_the_run_queue_line_of_nnrt_status():
    idle = {"cores": 1, "cores_in_use": 0, "queued": 0, "waited": 0, "wait_seconds": 0.0,
            "gave_up": 0}
    assert format_run_queue("cpu", idle) == "  cpu run queue: 1 core, 0 in use, 0 runs waiting"
    busy = {"cores": 2, "cores_in_use": 2, "queued": 1, "waited": 4, "wait_seconds": 0.008,
            "gave_up": 1}
    assert format_run_queue("cpu", busy) == \
        "  cpu run queue: 2 cores, 2 in use, 1 run waiting; 4 runs waited, 2.0 ms on average, " \
        "1 gave up waiting"


def test_wide_status_says_which_sessions_run_through_a_mailbox():
    from nnrt.client.commands import status

    def session(session_id: int, mailbox: bool, runs: int) -> dict:
        return {"session_id": session_id, "peer_pid": 40 + session_id, "buffers": 2,
                "buffer_bytes": 8192, "prepared_models": 1, "prepared_model_names": ["m"],
                "run_mailbox": mailbox, "mailbox_runs": runs}

    driver = {"name": "cpu", "reason": None, "takeovers": 0, "budgets": None,
              "run_queue": None, "state": "running", "health": "SERVING",
              "sessions": [session(1, True, 5120), session(2, False, 0)]}
    notes = status._notes([driver], wide=True)
    assert "  cpu session 1 (pid 41): 2 buffers, 8.0 KiB, 1 prepared model (m); run mailbox: " \
           "5120 runs" in notes
    assert "  cpu session 2 (pid 42): 2 buffers, 8.0 KiB, 1 prepared model (m)" in notes
