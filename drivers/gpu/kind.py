"""The GPU driver as a plugin (`nnrt-driver gpu`): its options and its device; pyopencl is
imported only by `create`."""

from __future__ import annotations

import argparse

from nnrt.hdi.device import Device
from nnrt.hdi.plugin import DriverKind


def add_options(group: argparse._ArgumentGroup) -> None:
    group.add_argument("--cl-device", default=None, metavar="gpu|any|P:D",
                       help="the OpenCL device: gpu (default: the first device of type GPU), "
                            "any (any type, e.g. PoCL's CPU device), or platform:device indices")
    group.add_argument("--gpu-memory-mb", type=int, default=None, metavar="N",
                       help="device memory the driver may use (default: the device's global "
                            "memory); beyond it prepare and runs get NNRT_OUT_OF_MEMORY")


def check_options(options: argparse.Namespace) -> None:
    if options.gpu_memory_mb is not None and options.gpu_memory_mb <= 0:
        raise ValueError("--gpu-memory-mb must be > 0")


def create(options: argparse.Namespace) -> Device:
    from nnrt.drivers.gpu.device import GpuDevice

    return GpuDevice(cl_device=options.cl_device or "gpu", memory_limit_mb=options.gpu_memory_mb)


KIND = DriverKind(name="gpu", summary="an OpenCL device through pyopencl (a GPU; PoCL's CPU "
                                      "device with --cl-device any)",
                  create=create, add_options=add_options, check_options=check_options)
