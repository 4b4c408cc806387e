"""The driver host: one Device served over gRPC and the session channel, with a lifecycle.

`DriverHost.start()` claims `<name>.sock` and `<name>.session` in the runtime directory
(refusing when a live driver already answers there, removing stale sockets of a dead one),
serves the HDI services and nnrt's admin service (server/admin.py) plus gRPC reflection and
`grpc.health.v1`, and marks itself
SERVING. `stop(grace)` marks NOT_SERVING, refuses new calls, lets calls in flight finish for
up to `grace` seconds, ends every session and removes both sockets.

Health means "this process serves", judged on the host's own threads, never on how long a
client's run takes. A watchdog thread re-evaluates it every `HEALTH_TICK` seconds (at most a
quarter of the stall timeout) and answers NOT_SERVING, for every service, while

* the session channel is down (its thread died: no client can open a session or run), or
* the session channel is wedged: its selector thread, woken by the watchdog, has not come
  round for `stall_timeout` seconds (a deadlock, or work that never belonged on it).

The health servicer itself answers on gRPC's threads, so a process that is stopped
(SIGSTOP) or whose interpreter no longer runs threads answers nothing: the supervisor's probe
goes unanswered, which it treats as NOT_SERVING. A run that computes for long — one
onnxruntime call for a whole lowered model, a hung device — is that run's business: its
caller's deadline and cancel end it, other sessions are served meanwhile, and health stays
SERVING (it used to say NOT_SERVING after 2 s of no operator boundary, and the device
manager then killed every client's sessions for one client's large MatMul). Runs in flight
that show no movement for `stall_timeout` seconds are logged once per episode (`runs in
flight without progress ...: still SERVING`), for the operator, and change nothing.

It goes back to SERVING when the cause is gone. One log line per transition.
`--stall-timeout 0` turns the wedge check off. A supervisor (the device manager) restarts
a driver whose probes say NOT_SERVING, exactly as one that does not answer.
"""

from __future__ import annotations

import logging
import os
import socket
import stat
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from nnrt.protos import admin_pb2_grpc, hdi_pb2, hdi_pb2_grpc
from nnrt.server import admin
from nnrt.hdi.device import Device
from nnrt.server.faults import FaultInjection
from nnrt.server.run_scheduler import RunScheduler
from nnrt.common.runtime_dir import (UnsafeRuntimeDir, admin_token_path, ensure_runtime_dir,
                                     grpc_socket, session_socket, stale_socket,
                                     write_admin_token)
from nnrt.server.runner import Runner
from nnrt.server.servicers import DeviceServicer, PreparedModelServicer
from nnrt.server.channel_connection import ChannelPolicy
from nnrt.server.channel_server import SessionChannelServer
from nnrt.server.sessions import SessionRegistry
from nnrt.server.stats import RunStats


log = logging.getLogger(__name__)

HDI_SERVICE_NAMES = tuple(s.full_name for s in hdi_pb2.DESCRIPTOR.services_by_name.values())
SERVICE_NAMES = (*HDI_SERVICE_NAMES, admin.SERVICE_NAME)  # reflected, and SERVING in health
MAX_MESSAGE_BYTES = 64 << 20  # descriptors only, but a big graph has many tensors and nodes
STALL_TIMEOUT = 2.0  # s the session channel may not come round before health says NOT_SERVING
HEALTH_TICK = 0.25  # s between two evaluations of health (at most stall_timeout / 4)


class DriverAlreadyRunning(RuntimeError):
    pass


def _claim(path: Path, kind: int) -> None:
    """Remove a stale socket at `path`; raise if something is still listening there."""
    if not path.exists() and not path.is_symlink():
        return
    try:
        stale = stale_socket(path, kind, 1.0)
    except OSError as exc:
        raise DriverAlreadyRunning(f"{path}: {exc}")
    if not stale:
        raise DriverAlreadyRunning(f"a driver is already listening on {path}")
    log.info("removing stale socket %s", path)
    path.unlink(missing_ok=True)


def _check_bound(path: Path) -> None:
    """Refuse to serve when what is at `path` is not the socket we just bound: someone who
    may write the directory replaced it (a symlink, say) between bind and now."""
    st = os.lstat(path)
    if not stat.S_ISSOCK(st.st_mode) or st.st_uid != os.geteuid() or \
            stat.S_IMODE(st.st_mode) != 0o660:
        raise UnsafeRuntimeDir(
            f"{path} was replaced while the driver bound it (mode {st.st_mode:o}, uid "
            f"{st.st_uid}): someone else writes {path.parent}; check its owner and mode")


class DriverHost:
    def __init__(self, device: Device, runtime_dir: Path, name: str,
                 faults: FaultInjection | None = None, workers: int = 32,
                 stall_timeout: float = STALL_TIMEOUT,
                 channel_policy: ChannelPolicy | None = None) -> None:
        self.device = device
        self.channel_policy = channel_policy or ChannelPolicy()  # session-channel limits
        self.name = name
        self.grpc_path = grpc_socket(runtime_dir, name)
        self.session_path = session_socket(runtime_dir, name)
        self.runtime_dir = runtime_dir
        self.faults = faults or FaultInjection()
        self.sessions = SessionRegistry()
        self.stats = RunStats()  # Run counters, reported by the admin service
        self.created = time.monotonic()  # uptime is counted from here
        self.health = health.HealthServicer()
        self._workers = workers
        self._server: grpc.Server | None = None
        self._channel: SessionChannelServer | None = None
        self._scheduler = RunScheduler(device.concurrent_runs)
        self.stall_timeout = stall_timeout  # <= 0: the wedged-channel check is off
        self.unhealthy_reason: str | None = None  # why health says NOT_SERVING, or None
        self._poked_at: float | None = None  # the watchdog woke the channel's thread then ...
        self._slow_runs_logged = False  # the current episode of runs not moving was logged
        self._watchdog_stop = threading.Event()
        self._watchdog: threading.Thread | None = None

    def start(self) -> None:
        ensure_runtime_dir(self.runtime_dir)  # created if needed, refused if not trusted
        _claim(self.grpc_path, socket.SOCK_STREAM)
        _claim(self.session_path, socket.SOCK_SEQPACKET)
        server = grpc.server(
            ThreadPoolExecutor(max_workers=self._workers, thread_name_prefix="hdi"),
            options=[
                ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                ("grpc.so_reuseport", 0),
            ],
        )
        hdi_pb2_grpc.add_INnrtDeviceServicer_to_server(
            DeviceServicer(self.device, self.sessions, self.faults), server)
        # The one run path, behind both doors: IPreparedModel.Run and the session channel.
        runner = Runner(self.sessions, self.faults, self.stats, self._scheduler)
        prepared = PreparedModelServicer(self.sessions, self.faults, runner)
        hdi_pb2_grpc.add_IPreparedModelServicer_to_server(prepared, server)
        self.admin = admin.AdminServicer(self.device, self.name, self.sessions, self.faults,
                                         self.stats, self.created, self._scheduler,
                                         self.channel_policy)
        admin_pb2_grpc.add_NnrtAdminServicer_to_server(self.admin, server)
        health_pb2_grpc.add_HealthServicer_to_server(self.health, server)
        reflection.enable_server_reflection(
            (*SERVICE_NAMES, health.SERVICE_NAME, reflection.SERVICE_NAME), server)
        # Sockets are created 0660 (group members may use the driver, others may not) by
        # the umask in force at bind: gRPC core binds in add_insecure_port. No chmod
        # afterwards: chmod follows a symlink swapped in at the path meanwhile. (fchmod on
        # a socket fd does not reach the file bind creates on Linux.)
        old_umask = os.umask(0o117)
        try:
            if server.add_insecure_port(f"unix:{self.grpc_path}") == 0:
                raise OSError(f"cannot listen on {self.grpc_path}")
            self._channel = SessionChannelServer(self.session_path, self.sessions, runner,
                                                 self._workers, self.channel_policy)
            self.admin.uids = self._channel.uids
        finally:
            os.umask(old_umask)
        try:
            _check_bound(self.grpc_path)
            _check_bound(self.session_path)
        except OSError as exc:
            server.stop(0)
            self._channel.start()  # its thread closes the listener and its pipe on stop
            self._channel.stop(0)
            self._channel = None
            for path in (self.grpc_path, self.session_path):
                path.unlink(missing_ok=True)  # a link itself, never what it points at
            raise UnsafeRuntimeDir(str(exc)) from exc
        self.admin.token = write_admin_token(self.runtime_dir, self.name)
        server.start()
        self._channel.start()
        self._server = server
        self._set_health(health_pb2.HealthCheckResponse.SERVING)
        self._watchdog = threading.Thread(target=self._watch, name="health-watchdog",
                                          daemon=True)
        self._watchdog.start()
        log.info(
            "serving %s device %r (vendor %r) on %s", self.device.kind, self.device.name,
            self.device.vendor, self.grpc_path,
        )

    def _set_health(self, status: int) -> None:
        for service in ("", *SERVICE_NAMES):
            self.health.set(service, status)

    def check_health(self, now: float | None = None) -> str | None:
        """Why the driver cannot serve right now, or None when it can."""
        # The selector thread is the whole session channel: if it died, no session opens
        # and no Run is answered.
        if self._channel is None:
            return None
        if not self._channel.serving:
            return "the session channel is down"
        if self.stall_timeout > 0:
            silent = self._channel_silent_for(time.monotonic() if now is None else now)
            if silent >= self.stall_timeout:
                return (f"the session channel is wedged: its thread has not come round for "
                        f"{silent:.1f} s (stall timeout {self.stall_timeout:g} s)")
        return None

    def _channel_silent_for(self, now: float) -> float:
        """Seconds since the watchdog woke the session channel's thread without it coming
        round (0 when it came round since); wakes it when it has been quiet for a tick."""
        channel = self._channel
        if self._poked_at is not None and channel.turned_at >= self._poked_at:
            self._poked_at = None  # it came round: alive
        if self._poked_at is None:
            if now - channel.turned_at < HEALTH_TICK:
                return 0.0
            self._poked_at = now
            channel.poke()
            return 0.0
        return now - self._poked_at

    def _note_slow_runs(self) -> None:
        """One log line per episode of runs in flight that do not move: for the operator
        (a hung device, a very long operator); health is not theirs to change."""
        if self.stall_timeout <= 0:
            return
        stalled = self.stats.stalled_for()
        if stalled < self.stall_timeout:
            self._slow_runs_logged = False
        elif not self._slow_runs_logged:
            self._slow_runs_logged = True
            log.warning("runs in flight without progress for %.1f s (%d in flight: a long "
                        "operator, or a hung device): still SERVING; each ends at its caller's "
                        "deadline or cancel", stalled, self.stats.snapshot().in_flight)

    def _watch(self) -> None:
        tick = HEALTH_TICK if self.stall_timeout <= 0 else min(HEALTH_TICK,
                                                               self.stall_timeout / 4)
        while not self._watchdog_stop.wait(tick):
            try:
                reason = self.check_health()
                self._note_slow_runs()
            except Exception:  # the watchdog must outlive any surprise
                log.exception("health check failed")
                continue
            if (reason is None) == (self.unhealthy_reason is None):
                self.unhealthy_reason = reason
                continue
            self.unhealthy_reason = reason
            if reason is None:
                log.warning("health: SERVING again")
                self._set_health(health_pb2.HealthCheckResponse.SERVING)
            else:
                log.error("health: NOT_SERVING: %s", reason)
                self._set_health(health_pb2.HealthCheckResponse.NOT_SERVING)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the gRPC server stops; True if it did."""
        return self._server.wait_for_termination(timeout)

    def stop(self, grace: float = 10.0) -> None:
        if self._server is None:
            return
        log.info("stopping: no new calls, up to %.1f s for calls in flight", grace)
        self._watchdog_stop.set()  # before the shutdown: it must not say SERVING again
        if self._watchdog is not None:
            self._watchdog.join(5)
        self.health.enter_graceful_shutdown()
        started = time.monotonic()
        self._channel.close_intake()  # Runs over the session channel: refused from now on
        self._server.stop(grace).wait(grace + 1)
        self._server = None
        self._channel.stop(max(0.0, grace - (time.monotonic() - started)))
        self._scheduler.close()  # after the runs in flight: none is queued any more
        for path in (self.grpc_path, self.session_path,
                     admin_token_path(self.runtime_dir, self.name)):
            path.unlink(missing_ok=True)
        self.device.close()
        log.info("stopped")
