"""The CPU device: numpy kernels, planned once per prepared model."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np

from nnrt.drivers.cpu.kernel import create_kernel
from nnrt.drivers.cpu.plan import ExecutionPlan
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.server.device import CancelCheck, Capabilities, Device, PrepareConfig, PreparedModel
from nnrt.server.errors import DriverError
from nnrt.server.graph import Graph, Shape

log = logging.getLogger(__name__)


class CpuPreparedModel(PreparedModel):
    def __init__(self, plan: ExecutionPlan) -> None:
        super().__init__(plan.graph.inputs, plan.graph.outputs)
        self.plan = plan

    def static_output_shapes(self) -> list[Shape] | None:
        return self.plan.output_shapes()

    def run(self, inputs: Sequence[np.ndarray], cancelled: CancelCheck) -> list[np.ndarray]:
        return self.plan.run(inputs, cancelled)


class CpuDevice(Device):
    kind = "cpu"
    name = "nnrt-cpu"
    vendor = "nnrt"
    version = "0.1.0"
    device_type = ht.CPU
    capabilities = Capabilities(dynamic_input=True)

    def supported_operations(self, graph: Graph) -> list[bool]:
        answers = []
        for node in graph.nodes:
            if node.index in graph.undecodable:
                answers.append(False)
                continue
            try:
                create_kernel(node)
                answers.append(True)
            except DriverError as exc:
                log.info("GetSupportedOperation: %s", exc.message)
                answers.append(False)
            except Exception:  # a malformed node must not fail the whole query
                log.exception("GetSupportedOperation: node %d rejected", node.index)
                answers.append(False)
        return answers

    def prepare(self, graph: Graph, config: PrepareConfig) -> PreparedModel:
        return CpuPreparedModel(ExecutionPlan(graph))
