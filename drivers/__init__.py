"""The devices. Each kind is one `Device` implementation hosted by `nnrt-driver <kind>`."""

from __future__ import annotations

import importlib

from nnrt.server.device import Device

# kind -> "module:class"; imported only when that driver starts.
DEVICE_KINDS: dict[str, str] = {
    "cpu": "nnrt.drivers.cpu.device:CpuDevice",
}


def load_device(kind: str) -> Device:
    """Instantiate the device of a kind; KeyError for an unknown kind."""
    module_name, _, class_name = DEVICE_KINDS[kind].partition(":")
    return getattr(importlib.import_module(module_name), class_name)()
