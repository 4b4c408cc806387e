"""What an operator sees (issue 14 leftovers): budgets in the admin status and `nnrt status`,
default budgets from a cgroup memory limit, the warm standby in `nnrt status` and in the
metrics, and driver options checked when the device manager's configuration is loaded."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import grpc
import pytest
from google.protobuf import empty_pb2
from nnrt.client import cli
from nnrt.client.core.driver import DriverClient
from nnrt.protos import admin_pb2_grpc
from nnrt.hdi import memory_limits
from nnrt.devmgr.config import ConfigError, parse_config
from nnrt.common.runtime_dir import lock_holder, lock_path

from tests.conftest import start_driver
from tests.devmgr.util import WAIT, config_text, processes_using, start_devmgr
from tests.helpers.metrics import metrics_port, scrape, value

MIB = 1 << 20


def admin_status(driver):
    with grpc.insecure_channel(f"unix:{driver.grpc_path}") as channel:
        return admin_pb2_grpc.NnrtAdminStub(channel).GetStatus(empty_pb2.Empty(), timeout=5)


# -- cgroup memory limits (a fake cgroupfs) --------------------------------------------------


def fake_cgroup(tmp_path: Path, lines: str, files: dict[str, str]) -> tuple[Path, Path]:
    root = tmp_path / "cgroup"
    for relative, text in files.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text + "\n")
    proc = tmp_path / "proc-self-cgroup"
    proc.write_text(lines)
    return root, proc


@pytest.mark.parametrize("lines, files, expected", [
    # v2: the lowest limit on the way up; "max" is none
    ("0::/a/b\n", {"a/b/memory.max": "max", "a/memory.max": str(2 << 30),
                   "memory.max": str(8 << 30)}, 2 << 30),
    ("0::/a/b\n", {"a/b/memory.max": "max"}, None),
    # v1: memory.limit_in_bytes in the memory hierarchy; ~2^63 is "unlimited"
    ("4:memory:/docker/x\n0::/\n", {"memory/docker/x/memory.limit_in_bytes": str(512 * MIB),
                                    "memory/memory.limit_in_bytes": "9223372036854771712"},
     512 * MIB),
    ("3:cpu,cpuacct:/x\n4:memory:/x\n", {"memory/memory.limit_in_bytes": "9223372036854771712"},
     None),
    # a container: /proc names a host path that is not under the mount; its root is read
    ("4:memory:/host/path/abc\n", {"memory/memory.limit_in_bytes": str(768 * MIB)}, 768 * MIB),
    # hybrid: both hierarchies, the lower wins; garbage is ignored
    ("4:memory:/\n0::/u\n", {"memory/memory.limit_in_bytes": str(3 << 30),
                             "u/memory.max": str(1 << 30), "memory.max": "garbage"}, 1 << 30),
    ("", {}, None),  # no cgroup at all
])
def test_cgroup_memory_limit(tmp_path, lines, files, expected):
    root, proc = fake_cgroup(tmp_path, lines, files)
    assert memory_limits.cgroup_memory_limit(root, proc) == expected


def test_default_budgets_follow_a_lower_cgroup_limit_only(tmp_path, monkeypatch):
    root, _ = fake_cgroup(tmp_path, "", {"memory.max": str(1 << 30),
                                         "memory/memory.limit_in_bytes": str(1 << 30)})
    monkeypatch.setenv(memory_limits.CGROUP_ROOT_ENV, str(root))
    monkeypatch.setattr(memory_limits, "physical_memory", lambda: 16 << 30)
    assert memory_limits.memory_basis() == (1 << 30, "the cgroup memory limit")
    assert memory_limits.default_driver_limit() == 512 * MIB
    assert memory_limits.default_session_limit(memory_limits.default_driver_limit()) == 128 * MIB
    monkeypatch.setattr(memory_limits, "physical_memory", lambda: 512 * MIB)  # RAM is lower
    assert memory_limits.memory_basis() == (512 * MIB, "the physical memory")
    monkeypatch.setenv(memory_limits.CGROUP_ROOT_ENV, str(tmp_path / "none"))  # no cgroupfs there
    monkeypatch.setattr(memory_limits, "physical_memory", lambda: 16 << 30)
    assert memory_limits.default_driver_limit() == 8 << 30


@pytest.mark.multiprocess
def test_a_driver_under_a_cgroup_limit_reports_its_budgets(tmp_path, runtime_dir, monkeypatch):
    """A real driver whose cgroupfs says 1 GiB: half of it by default, in its admin status,
    in `nnrt status`, and in its log."""
    root, _ = fake_cgroup(tmp_path, "", {"memory.max": str(1 << 30),
                                         "memory/memory.limit_in_bytes": str(1 << 30)})
    monkeypatch.setenv(memory_limits.CGROUP_ROOT_ENV, str(root))  # inherited by the driver
    driver = start_driver(runtime_dir)
    try:
        status = admin_status(driver)
        assert status.sharedMemoryBudgetBytes == 512 * MIB
        assert status.sessionMemoryBudgetBytes == 128 * MIB
        assert status.modelMemoryLimitBytes == 128 * MIB
        assert status.sharedMemoryUsedBytes == 0
        assert "(default: half of the cgroup memory limit, 1073741824 bytes (1024.0 MiB))" \
            in driver.log()
    finally:
        assert driver.stop() == 0


@pytest.mark.multiprocess
def test_budgets_given_as_options_are_reported_with_what_is_held(runtime_dir, capsys):
    driver = start_driver(runtime_dir, "cpu", "--max-driver-memory-mb", "64",
                          "--max-session-memory-mb", "16", "--max-model-memory-mb", "8")
    try:
        with DriverClient.connect("cpu", runtime_dir) as client:
            _, region = client.allocate_buffer(1 * MIB)
            status = admin_status(driver)
            assert (status.sharedMemoryBudgetBytes, status.sessionMemoryBudgetBytes,
                    status.modelMemoryLimitBytes) == (64 * MIB, 16 * MIB, 8 * MIB)
            assert status.sharedMemoryUsedBytes == 1 * MIB
            capsys.readouterr()
            assert cli.main(["status", "--runtime-dir", str(runtime_dir), "--json"]) == 0
            (entry,) = json.loads(capsys.readouterr().out)["drivers"]
            uid = os.geteuid()
            assert entry["budgets"] == {"shared_memory_bytes": 64 * MIB,
                                        "session_memory_bytes": 16 * MIB,
                                        "model_memory_bytes": 8 * MIB,
                                        "shared_memory_used_bytes": 1 * MIB,
                                        "uid_memory_bytes": 32 * MIB,  # half, the default
                                        "sessions_per_uid": 64,
                                        "uids": [{"uid": uid, "sessions": 1,
                                                  "shared_memory_bytes": 1 * MIB}]}
            assert [s["session_id"] for s in entry["sessions"]] == [client.session_id]
            assert entry["standby"] is None and entry["takeovers"] is None  # no devmgr
            assert cli.main(["status", "--runtime-dir", str(runtime_dir), "--wide"]) == 0
            out = capsys.readouterr().out
            header, row = out.splitlines()[3:5]
            assert header.split()[-1] == "BUDGET" and row.endswith("1.0 MiB  64.0 MiB")
            assert "  cpu budgets: shared memory 64.0 MiB (a session 16.0 MiB, a uid 32.0 MiB " \
                   "and 64 sessions), model memory 8.0 MiB per run" in out
            assert f"  cpu uid {uid}: 1 session, 1.0 MiB" in out
            region.close()
    finally:
        assert driver.stop() == 0


# -- warm standby: nnrt status and metrics -----------------------------------------------------


def test_standby_in_status_and_metrics(tmp_path, devmgrs, capsys):
    devmgr = start_devmgr(tmp_path, config_text("""
        [drivers.cpu]
        kind = "cpu"
        restart = "always"
        standby = true
        [drivers.plain]
        kind = "cpu"
    """), args=("--metrics-address", "127.0.0.1:0"))
    devmgrs.append(devmgr)
    port = metrics_port(devmgr)
    rt = str(devmgr.runtime_dir)
    cpu = devmgr.wait_drivers(lambda ds: ds["cpu"]["state"] == "ready"
                              and ds["plain"]["state"] == "ready"
                              and (ds["cpu"]["standby"] or {}).get("state") == "ready",
                              "cpu ready with a ready spare")["cpu"]
    live, spare = cpu["pid"], cpu["standby"]["pid"]
    assert lock_holder(lock_path(devmgr.runtime_dir, "cpu")) == live  # not the waiting spare

    capsys.readouterr()
    assert cli.main(["status", "--runtime-dir", rt, "--json"]) == 0
    entries = {d["name"]: d for d in json.loads(capsys.readouterr().out)["drivers"]}
    assert entries["cpu"]["standby"] == {"pid": spare, "state": "ready"}
    assert entries["cpu"]["takeovers"] == 0
    assert entries["plain"]["standby"] is None and entries["plain"]["takeovers"] == 0
    assert cli.main(["status", "--runtime-dir", rt, "--wide"]) == 0
    out = capsys.readouterr().out
    assert "STANDBY" in out and f"ready (pid {spare})" in out
    assert cli.main(["status", "--runtime-dir", rt]) == 0  # the default: the spare's state
    header, *rows = capsys.readouterr().out.splitlines()[4:7]
    column = header.index("STANDBY")
    spares = {row.split()[0]: row[column:].split()[0] for row in rows}
    assert spares == {"cpu": "ready", "plain": "-"}
    samples = scrape(port)
    labels = {"driver": "cpu", "kind": "cpu"}
    assert value(samples, "nnrt_driver_standby_ready", **labels) == 1
    assert value(samples, "nnrt_driver_standby_takeovers_total", **labels) == 0
    assert ("nnrt_driver_standby_ready", frozenset({"driver": "plain", "kind": "cpu"}.items())) \
        not in samples  # standby off: no series
    assert value(samples, "nnrt_driver_shared_memory_budget_bytes", **labels) > 0
    assert value(samples, "nnrt_driver_model_memory_limit_bytes", **labels) > 0
    assert value(samples, "nnrt_driver_uid_memory_budget_bytes", **labels) == \
        value(samples, "nnrt_driver_shared_memory_budget_bytes", **labels) // 2

    os.kill(live, signal.SIGKILL)
    after = devmgr.wait_drivers(
        lambda ds: ds["cpu"]["state"] == "ready" and ds["cpu"]["takeovers"] == 1
        and (ds["cpu"]["standby"] or {}).get("state") == "ready", "a takeover and a new spare"
    )["cpu"]
    assert after["pid"] == spare
    assert lock_holder(lock_path(devmgr.runtime_dir, "cpu")) == spare  # taken at its go
    samples = scrape(port)
    assert value(samples, "nnrt_driver_standby_takeovers_total", **labels) == 1
    assert cli.main(["status", "--runtime-dir", rt]) == 0
    assert "  cpu: 1 takeover by its standby" in capsys.readouterr().out

    # an operator's restart keeps the count (a counter, not reset by the new supervisor)
    assert cli.main(["devmgr", "restart", "cpu", "--runtime-dir", rt]) == 0
    assert devmgr.drivers()["cpu"]["takeovers"] == 1
    assert value(scrape(port), "nnrt_driver_standby_takeovers_total", **labels) == 1
    assert devmgr.stop() == 0
    assert processes_using(devmgr.runtime_dir) == []


# -- driver options checked at load ------------------------------------------------------------


@pytest.mark.parametrize("options, message", [
    ("{ no-such-option = true }", ("nnrt-driver cpu refuses --no-such-option: "
                                   "unrecognized arguments: --no-such-option")),
    ("{ grace = 'soon' }", ("refuses --grace soon: argument --grace: invalid float value: "
                            "'soon'")),
    ("{ log-level = 'LOUD' }", "argument --log-level: invalid choice: 'LOUD'"),
    ("{ fault-exit-on-run-probability = 2 }", ("--fault-exit-on-run-probability must be "
                                               "within [0, 1]")),
    ("{ max-runs-per-session = 0 }", "--max-runs-per-session must be >= 1"),
    ("{ cl-device = 'any' }", "--cl-device and --gpu-memory-mb are options of the gpu driver"),
    ("{ spec = 'npu.toml' }", "--spec is an option of the accel driver"),
    ("{ allow-uid = ['me'] }", "argument --allow-uid: invalid int value: 'me'"),
])
def test_bad_driver_options_are_config_errors_at_load(options, message):
    with pytest.raises(ConfigError) as error:
        parse_config(f"[drivers.worker]\nkind = 'cpu'\noptions = {options}\n",
                     Path("/etc/nnrt/devmgr.toml"))
    text = str(error.value)
    assert text.startswith("/etc/nnrt/devmgr.toml [drivers.worker]: options: ")
    assert message in text


def test_good_driver_options_of_every_kind_pass():
    config = parse_config("""
        [drivers.cpu]
        options = { grace = 5, allow-gid = [1, 2], fault-injection = true, stall-timeout = 0 }
        [drivers.gpu]
        options = { cl-device = "any", gpu-memory-mb = 512 }
        [drivers.accel]
        options = { spec = "/etc/nnrt/npu-sim.toml", fault-device-busy = false }
    """)
    assert [d.name for d in config.drivers] == ["cpu", "gpu", "accel"]


def test_a_bad_option_stops_the_devmgr_at_start_and_is_refused_at_reload(tmp_path, devmgrs):
    bad = start_devmgr(tmp_path / "a", config_text("""
        [drivers.cpu]
        kind = "cpu"
        [drivers.typo]
        kind = "cpu"
        options = { grase = 5 }
    """))
    devmgrs.append(bad)
    assert bad.proc.wait(WAIT) == 1  # failed to start: no driver was ever started
    log = bad.log()
    assert "bad configuration: " in log and "[drivers.typo]: options: nnrt-driver cpu refuses " \
        "--grase 5: unrecognized arguments: --grase 5" in log
    assert "started, pid" not in log and processes_using(bad.runtime_dir) == []

    good = start_devmgr(tmp_path / "b", config_text('[drivers.cpu]\nkind = "cpu"\n'))
    devmgrs.append(good)
    pid = good.wait_ready("cpu")["cpu"]["pid"]
    good.config_path.write_text(config_text("""
        [drivers.cpu]
        kind = "cpu"
        options = { grace = "later" }
    """))
    good.proc.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + WAIT
    while "reload refused, the running configuration stays" not in good.log():
        assert time.monotonic() < deadline, good.log()
        time.sleep(0.05)
    assert "options: nnrt-driver cpu refuses --grace later" in good.log()
    time.sleep(0.5)
    cpu = good.drivers()["cpu"]
    assert (cpu["state"], cpu["pid"], cpu["restarts"]) == ("ready", pid, 0)  # untouched
    assert good.stop() == 0
