"""The execution plan of a CPU prepared model, made once at prepare time.

Preparing creates every kernel (validation and planning), fixes the order of the steps,
pre-binds the constants, works out after which step each intermediate can be dropped, and,
when no input dimension is dynamic, infers every shape once and checks it against the
declared tensor dims. A run then only walks the steps. Making the plan is linear in the
graph (tests/test_hardening_budgets.py measures it).

The memory a run will write (drivers/reference.py, `run_memory`) is checked against the
model memory limit at prepare when the input shapes are static, else at each run for its
concrete shapes before any kernel runs: NNRT_OUT_OF_MEMORY with the sizes beyond it.

Each run borrows an arena from the plan's pool (`nnrt.drivers.cpu.arena`): the kernels
write intermediates and keep scratch space (padded inputs, im2col matrices) there, reused
from run to run while the shapes stay the same; concurrent runs get arenas of their own.
The model's outputs never live in an arena (the host reads them after the run).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass

import numpy as np

from nnrt.drivers.cpu.arena import ArenaPool
from nnrt.drivers.cpu.kernel import Kernel, create_kernel
from nnrt.drivers.reference import check_run_memory, infer_graph_shapes
from nnrt.server.device import CancelCheck
from nnrt.server.errors import NNRT_FAILED, NNRT_TIME_OUT, DriverError
from nnrt.server.graph import DYNAMIC, Graph, Shape

log = logging.getLogger(__name__)

# A context manager entered around one step of a run, given the step's position.
StepScope = Callable[[int], AbstractContextManager]


@dataclass(frozen=True)
class Step:
    kernel: Kernel
    inputs: tuple[int, ...]  # tensor indices
    outputs: tuple[int, ...]
    drop_after: tuple[int, ...]  # intermediates whose last reader is this step


class ExecutionPlan:
    def __init__(self, graph: Graph, memory_limit: int | None = None) -> None:
        """`memory_limit`: bytes a run may write (default: the process's model memory limit)."""
        self.graph = graph
        self.memory_limit = memory_limit
        kernels = {i: create_kernel(graph.nodes[i]) for i in graph.execution_order}
        self.input_ids = tuple(t.index for t in graph.inputs)
        self.output_ids = tuple(t.index for t in graph.outputs)
        self.constants = {t.index: t.constant for t in graph.tensors if t.is_constant}
        keep = set(self.output_ids) | set(self.constants)
        last_reader: dict[int, int] = {}
        for position, node_index in enumerate(graph.execution_order):
            for t in graph.nodes[node_index].inputs:
                last_reader[t.index] = position
        # Inverted once (tensor -> last step becomes step -> tensors): scanning every tensor
        # at every step made prepare quadratic in the graph (16 000 nodes: seconds).
        drops: dict[int, list[int]] = {}
        for t, position in last_reader.items():
            if t not in keep:
                drops.setdefault(position, []).append(t)
        steps = []
        for position, node_index in enumerate(graph.execution_order):
            node = graph.nodes[node_index]
            steps.append(Step(kernels[node_index], tuple(t.index for t in node.inputs),
                              tuple(t.index for t in node.outputs),
                              tuple(sorted(drops.get(position, ())))))
        self.steps = tuple(steps)
        self._slots: list[np.ndarray | None] = [None] * len(graph.tensors)
        for index, constant in self.constants.items():
            self._slots[index] = constant
        self.arenas = ArenaPool(frozenset(self.output_ids))
        self.dynamic = any(t.is_dynamic for t in graph.inputs)
        self.shapes: dict[int, Shape] | None = None
        if not self.dynamic:
            self.shapes = self.infer({t.index: t.shape for t in graph.inputs})
            check_run_memory(graph, self.shapes, "prepare", memory_limit)

    def infer(self, input_shapes: dict[int, Shape]) -> dict[int, Shape]:
        """Shapes of every tensor for these input shapes; DriverError on a mismatch."""
        return infer_graph_shapes([step.kernel for step in self.steps], input_shapes,
                                  self.constants)

    def output_shapes(self) -> list[Shape] | None:
        if self.shapes is None:
            return None
        shapes = [self.shapes[i] for i in self.output_ids]
        return None if any(DYNAMIC in s for s in shapes) else shapes

    def run(self, inputs: Sequence[np.ndarray], cancelled: CancelCheck,
            around: StepScope | None = None) -> list[np.ndarray]:
        """The outputs; `around(position)`, when given, is entered around each step (the
        accelerator simulator takes its device and keeps its time there)."""
        values = self._slots.copy()  # tensor index -> array; constants pre-bound
        for index, array in zip(self.input_ids, inputs):
            values[index] = array
        if self.dynamic:
            shapes = self.infer({i: a.shape for i, a in zip(self.input_ids, inputs)})
            check_run_memory(self.graph, shapes, "run", self.memory_limit)
        with self.arenas.use() as arena:
            for position, step in enumerate(self.steps):
                if cancelled():
                    node = step.kernel.node
                    log.info("run abandoned before node %d (%s): its caller gave up", node.index,
                             node.name)
                    raise DriverError(NNRT_TIME_OUT, "run abandoned: its caller gave up")
                try:
                    if around is None:
                        results = step.kernel.execute([values[i] for i in step.inputs])
                    else:
                        with around(position):
                            results = step.kernel.execute([values[i] for i in step.inputs])
                except DriverError:
                    raise
                except Exception as exc:  # a kernel bug or a value-dependent failure: one run fails
                    node = step.kernel.node
                    log.exception("node %d (%s) failed", node.index, node.name)
                    raise DriverError(NNRT_FAILED, f"node {node.index} ({node.name}) failed: {exc}")
                for index, value in zip(step.outputs, results):
                    values[index] = value
                for index in step.drop_after:
                    values[index] = None
            # An output that is a view of an intermediate (a Reshape of it) must not stay in
            # the arena, which the next run may take before the host has read this one's.
            return [np.array(y) if arena.holds(y) else y
                    for y in (values[i] for i in self.output_ids)]
