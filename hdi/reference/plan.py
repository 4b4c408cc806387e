"""The execution plan of a CPU prepared model, made once at prepare time.

Preparing creates every kernel (validation and planning), fixes the order of the steps,
pre-binds the constants, works out after which step each intermediate can be dropped, and,
when no input dimension is dynamic, infers every shape once and checks it against the
declared tensor dims. A run then only walks the steps. Making the plan is linear in the
graph (tests/server/test_budgets.py measures it).

The memory a run will write (hdi/reference/graph_checks.py, `run_memory`) is checked against the
model memory limit at prepare when the input shapes are static, else at each run for its
concrete shapes before any kernel runs: NNRT_OUT_OF_MEMORY with the sizes beyond it. The
tensors whose size depends on values (a run-time Tile multiples tensor, Range's bounds, a
run-time shape) are charged at each run against what is left of the limit (`RunAllowance`)
before the step that writes them computes, sized from the run's values (`unsized_outputs`).
An onnxruntime segment in which such a size depends on a value the segment itself computes
(TopK's k, a one-input Where's mask) cannot be sized before it runs: for that run its nodes
compute one by one on their numpy kernels, each charged before it computes.

Each run borrows an arena from the plan's pool (`nnrt.hdi.reference.arena`): the kernels
write intermediates and keep scratch space (padded inputs, im2col matrices) there, reused
from run to run while the shapes stay the same; concurrent runs get arenas of their own.
The model's outputs never live in an arena (the host reads them after the run).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from nnrt.hdi.reference.arena import ArenaPool
from nnrt.hdi.reference.kernel import Kernel, create_kernel
from nnrt.hdi.reference.graph_checks import (
    RunAllowance,
    RunMemory,
    check_run_memory,
    infer_graph_shapes,
    unsized_outputs,
)
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.device import CancelCheck, StepTime
from nnrt.common.errors import NNRT_FAILED, NNRT_TIME_OUT, DriverError
from nnrt.hdi.graph import DYNAMIC, Graph, Shape

log = logging.getLogger(__name__)

# A context manager entered around one step of a run, given the step's position.
StepScope = Callable[[int], AbstractContextManager]


class Unit(Protocol):
    """What one step computes: a numpy kernel (one node) or an engine's segment (several,
    `node_indices` in execution order)."""

    label: str

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]: ...


# Splits the graph's kernels (execution order) into units with the tensors each reads and
# writes; the default makes every kernel a unit of its own.
Partitioner = Callable[[Graph, dict[int, Kernel]], Sequence[tuple[Unit, Sequence[int],
                                                                  Sequence[int]]]]


def one_unit_per_node(graph: Graph, kernels: dict[int, Kernel]) -> list[tuple[Unit, tuple[int, ...], tuple[int, ...]]]:
    return [(kernels[i], tuple(t.index for t in graph.nodes[i].inputs),
             tuple(t.index for t in graph.nodes[i].outputs)) for i in graph.execution_order]


def op_name(node) -> str:
    """The node's type as a profile names it: CONV2D_FUSION, ..."""
    try:
        return na.NodeType.Name(node.node_type).removeprefix("NODE_TYPE_")
    except ValueError:
        return str(node.node_type)


@dataclass(frozen=True)
class Step:
    unit: Unit
    inputs: tuple[int, ...]  # tensor indices
    outputs: tuple[int, ...]
    drop_after: tuple[int, ...]  # intermediates whose last reader is this step
    nodes: tuple[int, ...]  # the node indices it computes, in execution order


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
        self.counted: RunMemory | None = None
        if not self.dynamic:
            self.shapes = self.infer({t.index: t.shape for t in graph.inputs})
            self.counted = check_run_memory(graph, self.shapes, "prepare", memory_limit)
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
        self.steps = tuple(Step(unit, ins, outs, tuple(sorted(drops.get(position, ()))),
                                (unit.node.index,) if isinstance(unit, Kernel)
                                else tuple(unit.node_indices))
                           for position, (unit, ins, outs) in enumerate(units))
        self._step_of = {n: position for position, step in enumerate(self.steps)
                         for n in step.nodes}
        # Steps that write a tensor whose size only the run's values tell (static inputs).
        self.unsized: frozenset[int] = frozenset() if self.shapes is None \
            else self._unsized_steps(self.shapes)
        self._slots: list[np.ndarray | None] = [None] * len(graph.tensors)
        for index, constant in self.constants.items():
            self._slots[index] = constant
        self.arenas = ArenaPool(frozenset(self.output_ids))
        self._split_logged: set[str] = set()  # segments said to run on numpy (see _sized)

    def infer(self, input_shapes: dict[int, Shape]) -> dict[int, Shape]:
        """Shapes of every tensor for these input shapes; DriverError on a mismatch."""
        return infer_graph_shapes([self.kernels[i] for i in self.graph.execution_order],
                                  input_shapes, self.constants)

    def _unsized_steps(self, shapes: dict[int, Shape]) -> frozenset[int]:
        """Positions of the steps that write a tensor left DYNAMIC by these shapes."""
        return frozenset(self._step_of[node.index] for node in
                         (self.graph.nodes[i] for i in self.graph.execution_order)
                         if any(DYNAMIC in shapes[t.index] for t in node.outputs))

    def sizes_at(self, inputs: Sequence[np.ndarray]) -> dict[int, Shape]:
        """Every tensor's shape for a run of these inputs, sized by their values where the
        values decide it (the accelerator's cost model times the run with them); DYNAMIC
        left where a value the run computes decides it."""
        shapes = self.shapes if not self.dynamic else \
            self.infer({i: a.shape for i, a in zip(self.input_ids, inputs)})
        unsized = self.unsized if not self.dynamic else self._unsized_steps(shapes)
        if not unsized:
            return shapes
        values = self._slots.copy()
        for index, array in zip(self.input_ids, inputs):
            values[index] = array
        sized = dict(shapes)
        for position in sorted(unsized):
            found = unsized_outputs([self.kernels[n] for n in self.steps[position].nodes],
                                    values, sized)
            for spec, shape, _ in found or ():
                sized[spec.index] = shape
        return sized

    def timed(self, steps: list[StepTime], around: StepScope | None = None,
              simulated: Sequence[float] | None = None) -> StepScope:
        """A StepScope that times each step into `steps` (a profiled run), entered outside
        `around` when given (the accelerator's device queue: the step's wall time is then
        its simulated one, `host` the computation inside; `simulated`: each step's time by
        the cost model)."""

        @contextmanager
        def scope(position: int) -> Iterator[None]:
            step = self.steps[position]
            nodes = step.nodes
            node = self.graph.nodes[nodes[0]] if len(nodes) == 1 else None
            record = StepTime(node.name if node is not None else step.unit.label, nodes,
                              time.monotonic(), 0.0, "" if node is None else op_name(node),
                              0.0 if simulated is None else simulated[position])
            try:
                if around is None:
                    yield
                else:
                    with around(position):
                        computing = time.monotonic()
                        try:
                            yield
                        finally:
                            record.host = time.monotonic() - computing
            finally:
                record.seconds = time.monotonic() - record.start
                steps.append(record)

        return scope

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
            counted = check_run_memory(self.graph, shapes, "run", self.memory_limit)
            unsized = self._unsized_steps(shapes)
        else:
            shapes, counted, unsized = self.shapes, self.counted, self.unsized
        allowance = RunAllowance(self.memory_limit, counted) if unsized else None
        with self.arenas.use() as arena:
            for position, step in enumerate(self.steps):
                if cancelled():
                    log.info("run abandoned before %s: its caller gave up", step.unit.label)
                    raise DriverError(NNRT_TIME_OUT, "run abandoned: its caller gave up")
                if position in unsized:
                    results = self._sized(step, position, values, shapes, allowance, around)
                else:
                    results = self._execute(step.unit, position, [values[i] for i in step.inputs],
                                            around)
                for index, value in zip(step.outputs, results):
                    values[index] = value
                for index in step.drop_after:
                    values[index] = None
            # An output that is a view of an intermediate (a Reshape of it) must not stay in
            # the arena, which the next run may take before the host has read this one's.
            return [np.array(y) if arena.holds(y) else y
                    for y in (values[i] for i in self.output_ids)]

    @staticmethod
    def _execute(unit: Unit, position: int, inputs: list[np.ndarray | None],
                 around: StepScope | None) -> list[np.ndarray]:
        try:
            if around is None:
                return unit.execute(inputs)
            with around(position):
                return unit.execute(inputs)
        except DriverError:
            raise
        except Exception as exc:  # a kernel bug or a value-dependent failure: one run fails
            log.exception("%s failed", unit.label)
            raise DriverError(NNRT_FAILED, f"{unit.label} failed: {exc}")

    def _sized(self, step: Step, position: int, values: list[np.ndarray | None],
               shapes: dict[int, Shape], allowance: RunAllowance,
               around: StepScope | None) -> list[np.ndarray]:
        """A step that writes a tensor sized by this run's values: charged before it
        computes. A segment whose sizes depend on values it computes itself runs on its
        nodes' numpy kernels for this run, each charged before it computes."""
        kernels = [self.kernels[n] for n in step.nodes]
        unsized = unsized_outputs(kernels, values, shapes)
        if unsized is not None:
            allowance.charge(unsized)
            return self._execute(step.unit, position, [values[i] for i in step.inputs], around)
        if len(kernels) == 1:
            return self._unsizable(kernels[0], position, values, shapes, allowance, around)
        if step.unit.label not in self._split_logged:
            self._split_logged.add(step.unit.label)
            log.info("%s: a size inside depends on a value it computes: its nodes run on "
                     "numpy in such runs, each sized before it computes", step.unit.label)
        for kernel in kernels:
            node = kernel.node
            unsized = unsized_outputs([kernel], values, shapes)
            if unsized is None:
                results = self._unsizable(kernel, position, values, shapes, allowance, around)
            else:
                allowance.charge(unsized)
                results = self._execute(kernel, position,
                                        [values[t.index] for t in node.inputs], around)
            for spec, value in zip(node.outputs, results):
                values[spec.index] = value
        return [values[i] for i in step.outputs]

    def _unsizable(self, kernel: Kernel, position: int, values: list[np.ndarray | None],
                   shapes: dict[int, Shape], allowance: RunAllowance,
                   around: StepScope | None) -> list[np.ndarray]:
        """A node whose reference kernel gave no sizes for this run's values: values it
        refuses, which its run refuses too (with its own code). Should it compute them all
        the same, its kernel disagrees with itself: what it made is charged then (logged)."""
        node = kernel.node
        results = self._execute(kernel, position, [values[t.index] for t in node.inputs], around)
        log.warning("%s was sized only after it computed: its kernel gave no sizes for this "
                    "run's values before", kernel.label)
        allowance.charge([(spec, tuple(r.shape), node) for spec, r in zip(node.outputs, results)
                          if DYNAMIC in shapes.get(spec.index, spec.shape)])
        return results
