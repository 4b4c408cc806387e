"""The device manager's control socket: `$NNRT_RUNTIME_DIR/devmgr.ctl`.

AF_UNIX stream socket, mode 0660. One request per connection: the client sends one JSON
object and a newline, the device manager answers one JSON object and a newline, and closes.

    {"cmd": "status"}  →  {"ok": true, "devmgr": {...}, "drivers": [{...}, ...]}
    {"cmd": "stop" | "start" | "restart", "driver": NAME}
                       →  {"ok": true, "message": "...", "driver": {...}}
    anything else      →  {"ok": false, "error": "...", "code": "..."}

The operator's commands (`nnrt devmgr stop|start|restart NAME`, client/commands/devmgr_ctl.py)
answer at once, before the driver has stopped or started; the status shows how it goes.
`stop`: the driver is stopped and stays stopped (not restarted by supervision, nor by a
reload) until `start`; `start`: a stopped, failed or backing-off driver gets a fresh start
(failures forgotten), a running one is left alone; `restart`: stop + start in any state,
backoff reset, counted in `restarts`. Refusals carry a `code`: `unknown-driver` (no driver
of that name in the configuration), `bad-request`, `stopping` (the device manager is).
Who may connect to the socket (mode 0660: its owner and group) may use them, as the
drivers' own admin service.

The `status` answer (times in seconds, `null` where unknown):

    devmgr:  pid, uptime, config, state (starting/running/reloading/stopping), runtime_dir
    drivers: name, kind, pid, state (starting/ready/backoff/failed/stopped), restarts,
             last_exit (exit status, or -N for a signal), uptime, reason, next_start_in,
             failures (within the crash-loop window), identity ({device_name, vendor,
             version: [major, minor], device_type} once it was ready, else null),
             restart_policy, standby ({pid, state: loading/ready/none}, null when standby
             is off), takeovers (restarts done by promoting the spare), operator_stopped
             (stopped by `nnrt devmgr stop`)
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import threading
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path

from .runtime_dir import ensure_runtime_dir

log = logging.getLogger(__name__)

CTL_NAME = "devmgr.ctl"
MAX_REQUEST = 64 << 10


class DriverState(StrEnum):
    """A supervised driver's state, as the status reply names it."""

    STARTING = "starting"  # its process runs; not serving yet
    READY = "ready"  # serving, its identity known
    BACKOFF = "backoff"  # exited; started again after a delay
    FAILED = "failed"  # gave up on it (the restart policy's limit)
    STOPPED = "stopped"  # stopped by the operator or the manager


class ManagerState(StrEnum):
    """The device manager's own state."""

    STARTING = "starting"
    RUNNING = "running"
    STOPPING = "stopping"
    STOPPED = "stopped"


class DevmgrAlreadyRunning(RuntimeError):
    pass


class DevmgrUnavailable(ConnectionError):
    """No device manager answers on the control socket."""


def ctl_path(directory: Path) -> Path:
    return Path(directory) / CTL_NAME


def _read_line(conn: socket.socket) -> bytes:
    data = b""
    while b"\n" not in data:
        chunk = conn.recv(4096)
        if not chunk:
            break
        data += chunk
        if len(data) > MAX_REQUEST:
            raise ValueError("message too long")
    return data.split(b"\n", 1)[0]


def request(directory: Path, message: dict, timeout: float = 2.0) -> dict:
    """Send one request to the device manager of `directory`; its answer.

    DevmgrUnavailable when none answers (no socket, a stale one, or no answer in time)."""
    path = ctl_path(directory)
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    conn.settimeout(timeout)
    try:
        conn.connect(str(path))
        conn.sendall(json.dumps(message).encode() + b"\n")
        line = _read_line(conn)
    except (OSError, ValueError) as exc:
        raise DevmgrUnavailable(f"no device manager answers on {path}: {exc}") from None
    finally:
        conn.close()
    try:
        answer = json.loads(line)
    except ValueError:
        raise DevmgrUnavailable(f"{path}: not a device manager answer: {line[:80]!r}") from None
    if not isinstance(answer, dict):
        raise DevmgrUnavailable(f"{path}: not a device manager answer: {line[:80]!r}")
    return answer


class ControlServer:
    """The listening side; `handler(request) -> answer` runs on a short-lived thread."""

    def __init__(self, directory: Path, handler: Callable[[dict], dict]) -> None:
        self.path = ctl_path(directory)
        self._handler = handler
        self._sock: socket.socket | None = None

    def claim(self) -> None:
        """Bind the socket (0660); DevmgrAlreadyRunning when a live one answers there."""
        ensure_runtime_dir(self.path.parent)  # a directory checked before use, as drivers do
        if self.path.exists() or self.path.is_symlink():
            probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            probe.settimeout(1.0)
            try:
                probe.connect(str(self.path))
            except (ConnectionRefusedError, FileNotFoundError):
                log.info("removing stale control socket %s", self.path)
                self.path.unlink(missing_ok=True)
            except OSError as exc:
                raise DevmgrAlreadyRunning(f"{self.path}: {exc}") from None
            else:
                raise DevmgrAlreadyRunning(f"a device manager already listens on {self.path}")
            finally:
                probe.close()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        old_umask = os.umask(0o117)
        try:  # 0660 from the umask at bind: no path-following chmod afterwards
            sock.bind(str(self.path))
        finally:
            os.umask(old_umask)
        sock.listen(16)
        sock.setblocking(False)
        self._sock = sock

    def fileno(self) -> int:
        return self._sock.fileno()

    def accept(self) -> None:
        """Take the pending connections (call when the socket is readable)."""
        while True:
            try:
                conn, _ = self._sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                log.warning("control socket: %s", exc)
                return
            threading.Thread(target=self._serve, args=(conn,), name="devmgr-ctl",
                             daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            conn.setblocking(True)
            conn.settimeout(2.0)
            try:
                line = _read_line(conn)
                try:
                    message = json.loads(line)
                    if not isinstance(message, dict):
                        raise ValueError("not an object")
                except ValueError as exc:
                    answer = {"ok": False, "error": f"bad request: {exc}"}
                else:
                    try:
                        answer = self._handler(message)
                    except Exception as exc:  # never let one request take the daemon down
                        log.exception("control request %r failed", message)
                        answer = {"ok": False, "error": str(exc)}
                conn.sendall(json.dumps(answer).encode() + b"\n")
            except (OSError, ValueError) as exc:
                log.debug("control connection: %s", exc)

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
            self.path.unlink(missing_ok=True)


def describe_exit(code: int | None) -> str:
    if code is None:
        return "-"
    if code < 0:
        try:
            return signal.Signals(-code).name
        except ValueError:
            return f"signal {-code}"
    return f"exit {code}"
