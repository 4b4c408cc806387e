"""What every driver shares besides its computation: the reference meaning of a node.

The CPU driver's kernels (`nnrt.drivers.cpu.ops`) are the readable reference of our
semantics: creating one validates its node (dtypes, ranks, attributes, constant inputs) and
it infers the node's output shapes. Every other driver (GPU, accelerator) validates and
infers through them, so one node means the same everywhere and gets the same code when it
is wrong; graph validation (server/model_validation.py) and the model-cache format
(server/graph_cache.py) are shared by the host already.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np

from nnrt.drivers.cpu.kernel import Kernel, create_kernel
from nnrt.server.errors import NNRT_INVALID_SHAPE, DriverError
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


def supported_operations(graph: Graph, accept: Callable[[NodeSpec], object]) -> list[bool]:
    """GetSupportedOperation's answer: per node, whether `accept(node)` takes it; never
    fails on a node (its reason is logged)."""
    answers = []
    for node in graph.nodes:
        if node.index in graph.undecodable:
            answers.append(False)
            continue
        try:
            accept(node)
            answers.append(True)
        except DriverError as exc:
            log.info("GetSupportedOperation: %s", exc.message)
            answers.append(False)
        except Exception:  # a malformed node must not fail the whole query
            log.exception("GetSupportedOperation: node %d rejected", node.index)
            answers.append(False)
    return answers
