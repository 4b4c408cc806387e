"""`nnrt devmgr`: the device manager, a supervisor that runs the configured drivers.

    nnrt devmgr                                   # /etc/nnrt/devmgr.toml, else one cpu driver
    nnrt devmgr --config deploy/devmgr.toml --runtime-dir /tmp/rt

Each configured driver (server/devmgr_config.py) runs as its own process,
`python -P -m nnrt.server <kind> --name <name> --runtime-dir <dir> <options>` started in `/`
(nothing of the device manager's working directory on its `sys.path`), in its own
session (terminal signals reach only the device manager), watched by one thread:

* started, then ready once `grpc.health.v1` answers SERVING (bounded by `ready_timeout`);
* probed every `probe_interval`; `probe_failures` probes in a row unanswered within
  `probe_timeout` (or not SERVING): the driver is wedged, it is SIGKILLed and restarted;
* a driver that exits is restarted as its restart policy says (`always`, `on-failure`,
  `never`), after `backoff_initial * 2^(n-1)` seconds (at most `backoff_max`), n being its
  failures within `crash_loop_window`; at `crash_loop_failures` failures within the window
  it is marked **failed**; after `failed_retry_after` seconds of rest it gets a fresh start
  (a reload gives one at once; 0: failed until then). `crash_loop_failures = 0`: no limit.
  A driver `ready` for `backoff_reset_after` seconds has its failures forgotten: the next
  crash restarts it after `backoff_initial` again.

Drivers die with the device manager: each inherits the read end of one lifeline pipe
(`nnrt-driver --lifeline-fd`) whose write end only the device manager holds; when it dies,
however (SIGKILL included), the kernel closes that end and every driver stops as at SIGTERM.
A pipe rather than PR_SET_PDEATHSIG: that signal follows the forking *thread*, and a
`preexec_fn` in a threaded parent may deadlock. Drivers carry `NNRT_DEVMGR_DIR=<runtime
dir>` in their environment; before starting a driver, the device manager looks for a
process holding that driver's sockets (/proc/net/unix, then /proc/*/fd): one carrying our
runtime directory that is not our child is a leftover of a dead device manager (in its
graceful stop, or one that never read its lifeline) and is stopped (SIGTERM + SIGCONT,
`stop_timeout`, SIGKILL) so that ours can take the name; another process (a driver started
by hand) is left alone, and ours exits 3 as before.

The status never shows `ready` (or a pid) for a process that is gone: the state changes in
the same step that forgets the process, and a snapshot checks the process it reports.

Warm standby (`standby = true` on a driver): once the live driver is ready, the supervisor
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

Signals: SIGTERM / SIGINT stop every driver (SIGTERM, `stop_timeout`, then SIGKILL) and
exit 0. SIGHUP re-reads the configuration and applies the difference: added drivers are
started, removed ones stopped, ones whose kind or options changed restarted, a change of
restart policy alone is applied in place; unchanged running drivers are not touched. A
configuration that does not parse is refused and the running one kept.

systemd: with `NOTIFY_SOCKET` set it sends READY=1 once every driver has settled (ready, or
failed), STATUS= lines, WATCHDOG=1 every WATCHDOG_USEC/2, RELOADING=1 ... READY=1 around a
reload and STOPPING=1. Logs go to stderr, one line per event; when stderr is the journal
(`JOURNAL_STREAM`) lines carry a `<N>` syslog priority and no timestamp.

State for the `nnrt` command: the control socket `devmgr.ctl` (common/devmgr_ctl.py).
Exit codes: 0 clean stop, 1 failed to start (bad configuration, ...), 2 bad usage,
3 another device manager already runs in the runtime directory.
"""

from __future__ import annotations

import argparse
import errno
import logging
import os
import select
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from pathlib import Path

import grpc
from google.protobuf import empty_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from nnrt.protos import admin_pb2_grpc, hdi_pb2_grpc
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.server.devmgr_config import (
    Config,
    ConfigError,
    DriverSpec,
    Settings,
    default_config_path,
    load_config,
)
from nnrt.common.devmgr_cli import CHILD_CWD, add_arguments, module_argv
from nnrt.common.devmgr_ctl import (ControlServer, DevmgrAlreadyRunning, DriverState, ManagerState,
                                     describe_exit)
from nnrt.server.sd_notify import Notifier
from nnrt.server.journal import JournalFormatter, stderr_is_journal
from nnrt.server.sessions import ACCEPT_BACKOFF_INITIAL, ACCEPT_BACKOFF_MAX, peer_credentials
from nnrt.common.runtime_dir import ENV as RUNTIME_DIR_ENV
from nnrt.common.runtime_dir import (
    admin_metadata,
    admin_token_path,
    grpc_socket,
    lock_path,
    remove_stale_lock,
    runtime_dir,
    session_socket,
    stale_socket,
)

log = logging.getLogger("nnrt.devmgr")

STATES = tuple(DriverState)
CONTROL_COMMANDS = ("stop", "start", "restart")  # the operator's, on the control socket
SETTLED = (DriverState.READY, DriverState.FAILED, DriverState.STOPPED)
POLL_INTERVAL = 0.05
# Environment a driver must not inherit: it belongs to the device manager's own service.
_PRIVATE_ENV = ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_FDS", "LISTEN_PID",
                "LISTEN_FDNAMES")
_EMPTY = empty_pb2.Empty()
MARKER_ENV = "NNRT_DEVMGR_DIR"  # in a driver's environment: the runtime dir of its devmgr


def health_status(path: Path, timeout: float = 1.0) -> int | None:
    """The grpc.health.v1 status of the server on `path`, None when it does not answer."""
    if not Path(path).exists():
        return None
    with grpc.insecure_channel(f"unix:{path}") as channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=""), timeout=timeout)
        except grpc.RpcError:
            return None
    return reply.status


def device_identity(path: Path, timeout: float) -> dict | None:
    """What the driver on `path` says it is (queries that need no session), None if it
    does not answer them."""
    try:
        with grpc.insecure_channel(f"unix:{path}") as channel:
            stub = hdi_pb2_grpc.INnrtDeviceStub(channel)
            name = stub.GetDeviceName(_EMPTY, timeout=timeout)
            vendor = stub.GetVendorName(_EMPTY, timeout=timeout)
            version = stub.GetVersion(_EMPTY, timeout=timeout)
            kind = stub.GetDeviceType(_EMPTY, timeout=timeout)
    except grpc.RpcError:
        return None
    if name.returnCode or vendor.returnCode or version.returnCode:
        return None
    return {
        "device_name": name.name,
        "vendor": vendor.name,
        "version": [version.major, version.minor],
        "device_type": ht.DeviceType.Name(kind.deviceType)
        if kind.returnCode == 0 and kind.deviceType in ht.DeviceType.values() else None,
    }


def served_by(directory: Path, name: str, pid: int, timeout: float = 1.0) -> bool:
    """False when the admin service of driver `name` says another process serves it (a
    driver started some other way holds the name: ours is about to exit 3); True when it
    says `pid`, or has no admin service to ask."""
    try:
        with grpc.insecure_channel(f"unix:{grpc_socket(directory, name)}") as channel:
            reply = admin_pb2_grpc.NnrtAdminStub(channel).GetStatus(
                _EMPTY, timeout=timeout, metadata=admin_metadata(directory, name))
    except grpc.RpcError as exc:
        return exc.code() == grpc.StatusCode.UNIMPLEMENTED
    return reply.returnCode != 0 or reply.pid in (0, pid)


def _remove_stale_sockets(directory: Path, name: str) -> None:
    """Remove a dead driver's sockets, admin token and name lock file (never those of a
    live driver: the token goes only with a stale gRPC socket, or with none left)."""
    remove_stale_lock(lock_path(directory, name))
    grpc_path = grpc_socket(directory, name)
    for path, kind in ((grpc_path, socket.SOCK_STREAM),
                       (session_socket(directory, name), socket.SOCK_SEQPACKET)):
        if not path.exists():
            continue
        try:
            stale = stale_socket(path, kind, 0.5)
        except OSError:
            continue  # cannot tell: leave it
        if stale:
            path.unlink(missing_ok=True)
    if not grpc_path.exists():
        admin_token_path(directory, name).unlink(missing_ok=True)


def socket_holders(paths: list[Path]) -> set[int]:
    """Pids of the processes holding a unix socket bound to one of `paths` (the listener or
    connections it accepted): /proc/net/unix gives the sockets' inodes, /proc/*/fd who holds
    them. Processes we may not inspect are skipped."""
    wanted = {str(p) for p in paths}
    inodes: set[str] = set()
    try:
        with open("/proc/net/unix") as table:
            next(table, None)
            for line in table:
                fields = line.split()
                if len(fields) >= 8 and fields[7] in wanted:
                    inodes.add(f"socket:[{fields[6]}]")
    except OSError:
        return set()
    holders: set[int] = set()
    if not inodes:
        return holders
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            for fd in os.scandir(f"/proc/{entry.name}/fd"):
                try:
                    if os.readlink(fd.path) in inodes:
                        holders.add(int(entry.name))
                        break
                except OSError:
                    continue
        except OSError:
            continue
    return holders


def _proc_info(pid: int) -> tuple[int, str, dict[str, str]] | None:
    """(ppid, state, environment) of `pid`, None when it is gone or not ours to read."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except (OSError, IndexError):
        return None
    environ = dict(item.split("=", 1) for item in raw.decode(errors="replace").split("\0")
                   if "=" in item)
    return int(stat[1]), stat[0], environ


def _gone(pid: int) -> bool:
    info = _proc_info(pid)
    return info is None or info[1] in ("Z", "X")


# -- systemd ------------------------------------------------------------------------------


def setup_logging(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if stderr_is_journal():
        handler.setFormatter(JournalFormatter("%(message)s"))
    else:
        handler.setFormatter(
            logging.Formatter("%(asctime)s nnrt-devmgr %(levelname)s: %(message)s"))
    root = logging.getLogger()
    for old in root.handlers[:]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)


# -- one driver ----------------------------------------------------------------------------


class DriverSupervisor:
    """Runs one driver process and keeps it running, on a thread of its own."""

    def __init__(self, manager: DeviceManager, spec: DriverSpec,
                 predecessor: DriverSupervisor | None = None, carry: bool = False) -> None:
        self.manager = manager
        self.spec = spec
        self._predecessor = predecessor
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._proc: subprocess.Popen | None = None
        self.state = DriverState.STARTING
        self.restarts = 0
        self.last_exit: int | None = None
        self.reason = ""
        self.identity: dict | None = None
        self._started_at: float | None = None
        self._next_start_at: float | None = None
        self._failures: deque[float] = deque()
        self._pidfd: int | None = None  # of the live process: its exit wakes the watch loop
        # The warm spare (spec.standby): process, our end of its standby socket, whether it
        # said ready, when it started, its failures in a row and when the next may start.
        self._spare: subprocess.Popen | None = None
        self._spare_sock: socket.socket | None = None
        self._spare_ready = False
        self._spare_started_at = 0.0
        self._spare_failures = 0
        self._spare_next_at = 0.0
        self.takeovers = 0  # restarts done by promoting a spare
        # Stopped by the operator (`nnrt devmgr stop`): not started again by supervision nor
        # by a reload, until `nnrt devmgr start` / `restart`.
        self.operator_stopped = False
        self._stop_reason = ""
        if carry and predecessor is not None:  # an operator's start/restart: same counters
            self.restarts, self.takeovers = predecessor.restarts, predecessor.takeovers
            self.last_exit = predecessor.last_exit
        self._thread = threading.Thread(target=self._run, name=f"devmgr-{spec.name}", daemon=True)

    @property
    def name(self) -> str:
        return self.spec.name

    def start(self) -> None:
        self._thread.start()

    def stop(self, reason: str = "") -> None:
        """Ask the driver to stop (returns at once; `join` waits); `reason` is shown once it
        is stopped."""
        self._stop_reason = reason
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def hold_stopped(self, reason: str) -> None:
        """Mark a supervisor whose thread is not running (finished, or never started) as
        stopped by the operator."""
        with self._lock:
            self.operator_stopped = True
            self.state, self.reason, self._next_start_at = DriverState.STOPPED, reason, None
        self.manager.wake()

    def join(self, timeout: float) -> bool:
        if self._thread.ident is None:  # never started (held stopped): nothing to wait for
            return True
        self._thread.join(timeout)
        return not self._thread.is_alive()

    @property
    def finished(self) -> bool:
        return not self._thread.is_alive()

    def update_spec(self, spec: DriverSpec) -> None:
        with self._lock:
            self.spec = spec

    def kill_now(self) -> None:
        """Last resort at shutdown: SIGKILL the driver whatever its thread is doing."""
        for proc in (self._proc, self._spare):
            if proc is not None and proc.poll() is None:
                proc.kill()

    def snapshot(self) -> dict:
        with self._lock:
            now = time.monotonic()
            state = self.state
            # The process is checked, not assumed: one that died a moment ago (its thread
            # has not noticed yet) is neither ready nor shown with a pid.
            running = self._proc is not None \
                and state in (DriverState.STARTING, DriverState.READY) \
                and self._proc.poll() is None
            if state == DriverState.READY and not running:
                state = DriverState.BACKOFF
            return {
                "name": self.spec.name,
                "kind": self.spec.kind,
                "pid": self._proc.pid if running else None,
                "state": state,
                "restarts": self.restarts,
                "last_exit": self.last_exit,
                "uptime": round(now - self._started_at, 3)
                if running and self._started_at is not None else None,
                "reason": self.reason or None,
                "next_start_in": round(max(self._next_start_at - now, 0.0), 3)
                if state in (DriverState.BACKOFF, DriverState.FAILED)
                and self._next_start_at is not None else None,
                "failures": self._recent_failures(now),
                "restart_policy": self.spec.policy.restart,
                "identity": self.identity,
                "standby": self._standby_snapshot(),
                "takeovers": self.takeovers,
                "operator_stopped": self.operator_stopped,
            }

    def _standby_snapshot(self) -> dict | None:
        """The spare, for the status (under the lock): None when standby is off."""
        if not self.spec.standby:
            return None
        spare = self._spare
        alive = spare is not None and spare.poll() is None
        return {"pid": spare.pid if alive else None,
                "state": ("ready" if self._spare_ready else "loading") if alive else "none"}

    # -- the thread --------------------------------------------------------------------

    def _set(self, **changes) -> None:
        with self._lock:
            for key, value in changes.items():
                setattr(self, key, value)
        self.manager.wake()

    def _recent_failures(self, now: float) -> int:
        window = self.spec.policy.crash_loop_window
        while self._failures and self._failures[0] < now - window:
            self._failures.popleft()
        return len(self._failures)

    def _run(self) -> None:
        try:
            if self._predecessor is not None:  # the same sockets: wait until it let go
                self._predecessor.join(self.manager.settings.stop_timeout + 10)
                self._predecessor = None
            while not self._stop.is_set():
                try:
                    outcome = self._run_once()
                finally:
                    self._close_pidfd()
                if self._stop.is_set():
                    break
                delay = self._restart_delay(outcome)
                state = DriverState.BACKOFF
                if delay is not None and self._spare_alive():
                    with self._lock:
                        self.restarts += 1
                    continue  # the spare takes over at once: no backoff, no cold start
                if delay is None:
                    self._stop_spare("the driver is not restarted")
                    delay = self._cool_down()
                    if delay is None:
                        break
                    state = DriverState.FAILED
                with self._lock:
                    self._next_start_at = time.monotonic() + delay
                self._set(state=state)
                if self._stop.wait(delay):
                    break
                with self._lock:
                    self.restarts += 1
                    self._next_start_at = None
                    if state == DriverState.FAILED:
                        self._failures.clear()  # a fresh start, as after a reload
                if state == DriverState.FAILED:
                    log.warning("driver %s: %g s cool-down over: a fresh start", self.name,
                                delay)
        except Exception as exc:
            log.exception("driver %s: supervisor failed", self.name)
            self._set(state=DriverState.FAILED, reason=f"supervisor error: {exc}")
        finally:
            self._stop_spare("the device manager stops this driver")
            self._terminate()

    def _run_once(self) -> tuple[str, int | None]:
        """Start the driver and watch it until it exits, is killed, or a stop is asked:
        ("exited", code) / ("unhealthy", code) / ("not-ready", code) / ("spawn", None) /
        ("stop", None)."""
        spec, directory = self.spec, self.manager.runtime_dir
        argv = [*module_argv("nnrt.server"), spec.kind, "--name", spec.name,
                "--runtime-dir", str(directory), *spec.option_args()]
        self._set(state=DriverState.STARTING, identity=None)
        proc = self._promote_spare()
        if proc is None:
            self._take_over_leftovers()
            if self._stop.is_set():
                return ("stop", None)
            lifeline = self.manager.lifeline_fd
            argv += ["--lifeline-fd", str(lifeline)]
            try:
                proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                        env=self.manager.child_env(), start_new_session=True,
                                        pass_fds=(lifeline,), cwd=CHILD_CWD)
            except OSError as exc:
                log.error("driver %s: cannot start %s: %s", spec.name, argv[0], exc)
                self._set(reason=f"cannot start: {exc}")
                return ("spawn", None)
            log.info("driver %s (%s): started, pid %d", spec.name, spec.kind, proc.pid)
        with self._lock:
            self._proc = proc
            self._started_at = time.monotonic()
        self._open_pidfd(proc)
        grpc_path = grpc_socket(directory, spec.name)
        deadline = self._started_at + self.manager.settings.ready_timeout
        while True:
            if self._stop.is_set():
                return ("stop", None)
            code = proc.poll()
            if code is not None:
                return self._exited(code, "while starting")
            if health_status(grpc_path, timeout=min(1.0, self.manager.settings.ready_timeout)) \
                    == health_pb2.HealthCheckResponse.SERVING and \
                    served_by(directory, spec.name, proc.pid):
                break
            if time.monotonic() > deadline:
                log.error("driver %s: not ready within %g s: killing pid %d", spec.name,
                          self.manager.settings.ready_timeout, proc.pid)
                return ("not-ready", self._kill("not ready in time"))
            self._stop.wait(POLL_INTERVAL)
        identity = device_identity(grpc_path, timeout=self.manager.settings.probe_timeout)
        self._set(state=DriverState.READY, identity=identity, reason="")
        what = (f"{identity['device_name']}, vendor {identity['vendor']}, "
                f"HDI {identity['version'][0]}.{identity['version'][1]}") if identity else \
            "identity unknown"
        log.info("driver %s: ready in %.2f s, pid %d (%s)", spec.name,
                 time.monotonic() - self._started_at, proc.pid, what)
        misses = 0
        ready_at = time.monotonic()
        next_probe = ready_at + self.manager.settings.probe_interval
        while True:
            if self._pause():
                return ("stop", None)
            code = proc.poll()
            if code is not None:
                return self._exited(code, "")
            self._maybe_reset_backoff(ready_at)
            self._tend_spare()
            if time.monotonic() < next_probe:
                continue
            settings = self.manager.settings
            status = health_status(grpc_path, settings.probe_timeout)
            if status == health_pb2.HealthCheckResponse.SERVING:
                if misses:
                    log.info("driver %s: answering health probes again", spec.name)
                misses = 0
            elif proc.poll() is None:
                misses += 1
                said = "unanswered" if status is None else \
                    health_pb2.HealthCheckResponse.ServingStatus.Name(status)
                log.warning("driver %s: health probe failed: %s (%d of %d in a row)", spec.name,
                            said, misses, settings.probe_failures)
                if misses >= settings.probe_failures:
                    why = "not answering health probes" if status is None else \
                        f"health says {said}: see the driver's log for why"
                    log.error("driver %s: %s: killing pid %d", spec.name, why, proc.pid)
                    return ("unhealthy", self._kill(why))
            next_probe = time.monotonic() + settings.probe_interval

    # -- the live process's exit, seen at once ------------------------------------------

    def _open_pidfd(self, proc: subprocess.Popen) -> None:
        try:
            self._pidfd = os.pidfd_open(proc.pid)
        except (AttributeError, OSError):
            self._pidfd = None  # no pidfds here: the watch loop polls every POLL_INTERVAL

    def _close_pidfd(self) -> None:
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None

    def _pause(self) -> bool:
        """Wait up to POLL_INTERVAL, waking at once when the live process exits (its pidfd
        reads ready); True when a stop is asked."""
        if self._pidfd is None:
            return self._stop.wait(POLL_INTERVAL)
        try:
            select.select([self._pidfd], [], [], POLL_INTERVAL)
        except (OSError, ValueError):
            self._stop.wait(POLL_INTERVAL)
        return self._stop.is_set()

    # -- the warm spare (spec.standby) ---------------------------------------------------

    def _spare_alive(self) -> bool:
        spare = self._spare
        return spare is not None and spare.poll() is None

    def _tend_spare(self) -> None:
        """Called from the watch loop of a ready driver: start a spare when standby is on
        and none runs (after the backoff of failed spares), note when it says ready, notice
        one that died, let one go when standby was turned off by a reload."""
        if not self.spec.standby or self.spec.policy.restart == "never":
            if self._spare is not None:  # a reload turned it off (a spare never promoted)
                self._stop_spare("standby turned off")
            return
        spare = self._spare
        now = time.monotonic()
        if spare is not None:
            code = spare.poll()
            if code is not None:
                self._forget_spare()
                self._spare_failures += 1
                delay = self.spec.policy.delay(self._spare_failures)
                self._spare_next_at = now + delay
                log.warning("driver %s: spare pid %d exited with %s before taking over; a new "
                            "one in %.2f s", self.name, spare.pid, describe_exit(code), delay)
                self.manager.wake()
                return
            if not self._spare_ready:
                try:
                    said = self._spare_sock.recv(16)
                except (BlockingIOError, InterruptedError):
                    return
                except OSError:
                    said = b""
                if said.startswith(b"R"):
                    with self._lock:
                        self._spare_ready = True
                    self._spare_failures = 0
                    log.info("driver %s: spare pid %d ready to take over (loaded in %.2f s)",
                             self.name, spare.pid, now - self._spare_started_at)
                    self.manager.wake()
            return
        if now >= self._spare_next_at:
            self._start_spare()

    def _start_spare(self) -> None:
        spec, directory = self.spec, self.manager.runtime_dir
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        lifeline = self.manager.lifeline_fd
        argv = [*module_argv("nnrt.server"), spec.kind, "--name", spec.name,
                "--runtime-dir", str(directory), *spec.option_args(),
                "--lifeline-fd", str(lifeline), "--standby-fd", str(theirs.fileno())]
        try:
            spare = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                     env=self.manager.child_env(), start_new_session=True,
                                     pass_fds=(lifeline, theirs.fileno()), cwd=CHILD_CWD)
        except OSError as exc:
            ours.close()
            self._spare_failures += 1
            self._spare_next_at = time.monotonic() + self.spec.policy.delay(self._spare_failures)
            log.error("driver %s: cannot start a spare: %s", self.name, exc)
            return
        finally:
            theirs.close()  # the spare's end lives in the spare alone: its EOF is ours closing
        ours.setblocking(False)
        with self._lock:
            self._spare, self._spare_sock, self._spare_ready = spare, ours, False
        self._spare_started_at = time.monotonic()
        log.info("driver %s: spare started, pid %d", self.name, spare.pid)
        self.manager.wake()

    def _forget_spare(self) -> subprocess.Popen | None:
        with self._lock:
            spare, sock = self._spare, self._spare_sock
            self._spare, self._spare_sock, self._spare_ready = None, None, False
        if sock is not None:
            sock.close()
        return spare

    def _promote_spare(self) -> subprocess.Popen | None:
        """Tell a live spare to take over: it becomes the driver process (None: no spare,
        or it could not be told, and a cold start follows)."""
        with self._lock:
            spare, sock, ready = self._spare, self._spare_sock, self._spare_ready
        if spare is None or sock is None:
            return None
        try:
            sock.setblocking(True)
            sock.settimeout(1.0)
            sock.sendall(b"G")
        except OSError as exc:
            log.warning("driver %s: spare pid %d cannot be told to take over (%s): a cold "
                        "start instead", self.name, spare.pid, exc)
            self._reap(self._forget_spare(), "it failed")
            return None
        self._forget_spare()  # closing our end is harmless now: it stopped listening on it
        with self._lock:
            self.takeovers += 1
        log.warning("driver %s: spare pid %d takes over (%s)", self.name, spare.pid,
                    "loaded" if ready else "still loading")
        return spare

    def _stop_spare(self, why: str) -> None:
        """Let the spare go: EOF on its standby socket makes it exit 0."""
        spare = self._forget_spare()
        if spare is not None:
            log.info("driver %s: letting spare pid %d go (%s)", self.name, spare.pid, why)
            self._reap(spare, why)
        self._spare_failures = 0
        self._spare_next_at = 0.0

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

    def _maybe_reset_backoff(self, ready_at: float) -> None:
        """Forget the failures of a driver ready for `backoff_reset_after` seconds."""
        after = self.spec.policy.backoff_reset_after
        if after <= 0 or not self._failures or time.monotonic() - ready_at < after:
            return
        with self._lock:
            forgotten = len(self._failures)
            self._failures.clear()
        log.info("driver %s: ready for %g s: %d earlier failure(s) forgotten, backoff reset",
                 self.name, after, forgotten)
        self.manager.wake()

    def _take_over_leftovers(self) -> None:
        """Stop a dead device manager's driver that still holds this driver's sockets."""
        directory = self.manager.runtime_dir
        paths = [grpc_socket(directory, self.name), session_socket(directory, self.name)]
        if not any(path.exists() for path in paths):
            return
        for pid in sorted(socket_holders(paths)):
            info = _proc_info(pid)
            if pid == os.getpid() or info is None:
                continue
            ppid, _, environ = info
            if ppid == os.getpid() or environ.get(MARKER_ENV) != str(directory):
                continue  # ours, or a driver started some other way: not ours to stop
            log.warning("driver %s: pid %d, left by a device manager that is gone, holds its "
                        "sockets: stopping it", self.name, pid)
            self._stop_leftover(pid)
        self._cleanup_sockets()

    def _stop_leftover(self, pid: int) -> None:
        """SIGTERM (+ SIGCONT, should it be stopped), `stop_timeout`, SIGKILL. Through a
        pidfd where the kernel has them, so that a reused pid is never signalled."""
        try:
            handle = os.pidfd_open(pid)
        except (AttributeError, OSError):
            handle = None
        if handle is None and _gone(pid):
            return

        def send(sig: int) -> None:
            try:
                if handle is not None:
                    signal.pidfd_send_signal(handle, sig)
                else:
                    os.kill(pid, sig)
            except OSError:
                pass  # gone already

        def wait(seconds: float) -> bool:
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                if handle is not None:
                    readable, _, _ = select.select([handle], [], [], POLL_INTERVAL)
                    if readable:  # a pidfd reads ready once its process has exited
                        return True
                elif _gone(pid):
                    return True
                else:
                    time.sleep(POLL_INTERVAL)
            return False

        try:
            send(signal.SIGTERM)
            send(signal.SIGCONT)
            if wait(self.manager.settings.stop_timeout):
                log.info("driver %s: leftover pid %d stopped", self.name, pid)
                return
            log.warning("driver %s: leftover pid %d still running %g s after SIGTERM: SIGKILL",
                        self.name, pid, self.manager.settings.stop_timeout)
            send(signal.SIGKILL)
            if not wait(10):
                log.error("driver %s: leftover pid %d survives SIGKILL", self.name, pid)
        finally:
            if handle is not None:
                os.close(handle)

    def _exited(self, code: int, when: str) -> tuple[str, int]:
        with self._lock:
            uptime = time.monotonic() - (self._started_at or time.monotonic())
            self._proc = None
            # with the process, never after: no ready without one
            self.state = DriverState.BACKOFF
        hint = ""
        if code == 2:
            hint = " (bad usage: check the driver's options)"
        elif code == 3:
            hint = " (another driver already serves this name)"
        log.warning("driver %s: exited %swith %s after %.2f s%s", self.name,
                    f"{when} " if when else "", describe_exit(code), uptime, hint)
        self._set(last_exit=code, reason=f"{describe_exit(code)}{hint}")
        return ("exited", code)

    def _kill(self, why: str) -> int | None:
        with self._lock:
            proc, self._proc = self._proc, None
            # with the process, never after: no ready without one
            self.state = DriverState.BACKOFF
        if proc is None:
            return None
        proc.kill()
        try:
            code = proc.wait(10)
        except subprocess.TimeoutExpired:
            log.error("driver %s: pid %d survives SIGKILL", self.name, proc.pid)
            code = None
        self._set(last_exit=code, reason=why)
        return code

    def _restart_delay(self, outcome: tuple[str, int | None]) -> float | None:
        """Seconds until the restart, or None when the driver is not restarted (its state
        then says why: stopped or failed)."""
        kind, code = outcome
        policy = self.spec.policy
        clean = kind == "exited" and code == 0
        if clean and policy.restart != "always":
            log.info("driver %s: exited cleanly; not restarted (restart = %s)", self.name,
                     policy.restart)
            self._set(state=DriverState.STOPPED)
            self._cleanup_sockets()
            return None
        if policy.restart == "never":
            log.error("driver %s: failed; not restarted (restart = never)", self.name)
            self._set(state=DriverState.FAILED)
            self._cleanup_sockets()
            return None
        now = time.monotonic()
        with self._lock:
            self._failures.append(now)
            failures = self._recent_failures(now)
        if not policy.unlimited and failures >= policy.crash_loop_failures:
            reason = (f"crash loop: {failures} failures within {policy.crash_loop_window:g} s "
                      f"(last: {self.reason or describe_exit(self.last_exit)})")
            then = f"a fresh start in {policy.failed_retry_after:g} s" \
                if policy.failed_retry_after > 0 else "not restarted until a reload"
            log.error("driver %s: %s; marked failed, %s", self.name, reason, then)
            self._set(state=DriverState.FAILED, reason=reason)
            self._cleanup_sockets()
            return None
        delay = policy.delay(failures)
        limit = "no limit" if policy.unlimited else f"of {policy.crash_loop_failures}"
        when = "at once by its spare" if self._spare_alive() else f"in {delay:.2f} s"
        log.warning("driver %s: restarting %s (failure %d %s within %g s)",
                    self.name, when, failures, limit, policy.crash_loop_window)
        return delay

    def _cool_down(self) -> float | None:
        """Seconds a failed driver rests before a fresh start; None: it stays as it is."""
        policy = self.spec.policy
        if self.state == DriverState.FAILED and policy.restart != "never" \
                and policy.failed_retry_after > 0:
            return policy.failed_retry_after
        return None

    def _cleanup_sockets(self) -> None:
        _remove_stale_sockets(self.manager.runtime_dir, self.name)

    def _terminate(self) -> None:
        """Stop the driver process if it runs: SIGTERM, `stop_timeout`, SIGKILL."""
        with self._lock:
            proc = self._proc
        if proc is not None:
            timeout = self.manager.settings.stop_timeout
            if proc.poll() is None:
                log.info("driver %s: stopping pid %d", self.name, proc.pid)
                try:
                    proc.send_signal(signal.SIGTERM)
                except ProcessLookupError:
                    pass
            try:
                code = proc.wait(timeout)
            except subprocess.TimeoutExpired:
                log.warning("driver %s: still running %g s after SIGTERM: SIGKILL", self.name,
                            timeout)
                proc.kill()
                try:
                    code = proc.wait(10)
                except subprocess.TimeoutExpired:
                    code = None
                    log.error("driver %s: pid %d survives SIGKILL", self.name, proc.pid)
            with self._lock:
                self._proc = None
                self.last_exit = code
                if self.state in (DriverState.STARTING, DriverState.READY):
                    self.state = DriverState.STOPPED if self._stop.is_set() else DriverState.BACKOFF
            log.info("driver %s: stopped (%s)", self.name, describe_exit(code))
            self._cleanup_sockets()
        if self._stop.is_set():
            self._set(state=DriverState.STOPPED, reason=self._stop_reason)
        else:
            self.manager.wake()


# -- the manager ---------------------------------------------------------------------------


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
        to 1 s, as the drivers' session channel, server/sessions.py), the episode logged once
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


# -- command line ------------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    setup_logging(args.log_level)
    explicit = args.config is not None
    path = args.config if explicit else default_config_path()
    notifier = Notifier()
    metrics = None
    try:
        manager = DeviceManager(path, args.runtime_dir or runtime_dir(), notifier,
                                explicit_config=explicit)
        if getattr(args, "metrics_address", None):
            from . import metrics as metrics_module

            try:
                metrics = metrics_module.serve(manager, args.metrics_address)
            except (OSError, ValueError) as exc:
                log.error("cannot serve metrics on %s: %s", args.metrics_address, exc)
                return 1
        return manager.run()
    finally:
        if metrics is not None:
            metrics.close()
        notifier.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="nnrt devmgr",
                                     description="Run and supervise the configured NNRt drivers.")
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
