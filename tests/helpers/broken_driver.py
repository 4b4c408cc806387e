"""A deliberately broken driver kind, for `nnrt conformance` to fail: the CPU driver's device
(numpy engine) with three faults a vendor could ship.

* Add is wrong where its operands broadcast (shapes differ): the result is off by 0.5 — a
  kernel right on the common case, wrong on the other;
* it says it has float16 (IsFloat16PrecisionSupported) yet computes a model prepared with
  enableFloat16 in float32;
* it writes a model cache it cannot read back (each exported blob loses its last byte).

Registered without installing anything: NNRT_DRIVER_PLUGINS="broken=tests.helpers.broken_driver:KIND"
(the driver process must be able to import `tests`: run from the repository root).
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Sequence

import numpy as np

from nnrt.hdi.device import Device
from nnrt.hdi.plugin import DriverKind

PLUGIN = "broken=tests.helpers.broken_driver:KIND"
WRONG_BY = 0.5


def _break_add() -> None:
    """Replace the ADD_FUSION kernel of this process with one wrong on broadcasting."""
    from nnrt.hdi.reference import ops  # noqa: F401  (registers the kernels first)
    from nnrt.hdi.reference.kernel import KERNELS
    from nnrt.hdi.reference.ops.op_arithmetic import AddFusion
    from nnrt.protos import node_attrs_pb2 as na

    class BroadcastingAddOffByHalf(AddFusion):
        def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
            (result,) = super().execute(inputs)
            if inputs[0].shape != inputs[1].shape and result.dtype.kind == "f":
                result = result + result.dtype.type(WRONG_BY)
            return [result]

    KERNELS[na.NODE_TYPE_ADD_FUSION] = BroadcastingAddOffByHalf


def create(options: argparse.Namespace) -> Device:
    from nnrt.drivers.cpu.device import CpuDevice
    from nnrt.hdi.device import PrepareConfig

    _break_add()

    class BrokenDevice(CpuDevice):
        name = "nnrt-broken"
        vendor = "conformance-fixture"

        def prepare(self, graph, config: PrepareConfig):
            # claims float16, computes float32: the flag is dropped
            prepared = super().prepare(graph, dataclasses.replace(config, enable_float16=False))
            export = prepared.export_cache
            prepared.export_cache = lambda: [blob[:-1] for blob in export()]
            return prepared

    return BrokenDevice(engine="numpy")


KIND = DriverKind(name="broken", summary="a CPU device with a wrong Add, a float16 it does "
                                         "not compute and a cache it cannot read back "
                                         "(conformance test fixture)", create=create)
