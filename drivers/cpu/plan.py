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
from typing import Protocol

import numpy as np

from nnrt.drivers.cpu.arena import ArenaPool
from nnrt.drivers.cpu.kernel import Kernel, create_kernel
from nnrt.drivers.reference import check_run_memory, infer_graph_shapes
from nnrt.server.device import CancelCheck
from nnrt.common.errors import NNRT_FAILED, NNRT_TIME_OUT, DriverError
from nnrt.server.graph import DYNAMIC, Graph, Shape

log = logging.getLogger(__name__)

# A context manager entered around one step of a run, given the step's position.
StepScope = Callable[[int], AbstractContextManager]


class Unit(Protocol):
    """What one step computes: a numpy kernel (one node) or an engine's segment (several)."""

    label: str

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]: ...


# Splits the graph's kernels (execution order) into units with the tensors each reads and
# writes; the default makes every kernel a unit of its own.
Partitioner = Callable[[Graph, dict[int, Kernel]], Sequence[tuple[Unit, Sequence[int],
                                                                  Sequence[int]]]]


def one_unit_per_node(graph: Graph, kernels: dict[int, Kernel]) -> list[tuple[Unit, tuple[int, ...], tuple[int, ...]]]:
    return [(kernels[i], tuple(t.index for t in graph.nodes[i].inputs),
             tuple(t.index for t in graph.nodes[i].outputs)) for i in graph.execution_order]


@dataclass(frozen=True)
class Step:
    unit: Unit
    inputs: tuple[int, ...]  # tensor indices
    outputs: tuple[int, ...]
    drop_after: tuple[int, ...]  # intermediates whose last reader is this step


class ExecutionPlan:
    def __init__(self, graph: Graph, memory_limit: int | None = None,
                 partitioner: Partitioner = one_unit_per_node) -> None:
        """`memory_limit`: bytes a run may write (default: the process's model memory limit);
        `partitioner`: what runs each node (default: its numpy kernel)."""
        self.graph = graph
        self.memory_limit = memory_limit
        self.kernels = {i: create_kernel(graph.nodes[i]) for i in graph.execution_order}
        self.input_ids = tuple(t.index for t in graph.inputs)
        self.output_ids = tuple(t.index for t in graph.outputs)
        self.constants = {t.index: t.constant for t in graph.tensors if t.is_constant}
        # Shapes are checked (and, for static inputs, the run's memory) before any engine
        # is asked to compile the graph.
        self.dynamic = any(t.is_dynamic for t in graph.inputs)
        self.shapes: dict[int, Shape] | None = None
        if not self.dynamic:
            self.shapes = self.infer({t.index: t.shape for t in graph.inputs})
            check_run_memory(graph, self.shapes, "prepare", memory_limit)
        units = [(unit, tuple(ins), tuple(outs)) for unit, ins, outs in partitioner(graph, self.kernels)]
        keep = set(self.output_ids) | set(self.constants)
        last_reader: dict[int, int] = {}
        for position, (_, ins, _) in enumerate(units):
            for t in ins:
                last_reader[t] = position
        # Inverted once (tensor -> last step becomes step -> tensors): scanning every tensor
        # at every step made prepare quadratic in the graph (16 000 nodes: seconds).
        drops: dict[int, list[int]] = {}
        for t, position in last_reader.items():
            if t not in keep:
                drops.setdefault(position, []).append(t)
        self.steps = tuple(Step(unit, ins, outs, tuple(sorted(drops.get(position, ()))))
                           for position, (unit, ins, outs) in enumerate(units))
        self._slots: list[np.ndarray | None] = [None] * len(graph.tensors)
        for index, constant in self.constants.items():
            self._slots[index] = constant
        self.arenas = ArenaPool(frozenset(self.output_ids))

    def infer(self, input_shapes: dict[int, Shape]) -> dict[int, Shape]:
        """Shapes of every tensor for these input shapes; DriverError on a mismatch."""
        return infer_graph_shapes([self.kernels[i] for i in self.graph.execution_order],
                                  input_shapes, self.constants)

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
                    log.info("run abandoned before %s: its caller gave up", step.unit.label)
                    raise DriverError(NNRT_TIME_OUT, "run abandoned: its caller gave up")
                try:
                    if around is None:
                        results = step.unit.execute([values[i] for i in step.inputs])
                    else:
                        with around(position):
                            results = step.unit.execute([values[i] for i in step.inputs])
                except DriverError:
                    raise
                except Exception as exc:  # a kernel bug or a value-dependent failure: one run fails
                    log.exception("%s failed", step.unit.label)
                    raise DriverError(NNRT_FAILED, f"{step.unit.label} failed: {exc}")
                for index, value in zip(step.outputs, results):
                    values[index] = value
                for index in step.drop_after:
                    values[index] = None
            # An output that is a view of an intermediate (a Reshape of it) must not stay in
            # the arena, which the next run may take before the host has read this one's.
            return [np.array(y) if arena.holds(y) else y
                    for y in (values[i] for i in self.output_ids)]
