"""The CPU kernel framework: one `Kernel` subclass per HDI operator, registered by NodeType.

As in ONNX's reference evaluator and NNAPI's CPU operations, each operator module keeps
three things side by side:

* validation and planning in ``__init__(node)`` — check dtypes, ranks, attributes and
  constant inputs, precompute whatever does not depend on the run (reshaped weights, axes,
  index tables); raise `unsupported(...)` for what this driver does not compute (the node
  is then reported false by GetSupportedOperation and refused by PrepareModel with
  NNRT_UNSUPPORTED_OP) and `invalid(...)` for a node that is wrong whatever the device;
* ``infer_shapes(input_shapes)`` — output shapes from input shapes (DYNAMIC where an output
  dimension depends on input values rather than shapes);
* ``execute(inputs)`` — the computation on numpy arrays, vectorised (no Python loop over
  elements or pixels). It must not write into its inputs (they may be the client's shared
  memory) and must not mutate ``self`` (runs of one prepared model are concurrent).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence

import numpy as np

from nnrt.hdi.registry import registrar
from nnrt.protos.hdi_types_pb2 import QUANT_TYPE_ALL
from nnrt.common.errors import NNRT_INVALID_NODE, NNRT_UNSUPPORTED_OP, DriverError
from nnrt.hdi.graph import NodeSpec, Shape

KERNELS: dict[int, type[Kernel]] = {}


def unsupported(node: NodeSpec, why: str) -> DriverError:
    return DriverError(NNRT_UNSUPPORTED_OP, f"node {node.index} ({node.name}): {why}")


def invalid(node: NodeSpec, why: str) -> DriverError:
    return DriverError(NNRT_INVALID_NODE, f"node {node.index} ({node.name}): {why}")


class Kernel(ABC):
    """One node of a prepared model on the CPU."""

    def __init__(self, node: NodeSpec) -> None:
        self.node = node

    @property
    def label(self) -> str:
        """The node as logs and errors name it."""
        return f"node {self.node.index} ({self.node.name})"

    def expect_counts(self, inputs: int | range, outputs: int | range = 1) -> None:
        """Raise invalid() unless the node has that many inputs and outputs."""
        for what, have, want in (("inputs", len(self.node.inputs), inputs),
                                 ("outputs", len(self.node.outputs), outputs)):
            ok = have in want if isinstance(want, range) else have == want
            if not ok:
                raise invalid(self.node, f"expects {want} {what}, has {have}")

    @abstractmethod
    def infer_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        """Output shapes for these input shapes."""

    @abstractmethod
    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Output arrays (with the output tensors' dtypes) for these input arrays."""


register = registrar(KERNELS)  # @register(NODE_TYPE_...) on each Kernel class


# How a node whose tensors are quantised gets its kernel: quantized.py registers it when it
# is imported (the package's __init__ imports it, and every operator, before any caller can
# reach this module), so the dependency goes one way: quantized → kernel.
_quantized_kernel: Callable[[NodeSpec, type[Kernel]], Kernel] | None = None


def register_quantized(make: Callable[[NodeSpec, type[Kernel]], Kernel]) -> None:
    """Set how a node of quant type ALL is made from its operator's float kernel class."""
    global _quantized_kernel
    _quantized_kernel = make


def create_kernel(node: NodeSpec) -> Kernel:
    """Validate and plan one node; DriverError when the CPU driver cannot run it."""
    cls = KERNELS.get(node.node_type)
    if cls is None:
        raise unsupported(node, f"NodeType {node.node_type} has no CPU kernel")
    if node.quant_type == QUANT_TYPE_ALL:
        if _quantized_kernel is None:  # never: the package imports quantized.py first
            raise unsupported(node, "quantised kernels are not loaded")
        return _quantized_kernel(node, cls)
    return cls(node)
