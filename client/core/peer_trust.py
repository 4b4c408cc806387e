"""Whether the process behind a driver's sockets may be trusted with this client's data
(`check_peer`, before anything is sent to it: see driver.py's docstring)."""

from __future__ import annotations

import os
import socket
import stat
import struct
from pathlib import Path

from nnrt.common.runtime_dir import SERVICE_USER_ENV, trusted_uids

from .errors import UntrustedDriver

_PEERCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


def check_peer(sock: socket.socket, session_path: Path, grpc_path: Path) -> None:
    """Refuse a driver whose session channel is served by an untrusted uid (the kernel's
    SO_PEERCRED, taken at connect: cannot be forged), or whose gRPC socket is not a socket
    bound by that same uid (both sockets are bound by one driver process)."""
    pid, uid, _ = _PEERCRED.unpack(
        sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size))
    trusted = trusted_uids()
    if uid not in trusted:
        raise UntrustedDriver(
            f"refusing driver {session_path}: served by uid {uid} (pid {pid}), not by us "
            f"(uid {os.geteuid()}), root or the service user ({SERVICE_USER_ENV}); "
            f"nothing was sent to it")
    st = os.lstat(grpc_path)  # OSError: no driver there (any more)
    if not stat.S_ISSOCK(st.st_mode) or st.st_uid != uid:
        raise UntrustedDriver(
            f"refusing driver {grpc_path}: not a socket bound by the session's uid {uid} "
            f"(mode {st.st_mode:o}, owner uid {st.st_uid}); nothing was sent to it")
