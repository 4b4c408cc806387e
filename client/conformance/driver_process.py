"""The driver under test as a child process: `nnrt-driver KIND OPTIONS --name NAME
--runtime-dir DIR` in a private runtime directory, waited for (bounded), SIGKILLed and reaped
at the end whatever happened. Nothing of the driver's code is imported here: the conformance
process talks to it through its sockets only (client/core/driver.py)."""

from __future__ import annotations

import logging
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc
from google.protobuf import empty_pb2

from nnrt.client.core.driver import DriverClient
from nnrt.client.core.errors import DriverGone
from nnrt.common.runtime_dir import grpc_socket, session_socket
from nnrt.protos import admin_pb2, admin_pb2_grpc

log = logging.getLogger(__name__)

START_TIMEOUT = 60.0  # s: a driver importing onnxruntime or compiling OpenCL on a busy machine
STOP_TIMEOUT = 10.0


class DriverStartError(RuntimeError):
    """The driver exited, or did not serve, within the bound; `log` is what it printed."""

    def __init__(self, message: str, log_text: str) -> None:
        super().__init__(message)
        self.log_text = log_text


def driver_command() -> list[str]:
    """How to start `nnrt-driver`: the script installed beside this interpreter, else the
    one on PATH, else the module."""
    beside = Path(sys.executable).with_name("nnrt-driver")
    if beside.exists():
        return [str(beside)]
    found = shutil.which("nnrt-driver")
    return [found] if found else [sys.executable, "-m", "nnrt.server"]


def split_driver_spec(spec: str) -> tuple[str, list[str]]:
    """`"KIND [OPTIONS]"` → (KIND, OPTIONS); ValueError when empty or not shell words."""
    words = shlex.split(spec)
    if not words:
        raise ValueError("--driver needs a kind, e.g. --driver cpu or --driver 'gpu --cl-device any'")
    if words[0].startswith("-"):
        raise ValueError(f"--driver {spec!r}: the kind comes first, then its options")
    return words[0], words[1:]


# A socket path holds 107 bytes (sun_path); the longest we bind is the directory plus
# "/<name>.session" for our longest driver name.
SOCKET_PATH_MAX = 107
LONGEST_SOCKET_NAME = len("/conformance-foreign.session")


class PrivateRuntime:
    """A runtime directory of our own (mode 0700), removed with everything in it at close:
    under $TMPDIR, or /tmp when $TMPDIR is too deep for a socket path."""

    def __init__(self) -> None:
        base = tempfile.gettempdir()
        if len(base) + len("/nnrt-conformance-XXXXXXXX") + LONGEST_SOCKET_NAME > SOCKET_PATH_MAX:
            base = "/tmp"
        self.path = Path(tempfile.mkdtemp(prefix="nnrt-conformance-", dir=base))

    def close(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


class DriverProcess:
    """One `nnrt-driver` child. `start()` waits until its session socket answers."""

    def __init__(self, kind: str, options: list[str], runtime: Path, name: str,
                 extra: list[str] | None = None) -> None:
        self.kind = kind
        self.options = list(options)
        self.extra = list(extra or [])
        self.runtime = runtime
        self.name = name
        self.log_path = runtime / f"{name}.log"
        self.proc: subprocess.Popen | None = None
        self._lifeline = -1  # our end of the driver's --lifeline-fd pipe

    def argv(self, lifeline: int | None = None) -> list[str]:
        return [*driver_command(), self.kind, *self.options, "--name", self.name,
                "--runtime-dir", str(self.runtime), "--log-level", "INFO", *self.extra,
                *([] if lifeline is None else ["--lifeline-fd", str(lifeline)])]

    def start(self, timeout: float = START_TIMEOUT) -> DriverProcess:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        # The driver's lifeline: it stops when this process is gone, however it went (even
        # by SIGKILL, when our `finally` never runs).
        theirs, self._lifeline = os.pipe2(os.O_CLOEXEC)
        try:
            with open(self.log_path, "ab") as out:
                self.proc = subprocess.Popen(self.argv(theirs), stdin=subprocess.DEVNULL,
                                             stdout=out, stderr=subprocess.STDOUT, env=env,
                                             close_fds=True, pass_fds=(theirs,))
        finally:
            os.close(theirs)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                code = self.proc.returncode
                self.kill()
                raise DriverStartError(f"nnrt-driver {self.kind} exited with {code} before "
                                       f"serving", self.log())
            if session_socket(self.runtime, self.name).exists() and self._answers():
                return self
            time.sleep(0.05)
        self.kill()
        raise DriverStartError(f"nnrt-driver {self.kind} did not serve within {timeout:g} s",
                               self.log())

    def _answers(self) -> bool:
        try:
            client = DriverClient.connect(self.name, self.runtime, timeout=2.0)
        except (DriverGone, OSError):
            return False
        client.close()
        return True

    @property
    def pid(self) -> int | None:
        return None if self.proc is None else self.proc.pid

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def client(self, timeout: float = 10.0) -> DriverClient:
        return DriverClient.connect(self.name, self.runtime, timeout=timeout)

    def admin_status(self, timeout: float = 5.0) -> admin_pb2.DriverStatus:
        """The host's admin status of this driver (budgets, device details)."""
        with grpc.insecure_channel(f"unix:{grpc_socket(self.runtime, self.name)}") as channel:
            return admin_pb2_grpc.NnrtAdminStub(channel).GetStatus(empty_pb2.Empty(),
                                                                  timeout=timeout)

    def kill(self) -> None:
        """SIGKILL and reap (no zombie, whatever state it was in)."""
        if self._lifeline >= 0:
            os.close(self._lifeline)
            self._lifeline = -1
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        try:
            self.proc.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:  # not reapable yet (uninterruptible sleep)
            log.warning("driver %s (pid %d) not reaped within %g s", self.name, self.proc.pid,
                        STOP_TIMEOUT)
        self.proc = None

    def stop(self) -> None:
        """SIGTERM (a clean stop), SIGKILL past STOP_TIMEOUT; reaped either way."""
        if self.proc is None:
            self.kill()
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                pass
        self.kill()

    def log(self, tail: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-tail:]
        except OSError:
            return ""
