"""The devices the Pythonic API names: by ID, name, type, DeviceInfo, or a preference
list ("gpu,cpu", "auto")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from nnrt.client import capi
from nnrt.client.capi.enums import OH_NN_DeviceType
from nnrt.client.core.device import find_device, registry
from nnrt.client.core.hetero import device_list

from .calls import _call


@dataclass(frozen=True)
class DeviceInfo:
    """A device the runtime knows: its OH_NN device ID, name and type."""

    id: int
    name: str
    type: OH_NN_DeviceType


def list_devices() -> list[DeviceInfo]:
    """Every device whose driver answers now (OH_NNDevice_GetAllDevicesID order)."""
    found = []
    for device_id in _call("OH_NNDevice_GetAllDevicesID", capi.OH_NNDevice_GetAllDevicesID):
        code, name = capi.OH_NNDevice_GetName(device_id)
        kind_code, kind = capi.OH_NNDevice_GetType(device_id)
        if code == 0 and kind_code == 0:
            found.append(DeviceInfo(device_id, name, kind))
    return found


def _devices(device: Any) -> list[Any] | None:
    """The core's devices of a preference list, "gpu,cpu" or "auto" (core/hetero.py
    `device_list`); None: one device is named."""
    return device_list(registry().devices(), device)


def _device_id(device: int | str | OH_NN_DeviceType | DeviceInfo | None) -> int:
    """The ID of the device an ID, a name, a type, a DeviceInfo or None (the first) names,
    by the core's rules (core/device.py `find_device`, as the CLI's --device)."""
    if isinstance(device, DeviceInfo):
        return device.id
    return find_device(registry().devices(), device).id
