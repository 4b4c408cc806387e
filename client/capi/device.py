"""`OH_NNDevice_*`: the devices the runtime knows (capi.md 1.48–1.50).

Every driver found in `NNRT_RUNTIME_DIR` is a device (nnrt.client.core.device). Its ID is a
hash of its name `<deviceName>_<vendorName>_v<major>_<minor>` and of its driver's socket
name, so two drivers of one kind are two devices, it is stable across driver restarts and
never 0; `0` stands for the first device of
`OH_NNDevice_GetAllDevicesID`'s order wherever an ID is accepted.
"""

from __future__ import annotations

import logging
from typing import Any

from nnrt.client.capi.enums import (
    OH_NN_CONNECTION_EXCEPTION,
    OH_NN_FAILED,
    OH_NN_INVALID_PARAMETER,
    OH_NN_SUCCESS,
    OH_NN_UNAVAILABLE_DEVICE,
    OH_NN_DeviceType,
    OH_NN_ReturnCode,
)
from nnrt.client.capi.structs import c_count
from nnrt.client.core.device import Device, registry
from nnrt.client.core.driver import DriverGone
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.common.errors import NNRT_SUCCESS, code_name

__all__ = ["OH_NNDevice_GetAllDevicesID", "OH_NNDevice_GetName", "OH_NNDevice_GetType"]

log = logging.getLogger(__name__)

_DEVICE_TYPES = {
    ht.CPU: OH_NN_DeviceType.OH_NN_CPU,
    ht.GPU: OH_NN_DeviceType.OH_NN_GPU,
    ht.ACCELERATOR: OH_NN_DeviceType.OH_NN_ACCELERATOR,
}


def _devices() -> list[Device]:
    try:
        return registry().devices()
    except Exception:  # an unreadable runtime directory is "no device", never an exception
        log.exception("listing the devices failed")
        return []


def find_device(device_id: Any) -> Device | None:
    """The registered device of an ID (0 = the first one), None if there is none."""
    value = c_count(device_id)
    if value is None:
        return None
    devices = _devices()
    if not devices:
        return None
    if value == 0:
        return devices[0]
    return next((d for d in devices if d.id == value), None)


def OH_NNDevice_GetAllDevicesID() -> tuple[OH_NN_ReturnCode, list[int]]:
    """capi.md 1.48: `(OH_NN_SUCCESS, ids)` — one ID per answering driver; `[]` for none."""
    return OH_NN_SUCCESS, [device.id for device in _devices()]


def OH_NNDevice_GetName(deviceID: int) -> tuple[OH_NN_ReturnCode, str | None]:
    """capi.md 1.49: `(code, name)`; an unknown ID (or no device) → `(OH_NN_FAILED, None)`."""
    device = find_device(deviceID)
    if device is None:
        return OH_NN_FAILED, None
    return OH_NN_SUCCESS, device.name


def OH_NNDevice_GetType(deviceID: int) -> tuple[OH_NN_ReturnCode, OH_NN_DeviceType | None]:
    """capi.md 1.50: `(code, type)`; unknown ID → INVALID_PARAMETER, failed query →
    UNAVAILABLE_DEVICE, driver gone meanwhile → CONNECTION_EXCEPTION."""
    device = find_device(deviceID)
    if device is None:
        return OH_NN_INVALID_PARAMETER, None
    try:
        reply = device.get_device_type()  # no session kept for a query
    except DriverGone as exc:
        log.warning("OH_NNDevice_GetType: device %s is gone: %s", device.name, exc)
        return OH_NN_CONNECTION_EXCEPTION, None
    if reply.returnCode != NNRT_SUCCESS:
        log.warning("OH_NNDevice_GetType: GetDeviceType on %s failed: %s", device.name,
                    code_name(reply.returnCode))
        return OH_NN_UNAVAILABLE_DEVICE, None
    return OH_NN_SUCCESS, _DEVICE_TYPES.get(reply.deviceType, OH_NN_DeviceType.OH_NN_OTHERS)
