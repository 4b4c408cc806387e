"""The template driver's registration: the DriverKind its entry point names.

Kept light (nnrt imports it to list the kinds and to check a configuration's options): the
device module is imported by `create` only.
"""

from __future__ import annotations

import argparse

from nnrt.hdi.device import Device
from nnrt.hdi.plugin import DriverKind

DEFAULT_MEMORY_MB = 256


def add_options(group: argparse._ArgumentGroup) -> None:
    """The driver's own options, shown by `nnrt-driver template --help` and accepted in the
    device manager's `options = { ... }` table."""
    group.add_argument("--memory-mb", type=int, default=DEFAULT_MEMORY_MB, metavar="N",
                       help="the device's memory: client buffers and prepared weights "
                            "together; beyond it NNRT_OUT_OF_MEMORY (default "
                            f"{DEFAULT_MEMORY_MB})")


def check_options(options: argparse.Namespace) -> None:
    """What argparse cannot check: a ValueError's message is the usage error."""
    if options.memory_mb <= 0:
        raise ValueError("--memory-mb must be > 0")


def create(options: argparse.Namespace) -> Device:
    from nnrt_template_driver.device import TemplateDevice

    return TemplateDevice(memory_bytes=options.memory_mb << 20)


KIND = DriverKind(name="template",
                  summary="the template driver: Add, Mul, MatMul, Activation, Softmax and "
                          "Reshape in float32 on the reference kernels",
                  create=create, add_options=add_options, check_options=check_options)
