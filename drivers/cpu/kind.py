"""The CPU driver as a plugin (`nnrt-driver cpu`): its options, their checks, its device.

Imported for `nnrt-driver --help`, the device manager's configuration and `nnrt devices
--kinds`: the device module (onnxruntime, the kernels) is imported only by `create`.
"""

from __future__ import annotations

import argparse
import os

from nnrt.drivers.cpu.ort import int8_kernels  # its choices and variable (numpy alone)
from nnrt.hdi.device import Device
from nnrt.hdi.plugin import DriverKind

ENGINE_ENV = "NNRT_CPU_ENGINE"
SPIN_ENV = "NNRT_ORT_SPIN"


def add_options(group: argparse._ArgumentGroup) -> None:
    group.add_argument("--engine", choices=["ort", "numpy"], default=None,
                       help=f"ort (default, or ${ENGINE_ENV}): onnxruntime computes what it can "
                            "express exactly, numpy kernels the rest; numpy: the numpy "
                            "reference kernels only")
    group.add_argument("--threads", type=int, default=None, metavar="N",
                       help="onnxruntime's intra-op threads, shared by every model (default: "
                            "the cores this process may use)")
    group.add_argument("--int8-kernels", choices=int8_kernels.CHOICES, default=None,
                       help="onnxruntime's int8 kernels: auto (default, or "
                            f"${int8_kernels.ENV}): u8s8 where the CPU makes them exact "
                            "(VNNI; ARM), s8s8 elsewhere (u8s8 saturates without VNNI), each "
                            "checked at start; numpy: quantised nodes on the numpy kernels")
    group.add_argument("--ort-spin", action="store_true", default=None,
                       help="onnxruntime's pool threads spin on after each run, to find the "
                            "next one awake: for a driver that owns the machine (default, "
                            f"unless ${SPIN_ENV}=1: they spin within a run given every core "
                            "and sleep at its end, leaving the cores to other processes)")

def check_options(options: argparse.Namespace) -> None:
    if options.threads is not None and options.threads <= 0:
        raise ValueError("--threads must be > 0")
    spin_env = os.environ.get(SPIN_ENV)
    if options.ort_spin is None and spin_env not in (None, "", "0", "1"):
        raise ValueError(f"${SPIN_ENV}={spin_env!r} is not 0 or 1")
    int8_env = os.environ.get(int8_kernels.ENV)
    if options.int8_kernels is None and int8_env and \
            int8_env.lower() not in int8_kernels.CHOICES:
        raise ValueError(f"${int8_kernels.ENV}={int8_env!r} is not one of "
                         f"{', '.join(int8_kernels.CHOICES)}")


def create(options: argparse.Namespace) -> Device:
    from nnrt.drivers.cpu.device import CpuDevice

    # NNRT_CPU_ENGINE: the default engine of every CPU driver started without --engine
    # (how the test suite runs whole with either engine).
    spin = options.ort_spin
    if spin is None:
        spin = os.environ.get(SPIN_ENV, "0") == "1"
    return CpuDevice(engine=options.engine or os.environ.get(ENGINE_ENV, "ort"),
                     threads=options.threads, int8_kernels=options.int8_kernels, ort_spin=spin)


KIND = DriverKind(name="cpu", summary="the CPU: onnxruntime (--engine ort, default) or the "
                                      "numpy reference kernels (--engine numpy)",
                  create=create, add_options=add_options, check_options=check_options)
