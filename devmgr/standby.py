"""Warm standby (`standby = true` on a driver): once the live driver is ready, the supervisor
starts a spare, the same command line plus `--standby-fd N` (one end of a socketpair),
which imports everything and creates its device, says b"R" and waits without claiming any
socket (server/main.py). A driver's exit is seen at once (a pidfd in the watch loop, not a
poll); when the restart policy restarts it, a live spare gets b"G" *instead of the backoff
and the cold start*: it claims the dead driver's stale sockets and serves under the same
name and kind, so clients see the same device ID. The failure still counts toward the
crash-loop limit (a driver that keeps dying is failed, spare or not; failed or stopped, the
spare is let go). A new spare is started once the promoted one is ready, so the two never
compete for the CPU while clients reconnect. A spare is let go by closing our end (its EOF:
exit 0; SIGTERM, then SIGKILL after `stop_timeout` if it does not go); a spare that dies on
its own is replaced after the driver's backoff. Spares hold the lifeline like every driver
and die with the device manager twice over (the lifeline, and the EOF of the standby
socket, whose other end only we hold); they hold no socket, so a successor's leftover
takeover, which looks for socket holders, never meets one.
"""

from __future__ import annotations

import logging
import signal
import socket
import subprocess
import threading
import time
from typing import TYPE_CHECKING

from nnrt.common.devmgr_cli import CHILD_CWD
from nnrt.common.devmgr_ctl import describe_exit

if TYPE_CHECKING:
    from .manager import DeviceManager
    from .supervisor import DriverSupervisor

log = logging.getLogger("nnrt.devmgr")


class Standby:
    """The warm spare of one driver: owned by its DriverSupervisor and tended from its
    thread; the status reads it under the supervisor's lock, which it shares."""

    def __init__(self, supervisor: DriverSupervisor, lock: threading.Lock) -> None:
        self._supervisor = supervisor
        self._lock = lock
        # The spare: process, our end of its standby socket, whether it said ready, when it
        # started, its failures in a row and when the next may start.
        self._proc: subprocess.Popen | None = None
        self._sock: socket.socket | None = None
        self._ready = False
        self._started_at = 0.0
        self._failures = 0
        self._next_at = 0.0

    @property
    def name(self) -> str:
        return self._supervisor.name

    @property
    def manager(self) -> DeviceManager:
        return self._supervisor.manager

    @property
    def process(self) -> subprocess.Popen | None:
        """The spare's process, None when there is none (for the last-resort SIGKILL)."""
        return self._proc

    def snapshot(self) -> dict | None:
        """The spare, for the status (under the lock): None when standby is off."""
        if not self._supervisor.spec.standby:
            return None
        spare = self._proc
        alive = spare is not None and spare.poll() is None
        return {"pid": spare.pid if alive else None,
                "state": ("ready" if self._ready else "loading") if alive else "none"}

    def alive(self) -> bool:
        spare = self._proc
        return spare is not None and spare.poll() is None

    def tend(self) -> None:
        """Called from the watch loop of a ready driver: start a spare when standby is on
        and none runs (after the backoff of failed spares), note when it says ready, notice
        one that died, let one go when standby was turned off by a reload."""
        spec = self._supervisor.spec
        if not spec.standby or spec.policy.restart == "never":
            if self._proc is not None:  # a reload turned it off (a spare never promoted)
                self.stop("standby turned off")
            return
        spare = self._proc
        now = time.monotonic()
        if spare is not None:
            code = spare.poll()
            if code is not None:
                self._forget()
                self._failures += 1
                delay = spec.policy.delay(self._failures)
                self._next_at = now + delay
                log.warning("driver %s: spare pid %d exited with %s before taking over; a new "
                            "one in %.2f s", self.name, spare.pid, describe_exit(code), delay)
                self.manager.wake()
                return
            if not self._ready:
                try:
                    said = self._sock.recv(16)
                except (BlockingIOError, InterruptedError):
                    return
                except OSError:
                    said = b""
                if said.startswith(b"R"):
                    with self._lock:
                        self._ready = True
                    self._failures = 0
                    log.info("driver %s: spare pid %d ready to take over (loaded in %.2f s)",
                             self.name, spare.pid, now - self._started_at)
                    self.manager.wake()
            return
        if now >= self._next_at:
            self._start()

    def _start(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        lifeline = self.manager.lifeline_fd
        argv = [*self._supervisor.driver_argv(),
                "--lifeline-fd", str(lifeline), "--standby-fd", str(theirs.fileno())]
        try:
            spare = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                     env=self.manager.child_env(), start_new_session=True,
                                     pass_fds=(lifeline, theirs.fileno()), cwd=CHILD_CWD)
        except OSError as exc:
            ours.close()
            self._failures += 1
            self._next_at = time.monotonic() + self._supervisor.spec.policy.delay(self._failures)
            log.error("driver %s: cannot start a spare: %s", self.name, exc)
            return
        finally:
            theirs.close()  # the spare's end lives in the spare alone: its EOF is ours closing
        ours.setblocking(False)
        with self._lock:
            self._proc, self._sock, self._ready = spare, ours, False
        self._started_at = time.monotonic()
        log.info("driver %s: spare started, pid %d", self.name, spare.pid)
        self.manager.wake()

    def _forget(self) -> subprocess.Popen | None:
        with self._lock:
            spare, sock = self._proc, self._sock
            self._proc, self._sock, self._ready = None, None, False
        if sock is not None:
            sock.close()
        return spare

    def promote(self) -> subprocess.Popen | None:
        """Tell a live spare to take over: it becomes the driver process (None: no spare,
        or it could not be told, and a cold start follows)."""
        with self._lock:
            spare, sock, ready = self._proc, self._sock, self._ready
        if spare is None or sock is None:
            return None
        try:
            sock.setblocking(True)
            sock.settimeout(1.0)
            sock.sendall(b"G")
        except OSError as exc:
            log.warning("driver %s: spare pid %d cannot be told to take over (%s): a cold "
                        "start instead", self.name, spare.pid, exc)
            self._reap(self._forget(), "it failed")
            return None
        self._forget()  # closing our end is harmless now: it stopped listening on it
        with self._lock:
            self._supervisor.takeovers += 1
        log.warning("driver %s: spare pid %d takes over (%s)", self.name, spare.pid,
                    "loaded" if ready else "still loading")
        return spare

    def stop(self, why: str) -> None:
        """Let the spare go: EOF on its standby socket makes it exit 0."""
        spare = self._forget()
        if spare is not None:
            log.info("driver %s: letting spare pid %d go (%s)", self.name, spare.pid, why)
            self._reap(spare, why)
        self._failures = 0
        self._next_at = 0.0

    def _reap(self, spare: subprocess.Popen | None, why: str) -> None:
        """Wait for a spare that was let go; SIGTERM, then SIGKILL, if it lingers."""
        if spare is None:
            return
        timeout = self.manager.settings.stop_timeout
        for sig in (None, signal.SIGTERM, signal.SIGKILL):
            if sig is not None:
                log.warning("driver %s: spare pid %d still running: %s", self.name, spare.pid,
                            signal.Signals(sig).name)
                try:
                    spare.send_signal(sig)
                except ProcessLookupError:
                    pass
            try:
                spare.wait(timeout if sig != signal.SIGKILL else 10)
                return
            except subprocess.TimeoutExpired:
                continue
        log.error("driver %s: spare pid %d survives SIGKILL", self.name, spare.pid)
