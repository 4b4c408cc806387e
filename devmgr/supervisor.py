"""One driver, run and kept running by the device manager (`DriverSupervisor`).

Each configured driver (devmgr/config.py) runs as its own process,
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

Warm standby (`standby = true` on a driver), a spare process that takes over at once: standby.py.
"""

from __future__ import annotations

import logging
import os
import select
import signal
import subprocess
import threading
import time
from collections import deque
from typing import TYPE_CHECKING

from grpc_health.v1 import health_pb2
from nnrt.common.devmgr_cli import CHILD_CWD, module_argv
from nnrt.common.devmgr_ctl import DriverState, describe_exit
from nnrt.common.runtime_dir import grpc_socket, session_socket
from nnrt.devmgr.config import DriverSpec

from .probes import (
    MARKER_ENV,
    device_identity,
    health_status,
    proc_info,
    process_gone,
    remove_stale_sockets,
    served_by,
    socket_holders,
)
from .standby import Standby

if TYPE_CHECKING:
    from .manager import DeviceManager

log = logging.getLogger("nnrt.devmgr")

POLL_INTERVAL = 0.05


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
        self._standby = Standby(self, self._lock)  # the warm spare (spec.standby)
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
        for proc in (self._proc, self._standby.process):
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
                "standby": self._standby.snapshot(),
                "takeovers": self.takeovers,
                "operator_stopped": self.operator_stopped,
            }

    def driver_argv(self) -> list[str]:
        """The driver's command line, without the descriptors it is handed."""
        spec = self.spec
        return [*module_argv("nnrt.server"), spec.kind, "--name", spec.name,
                "--runtime-dir", str(self.manager.runtime_dir), *spec.option_args()]

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
                if delay is not None and self._standby.alive():
                    with self._lock:
                        self.restarts += 1
                    continue  # the spare takes over at once: no backoff, no cold start
                if delay is None:
                    self._standby.stop("the driver is not restarted")
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
            self._standby.stop("the device manager stops this driver")
            self._terminate()

    def _run_once(self) -> tuple[str, int | None]:
        """Start the driver and watch it until it exits, is killed, or a stop is asked:
        ("exited", code) / ("unhealthy", code) / ("not-ready", code) / ("spawn", None) /
        ("stop", None)."""
        spec, directory = self.spec, self.manager.runtime_dir
        argv = self.driver_argv()
        self._set(state=DriverState.STARTING, identity=None)
        proc = self._standby.promote()
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
            self._standby.tend()
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
            info = proc_info(pid)
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
        if handle is None and process_gone(pid):
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
                elif process_gone(pid):
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
        when = "at once by its spare" if self._standby.alive() else f"in {delay:.2f} s"
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
        remove_stale_sockets(self.manager.runtime_dir, self.name)

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
