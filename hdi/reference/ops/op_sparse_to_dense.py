"""SparseToDense (indices, values, sparseShape[, defaultValue]): a dense tensor of
sparseShape holding values[j] at position indices[j] and 0 elsewhere (TensorFlow's
sparse_to_dense, with the inputs in HDI's order).

Decisions where the spec is silent:

* indices are INT32 or INT64: [N, R] for an R-D output, or [N] / a scalar for a 1-D output
  (TensorFlow). Entries must lie in [0, size) of their dimension (no counting from the end,
  as TensorFlow): invalid when indices and shape are constant, the run fails (NNRT_FAILED)
  otherwise.
* values is [N], or a scalar written at every index; its dtype is the output dtype (any).
* a fourth input, a scalar of the values' dtype, replaces 0 as the default value
  (TensorFlow's default_value); without it the default is 0 (False for bool).
* sparseShape is a 1-D INT32/INT64 tensor of sizes >= 0 and at least one entry
  (hdi_ops.json's "(N, C)" is the 2-D case; any rank is computed). A run-time one gives
  DYNAMIC output dimensions until the run.
* an index repeated in `indices` takes its LAST value (MindSpore Lite writes the rows in
  order; TensorFlow would reject the input). The result never depends on a thread order.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from nnrt.hdi.reference.kernel import Kernel, invalid, register
from nnrt.hdi.reference.ops._common import (
    bad_shape,
    check_declared_shapes,
    require_index_dtype,
    run_failure,
    run_shape_input,
    shape_input,
    written_values,
)
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import DYNAMIC, NodeSpec, Shape


@register(na.NODE_TYPE_SPARSE_TO_DENSE)
class SparseToDense(Kernel):
    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        self.expect_counts(range(3, 5))
        indices, values = node.inputs[0], node.inputs[1]
        require_index_dtype(node, 0)
        written_values(node, 1, "values", "quantised values")
        if len(node.inputs) == 4:
            default = node.inputs[3]
            if default.dtype != values.dtype:
                raise invalid(node, f"default value of dtype {default.dtype}, the values are "
                                    f"{values.dtype}")
            if len(default.shape) > 1 or (default.shape and default.shape[0] not in (1, DYNAMIC)):
                raise invalid(node, f"default value of shape {list(default.shape)} is not one "
                                    f"value")
        if len(indices.shape) > 2:
            raise invalid(node, f"indices of rank {len(indices.shape)} (0, 1 or 2 expected)")
        if len(values.shape) > 1:
            raise invalid(node, f"values of rank {len(values.shape)} (0 or 1 expected)")
        self.shape, self.rank = shape_input(node, 2, "sparseShape", nonempty=True)
        if len(indices.shape) < 2 and self.rank != 1:
            raise invalid(node, f"indices of rank {len(indices.shape)} need a 1-D output, "
                                f"sparseShape has {self.rank} entries")
        if indices.is_constant and self.shape is not None:
            self._rows(indices.constant, self.shape, True)
        check_declared_shapes(self)

    def _rows(self, indices: np.ndarray, shape: Shape, prepare: bool) -> np.ndarray:
        """[N, R] int64 positions, checked against the output shape."""
        rows = indices.reshape(-1, self.rank).astype(np.int64, copy=False)
        if rows.size:
            low, high = rows.min(axis=0), rows.max(axis=0)
            bad = (low < 0) | (high >= np.asarray(shape))
            if bad.any():
                d = int(np.argmax(bad))
                why = (f"indices [{low[d]}, {high[d]}] for dimension {d} fall outside "
                       f"[0, {shape[d]})")
                raise invalid(self.node, why) if prepare else run_failure(self.node, why)
        return rows

    def infer_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        indices, values = tuple(input_shapes[0]), tuple(input_shapes[1])
        if len(indices) == 2 and indices[1] not in (self.rank, DYNAMIC):
            raise bad_shape(self.node, f"indices of shape {list(indices)} for a "
                                       f"{self.rank}-D output")
        count = indices[0] if indices else 1
        if values and DYNAMIC not in (values[0], count) and values[0] != count:
            raise bad_shape(self.node, f"{values[0]} values for {count} indices")
        if len(input_shapes) == 4 and DYNAMIC not in input_shapes[3] and \
                int(np.prod(input_shapes[3])) != 1:
            raise bad_shape(self.node, f"default value of shape {list(input_shapes[3])}")
        return [tuple(self.shape) if self.shape is not None else (DYNAMIC,) * self.rank]

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        indices, values = inputs[0], inputs[1]
        shape = self.shape
        if shape is None:
            shape = run_shape_input(self.node, inputs[2], self.rank, "sparseShape", nonempty=True)
        shape = tuple(shape)
        self.infer_shapes([a.shape for a in inputs])
        default = inputs[3].reshape(()) if len(inputs) == 4 else np.zeros((), values.dtype)
        out = np.full(shape, default, dtype=values.dtype)
        rows = self._rows(indices, shape, False)
        flat = np.ravel_multi_index(tuple(rows.T), shape)
        # The last occurrence of each position wins: unique() over the reversed rows keeps
        # each position's first appearance there.
        positions, first = np.unique(flat[::-1], return_index=True)
        written = np.broadcast_to(values, (len(flat),))[::-1][first]
        out.reshape(-1)[positions] = written
        return [out]
