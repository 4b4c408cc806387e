"""Where driver sockets live: `NNRT_RUNTIME_DIR`, shared by drivers and clients.

Default (ARCHITECTURE.md, decision 9): `/run/nnrt` when writable, else
`$XDG_RUNTIME_DIR/nnrt`, else `/tmp/nnrt-$UID`. A driver named N listens on `N.sock`
(gRPC, the HDI services) and `N.session` (the session channel, server/session_channel.py).
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

ENV = "NNRT_RUNTIME_DIR"
GRPC_SUFFIX = ".sock"
SESSION_SUFFIX = ".session"


def _writable(path: Path) -> bool:
    if path.exists():
        return os.access(path, os.W_OK | os.X_OK)
    return os.access(path.parent, os.W_OK | os.X_OK)


def runtime_dir() -> Path:
    """The runtime directory in force for this process (not created)."""
    configured = os.environ.get(ENV)
    if configured:
        return Path(configured)
    system = Path("/run/nnrt")
    if _writable(system):
        return system
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg and _writable(Path(xdg)):
        return Path(xdg) / "nnrt"
    return Path(f"/tmp/nnrt-{os.getuid()}")


def grpc_socket(directory: Path, name: str) -> Path:
    return directory / f"{name}{GRPC_SUFFIX}"


def session_socket(directory: Path, name: str) -> Path:
    return directory / f"{name}{SESSION_SUFFIX}"


def stale_socket(path: Path, kind: int, timeout: float) -> bool:
    """Whether the Unix socket at `path` (of socket type `kind`) is a dead process's: a
    connection is refused, or finds nothing. False when something accepts it; any other
    failure (a full backlog, the timeout) raises its OSError: the caller cannot tell."""
    probe = socket.socket(socket.AF_UNIX, kind)
    probe.settimeout(timeout)
    try:
        probe.connect(str(path))
    except (ConnectionRefusedError, FileNotFoundError):
        return True
    finally:
        probe.close()
    return False


def driver_names(directory: Path) -> list[str]:
    """Names of the drivers whose two sockets are present in `directory`, sorted."""
    if not directory.is_dir():
        return []
    names = []
    for path in directory.glob(f"*{GRPC_SUFFIX}"):
        name = path.name[: -len(GRPC_SUFFIX)]
        if session_socket(directory, name).exists():
            names.append(name)
    return sorted(names)
