"""BroadcastTo: x broadcast against the target `shape` (numpy / ONNX Expand rules).

Decisions where the spec is silent:

* The broadcast is bidirectional, as MindSpore Lite's BroadcastTo and ONNX Expand compute
  it: the output shape is numpy's broadcast of x.shape and `shape`, so a target entry 1
  keeps a larger input dimension ([2, 1] to [1, 3] gives [2, 3]). Dimensions that are
  neither equal nor 1 make the node invalid.
* A target entry -1 keeps the input's dimension at the same (right-aligned) position;
  -1 beyond the input's rank, and any other negative entry, are invalid.
* The target normally comes from the `shape` attribute. A second input (a 1-D INT32/INT64
  tensor, as in MindSpore Lite and ONNX Expand) is accepted instead when the attribute is
  empty; a run-time one gives DYNAMIC output dimensions until the run.

Data movement only: any dtype, quantisation kept. The result is a read-only broadcast view;
the host's copy to the output buffer materialises it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from nnrt.hdi.reference.kernel import Kernel, invalid, register, unsupported
from nnrt.hdi.reference.ops._common import (
    bad_shape,
    broadcast_shapes,
    check_declared_shapes,
    constant_index_input,
    index_values,
    moved_dtype,
)
from nnrt.protos import node_attrs_pb2 as na
from nnrt.common.errors import DriverError
from nnrt.hdi.graph import DYNAMIC, NodeSpec, Shape

KEEP = -1  # target entry that keeps the input's dimension


def _check_target(target: Sequence[int], error: Callable[[str], DriverError]) -> None:
    if any(d < KEEP for d in target):
        raise error(f"target shape {list(target)} holds a negative entry other than -1")


@register(na.NODE_TYPE_BROADCAST_TO)
class BroadcastTo(Kernel):
    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        self.expect_counts(range(1, 3))
        moved_dtype(node)
        attr = tuple(int(d) for d in node.attrs.shape)
        self.target: tuple[int, ...] | None = attr
        self.rank = len(attr)
        if len(node.inputs) == 2:
            if attr:
                raise invalid(node, "target shape given both as attribute and as input 1")
            self.target = constant_index_input(node, 1, "shape")
            if self.target is None:
                declared = node.inputs[1].shape
                self.rank = declared[0] if declared else 1
                if self.rank == DYNAMIC:
                    raise unsupported(node, "a run-time target shape of unknown length")
            else:
                self.rank = len(self.target)
        if self.target is not None:
            _check_target(self.target, lambda why: invalid(node, why))
        check_declared_shapes(self)

    def resolve(self, target: Sequence[int], x: Shape) -> Shape:
        """The output shape for this target and input shape (DYNAMIC-aware)."""
        dims = list(target)
        for i, d in enumerate(dims):
            if d == KEEP:
                at = i - len(dims) + len(x)
                if at < 0:
                    raise bad_shape(self.node, f"target entry {i} is -1 but the input "
                                               f"{list(x)} has no dimension there")
                dims[i] = x[at]
        return broadcast_shapes(self.node, tuple(x), tuple(dims))

    def infer_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        x = tuple(input_shapes[0])
        if self.target is None:
            return [(DYNAMIC,) * max(self.rank, len(x))]
        return [self.resolve(self.target, x)]

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        x = inputs[0]
        target = self.target
        if target is None:
            target = index_values(self.node, inputs[1], "shape")
            _check_target(target, lambda why: bad_shape(self.node, why))
        return [np.broadcast_to(x, self.resolve(target, x.shape))]
