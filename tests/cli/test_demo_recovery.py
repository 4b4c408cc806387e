"""`nnrt demo --recovery`: a device manager, client processes running a model in a loop, a
driver killed and wedged; the figures come back for cold restart, warm standby and failover,
no run is lost, and nothing is left behind (processes, the private directory) — at its end,
at Ctrl-C and at its deadline. deploy/devmgr-demo.toml is the demo's configuration."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from nnrt.client.commands.demo import SCENARIOS, recovery_config
from nnrt.devmgr.config import load_config, parse_config

ROOT = Path(__file__).resolve().parents[2]
BOUND = 120  # s: the demo takes ~10 s on an idle machine, its own deadline is 90 s


def _processes_mentioning(text: str) -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if text.encode() in cmdline:
            found.append(int(pid))
    return found


def _demo(*args: str) -> subprocess.Popen:
    env = {**os.environ, "NNRT_NO_EMBEDDED": "1"}
    return subprocess.Popen([sys.executable, "-m", "nnrt.client.cli", "demo", "--recovery",
                             *args], env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _private_dir(text: str) -> str:
    found = re.search(r"runtime dir: (\S+)/rt \(private", text)
    assert found, text
    return found.group(1)


def _left_behind(directory: str) -> tuple[bool, list[int]]:
    deadline = time.monotonic() + 10  # the drivers follow their lifeline: not instantly
    while time.monotonic() < deadline and _processes_mentioning(directory):
        time.sleep(0.1)
    return Path(directory).exists(), _processes_mentioning(directory)


def test_the_shipped_demo_config_is_the_demos_with_standby_on():
    shipped = load_config(ROOT / "deploy" / "devmgr-demo.toml")
    demo = parse_config(recovery_config(standby=True))
    assert shipped.settings == demo.settings
    assert shipped.drivers == demo.drivers
    cold = parse_config(recovery_config(standby=False))
    assert cold.drivers == tuple(replace(d, standby=False) for d in demo.drivers)
    names = [d.name for d in shipped.drivers]
    assert names == ["cpu0", "cpu1"]
    assert shipped.drivers[0].standby and "--fault-injection" in shipped.drivers[0].option_args()


@pytest.mark.multiprocess
def test_recovery_demo_reports_every_scenario_and_loses_no_run():
    proc = _demo("--json", "--clients", "2")
    out, err = proc.communicate(timeout=BOUND)
    assert proc.returncode == 0, err
    report = json.loads(out)  # stdout is the JSON alone; the live lines went to stderr
    assert [(s["name"], s["signal"]) for s in report["scenarios"]] == \
        [(name, sig) for name, sig, _, _ in SCENARIOS]
    for scenario in report["scenarios"]:
        assert scenario["ok"] and scenario["lost"] == 0 and scenario["wrong"] == 0, scenario
        assert 0 <= scenario["noticed_ms"] <= scenario["back_ms"] + 50, scenario
        assert 0 < scenario["first_good_run_ms"] < 20_000, scenario
        assert scenario["runs"] > 0
    how = {(s["name"], s["signal"]): s["back_how"] for s in report["scenarios"]}
    assert how[("cold restart", "SIGKILL")] == how[("cold restart", "SIGSTOP")] == "restart"
    assert how[("warm standby", "SIGKILL")] == how[("warm standby", "SIGSTOP")] == "takeover"
    assert how[("failover", "SIGKILL")].startswith("failover (cpu1)")
    failover = report["scenarios"][-1]
    assert failover["retried"] == 0  # no run even saw the death: the other device took it
    assert report["totals"]["lost"] == 0 and report["ok"] and report["seconds"] < 90
    assert "death noticed by" in err and "first good run again" in err
    assert "the spare took over" in err and "restarted" in err
    directory = _private_dir(err)
    assert _left_behind(directory) == (False, [])


@pytest.mark.multiprocess
def test_ctrl_c_in_the_middle_leaves_nothing_behind():
    proc = _demo()
    try:
        seen = ""
        deadline = time.monotonic() + BOUND
        while "SIGKILL cpu0" not in seen and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            seen += line
        assert "SIGKILL cpu0" in seen, seen + proc.stderr.read()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=BOUND)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1] == "nnrt: interrupted"
    assert _left_behind(_private_dir(seen)) == (False, [])


@pytest.mark.multiprocess
def test_the_deadline_ends_the_demo_and_cleans_up():
    proc = _demo("--timeout", "500ms")
    out, err = proc.communicate(timeout=BOUND)
    assert proc.returncode == 1, err
    assert "the demo's deadline passed (--timeout)" in err or "not within" in err, err
    assert _left_behind(_private_dir(out)) == (False, [])


def test_recovery_options_are_checked(capsys):
    from nnrt.client import cli

    assert cli.main(["demo", "--recovery", "--device", "cpu"]) == 2
    assert "--device does not go with --recovery" in capsys.readouterr().err
    assert cli.main(["demo", "--json"]) == 2
    with pytest.raises(SystemExit) as info:
        cli.main(["demo", "--recovery", "--clients", "0"])
    assert info.value.code == 2
