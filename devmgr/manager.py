"""The device manager (`DeviceManager`): its drivers' supervisors (supervisor.py), the
configuration applied and re-read, the operator's control socket, systemd notify.

Signals: SIGTERM / SIGINT stop every driver (SIGTERM, `stop_timeout`, then SIGKILL) and
exit 0. SIGHUP re-reads the configuration and applies the difference: added drivers are
started, removed ones stopped, ones whose kind or options changed restarted, a change of
restart policy alone is applied in place; unchanged running drivers are not touched. A
configuration that does not parse is refused and the running one kept.

systemd: with `NOTIFY_SOCKET` set it sends READY=1 once every driver has settled (ready, or
failed), STATUS= lines, WATCHDOG=1 every WATCHDOG_USEC/2, RELOADING=1 ... READY=1 around a
reload and STOPPING=1.

State for the `nnrt` command: the control socket `devmgr.ctl` (common/devmgr_ctl.py).
"""

from __future__ import annotations

import errno
import logging
import os
import selectors
import signal
import socket
import threading
import time
from pathlib import Path

from nnrt.devmgr.config import (
    Config,
    ConfigError,
    Settings,
    default_config_path,
    load_config,
)
from nnrt.common.devmgr_ctl import ControlServer, DevmgrAlreadyRunning, DriverState, ManagerState
from nnrt.server.sd_notify import Notifier
from nnrt.server.channel_connection import peer_credentials
from nnrt.server.channel_server import ACCEPT_BACKOFF_INITIAL, ACCEPT_BACKOFF_MAX
from nnrt.common.runtime_dir import ENV as RUNTIME_DIR_ENV

from .probes import MARKER_ENV
from .states import SETTLED, STATES
from .supervisor import DriverSupervisor

log = logging.getLogger("nnrt.devmgr")

CONTROL_COMMANDS = ("stop", "start", "restart")  # the operator's, on the control socket
# Environment a driver must not inherit: it belongs to the device manager's own service.
_PRIVATE_ENV = ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_FDS", "LISTEN_PID",
                "LISTEN_FDNAMES")


class DeviceManager:
    def __init__(self, config_path: Path | None, directory: Path,
                 notifier: Notifier | None = None, explicit_config: bool = True) -> None:
        self.config_path = config_path
        self._explicit_config = explicit_config
        self.runtime_dir = Path(directory).absolute()
        self.notifier = notifier or Notifier({})
        self.config: Config | None = None
        self.state = ManagerState.STARTING
        self._started = time.monotonic()
        self._lock = threading.Lock()
        self._supervisors: dict[str, DriverSupervisor] = {}
        self._retiring: list[DriverSupervisor] = []
        self._wake_r, self._wake_w = socket.socketpair()
        for end in (self._wake_r, self._wake_w):
            end.setblocking(False)
        self._stop_requested = False
        self._reload_requested = False
        self._ready_sent = False
        self._last_status = ""
        self._ctl = ControlServer(self.runtime_dir, self._handle_request, peer_credentials)
        self._ctl_failures = 0  # failed accept() calls on the control socket in a row
        self._ctl_failing_since = 0.0
        self._ctl_resume: float | None = None  # when the control socket is polled again
        self._refusals = 0  # control commands refused for their uid (the log says the first)
        # The drivers' lifeline: they inherit the read end; the write end is ours alone
        # (non-inheritable), so it closes exactly when this process ends.
        self._lifeline_r, self._lifeline_w = os.pipe()

    @property
    def lifeline_fd(self) -> int:
        return self._lifeline_r

    @property
    def settings(self) -> Settings:
        return self.config.settings if self.config is not None else Settings()

    def child_env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in _PRIVATE_ENV}
        env[RUNTIME_DIR_ENV] = str(self.runtime_dir)
        env[MARKER_ENV] = str(self.runtime_dir)  # how a successor knows our leftovers
        return env

    def wake(self) -> None:
        try:
            self._wake_w.send(b"\0")
        except (BlockingIOError, OSError):
            pass  # already awake (buffer full) or shutting down

    # -- lifecycle -----------------------------------------------------------------------

    def run(self) -> int:
        try:
            config = load_config(self.config_path)
        except ConfigError as exc:
            log.error("bad configuration: %s", exc)
            return 1
        try:
            self._ctl.claim()
        except DevmgrAlreadyRunning as exc:
            log.error("%s", exc)
            return 3
        except OSError as exc:
            log.error("cannot open the control socket %s: %s", self._ctl.path, exc)
            return 1
        previous = {}
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            previous[signum] = signal.signal(signum, self._on_signal)
        old_wakeup = signal.set_wakeup_fd(self._wake_w.fileno(), warn_on_full_buffer=False)
        try:
            log.info("device manager pid %d: runtime dir %s, config %s, %d driver(s)",
                     os.getpid(), self.runtime_dir, config.source, len(config.drivers))
            self._apply(config)
            self.state = ManagerState.RUNNING
            self._loop()
        finally:
            self._shutdown()
            signal.set_wakeup_fd(old_wakeup)
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        return 0

    def _on_signal(self, signum: int, _frame) -> None:
        if signum == signal.SIGHUP:
            self._reload_requested = True
        else:
            self._stop_requested = True

    def _loop(self) -> None:
        selector = selectors.DefaultSelector()
        selector.register(self._wake_r, selectors.EVENT_READ, "wake")
        selector.register(self._ctl, selectors.EVENT_READ, "ctl")
        interval = self.notifier.watchdog_interval
        next_watchdog = time.monotonic()
        try:
            while True:
                timeout = 1.0
                if interval is not None:
                    timeout = max(0.0, min(timeout, next_watchdog - time.monotonic()))
                if self._ctl_resume is not None:
                    timeout = max(0.0, min(timeout, self._ctl_resume - time.monotonic()))
                for key, _ in selector.select(timeout):
                    if key.data == "wake":
                        try:
                            while self._wake_r.recv(4096):
                                pass
                        except (BlockingIOError, InterruptedError):
                            pass
                    else:
                        self._accept_control(selector)
                if self._ctl_resume is not None and time.monotonic() >= self._ctl_resume:
                    self._ctl_resume = None
                    selector.register(self._ctl, selectors.EVENT_READ, "ctl")
                if self._stop_requested:
                    log.info("stop requested")
                    return
                if self._reload_requested:
                    self._reload_requested = False
                    self._reload()
                self._report()
                if interval is not None and time.monotonic() >= next_watchdog:
                    self.notifier.send("WATCHDOG=1")
                    next_watchdog = time.monotonic() + interval
        finally:
            selector.close()

    def _accept_control(self, selector: selectors.BaseSelector) -> None:
        """Serve the control socket's pending connections. When accept() fails for want of a
        resource (EMFILE at the fd limit, ...) it fails again at once and a level-triggered
        selector would spin on it: the socket is not polled for a backoff (10 ms doubling
        to 1 s, as the drivers' session channel, server/channel_server.py), the episode logged once
        and at recovery; clients wait in the listen queue meanwhile."""
        try:
            taken = self._ctl.accept()
        except OSError as exc:
            now = time.monotonic()
            if not self._ctl_failures:
                self._ctl_failing_since = now
                log.error("control socket: accept() failed: %s%s; retrying every %.2f-%.1f s",
                          exc, " (the fd limit: raise LimitNOFILE=)"
                          if exc.errno in (errno.EMFILE, errno.ENFILE) else "",
                          ACCEPT_BACKOFF_INITIAL, ACCEPT_BACKOFF_MAX)
            self._ctl_failures += 1
            selector.unregister(self._ctl)
            self._ctl_resume = now + min(ACCEPT_BACKOFF_MAX, ACCEPT_BACKOFF_INITIAL
                                         * 2 ** min(self._ctl_failures - 1, 20))
            return
        if taken and self._ctl_failures:
            log.warning("control socket: accepting again after %d failed accept() calls over "
                        "%.2f s", self._ctl_failures, time.monotonic() - self._ctl_failing_since)
            self._ctl_failures = 0

    def _shutdown(self) -> None:
        self.state = ManagerState.STOPPING
        self.notifier.send("STOPPING=1", "STATUS=stopping the drivers")
        with self._lock:
            supervisors = [*self._supervisors.values(), *self._retiring]
        running = [s for s in supervisors if not s.finished]
        if running:
            log.info("stopping %d driver(s)", len(running))
        for supervisor in supervisors:
            supervisor.stop()
        deadline = time.monotonic() + self.settings.stop_timeout + 10
        for supervisor in supervisors:
            if not supervisor.join(max(deadline - time.monotonic(), 0.0)):
                log.error("driver %s: did not stop in time: SIGKILL", supervisor.name)
                supervisor.kill_now()
                supervisor.join(5)
        self._ctl.close()
        for fd in (self._lifeline_r, self._lifeline_w):
            os.close(fd)
        self.state = ManagerState.STOPPED
        log.info("device manager stopped")

    # -- configuration -------------------------------------------------------------------

    def _apply(self, config: Config) -> None:
        """Make the running drivers those of `config`, touching only what changed."""
        added, removed, changed, retried, unchanged, held = [], [], [], [], [], []
        with self._lock:
            old = self._supervisors
            wanted = {spec.name for spec in config.drivers}
            for name, supervisor in old.items():
                if name not in wanted:
                    supervisor.stop()
                    self._retiring.append(supervisor)
                    removed.append(name)
            current: dict[str, DriverSupervisor] = {}
            self.config = config  # settings first: new supervisors read them
            for spec in config.drivers:
                supervisor = old.get(spec.name)
                if supervisor is None:
                    current[spec.name] = DriverSupervisor(self, spec)
                    added.append(spec.name)
                elif supervisor.operator_stopped:  # stays stopped; `start` uses the new spec
                    if supervisor.spec != spec:
                        supervisor.update_spec(spec)
                    current[spec.name] = supervisor
                    held.append(spec.name)
                elif not supervisor.spec.same_process(spec):
                    supervisor.stop()
                    self._retiring.append(supervisor)
                    current[spec.name] = DriverSupervisor(self, spec, predecessor=supervisor)
                    changed.append(spec.name)
                elif supervisor.finished:  # failed or stopped for good: a fresh start
                    current[spec.name] = DriverSupervisor(self, spec, predecessor=supervisor)
                    retried.append(spec.name)
                else:
                    if supervisor.spec != spec:
                        supervisor.update_spec(spec)  # restart policy only
                    current[spec.name] = supervisor
                    unchanged.append(spec.name)
            self._supervisors = current
            self._retiring = [s for s in self._retiring if not s.finished]
        for name in (*added, *changed, *retried):
            current[name].start()
        if old:
            log.info("configuration applied: added %s; removed %s; restarted (changed) %s; "
                     "retried (failed/stopped) %s; unchanged %s; kept stopped (nnrt devmgr "
                     "stop) %s", *(", ".join(names) or "none" for names in
                                   (added, removed, changed, retried, unchanged, held)))

    def _reload(self) -> None:
        path = self.config_path if self._explicit_config else default_config_path()
        log.info("SIGHUP: reloading %s", path or "(built-in default)")
        self.state = "reloading"
        now_usec = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
        self.notifier.send("RELOADING=1", f"MONOTONIC_USEC={now_usec}",
                           "STATUS=reloading the configuration")
        try:
            config = load_config(path)
        except ConfigError as exc:
            log.error("reload refused, the running configuration stays: %s", exc)
        else:
            self.config_path = path
            self._apply(config)
        self.state = ManagerState.RUNNING
        self._last_status = ""
        self._report()
        self.notifier.send("READY=1")

    # -- the operator's commands (control socket) ----------------------------------------

    def control(self, command: str, name: str) -> dict:
        """`stop`, `start` or `restart` the driver `name` (common/devmgr_ctl.py). Answers at
        once; the state in the status shows how it goes. Unknown name: code unknown-driver.

        stop: the driver is stopped (SIGTERM, `stop_timeout`, SIGKILL; its spare let go)
        and stays stopped — not restarted by supervision nor by a reload — until started.
        start: a stopped or failed driver (or one waiting in backoff) gets a fresh start at
        once, its failures forgotten; a running one is left as it is. restart: stop + start,
        whatever its state, with the backoff reset; counted in its restarts."""
        with self._lock:
            if self.state in (ManagerState.STOPPING, ManagerState.STOPPED):
                return {"ok": False, "error": "the device manager is stopping",
                        "code": "stopping"}
            supervisor = self._supervisors.get(name)
            if supervisor is None:
                known = ", ".join(sorted(self._supervisors)) or "none"
                return {"ok": False, "code": "unknown-driver",
                        "error": f"no driver {name!r} in the device manager's configuration "
                                 f"(known: {known})"}
            fresh = None
            if command == "stop":
                reason = "stopped by nnrt devmgr stop"
                if supervisor.finished:
                    message = "already stopped" if supervisor.state == DriverState.STOPPED else \
                        f"was {supervisor.state}: now stopped"
                    supervisor.hold_stopped(reason)
                else:
                    message = "stopping"
                    supervisor.operator_stopped = True
                    supervisor.stop(reason)
            elif (command == "start" and not supervisor.finished and not supervisor.stopping
                  and supervisor.state in (DriverState.STARTING, DriverState.READY)):
                message = f"already running ({supervisor.state})"
            else:
                if not supervisor.finished:
                    supervisor.stop()
                    self._retiring.append(supervisor)
                fresh = DriverSupervisor(self, supervisor.spec, predecessor=supervisor,
                                         carry=True)
                if command == "restart":
                    fresh.restarts += 1
                self._supervisors[name] = fresh
                message = "restarting" if command == "restart" else "starting"
        if fresh is not None:
            fresh.start()
        log.info("driver %s: %s asked on the control socket: %s", name, command, message)
        target = fresh or supervisor
        return {"ok": True, "driver": target.snapshot(), "message": message}

    # -- reporting -----------------------------------------------------------------------

    def snapshots(self) -> list[dict]:
        with self._lock:
            supervisors = list(self._supervisors.values())
        return [s.snapshot() for s in supervisors]

    def _status_line(self, drivers: list[dict]) -> str:
        if not drivers:
            return "no drivers configured"
        counts = {state: sum(d["state"] == state for d in drivers) for state in STATES}
        parts = [f"{n} {state}" for state, n in counts.items() if n]
        failed = [d["name"] for d in drivers if d["state"] == "failed"]
        line = f"{len(drivers)} driver(s): {', '.join(parts)}"
        return line + (f" (failed: {', '.join(failed)})" if failed else "")

    def _report(self) -> None:
        drivers = self.snapshots()
        status = self._status_line(drivers)
        settled = all(d["state"] in SETTLED for d in drivers)
        if not self._ready_sent and settled:
            self._ready_sent = True
            self._last_status = status
            log.info("all drivers settled: %s", status)
            self.notifier.send("READY=1", f"STATUS={status}")
        elif status != self._last_status:
            self._last_status = status
            self.notifier.send(f"STATUS={status}")

    def may_control(self, uid: int) -> bool:
        """Whether a peer of `uid` may stop, start or restart drivers: root and the device
        manager's own user (its drivers run as that user). `status` is open to whoever may
        connect to the control socket (0660: the group)."""
        return uid in (0, os.geteuid())

    def _handle_request(self, request: dict, uid: int) -> dict:
        command = request.get("cmd")
        if command in CONTROL_COMMANDS and not self.may_control(uid):
            self._refusals += 1
            if self._refusals == 1 or self._refusals % 100 == 0:  # a flood is one line in 100
                log.warning("control socket: %s refused for uid %d: only root and uid %d may "
                            "stop, start or restart drivers (%d refused since the start)",
                            command, uid, os.geteuid(), self._refusals)
            return {"ok": False, "code": "not-permitted",
                    "error": f"uid {uid} may not {command} drivers: only root and the device "
                             f"manager's user (uid {os.geteuid()}) may; status is open to "
                             f"the group"}
        if command in CONTROL_COMMANDS:
            name = request.get("driver")
            if not isinstance(name, str) or not name:
                return {"ok": False, "error": f"{command}: needs a driver name ('driver')",
                        "code": "bad-request"}
            return self.control(command, name)
        if command != "status":
            return {"ok": False, "error": f"unknown command {command!r} (known: status, "
                                          f"{', '.join(CONTROL_COMMANDS)})",
                    "code": "bad-request"}
        drivers = self.snapshots()
        config = self.config
        return {
            "ok": True,
            "devmgr": {
                "pid": os.getpid(),
                "uptime": round(time.monotonic() - self._started, 3),
                "state": self.state,
                "config": config.source if config is not None else None,
                "runtime_dir": str(self.runtime_dir),
                "status": self._status_line(drivers),
            },
            "drivers": drivers,
        }
