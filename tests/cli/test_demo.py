"""The README's main command: with no driver running, it starts an embedded one, runs the
MLP across processes, shows a checked result, and leaves no process or directory behind."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest


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


@pytest.mark.multiprocess
def test_demo_with_an_empty_runtime_dir(runtime_dir):
    env = {**os.environ, "NNRT_RUNTIME_DIR": str(runtime_dir)}
    env.pop("NNRT_NO_EMBEDDED", None)
    proc = subprocess.run([sys.executable, "-m", "nnrt.client.cli", "demo"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "numpy check:" in proc.stdout and "OK" in proc.stdout
    embedded = re.search(r"runtime dir:\s+(\S+) \(embedded", proc.stdout)
    assert embedded, proc.stdout
    assert not Path(embedded.group(1)).exists()
    assert _processes_mentioning(embedded.group(1)) == []
    assert list(runtime_dir.iterdir()) == []  # nothing was put in the user's runtime dir


@pytest.mark.multiprocess
def test_demo_refuses_to_start_drivers_when_told_not_to(runtime_dir):
    env = {**os.environ, "NNRT_RUNTIME_DIR": str(runtime_dir), "NNRT_NO_EMBEDDED": "1"}
    proc = subprocess.run([sys.executable, "-m", "nnrt.client.cli", "demo"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 3  # no device, as for every command (README, "Exit codes")
    assert "NNRT_NO_EMBEDDED" in proc.stderr


def test_demo_uses_a_running_driver(shared_driver):
    env = {**os.environ, "NNRT_RUNTIME_DIR": str(shared_driver.runtime_dir)}
    proc = subprocess.run([sys.executable, "-m", "nnrt.client.cli", "demo"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "(running drivers)" in proc.stdout and "OK" in proc.stdout
