"""The driver host: one Device served over gRPC and the session channel, with a lifecycle.

`DriverHost.start()` claims `<name>.sock` and `<name>.session` in the runtime directory
(refusing when a live driver already answers there, removing stale sockets of a dead one),
serves the HDI services and nnrt's admin service (server/admin.py) plus gRPC reflection and
`grpc.health.v1`, and marks itself
SERVING. `stop(grace)` marks NOT_SERVING, refuses new calls, lets calls in flight finish for
up to `grace` seconds, ends every session and removes both sockets.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from nnrt.protos import admin_pb2_grpc, hdi_pb2, hdi_pb2_grpc
from nnrt.server import admin
from nnrt.server.device import Device
from nnrt.server.faults import FaultInjection
from nnrt.server.runtime_dir import grpc_socket, session_socket, stale_socket
from nnrt.server.servicers import DeviceServicer, PreparedModelServicer
from nnrt.server.sessions import SessionChannelServer, SessionRegistry
from nnrt.server.stats import RunStats


log = logging.getLogger(__name__)

HDI_SERVICE_NAMES = tuple(s.full_name for s in hdi_pb2.DESCRIPTOR.services_by_name.values())
SERVICE_NAMES = (*HDI_SERVICE_NAMES, admin.SERVICE_NAME)  # reflected, and SERVING in health
MAX_MESSAGE_BYTES = 64 << 20  # descriptors only, but a big graph has many tensors and nodes


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


class DriverHost:
    def __init__(self, device: Device, runtime_dir: Path, name: str,
                 faults: FaultInjection | None = None, workers: int = 32) -> None:
        self.device = device
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

    def start(self) -> None:
        self.runtime_dir.mkdir(parents=True, exist_ok=True)
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
        prepared = PreparedModelServicer(self.sessions, self.faults, self.stats)
        hdi_pb2_grpc.add_IPreparedModelServicer_to_server(prepared, server)
        admin_pb2_grpc.add_NnrtAdminServicer_to_server(
            admin.AdminServicer(self.device, self.name, self.sessions, self.faults, self.stats,
                                self.created), server)
        health_pb2_grpc.add_HealthServicer_to_server(self.health, server)
        reflection.enable_server_reflection(
            (*SERVICE_NAMES, health.SERVICE_NAME, reflection.SERVICE_NAME), server)
        # Sockets are created 0660: group members may use the driver, others may not.
        old_umask = os.umask(0o117)
        try:
            if server.add_insecure_port(f"unix:{self.grpc_path}") == 0:
                raise OSError(f"cannot listen on {self.grpc_path}")
            self._channel = SessionChannelServer(self.session_path, self.sessions,
                                                 prepared.run_packet, self._workers)
        finally:
            os.umask(old_umask)
        server.start()
        os.chmod(self.grpc_path, 0o660)
        os.chmod(self.session_path, 0o660)
        self._channel.start()
        self._server = server
        for service in ("", *SERVICE_NAMES):
            self.health.set(service, health_pb2.HealthCheckResponse.SERVING)
        log.info(
            "serving %s device %r (vendor %r) on %s", self.device.kind, self.device.name,
            self.device.vendor, self.grpc_path,
        )

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the gRPC server stops; True if it did."""
        return self._server.wait_for_termination(timeout)

    def stop(self, grace: float = 10.0) -> None:
        if self._server is None:
            return
        log.info("stopping: no new calls, up to %.1f s for calls in flight", grace)
        self.health.enter_graceful_shutdown()
        started = time.monotonic()
        self._channel.close_intake()  # Runs over the session channel: refused from now on
        self._server.stop(grace).wait(grace + 1)
        self._server = None
        self._channel.stop(max(0.0, grace - (time.monotonic() - started)))
        for path in (self.grpc_path, self.session_path):
            path.unlink(missing_ok=True)
        self.device.close()
        log.info("stopped")
