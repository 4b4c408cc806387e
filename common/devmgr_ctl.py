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
of that name in the configuration), `bad-request`, `stopping` (the device manager is),
`not-permitted` (a control command from a uid that may not), `busy` (too many requests at
once).
Who may ask what (the kernel's SO_PEERCRED of the connection, unforgeable): anyone who may
connect to the socket (mode 0660: its owner and group) may ask `status` (the state of the
service's own processes, nothing of any client); `stop`, `start` and `restart` only root and
the device manager's own user — another uid is answered `not-permitted` and the request
logged. At most `MAX_CONNECTIONS` requests are served at once (a thread each); one more is
answered `busy` at once and closed, so a flood holds a bounded number of threads. A request
must arrive whole within `REQUEST_TIMEOUT` seconds. When accept() fails for want of a
resource (EMFILE at the fd limit, ...) the device manager stops polling the socket for a
backoff (devmgr/manager.py, as the drivers' session channel does) rather than spin.

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

import errno
import json
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path

from .runtime_dir import ensure_runtime_dir

log = logging.getLogger(__name__)

CTL_NAME = "devmgr.ctl"
MAX_REQUEST = 64 << 10
MAX_CONNECTIONS = 16  # requests served at once (a thread each); one more is answered busy
REQUEST_TIMEOUT = 2.0  # s for a request to arrive whole and its answer to leave
# accept() failing for the one connection at the head of the queue: the next may be fine.
_LOST_CONNECTION_ERRORS = frozenset({errno.ECONNABORTED, errno.EPROTO, errno.EPERM,
                                     errno.EINTR})


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


def _read_line(conn: socket.socket, deadline: float | None = None) -> bytes:
    """One line from `conn`; with a `deadline` (time.monotonic()), the whole line must come
    by then (socket.timeout otherwise): a peer that trickles bytes holds nothing for long."""
    data = b""
    while b"\n" not in data:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise socket.timeout("request not complete in time")
            conn.settimeout(left)
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


Handler = Callable[[dict, int], dict]  # (request, the peer's uid) -> answer
Credentials = Callable[[socket.socket], tuple[int, int, int]]  # -> (pid, uid, gid)


class ControlServer:
    """The listening side; `handler(request, uid) -> answer` runs on a short-lived thread,
    at most MAX_CONNECTIONS at once; `credentials(conn)` gives the peer's (pid, uid, gid)
    (SO_PEERCRED)."""

    def __init__(self, directory: Path, handler: Handler, credentials: Credentials,
                 max_connections: int = MAX_CONNECTIONS) -> None:
        self.path = ctl_path(directory)
        self._handler = handler
        self._credentials = credentials
        self._sock: socket.socket | None = None
        self.max_connections = max_connections
        self._slots = threading.BoundedSemaphore(max_connections)
        self.refused_busy = 0  # connections answered `busy` (the cap), since the start

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

    def accept(self) -> int:
        """Take the pending connections (call when the socket is readable); how many were
        taken. OSError when accept() fails for want of a resource (EMFILE, ENFILE, ENOBUFS,
        ENOMEM, ...): it would fail again at once, so the caller stops polling the socket
        for a while; a failure of one connection alone (ECONNABORTED, ...) is skipped."""
        taken = 0
        while True:
            try:
                conn, _ = self._sock.accept()
            except (BlockingIOError, InterruptedError):
                return taken
            except OSError as exc:
                if exc.errno in _LOST_CONNECTION_ERRORS:
                    log.debug("control socket: accept: %s (that connection is lost)", exc)
                    continue
                raise
            taken += 1
            if not self._slots.acquire(blocking=False):
                self._refuse_busy(conn)
                continue
            try:
                threading.Thread(target=self._serve, args=(conn,), name="devmgr-ctl",
                                 daemon=True).start()
            except RuntimeError as exc:  # can't start new thread: as busy
                self._slots.release()
                log.warning("control socket: cannot serve a request (%s)", exc)
                self._refuse_busy(conn)

    def _refuse_busy(self, conn: socket.socket) -> None:
        """Answer `busy` without a thread (never blocking the caller's loop) and close."""
        self.refused_busy += 1
        if self.refused_busy == 1 or self.refused_busy % 1000 == 0:
            log.warning("control socket: %d request(s) at once, the limit: refused one "
                        "(%d refused since the start)", self.max_connections, self.refused_busy)
        answer = {"ok": False, "code": "busy",
                  "error": f"the device manager serves {self.max_connections} control "
                           f"requests at once: try again"}
        with conn:
            conn.setblocking(False)
            try:
                conn.send(json.dumps(answer).encode() + b"\n")
            except OSError:
                pass

    def _serve(self, conn: socket.socket) -> None:
        try:
            with conn:
                conn.setblocking(True)
                deadline = time.monotonic() + REQUEST_TIMEOUT
                try:
                    _, uid, _ = self._credentials(conn)
                    line = _read_line(conn, deadline)
                    try:
                        message = json.loads(line)
                        if not isinstance(message, dict):
                            raise ValueError("not an object")
                    except (ValueError, RecursionError) as exc:
                        answer = {"ok": False, "error": f"bad request: {exc}",
                                  "code": "bad-request"}
                    else:
                        try:
                            answer = self._handler(message, uid)
                        except Exception as exc:  # never let one request take the daemon down
                            log.exception("control request %r failed", message)
                            answer = {"ok": False, "error": str(exc)}
                    conn.settimeout(max(0.1, deadline - time.monotonic()))
                    conn.sendall(json.dumps(answer).encode() + b"\n")
                except (OSError, ValueError) as exc:
                    log.debug("control connection: %s", exc)
        finally:
            self._slots.release()

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
