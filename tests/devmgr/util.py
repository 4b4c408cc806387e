"""Running `nnrt devmgr` as a real process in tests: a fake systemd notify socket, the
control socket, bounded waits, and a /proc sweep for leftover processes."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from nnrt.common.devmgr_ctl import DevmgrUnavailable, request

# Short timings so a test sees restarts, backoff and crash loops in well under a second.
FAST_CONFIG = """\
[devmgr]
ready_timeout = 20
stop_timeout = 5
probe_interval = 0.2
probe_timeout = 1.0
probe_failures = 2

[defaults]
restart = "on-failure"
backoff_initial = 0.1
backoff_max = 0.4
crash_loop_failures = 3
crash_loop_window = 30
"""

WAIT = 30.0  # bound of every wait for the device manager or its drivers


def config_text(drivers: str, header: str = FAST_CONFIG) -> str:
    return header + "\n" + drivers


class NotifyListener:
    """A stand-in for systemd's notify socket (abstract name when `abstract`)."""

    def __init__(self, directory: Path, abstract: bool = False) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        if abstract:
            name = f"nnrt-test-notify-{uuid.uuid4().hex}"
            self.sock.bind("\0" + name)
            self.address = "@" + name
        else:
            path = directory / "notify.sock"
            self.sock.bind(str(path))
            self.address = str(path)
        self.sock.settimeout(0.1)
        self.messages: list[str] = []

    def drain(self) -> list[str]:
        while True:
            try:
                data = self.sock.recv(65536)
            except (TimeoutError, BlockingIOError):
                return self.messages
            self.messages.append(data.decode())

    def fields(self) -> list[str]:
        """Every KEY=VALUE received, in order."""
        return [line for message in self.drain() for line in message.split("\n")]

    def wait_for(self, line: str, timeout: float = WAIT, count: int = 1) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.fields().count(line) >= count:
                return True
        return self.fields().count(line) >= count

    def close(self) -> None:
        self.sock.close()


@dataclass
class Devmgr:
    proc: subprocess.Popen
    runtime_dir: Path
    config_path: Path
    log_path: Path
    notify: NotifyListener | None = None
    history: list[dict] = field(default_factory=list)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def status(self) -> dict:
        return request(self.runtime_dir, {"cmd": "status"})

    def drivers(self) -> dict[str, dict]:
        return {d["name"]: d for d in self.status()["drivers"]}

    def wait_drivers(self, predicate, what: str, timeout: float = WAIT) -> dict[str, dict]:
        """Poll the control socket until `predicate(drivers)`; fail with the log if not."""
        deadline = time.monotonic() + timeout
        drivers: dict[str, dict] = {}
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"devmgr exited with {self.proc.returncode} while waiting "
                                     f"for {what}:\n{self.log()}")
            try:
                drivers = self.drivers()
            except DevmgrUnavailable:
                drivers = {}
            if drivers and predicate(drivers):
                return drivers
            time.sleep(0.05)
        raise AssertionError(f"not {what} within {timeout} s: {drivers}\n{self.log()}")

    def wait_ready(self, *names: str) -> dict[str, dict]:
        return self.wait_drivers(lambda ds: all(ds.get(n, {}).get("state") == "ready"
                                                for n in names), f"{', '.join(names)} ready")

    def stop(self, timeout: float = WAIT) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
            raise AssertionError(f"devmgr did not stop within {timeout} s:\n{self.log()}")

    def kill_everything(self) -> None:
        """Test teardown: nothing may outlive the test, whatever happened."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)
        for pid in processes_using(self.runtime_dir):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.notify is not None:
            self.notify.close()


def processes_using(runtime_dir: Path) -> list[int]:
    """Live processes (not zombies) whose command line names `runtime_dir`."""
    needle = str(runtime_dir).encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if needle in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


def start_devmgr(tmp_path: Path, config: str, *, notify: NotifyListener | None = None,
                 env: dict[str, str] | None = None, journal: bool = False,
                 args: tuple[str, ...] = ()) -> Devmgr:
    """Start `nnrt devmgr` on `config` (TOML text) in tmp_path/rt; returns at once."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    runtime_dir = tmp_path / "rt"
    config_path = tmp_path / "devmgr.toml"
    config_path.write_text(config)
    log_path = tmp_path / f"devmgr-{time.monotonic_ns()}.log"
    child_env = {k: v for k, v in os.environ.items()
                 if k not in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "JOURNAL_STREAM")}
    if notify is not None:
        child_env["NOTIFY_SOCKET"] = notify.address
    child_env.update(env or {})
    with open(log_path, "wb") as log:
        if journal:
            st = os.fstat(log.fileno())
            child_env["JOURNAL_STREAM"] = f"{st.st_dev}:{st.st_ino}"
        proc = subprocess.Popen(
            [sys.executable, "-m", "nnrt.client.cli", "devmgr", "--config", str(config_path),
             "--runtime-dir", str(runtime_dir), *args],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=child_env)
    return Devmgr(proc, runtime_dir, config_path, log_path, notify)


def pid_alive(pid: int) -> bool:
    """True while `pid` runs (a zombie counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"
