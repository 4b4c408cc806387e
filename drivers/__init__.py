"""The devices. Each kind is one `Device` implementation hosted by `nnrt-driver <kind>`."""

from __future__ import annotations

import importlib

from nnrt.hdi.device import Device


class DeviceUnavailable(RuntimeError):
    """The device a driver was asked to serve does not exist here (no OpenCL GPU, ...); the
    message says what was found and how to choose."""

# kind -> "module:class"; imported only when that driver starts.
DEVICE_KINDS: dict[str, str] = {
    "cpu": "nnrt.drivers.cpu.device:CpuDevice",
    "gpu": "nnrt.drivers.gpu.device:GpuDevice",
    "accel": "nnrt.drivers.accel.device:AccelDevice",
}


def load_device(kind: str, **options: object) -> Device:
    """Instantiate the device of a kind with its own options (the GPU's `cl_device`, ...);
    KeyError for an unknown kind."""
    module_name, _, class_name = DEVICE_KINDS[kind].partition(":")
    return getattr(importlib.import_module(module_name), class_name)(**options)
