"""The faults a driver can be told to inject (server/faults.py applies them): one immutable
value, its command-line and admin-protocol spellings. Shared by the driver and the CLI
(`nnrt faults`), which builds and prints them.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import cached_property

from nnrt.protos import admin_pb2 as pb
from nnrt.protos import hdi_types_pb2 as ht

# --fault-device-status names -> HDI DeviceStatus codes
DEVICE_STATUS = {"available": ht.AVAILABLE, "busy": ht.BUSY, "offline": ht.OFFLINE,
                 "unknown": ht.UNKNOWN}


@dataclass(frozen=True)
class Faults:
    """The faults in force at one moment; the default value injects nothing."""

    run_delay_ms: int = 0
    run_hang: bool = False
    exit_on_run: int = 0
    exit_on_prepare: int = 0
    exit_on_run_probability: float = 0.0
    exit_on_export_cache: bool = False
    device_status: int | None = None  # an HDI DeviceStatus code; None = the device's own
    device_busy: bool = False
    corrupt_exported_cache: bool = False

    def __post_init__(self) -> None:
        for name in ("run_delay_ms", "exit_on_run", "exit_on_prepare"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0")
        if not 0.0 <= self.exit_on_run_probability <= 1.0:
            raise ValueError("exit_on_run_probability must be within [0, 1]")
        if self.device_status is not None and self.device_status not in DEVICE_STATUS.values():
            raise ValueError(f"device_status {self.device_status} is no DeviceStatus")

    @cached_property
    def any(self) -> bool:
        # Worked out once per (immutable) value: every Run asks.
        return self != Faults()

    def describe(self) -> str:
        parts = []
        if self.run_delay_ms:
            parts.append(f"Run delayed {self.run_delay_ms} ms")
        if self.run_hang:
            parts.append("Run hangs forever")
        if self.exit_on_run:
            parts.append(f"SIGKILL on Run #{self.exit_on_run}")
        if self.exit_on_prepare:
            parts.append(f"SIGKILL on Prepare #{self.exit_on_prepare}")
        if self.exit_on_run_probability:
            parts.append(f"SIGKILL on any Run with probability {self.exit_on_run_probability:g}")
        if self.exit_on_export_cache:
            parts.append("SIGKILL on ExportModelCache")
        if self.device_status is not None:
            parts.append(f"device status reported as {ht.DeviceStatus.Name(self.device_status)}")
        if self.device_busy:
            parts.append("Prepare* and Run answer NNRT_DEVICE_BUSY")
        if self.corrupt_exported_cache:
            parts.append("exported model caches corrupted")
        return ", ".join(parts) or "none"


# The Faults fields every layer carries as they are, under the same name (the option
# `--fault-<name>`, the admin FaultConfig field <name> in camelCase); device_status alone is
# translated: a name on the command line, shifted by one on the wire (0: the device's own).
PLAIN_FIELDS = tuple(f.name for f in fields(Faults) if f.name != "device_status")



def _wire(name: str) -> str:
    """The FaultConfig field of Faults field `name` (run_delay_ms: runDelayMs)."""
    head, *rest = name.split("_")
    return head + "".join(word.capitalize() for word in rest)


def faults_to_proto(faults: Faults) -> pb.FaultConfig:
    return pb.FaultConfig(
        **{_wire(name): getattr(faults, name) for name in PLAIN_FIELDS},
        deviceStatus=0 if faults.device_status is None else faults.device_status + 1,
    )


def faults_from_proto(config: pb.FaultConfig) -> Faults:
    """The Faults a FaultConfig asks for; ValueError when it is out of range."""
    return Faults(
        **{name: getattr(config, _wire(name)) for name in PLAIN_FIELDS},
        device_status=None if config.deviceStatus == 0 else config.deviceStatus - 1,
    )
