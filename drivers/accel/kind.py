"""The NPU simulator as a plugin (`nnrt-driver accel`): its option and its device."""

from __future__ import annotations

import argparse
from pathlib import Path

from nnrt.hdi.device import Device
from nnrt.hdi.plugin import DriverKind


def add_options(group: argparse._ArgumentGroup) -> None:
    group.add_argument("--spec", type=Path, default=None, metavar="SPEC.toml",
                       help="the simulated device's specification (default: the built-in "
                            "one, a small mobile NPU)")


def create(options: argparse.Namespace) -> Device:
    from nnrt.drivers.accel.device import AccelDevice

    return AccelDevice(spec_path=options.spec)


KIND = DriverKind(name="accel", summary="an NPU simulator: int8 and float16 on the reference "
                                        "kernels, timed by a cost model (--spec)",
                  create=create, add_options=add_options)
