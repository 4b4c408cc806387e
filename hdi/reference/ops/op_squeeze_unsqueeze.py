"""Squeeze and Unsqueeze: remove or insert dimensions of size 1 (ONNX / numpy semantics).

Squeeze: `axis` lists dimensions of x, each in [-n, n) (negative counts from the end),
each of size 1; no axis removes every dimension of size 1 (semantics.md). Decisions where
the spec is silent:

* a repeated axis (after normalisation) is invalid, as in ONNX and numpy;
* a listed DYNAMIC dimension is checked at run time (NNRT_INVALID_SHAPE when it is not 1);
* without an axis, a DYNAMIC dimension cannot be known to be 1 before the run: the inferred
  shape keeps it (DYNAMIC), and the run removes whatever dimensions really are 1 — the
  semantics hold and the host sees the real output shape.

Unsqueeze: `axis` lists the positions of the new size-1 dimensions in the OUTPUT (rank
n + len(axis)), each in [-(n+k), n+k), as ONNX Unsqueeze (hdi_ops.json's [-n, n) could
not insert after the last dimension; ONNX's range includes every position of [-n, n)).
A repeated position is invalid, and so is an empty axis list: an Unsqueeze that inserts
nothing is refused rather than guessed at (MindSpore Lite would squeeze instead).

Data movement only: any dtype, quantisation kept; the results are views of x.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from nnrt.hdi.reference.kernel import Kernel, invalid, register
from nnrt.hdi.reference.ops._common import (
    bad_shape,
    check_declared_shapes,
    moved_dtype,
    normalize_axis,
)
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import DYNAMIC, NodeSpec, Shape


def _axes(node: NodeSpec, values: Sequence[int], rank: int) -> tuple[int, ...]:
    """Distinct normalised axes, sorted."""
    axes = [normalize_axis(node, int(v), rank) for v in values]
    if len(set(axes)) != len(axes):
        raise invalid(node, f"axis {list(values)} repeats a dimension")
    return tuple(sorted(axes))


@register(na.NODE_TYPE_SQUEEZE)
class Squeeze(Kernel):
    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        self.expect_counts(1)
        moved_dtype(node)
        self.rank = len(node.inputs[0].shape)
        self.axes = _axes(node, node.attrs.axis, self.rank) if node.attrs.axis else None
        check_declared_shapes(self)

    def infer_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        x = tuple(input_shapes[0])
        if len(x) != self.rank:
            raise bad_shape(self.node, f"input rank {len(x)}, the model has {self.rank}")
        if self.axes is None:
            return [tuple(d for d in x if d != 1)]
        for a in self.axes:
            if x[a] not in (1, DYNAMIC):
                raise bad_shape(self.node, f"dimension {a} of {list(x)} is not 1")
        return [tuple(d for i, d in enumerate(x) if i not in self.axes)]

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        x = inputs[0]
        (shape,) = self.infer_shapes([x.shape])  # checks the listed dimensions
        return [x.reshape(shape)]


@register(na.NODE_TYPE_UNSQUEEZE)
class Unsqueeze(Kernel):
    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        self.expect_counts(1)
        moved_dtype(node)
        self.rank = len(node.inputs[0].shape)
        if not node.attrs.axis:
            raise invalid(node, "axis is empty: no dimension to insert")
        self.out_rank = self.rank + len(node.attrs.axis)
        self.axes = _axes(node, node.attrs.axis, self.out_rank)
        check_declared_shapes(self)

    def infer_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        x = tuple(input_shapes[0])
        if len(x) != self.rank:
            raise bad_shape(self.node, f"input rank {len(x)}, the model has {self.rank}")
        rest = iter(x)
        return [tuple(1 if i in self.axes else next(rest) for i in range(self.out_rank))]

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        return [np.expand_dims(inputs[0], self.axes)]
