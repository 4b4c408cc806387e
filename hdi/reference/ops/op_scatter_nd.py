"""ScatterNd (indices, updates, shape): a new tensor of `shape`, zero everywhere except where
the rows of `indices` ([..., k], k <= len(shape)) address it: out[indices[j]] += updates[j]
(TensorFlow's scatter_nd). updates has the shape indices.shape[:-1] + shape[k:]; the output
has its dtype (any dtype; bool accumulates as logical or).

Decisions where the spec is silent:

* Duplicate rows ACCUMULATE (TensorFlow's documented behaviour; ONNX leaves the order of
  duplicates undefined and MindSpore Lite's result depends on its thread split), so the
  result never depends on an order.
* indices are INT32 or INT64 of rank >= 1 (a single row [k] is allowed, as TensorFlow
  allows it); an entry may be negative, counting from the end of its dimension (as Gather
  and GatherNd here). An entry outside [-size, size) makes the node invalid when indices and
  shape are constant, and fails the run (NNRT_FAILED) otherwise.
* `shape` is a 1-D INT32/INT64 tensor of sizes >= 0 (it need not share the indices' dtype);
  a run-time one gives DYNAMIC output dimensions until the run.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from nnrt.hdi.reference.kernel import Kernel, invalid, register, unsupported
from nnrt.hdi.reference.ops._common import (
    bad_shape,
    check_declared_shapes,
    nd_index_columns,
    require_index_dtype,
    run_shape_input,
    shape_input,
    written_values,
)
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import DYNAMIC, NodeSpec, Shape


@register(na.NODE_TYPE_SCATTER_ND)
class ScatterNd(Kernel):
    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        self.expect_counts(3)
        indices = node.inputs[0]
        require_index_dtype(node, 0)
        written_values(node, 1, "updates", "quantised updates (zero would be the zero point)")
        if not indices.shape:
            raise invalid(node, "indices must have rank >= 1")
        self.depth = indices.shape[-1]
        if self.depth == DYNAMIC:
            raise unsupported(node, "indices whose last dimension is DYNAMIC")
        self.shape, self.rank = shape_input(node, 2)
        if self.depth > self.rank:
            raise invalid(node, f"indices address {self.depth} dimensions of a rank-{self.rank} "
                                f"output")
        if indices.is_constant and self.shape is not None:
            self._rows(indices.constant, self.shape, True)
        check_declared_shapes(self)

    def _rows(self, indices: np.ndarray, shape: Shape, prepare: bool) -> tuple[np.ndarray, ...]:
        """One flat normalised index array per addressed dimension."""
        rows = indices.reshape(-1, self.depth).astype(np.int64, copy=False)
        return nd_index_columns(self.node, rows, shape, prepare)

    def _output_shape(self, indices: Shape, updates: Shape, shape: Shape) -> Shape:
        expected = tuple(indices[:-1]) + tuple(shape[self.depth:])
        if len(updates) != len(expected) or any(
                DYNAMIC not in (u, e) and u != e for u, e in zip(updates, expected)):
            raise bad_shape(self.node, f"updates of shape {list(updates)}, expected "
                                       f"{list(expected)} (indices.shape[:-1] + "
                                       f"shape[{self.depth}:])")
        return tuple(shape)

    def infer_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        indices, updates = tuple(input_shapes[0]), tuple(input_shapes[1])
        if not indices or indices[-1] not in (self.depth, DYNAMIC):
            raise bad_shape(self.node, f"indices of shape {list(indices)}, the model has "
                                       f"[..., {self.depth}]")
        shape = self.shape if self.shape is not None else (DYNAMIC,) * self.rank
        return [self._output_shape(indices, updates, shape)]

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        indices, updates = inputs[0], inputs[1]
        shape = self.shape
        if shape is None:
            shape = run_shape_input(self.node, inputs[2], self.rank)
        shape = tuple(shape)
        self._output_shape(indices.shape, updates.shape, shape)
        out = np.zeros(shape, dtype=updates.dtype)
        flat = updates.reshape((int(np.prod(indices.shape[:-1])),) + shape[self.depth:])
        if self.depth == 0:  # every row addresses the whole output
            np.add.at(out[np.newaxis], np.zeros(len(flat), dtype=np.intp), flat)
        else:
            np.add.at(out, self._rows(indices, shape, False), flat)
        return [out]
