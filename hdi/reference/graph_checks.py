"""What every driver shares besides its computation: the reference meaning of a node.

The CPU driver's kernels (`nnrt.hdi.reference.ops`) are the readable reference of our
semantics: creating one validates its node (dtypes, ranks, attributes, constant inputs) and
it infers the node's output shapes. Every other driver (GPU, accelerator) validates and
infers through them, so one node means the same everywhere and gets the same code when it
is wrong; graph validation (hdi/model_validation.py) and the model-cache format
(hdi/graph_cache.py) are shared by the host already.

The memory a run needs (`run_memory`) is worked out here too, from the inferred shapes, so
that every graph-based driver can refuse a model whose run would not fit before it runs:
a 4-byte input and a Tile can ask for gigabytes. Decisions:

* What counts: every tensor a node writes (intermediates and model outputs) at its inferred
  shape, all at once, since the CPU driver's run arena keeps every intermediate of a run
  (hdi/reference/arena.py). Model inputs live in the client's shared buffers (already charged
  to the session's budget, server/buffers.py) and constants were counted when they were
  sent; kernels' scratch space (im2col, at most 16 MiB) is not counted.
* Static input shapes: checked once, at prepare. Dynamic input shapes: the bound at
  GetInputDimRanges' maximum would refuse nearly every dynamic model, so the check runs at
  each run for its concrete shapes, before any kernel allocates (NNRT_OUT_OF_MEMORY for that
  run only).
* A dimension that depends on tensor values (Tile's run-time multiples, Range's bounds, a
  run-time shape of Fill / ConstantOfShape / BroadcastTo / Reshape, OneHot's depth, TopK's
  k, the count of a one-input Where, ...) is unknown before the run and counts as 0 at that
  check. Each run then charges it, before the node that writes it computes, against what
  the run has left of the limit (`RunAllowance`): the node's reference kernel made with the
  run's values as its constant inputs infers its exact shapes (`infer_with_values`), as it
  would have at prepare had they been constant; so do the nodes after it, from the sizes
  now known (`unsized_outputs`). Beyond the limit: NNRT_OUT_OF_MEMORY for that run only,
  nothing allocated; the prepared model keeps serving runs whose values fit.
* The limit (`--max-model-memory-mb`) is the process's, set once at driver start
  (`configure_model_memory_limit`); the default is the default shared-memory budget of one
  session (a quarter of the driver's, hdi/memory_limits.py): what a run may make is what a
  session may hold.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

import numpy as np

from nnrt.hdi.reference.kernel import Kernel, create_kernel
from nnrt.hdi import memory_limits
from nnrt.common.errors import NNRT_INVALID_SHAPE, NNRT_OUT_OF_MEMORY, DriverError
from nnrt.hdi.graph import DYNAMIC, Graph, NodeSpec, Shape, TensorSpec

log = logging.getLogger(__name__)


def reference_kernel(node: NodeSpec) -> Kernel:
    """Validate a node; its reference kernel, or DriverError (invalid or unsupported)."""
    return create_kernel(node)


class ShapeInferring(Protocol):
    node: NodeSpec

    def infer_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]: ...


def compatible(declared: Shape, inferred: Shape) -> bool:
    return len(declared) == len(inferred) and all(
        d == DYNAMIC or i == DYNAMIC or d == i for d, i in zip(declared, inferred)
    )


def infer_graph_shapes(steps: Sequence[ShapeInferring], input_shapes: dict[int, Shape],
                       constants: dict[int, np.ndarray]) -> dict[int, Shape]:
    """Shapes of every tensor, node by node in execution order, checked against the declared
    output dims; DriverError(NNRT_INVALID_SHAPE) on a mismatch."""
    shapes = dict(input_shapes)
    shapes.update({i: c.shape for i, c in constants.items()})
    for step in steps:
        node = step.node
        outs = step.infer_shapes([shapes[t.index] for t in node.inputs])
        for spec, shape in zip(node.outputs, outs):
            shape = tuple(int(d) for d in shape)
            if not compatible(spec.shape, shape):
                raise DriverError(
                    NNRT_INVALID_SHAPE,
                    f"node {node.index} ({node.name}): output {spec.name!r} is declared "
                    f"{list(spec.shape)} but computes {list(shape)}",
                )
            shapes[spec.index] = shape
    return shapes


@dataclass(frozen=True)
class RunMemory:
    """What one run of a graph writes, by the estimate of the module docstring."""

    total_bytes: int
    largest_bytes: int = 0
    largest: str = ""  # the biggest tensor, described for the log


def _describe(spec: TensorSpec, shape: Shape, node: NodeSpec) -> str:
    return (f"tensor {spec.index} ({spec.name!r}, {spec.dtype} {list(shape)}) of "
            f"node {node.index} ({node.name})")


def run_memory(graph: Graph, shapes: dict[int, Shape]) -> RunMemory:
    """Bytes of every tensor the graph's nodes write, at the inferred `shapes` (linear)."""
    total, largest_bytes, largest = 0, 0, ""
    for node_index in graph.execution_order:
        node = graph.nodes[node_index]
        for spec in node.outputs:
            shape = shapes.get(spec.index, spec.shape)
            if DYNAMIC in shape:
                continue  # value-dependent: charged by the run (`RunAllowance`)
            nbytes = math.prod(shape) * spec.dtype.itemsize
            total += nbytes
            if nbytes > largest_bytes:
                largest_bytes = nbytes
                largest = _describe(spec, shape, node)
    return RunMemory(total, largest_bytes, largest)


_model_limit: int | None = None  # None: the default, worked out on first use


def default_model_memory_limit() -> int:
    return memory_limits.default_session_limit(memory_limits.default_driver_limit())


def configure_model_memory_limit(nbytes: int | None) -> int:
    """Set the process's limit of `run_memory` per run (None: the default); returns it."""
    global _model_limit
    _model_limit = default_model_memory_limit() if nbytes is None else nbytes
    log.info("model memory limit: %d bytes (%.1f MiB) per run", _model_limit,
             _model_limit / memory_limits.MIB)
    return _model_limit


def model_memory_limit() -> int:
    global _model_limit
    if _model_limit is None:
        _model_limit = default_model_memory_limit()
    return _model_limit


def check_run_memory(graph: Graph, shapes: dict[int, Shape], when: str,
                     limit: int | None = None) -> RunMemory:
    """`run_memory`, or DriverError(NNRT_OUT_OF_MEMORY) with the sizes (logged by the
    caller's refusal) when it exceeds `limit` (default: the process's)."""
    limit = model_memory_limit() if limit is None else limit
    need = run_memory(graph, shapes)
    if need.total_bytes > limit:
        raise DriverError(
            NNRT_OUT_OF_MEMORY,
            f"{when}: a run would need {need.total_bytes} bytes "
            f"({need.total_bytes / memory_limits.MIB:.1f} MiB) for its intermediates and outputs, "
            f"over the limit of {limit} bytes ({limit / memory_limits.MIB:.1f} MiB, "
            f"--max-model-memory-mb); the largest is {need.largest}, {need.largest_bytes} bytes")
    return need


def infer_with_values(node: NodeSpec, arrays: Sequence[np.ndarray | None]) -> list[Shape]:
    """The output shapes of a node at a run's input values (`arrays`: per input, its value,
    None where unknown): its reference kernel made with those values as constant inputs
    infers them, as at prepare for a model whose values are constants. Its declared output
    dims are not imposed (the run's shapes are what is charged). DriverError when the node
    refuses the values (its own run then fails with its own code)."""
    inputs = tuple(spec if value is None or spec.is_constant
                   else replace(spec, shape=tuple(value.shape), constant=value)
                   for spec, value in zip(node.inputs, arrays))
    outputs = tuple(replace(spec, shape=(DYNAMIC,) * len(spec.shape)) for spec in node.outputs)
    kernel = reference_kernel(replace(node, inputs=inputs, outputs=outputs))
    return [tuple(int(d) for d in s) for s in kernel.infer_shapes([t.shape for t in inputs])]


# An output that a run's shape inference left unsized, at the size it has at the run's values.
Unsized = tuple[TensorSpec, Shape, NodeSpec]


def unsized_outputs(steps: Sequence[ShapeInferring], values: Sequence[np.ndarray | None],
                    shapes: dict[int, Shape]) -> list[Unsized] | None:
    """The outputs of consecutive nodes about to run (execution order) that `shapes` (the
    run's inference) left DYNAMIC, at their sizes for this run: from the input arrays in
    `values` (by tensor index, None: not computed yet) and the shapes of the outputs before
    them, with `infer_with_values` where a size depends on values. None when it cannot be
    known before they compute: a value computed among these nodes decides a size, or a node
    refuses its values."""
    known: dict[int, Shape] = {}

    def shape_of(spec: TensorSpec) -> Shape:
        if spec.index in known:
            return known[spec.index]
        value = values[spec.index]
        return shapes[spec.index] if value is None else value.shape

    unsized: list[Unsized] = []
    for step in steps:
        node = step.node
        outs = step.infer_shapes([shape_of(t) for t in node.inputs])
        if any(DYNAMIC in s for s in outs):
            arrays = [values[t.index] for t in node.inputs]
            if any(a is None and not t.is_constant for a, t in zip(arrays, node.inputs)):
                return None  # computed among these nodes
            try:
                outs = infer_with_values(node, arrays)
            except DriverError as exc:
                log.debug("node %d (%s): no sizes before it runs (%s)", node.index, node.name,
                          exc.message)
                return None
            if any(DYNAMIC in s for s in outs):
                return None
        for spec, shape in zip(node.outputs, outs):
            shape = tuple(int(d) for d in shape)
            known[spec.index] = shape
            if DYNAMIC in shapes.get(spec.index, spec.shape):
                unsized.append((spec, shape, node))
    return unsized


class RunAllowance:
    """What one run may still write beyond what was counted before it started (`run_memory`
    at its input shapes): the tensors whose size depends on values are charged here as the
    run reaches them, before they are computed."""

    def __init__(self, limit: int | None, counted: RunMemory) -> None:
        self.limit = model_memory_limit() if limit is None else limit
        self.used = counted.total_bytes

    def charge(self, outputs: Sequence[Unsized]) -> None:
        """Count these outputs; DriverError(NNRT_OUT_OF_MEMORY) with the sizes when they
        would take the run over its limit (nothing counted then)."""
        need = 0
        for spec, shape, node in outputs:
            nbytes = math.prod(shape) * spec.dtype.itemsize
            need += nbytes
            if self.used + need > self.limit:
                left = self.limit - self.used
                raise DriverError(
                    NNRT_OUT_OF_MEMORY,
                    f"run: {_describe(spec, shape, node)}, sized by this run's values, would "
                    f"need {nbytes} bytes ({nbytes / memory_limits.MIB:.1f} MiB); the run has "
                    f"{max(left, 0)} bytes left of its limit of {self.limit} bytes "
                    f"({self.limit / memory_limits.MIB:.1f} MiB, --max-model-memory-mb)")
        self.used += need


def supported_operations(graph: Graph, accept: Callable[[NodeSpec], object]) -> list[bool | str]:
    """GetSupportedOperation's answer: per node, True when `accept(node)` takes it, else
    why not (a string, also logged); never fails on a node."""
    answers: list[bool | str] = []
    for node in graph.nodes:
        if node.index in graph.undecodable:
            answers.append(False)
            continue
        try:
            accept(node)
            answers.append(True)
        except DriverError as exc:
            log.info("GetSupportedOperation: %s", exc.message)
            answers.append(exc.message)
        except Exception as exc:  # a malformed node must not fail the whole query
            log.exception("GetSupportedOperation: node %d rejected", node.index)
            answers.append(f"node {node.index} ({node.name}) rejected unexpectedly "
                           f"({type(exc).__name__})")
    return answers
