"""What every driver shares besides its computation: the reference meaning of a node.

The CPU driver's kernels (`nnrt.drivers.cpu.ops`) are the readable reference of our
semantics: creating one validates its node (dtypes, ranks, attributes, constant inputs) and
it infers the node's output shapes. Every other driver (GPU, accelerator) validates and
infers through them, so one node means the same everywhere and gets the same code when it
is wrong; graph validation (server/model_validation.py) and the model-cache format
(server/graph_cache.py) are shared by the host already.

The memory a run needs (`run_memory`) is worked out here too, from the inferred shapes, so
that every graph-based driver can refuse a model whose run would not fit before it runs:
a 4-byte input and a Tile can ask for gigabytes. Decisions:

* What counts: every tensor a node writes (intermediates and model outputs) at its inferred
  shape, all at once, since the CPU driver's run arena keeps every intermediate of a run
  (drivers/cpu/arena.py). Model inputs live in the client's shared buffers (already charged
  to the session's budget, server/buffers.py) and constants were counted when they were
  sent; kernels' scratch space (im2col, at most 16 MiB) is not counted.
* Static input shapes: checked once, at prepare. Dynamic input shapes: the bound at
  GetInputDimRanges' maximum would refuse nearly every dynamic model, so the check runs at
  each run for its concrete shapes, before any kernel allocates (NNRT_OUT_OF_MEMORY for that
  run only). A dimension that depends on tensor values (a run-time Tile multiples tensor)
  is unknown before the node runs and counts as 0.
* The limit (`--max-model-memory-mb`) is the process's, set once at driver start
  (`configure_model_memory_limit`); the default is the default shared-memory budget of one
  session (a quarter of the driver's, server/buffers.py): what a run may make is what a
  session may hold.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from nnrt.drivers.cpu.kernel import Kernel, create_kernel
from nnrt.server import buffers
from nnrt.common.errors import NNRT_INVALID_SHAPE, NNRT_OUT_OF_MEMORY, DriverError
from nnrt.server.graph import DYNAMIC, Graph, NodeSpec, Shape

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


def run_memory(graph: Graph, shapes: dict[int, Shape]) -> RunMemory:
    """Bytes of every tensor the graph's nodes write, at the inferred `shapes` (linear)."""
    total, largest_bytes, largest = 0, 0, ""
    for node_index in graph.execution_order:
        node = graph.nodes[node_index]
        for spec in node.outputs:
            shape = shapes.get(spec.index, spec.shape)
            if DYNAMIC in shape:
                continue  # value-dependent: unknown before the node runs
            nbytes = math.prod(shape) * spec.dtype.itemsize
            total += nbytes
            if nbytes > largest_bytes:
                largest_bytes = nbytes
                largest = (f"tensor {spec.index} ({spec.name!r}, {spec.dtype} {list(shape)}) of "
                           f"node {node.index} ({node.name})")
    return RunMemory(total, largest_bytes, largest)


_model_limit: int | None = None  # None: the default, worked out on first use


def default_model_memory_limit() -> int:
    return buffers.default_session_limit(buffers.default_driver_limit())


def configure_model_memory_limit(nbytes: int | None) -> int:
    """Set the process's limit of `run_memory` per run (None: the default); returns it."""
    global _model_limit
    _model_limit = default_model_memory_limit() if nbytes is None else nbytes
    log.info("model memory limit: %d bytes (%.1f MiB) per run", _model_limit,
             _model_limit / buffers.MIB)
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
            f"({need.total_bytes / buffers.MIB:.1f} MiB) for its intermediates and outputs, "
            f"over the limit of {limit} bytes ({limit / buffers.MIB:.1f} MiB, "
            f"--max-model-memory-mb); the largest is {need.largest}, {need.largest_bytes} bytes")
    return need


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
