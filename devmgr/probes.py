"""What the device manager asks of a driver and of the kernel, each bounded: a driver's
health, identity and who serves its name (gRPC on its socket); who holds a unix socket, a
process's parent, state and environment (/proc); and a dead driver's leftover files.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import grpc
from google.protobuf import empty_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from nnrt.protos import admin_pb2_grpc, hdi_pb2_grpc
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.common.runtime_dir import (
    admin_metadata,
    admin_token_path,
    grpc_socket,
    lock_path,
    remove_stale_lock,
    session_socket,
    stale_socket,
)

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


def remove_stale_sockets(directory: Path, name: str) -> None:
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


def proc_info(pid: int) -> tuple[int, str, dict[str, str]] | None:
    """(ppid, state, environment) of `pid`, None when it is gone or not ours to read."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except (OSError, IndexError):
        return None
    environ = dict(item.split("=", 1) for item in raw.decode(errors="replace").split("\0")
                   if "=" in item)
    return int(stat[1]), stat[0], environ


def process_gone(pid: int) -> bool:
    info = proc_info(pid)
    return info is None or info[1] in ("Z", "X")
