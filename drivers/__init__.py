"""The devices. Each kind is one `Device` implementation hosted by `nnrt-driver <kind>`,
found as a plugin (nnrt.hdi.plugin): ours declare their `DriverKind` in `<kind>/kind.py` and
register it in pyproject.toml's `nnrt.drivers` entry points, as a vendor's package would."""

from __future__ import annotations

from nnrt.hdi.plugin import DeviceUnavailable

__all__ = ["DeviceUnavailable"]
