"""`nnrt devices`: one line per device, like `nvidia-smi -L`.

    ID                   NAME                  DRIVER  VENDOR  TYPE  STATUS     HDI  UPTIME  RESTARTS
    4536084387933173364  nnrt-cpu_nnrt_v2_1    cpu     nnrt    CPU   available  2.1  5m03s   0

ID is the stable device ID of client/core/device.py (the one OH_NNDevice_GetAllDevicesID gives),
NAME the device name it is derived from. STATUS is the device's own (available, busy,
offline, unknown) while its driver serves; otherwise the device manager's state of the
driver (starting, backoff, failed, stopped), or `unreachable`. UPTIME and RESTARTS come from
the device manager when one runs (`devmgr.ctl`), else UPTIME from the driver's admin
status and RESTARTS is unknown (`-`). A device whose driver never came up has no identity
yet: ID and NAME are `-`. A device with details of its own (the GPU driver: its OpenCL
platform, device, driver version and memory; the NPU simulator: its specification, memory
in use and simulated utilisation) gets a line under the table; `--json` has all of them.

`nnrt devices --kinds`: the driver kinds installed here instead (nnrt.hdi.plugin: the
`nnrt.drivers` entry points and $NNRT_DRIVER_PLUGINS), whether a driver of that kind runs
or not:

    KIND   FROM        MODULE                 SUMMARY
    accel  nnrt 0.1.0  nnrt.drivers.accel.kind  an NPU simulator: int8 and float16 on ...

A plugin that cannot be used is listed with why (and logged).

Exit codes: 0 at least one device listed, 3 none (no device manager, no driver);
`--kinds`: 0 every kind usable, 1 one is not, 3 none installed.
"""

from __future__ import annotations

import argparse

from nnrt.client.commands.common import (EXIT_FAILURE, EXIT_OK, EXIT_UNREACHABLE,
                                         add_common_arguments,
                                         device_of, devmgr_status, directory_of,
                                         format_duration, known_drivers, print_json,
                                         probe_driver, say, table)

HEADERS = ("ID", "NAME", "DRIVER", "VENDOR", "TYPE", "STATUS", "HDI", "UPTIME", "RESTARTS")


def add_parser(sub) -> None:
    parser = sub.add_parser("devices", help="list the devices (one per driver)",
                            description="List the devices: one per driver in the runtime "
                                        "directory or run by the device manager.")
    add_common_arguments(parser)
    parser.add_argument("--kinds", action="store_true",
                        help="list the driver kinds installed here (nnrt-driver KIND), not "
                             "the devices")
    parser.set_defaults(func=run)


def collect(directory, devmgr: dict | None) -> list[dict]:
    managed = {d["name"]: d for d in devmgr["drivers"]} if devmgr else {}
    devices = []
    for name in known_drivers(directory, devmgr):
        entry = managed.get(name)
        probe = probe_driver(directory, name, admin=True)
        identity = probe.identity or (entry or {}).get("identity")
        device = device_of(directory, name, identity)
        if entry is not None and entry["state"] != "ready":
            status = entry["state"]
        elif probe.serving:
            status = probe.device_status or "unknown"
        else:
            status = "unreachable"
        if entry is not None:
            pid, uptime, restarts = entry["pid"], entry["uptime"], entry["restarts"]
        elif probe.admin is not None:
            pid, uptime, restarts = probe.admin.pid, round(probe.admin.uptimeSeconds, 3), None
        else:
            pid = uptime = restarts = None
        devices.append({
            "id": device.id if device else None,
            "name": device.name if device else None,
            "driver": name,
            "kind": entry["kind"] if entry else (probe.admin.kind if probe.admin else None),
            "device_name": identity["device_name"] if identity else None,
            "vendor": identity["vendor"] if identity else None,
            "type": identity.get("device_type") if identity else None,
            "status": status,
            "hdi_version": "{}.{}".format(*identity["version"]) if identity else None,
            "pid": pid,
            "uptime_seconds": uptime,
            "restarts": restarts,
            "managed": entry is not None,
            "details": dict(sorted(probe.admin.details.items())) if probe.admin else {},
        })
    return devices


# The device details worth a line under the table (all of them are in --json).
_SHOWN_DETAILS = (("opencl_platform", "platform {}"), ("opencl_device", "device {}"),
                  ("opencl_device_index", "index {}"),
                  ("opencl_driver_version", "OpenCL driver {}"),
                  ("global_memory_mib", "{} MiB global memory"),
                  ("spec_identity", "spec {}"), ("int8_throughput", "int8 {}"),
                  ("fp16_throughput", "fp16 {}"), ("device_memory", "{} device memory"),
                  ("memory_used_bytes", "{} bytes in use"),
                  ("sim_utilisation", "utilisation {}"),
                  ("engine", "engine {}"), ("threads", "{} threads"),
                  ("concurrent_runs", "{} run(s) at once"),
                  ("int8_kernels", "int8 kernels {}"),
                  ("nodes_onnxruntime", "{} nodes on onnxruntime"),
                  ("nodes_numpy", "{} on numpy"))


def _detail_words(details: dict[str, str]) -> list[str]:
    return [form.format(details[key]) for key, form in _SHOWN_DETAILS if key in details]


def installed_kinds() -> list[dict]:
    """Every installed driver kind: its name, summary and where it comes from."""
    from nnrt.hdi.plugin import PluginError
    from nnrt.hdi.plugin import installed_kinds as found

    kinds = []
    for name, entry in found().items():
        try:
            summary, error = entry.load().summary, None
        except PluginError as exc:
            summary, error = None, str(exc)
        kinds.append({"kind": name, "summary": summary, "origin": entry.origin,
                      "target": entry.target, "usable": error is None, "error": error})
    return kinds


def run_kinds(args: argparse.Namespace) -> int:
    kinds = installed_kinds()
    if args.json:
        print_json({"kinds": kinds})
    elif kinds:
        print(table(("KIND", "FROM", "MODULE", "SUMMARY"), [
            (k["kind"], k["origin"], k["target"].partition(":")[0],
             k["summary"] if k["usable"] else f"UNUSABLE: {k['error']}") for k in kinds]))
    if not kinds:
        say("no driver kind is installed (reinstall nnrt: its own kinds are entry points of "
            "the group nnrt.drivers)")
        return EXIT_UNREACHABLE
    return EXIT_OK if all(k["usable"] for k in kinds) else EXIT_FAILURE


def run(args: argparse.Namespace) -> int:
    if args.kinds:
        return run_kinds(args)
    directory = directory_of(args)
    devmgr = devmgr_status(directory)
    devices = collect(directory, devmgr)
    if args.json:
        print_json({"runtime_dir": str(directory), "devmgr": devmgr is not None,
                    "devices": devices})
    elif devices:
        print(table(HEADERS, [
            (d["id"], d["name"], d["driver"], d["vendor"], d["type"], d["status"],
             d["hdi_version"], format_duration(d["uptime_seconds"]), d["restarts"])
            for d in devices]))
        for d in devices:
            if d["details"]:
                print(f"  {d['driver']}: " + ", ".join(_detail_words(d["details"])))
    if not devices:
        say(f"no devices: no device manager and no driver in {directory}"
            if devmgr is None else f"no devices: the device manager in {directory} runs none")
        return EXIT_UNREACHABLE
    return EXIT_OK
