"""`nnrt devmgr stop|start|restart DRIVER` and `nnrt fault set|clear|show DRIVER`.

    nnrt devmgr restart cpu            # stop + start, backoff reset; waits until it is ready
    nnrt devmgr stop cpu               # stays stopped (no restart by supervision) until ...
    nnrt devmgr start cpu              # ... started; a failed driver may be started again
    nnrt fault set cpu --device-busy   # the faults in force on a running driver (replaced)
    nnrt fault clear cpu

No protocol of their own: the device manager's commands go over its control socket
(`devmgr.ctl`, the one `nnrt status` reads: one JSON request, one answer), the faults over
the driver's own admin service (`nnrt.admin.v1.NnrtAdmin/SetFaults` on its gRPC socket, the
one `nnrt status` asks GetStatus), so `fault` works with or without a device manager. A
driver accepts faults only when started with fault injection enabled (`--fault-injection`,
or `options = { fault-injection = true }` in the device manager's configuration).

The device manager answers at once; the command then waits (`--timeout`, default
WAIT_TIMEOUT s; `--no-wait`: not at all) until the driver is stopped (`stop`) or ready
(`start`, `restart`), polling the status. Exit codes (EXIT_CODES): 0 done; 1 the driver
failed to come up in time, or the driver refuses the faults (no fault injection); 2 bad
usage; 3 no device manager (`devmgr ...`) or no such driver (`devmgr`: not in its
configuration; `fault`: neither served in the runtime directory nor known to a device
manager), or the driver does not answer.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import fields
from pathlib import Path

import grpc
from google.protobuf import empty_pb2
from nnrt.client.commands.common import (
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    devmgr_status,
    directory_of,
    known_drivers,
    non_negative_int,
    DURATION_HELP,
    duration,
    print_json,
    say,
)
from nnrt.protos import admin_pb2, admin_pb2_grpc
from nnrt.common.devmgr_ctl import DevmgrUnavailable, request
from nnrt.common.runtime_dir import admin_metadata, grpc_socket

WAIT_TIMEOUT = 60.0  # s: a stop (stop_timeout, 15 s) plus a start (ready_timeout, 30 s)
POLL = 0.1
RPC_TIMEOUT = 5.0
ACTIONS = {
    "stop": "stop a driver; it stays stopped (not restarted) until `nnrt devmgr start`",
    "start": "start a stopped or failed driver (a fresh start, its failures forgotten)",
    "restart": "stop and start a driver, whatever its state, with its backoff reset",
}
# HDF return codes of SetFaults (common/errors.py)
_NOPERM, _INVALID_PARAM = -19, -3


def _runtime_dir_option(parser: argparse.ArgumentParser, *, suppress: bool = False) -> None:
    # suppress: `nnrt devmgr --runtime-dir X restart cpu` keeps the X given before the action
    parser.add_argument("--runtime-dir", type=Path,
                        default=argparse.SUPPRESS if suppress else None,
                        help="where the device manager and drivers are (default: "
                             "$NNRT_RUNTIME_DIR, else /run/nnrt when it exists and we may "
                             "enter it, else $XDG_RUNTIME_DIR/nnrt, else /tmp/nnrt-$UID)")
    parser.add_argument("--json", action="store_true", help="print JSON")


# -- nnrt devmgr ACTION DRIVER -----------------------------------------------------------


def add_devmgr_actions(devmgr: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The actions under `nnrt devmgr` (which alone runs the daemon)."""
    sub = devmgr.add_subparsers(dest="devmgr_action", metavar="ACTION", required=False,
                                title="control a running device manager (ACTION DRIVER)")
    parsers = {}
    for action, text in ACTIONS.items():
        parser = sub.add_parser(action, help=text, description=text[0].upper() + text[1:] + ".")
        parser.add_argument("driver", metavar="DRIVER", help="the driver's name (its table in "
                                                             "the configuration)")
        _runtime_dir_option(parser, suppress=True)
        parser.add_argument("--timeout", type=duration, default=WAIT_TIMEOUT,
                            metavar="DURATION",
                            help=f"wait at most this long for the driver to be "
                                 f"{'stopped' if action == 'stop' else 'ready'} "
                                 f"({DURATION_HELP}; default {WAIT_TIMEOUT:g} s)")
        parser.add_argument("--no-wait", action="store_true",
                            help="return once the device manager has taken the command")
        parser.set_defaults(func=run_devmgr_action)
        parsers[action] = parser
    return parsers


def _wait(directory, name: str, action: str, timeout: float) -> tuple[dict | None, str]:
    """Poll the status until the driver settles as `action` wants: (its entry, "done" /
    "failed" / "timeout" / "gone")."""
    deadline = time.monotonic() + timeout
    entry = None
    while True:
        try:
            answer = request(directory, {"cmd": "status"})
        except DevmgrUnavailable:
            return entry, "gone"
        entry = next((d for d in answer.get("drivers", ()) if d.get("name") == name), None)
        if entry is None:
            return None, "gone"  # removed by a reload meanwhile
        state = entry["state"]
        if action == "stop":
            if state == "stopped" and entry["pid"] is None:
                return entry, "done"
        elif state == "ready":
            return entry, "done"
        elif state in ("failed", "stopped"):
            return entry, "failed"
        if time.monotonic() >= deadline:
            return entry, "timeout"
        time.sleep(POLL)


def run_devmgr_action(args: argparse.Namespace) -> int:
    action, name = args.devmgr_action, args.driver
    directory = directory_of(args)
    started = time.monotonic()
    try:
        answer = request(directory, {"cmd": action, "driver": name})
    except DevmgrUnavailable:
        say(f"devmgr {action}: no device manager runs in {directory}")
        return EXIT_UNREACHABLE
    if not answer.get("ok"):
        say(f"devmgr {action}: {answer.get('error', 'refused')}")
        return EXIT_UNREACHABLE if answer.get("code") == "unknown-driver" else EXIT_FAILURE
    message = answer.get("message", "")
    entry, outcome = answer.get("driver"), "done"
    if not args.no_wait and not message.startswith("already"):
        entry, outcome = _wait(directory, name, action, args.timeout)
    took = time.monotonic() - started
    if args.json:
        print_json({"driver": name, "action": action, "message": message, "outcome": outcome,
                    "seconds": round(took, 3), "status": entry})
    elif outcome == "done":
        if args.no_wait:
            print(f"{name}: {message}")
        elif action == "stop" or entry is None:
            print(f"{name}: {message if message.startswith('already') else 'stopped'}")
        else:
            print(f"{name}: {'ready' if not message.startswith('already') else message}, "
                  f"pid {entry['pid']}" + (f" ({took:.2f} s)"
                                           if not message.startswith("already") else ""))
    if outcome == "done":
        return EXIT_OK
    if outcome == "gone":
        say(f"devmgr {action}: the device manager in {directory} stopped answering, or no "
            f"longer runs {name!r}")
        return EXIT_UNREACHABLE
    state = entry["state"] if entry else "?"
    reason = f": {entry['reason']}" if entry and entry.get("reason") else ""
    if outcome == "timeout":
        want = "stopped" if action == "stop" else "ready"
        say(f"devmgr {action}: {name} not {want} within {args.timeout:g} s "
            f"(state {state}{reason})")
    else:
        say(f"devmgr {action}: {name} did not come up: {state}{reason}")
    return EXIT_FAILURE


# -- nnrt fault set|clear|show DRIVER -----------------------------------------------------


def _fault_fields():
    """(name, type) of the faults SetFaults carries as they are (server/faults.py)."""
    from nnrt.common.faults import PLAIN_FIELDS, Faults

    types = {f.name: f.type for f in fields(Faults)}
    return [(name, types[name]) for name in PLAIN_FIELDS]


FAULT_HELP = {
    "run_delay_ms": "every Run sleeps N ms first (abandoned at its caller's deadline)",
    "run_hang": "every Run blocks forever (a wedged device)",
    "exit_on_run": "the driver SIGKILLs itself at the Nth Run from now",
    "exit_on_prepare": "the driver SIGKILLs itself at the Nth Prepare* call from now",
    "exit_on_run_probability": "the driver SIGKILLs itself at any Run with probability P",
    "exit_on_export_cache": "the driver SIGKILLs itself in ExportModelCache",
    "device_busy": "Prepare* and Run answer NNRT_DEVICE_BUSY (14)",
    "corrupt_exported_cache": "exported model caches get a flipped byte",
}


def _probability(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be within [0, 1]: {text}")
    return value


def add_parser(sub) -> list[argparse.ArgumentParser]:
    """`nnrt fault`; returns the parsers of its actions."""
    parser = sub.add_parser(
        "fault", help="set or clear the faults a running driver injects (tests)",
        description="Set, clear or show the faults a running driver injects, through its "
                    "admin service (SetFaults). The driver must run with fault injection "
                    "enabled (nnrt-driver --fault-injection; in the device manager's "
                    "configuration: options = { fault-injection = true }). `set` replaces "
                    "the faults in force with those given.")
    actions = parser.add_subparsers(dest="fault_action", metavar="ACTION", required=True)
    setter = actions.add_parser("set", help="replace the faults in force with those given",
                                description="Replace the faults in force on DRIVER with those "
                                            "given (the counters of the Nth-call faults "
                                            "restart from now).")
    setter.add_argument("driver", metavar="DRIVER", help="the driver's (socket) name")
    for name, kind in _fault_fields():
        option = "--" + name.replace("_", "-")
        if kind == "bool":
            setter.add_argument(option, action="store_true", help=FAULT_HELP.get(name))
        elif kind == "int":
            setter.add_argument(option, type=non_negative_int, default=0, metavar="N",
                                help=FAULT_HELP.get(name))
        else:
            setter.add_argument(option, type=_probability, default=0.0, metavar="P",
                                help=FAULT_HELP.get(name))
    from nnrt.common.faults import DEVICE_STATUS

    setter.add_argument("--device-status", choices=sorted(DEVICE_STATUS),
                        help="what GetDeviceStatus reports")
    _runtime_dir_option(setter)
    clear = actions.add_parser("clear", help="remove every fault in force",
                               description="Remove every fault in force on DRIVER.")
    show = actions.add_parser("show", help="the faults in force",
                              description="Show the faults in force on DRIVER.")
    for each in (clear, show):
        each.add_argument("driver", metavar="DRIVER", help="the driver's (socket) name")
        _runtime_dir_option(each)
    for each in (setter, clear, show):
        each.set_defaults(func=run_fault)
    return [setter, clear, show]


def _requested_faults(args: argparse.Namespace):
    from nnrt.common.faults import DEVICE_STATUS, Faults

    if args.fault_action == "clear":
        return Faults()
    return Faults(**{name: getattr(args, name) for name, _ in _fault_fields()},
                  device_status=None if args.device_status is None
                  else DEVICE_STATUS[args.device_status])


def _faults_json(faults) -> dict:
    from nnrt.common.faults import DEVICE_STATUS

    names = {code: name for name, code in DEVICE_STATUS.items()}
    data = {name: getattr(faults, name) for name, _ in _fault_fields()}
    data["device_status"] = names.get(faults.device_status)
    return data


def run_fault(args: argparse.Namespace) -> int:
    from nnrt.common.faults import faults_from_proto, faults_to_proto

    action, name = args.fault_action, args.driver
    directory = directory_of(args)
    wanted = None
    if action != "show":
        wanted = _requested_faults(args)
        if action == "set" and not wanted.any:
            say("fault set: no fault given (nnrt fault clear DRIVER removes them)")
            return EXIT_USAGE
    path = grpc_socket(directory, name)
    if not path.exists():
        devmgr = devmgr_status(directory)
        managed = {d["name"]: d for d in devmgr["drivers"]} if devmgr else {}
        if name in managed:
            say(f"fault {action}: driver {name!r} is not running "
                f"(device manager state: {managed[name]['state']})")
        else:
            known = ", ".join(known_drivers(directory, devmgr)) or "none"
            say(f"fault {action}: no driver {name!r} in {directory} (known: {known})")
        return EXIT_UNREACHABLE
    try:
        with grpc.insecure_channel(f"unix:{path}") as channel:
            stub = admin_pb2_grpc.NnrtAdminStub(channel)
            if wanted is None:
                status = stub.GetStatus(empty_pb2.Empty(), timeout=RPC_TIMEOUT,
                                        metadata=admin_metadata(directory, name))
                reply = admin_pb2.FaultReply(returnCode=status.returnCode, faults=status.faults)
                enabled = status.faultInjectionEnabled
            else:
                reply = stub.SetFaults(faults_to_proto(wanted), timeout=RPC_TIMEOUT,
                                       metadata=admin_metadata(directory, name))
                enabled = reply.returnCode != _NOPERM
    except grpc.RpcError as exc:
        say(f"fault {action}: driver {name!r} does not answer on {path}: {exc.code().name}")
        return EXIT_UNREACHABLE
    if reply.returnCode == _NOPERM:
        say(f"fault {action}: driver {name!r} refuses: fault injection is not enabled (start "
            f"it with --fault-injection; in the device manager's configuration: options = "
            f"{{ fault-injection = true }})")
        return EXIT_FAILURE
    if reply.returnCode == _INVALID_PARAM:
        say(f"fault {action}: driver {name!r} refuses these faults as out of range")
        return EXIT_USAGE
    if reply.returnCode != 0:
        say(f"fault {action}: driver {name!r} answered error {reply.returnCode}")
        return EXIT_FAILURE
    faults = faults_from_proto(reply.faults)
    if args.json:
        print_json({"driver": name, "fault_injection": enabled, "faults": _faults_json(faults),
                    "in_force": faults.describe()})
    else:
        state = "" if enabled else " (fault injection not enabled: none can be set)"
        print(f"{name}: faults in force: {faults.describe()}{state}")
    return EXIT_OK

