"""The CPU driver as a plugin (`nnrt-driver cpu`): its options, their checks, its device.

Imported for `nnrt-driver --help`, the device manager's configuration and `nnrt devices
--kinds`: the device module (onnxruntime, the kernels) is imported only by `create`.
"""

from __future__ import annotations

import argparse
import os

from nnrt.drivers.cpu.ort import int8_kernels, pool_spinning  # choices, variables (no onnxruntime)
from nnrt.hdi.device import Device
from nnrt.hdi.plugin import DriverKind

ENGINE_ENV = "NNRT_CPU_ENGINE"


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
    group.add_argument("--ort-spin", nargs="?", const="on", choices=pool_spinning.MODES,
                       default=None,
                       help="onnxruntime's pool threads after a run: auto (default, or "
                            f"${pool_spinning.ENV}) spin on while the CPUs are spare, a run "
                            "taking the pool only then; on (the flag alone): spin on after "
                            "every run, for a driver that owns the machine; off: sleep at its "
                            "end, leaving the cores to other processes at the price of waking "
                            "them for every run")


def check_options(options: argparse.Namespace) -> None:
    if options.threads is not None and options.threads <= 0:
        raise ValueError("--threads must be > 0")
    if options.ort_spin is None:
        pool_spinning.mode_from_env(os.environ.get(pool_spinning.ENV))  # ValueError: refused
    int8_env = os.environ.get(int8_kernels.ENV)
    if options.int8_kernels is None and int8_env and \
            int8_env.lower() not in int8_kernels.CHOICES:
        raise ValueError(f"${int8_kernels.ENV}={int8_env!r} is not one of "
                         f"{', '.join(int8_kernels.CHOICES)}")


def create(options: argparse.Namespace) -> Device:
    from nnrt.drivers.cpu.device import CpuDevice

    # NNRT_CPU_ENGINE: the default engine of every CPU driver started without --engine
    # (how the test suite runs whole with either engine).
    spin = options.ort_spin or pool_spinning.mode_from_env(os.environ.get(pool_spinning.ENV)) \
        or "auto"
    return CpuDevice(engine=options.engine or os.environ.get(ENGINE_ENV, "ort"),
                     threads=options.threads, int8_kernels=options.int8_kernels, ort_spin=spin)


KIND = DriverKind(name="cpu", summary="the CPU: onnxruntime (--engine ort, default) or the "
                                      "numpy reference kernels (--engine numpy)",
                  create=create, add_options=add_options, check_options=check_options)
