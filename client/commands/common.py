"""What `nnrt devices` and `nnrt status` share: finding drivers, asking them, printing."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc
from google.protobuf import empty_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc

from nnrt.client.core.device import Device, identity_of
from nnrt.protos import admin_pb2, admin_pb2_grpc, hdi_pb2_grpc
from nnrt.protos import hdi_types_pb2 as ht

from nnrt.common.devmgr_ctl import DevmgrUnavailable, ctl_path, describe_exit, request
from nnrt.common.runtime_dir import admin_metadata, driver_names, grpc_socket, runtime_dir

# One exit code per kind of failure, the same in every subcommand (`nnrt --help` and the
# README's "Exit codes" table show EXIT_CODES; a test holds the three together). Decisions:
# a deadline that passes is a failed job (1), not a kind of its own, since a script reacts to
# it as to any failed run; a daemon's unusable configuration is "failed to start" (1), as
# systemd's units report it, while a bad file named to a client command is bad input (2);
# 3 is "the runtime directory is not as the command needs it": nothing to use there for a
# client, the name already taken there for a daemon; Ctrl-C is 128 + SIGINT, as in a shell.
EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_INTERRUPTED = 130

EXIT_CODES: dict[int, str] = {
    EXIT_OK: "success",
    EXIT_FAILURE: "the job failed: the device refused the model, a run failed or passed its "
                  "deadline, a driver is not healthy (status), an output cannot be written, "
                  "the device manager cannot start (e.g. an unusable configuration)",
    EXIT_USAGE: "bad usage or bad input: the command line, a model or input file that cannot "
                "be read or does not fit the model",
    EXIT_UNREACHABLE: "nothing to use: no device, driver or device manager answers in the "
                      "runtime directory, or no device or driver of that name; devmgr: "
                      "another device manager already runs there",
    EXIT_INTERRUPTED: "interrupted (Ctrl-C, SIGINT); devmgr: SIGINT, like SIGTERM, is a "
                      "requested stop (0)",
}

PROBE_TIMEOUT = 1.0
_EMPTY = empty_pb2.Empty()


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--runtime-dir", type=Path,
                        help="where the drivers are (default: $NNRT_RUNTIME_DIR, else "
                             "/run/nnrt when it exists and we may enter it, else "
                             "$XDG_RUNTIME_DIR/nnrt, else /tmp/nnrt-$UID)")


def directory_of(args: argparse.Namespace) -> Path:
    return args.runtime_dir if args.runtime_dir is not None else runtime_dir()


def devmgr_status(directory: Path) -> dict | None:
    """The device manager's status answer, None when no device manager runs there."""
    if not ctl_path(directory).exists():
        return None
    try:
        answer = request(directory, {"cmd": "status"})
    except DevmgrUnavailable:
        return None
    return answer if answer.get("ok") else None


def known_drivers(directory: Path, devmgr: dict | None) -> list[str]:
    """Drivers the device manager runs (its order) and then the others found in `directory`."""
    managed = [d["name"] for d in devmgr["drivers"]] if devmgr else []
    return managed + [name for name in driver_names(directory) if name not in managed]


@dataclass
class DriverProbe:
    """What one driver answers now (every field None when it does not answer)."""

    health: str  # SERVING, NOT_SERVING, ... or "unreachable"
    identity: dict | None = None
    device_status: str | None = None
    admin: admin_pb2.DriverStatus | None = None

    @property
    def serving(self) -> bool:
        return self.health == "SERVING"


def probe_driver(directory: Path, name: str, *, admin: bool,
                 timeout: float = PROBE_TIMEOUT) -> DriverProbe:
    """Ask the driver `name` (no session needed): health, identity, status, admin status."""
    path = grpc_socket(directory, name)
    if not path.exists():
        return DriverProbe("unreachable")
    with grpc.insecure_channel(f"unix:{path}") as channel:
        try:
            health = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=""), timeout=timeout)
        except grpc.RpcError:
            return DriverProbe("unreachable")
        probe = DriverProbe(health_pb2.HealthCheckResponse.ServingStatus.Name(health.status))
        stub = hdi_pb2_grpc.INnrtDeviceStub(channel)
        try:
            device_name = stub.GetDeviceName(_EMPTY, timeout=timeout)
            vendor = stub.GetVendorName(_EMPTY, timeout=timeout)
            version = stub.GetVersion(_EMPTY, timeout=timeout)
            kind = stub.GetDeviceType(_EMPTY, timeout=timeout)
            status = stub.GetDeviceStatus(_EMPTY, timeout=timeout)
        except grpc.RpcError:
            pass
        else:
            identity = identity_of(device_name, vendor, version)
            if identity is not None:
                probe.identity = {
                    "device_name": identity[0], "vendor": identity[1],
                    "version": list(identity[2]),
                    "device_type": ht.DeviceType.Name(kind.deviceType)
                    if kind.returnCode == 0 and kind.deviceType in ht.DeviceType.values()
                    else None,
                }
            if status.returnCode == 0 and status.status in ht.DeviceStatus.values():
                probe.device_status = ht.DeviceStatus.Name(status.status).lower()
        if admin:
            try:
                reply = admin_pb2_grpc.NnrtAdminStub(channel).GetStatus(
                    _EMPTY, timeout=timeout, metadata=admin_metadata(directory, name))
            except grpc.RpcError:  # an older driver without the admin service, or wedged
                reply = None
            if reply is not None and reply.returnCode == 0:
                probe.admin = reply
    return probe


def device_of(directory: Path, name: str, identity: dict | None) -> Device | None:
    """The client/core/device.py view of a driver's identity (for its name and stable ID)."""
    if not identity:
        return None
    types = ht.DeviceType.values()
    device_type = ht.DeviceType.Value(identity["device_type"]) \
        if identity.get("device_type") in ht.DeviceType.keys() else types[0]
    return Device(name, directory, identity["device_name"], identity["vendor"],
                  tuple(identity["version"]), device_type)


# -- output --------------------------------------------------------------------------------


def format_duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = int(seconds)
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d{hours}h"
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


def format_bytes(count: int | None) -> str:
    if count is None:
        return "-"
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{count} B"


def format_exit(code: int | None) -> str:
    return describe_exit(code)


def dash(value: object) -> str:
    return "-" if value is None or value == "" else str(value)


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [list(headers)] + [[dash(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip()
                     for row in cells)


def print_json(data: object) -> None:
    json.dump(data, sys.stdout, indent=2)
    sys.stdout.write("\n")


def redraws(stream) -> bool:
    """Whether `stream` is a terminal that can redraw in place (\\r, ANSI erase): a terminal,
    and not TERM=dumb (Emacs' shell, some CI consoles), where such codes print as garbage."""
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or closed
        return False
    return tty and os.environ.get("TERM") != "dumb"


def say(message: str) -> None:
    """A message for the person, not the parser: stderr."""
    print(f"nnrt: {message}", file=sys.stderr)


def non_negative_int(text: str) -> int:
    """argparse type: an integer >= 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0: {text}")
    return value


def positive_int(text: str) -> int:
    """argparse type: an integer > 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: {value}")
    return value


# Durations on the command line have one unit, seconds; a suffix says another: 200ms, 1.5s,
# 2m, 1h. Every option that takes a time uses `duration` (a test holds them to it).
DURATION_UNITS = {"ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
DURATION_HELP = "seconds, or with a unit: 200ms, 1.5s, 2m"


def parse_duration(text: str) -> float:
    """`1.5` or `1.5s` -> 1.5, `200ms` -> 0.2, `2m` -> 120.0; ValueError otherwise."""
    number = text.strip().lower()
    scale = 1.0
    for unit in sorted(DURATION_UNITS, key=len, reverse=True):  # "ms" before "s" and "m"
        if number.endswith(unit):
            number, scale = number[:-len(unit)].strip(), DURATION_UNITS[unit]
            break
    value = float(number)  # ValueError for anything but a number
    if not (value >= 0 and value * scale < float("inf")):
        raise ValueError(f"not a duration: {text!r}")
    return value * scale


def duration(text: str) -> float:
    """argparse type: a duration > 0 in seconds (`200ms`, `1.5`, `2m`)."""
    try:
        value = parse_duration(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a duration: {text!r} ({DURATION_HELP})") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text}")
    return value
