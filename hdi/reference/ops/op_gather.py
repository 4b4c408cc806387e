"""Gather and GatherNd: slices of x picked by integer indices.

Gather (x, indices, axis): output = x.shape[:axis] + indices.shape + x.shape[axis+1:],
out[..., j..., ...] = x[..., indices[j...], ...] (numpy.take, ONNX Gather). `axis` (input 2)
is a constant one-element INT32/INT64 tensor, negative counting from the end; a run-time
axis is unsupported (the output's layout would be unknown until the run).

GatherNd (x, indices): indices of shape [..., k], k <= rank(x), each row addressing the
first k dimensions of x; output = indices.shape[:-1] + x.shape[k:] (TensorFlow gather_nd,
ONNX GatherND with batch_dims 0).

Decisions where the spec is silent: indices are INT32 or INT64 and may be negative, counting
from the end of their dimension (ONNX; hdi_ops.json only names [0, size)). An index outside
[-size, size) makes the node invalid when the indices are constant and fails the run
(NNRT_FAILED) when they arrive at run time — never a wrapped or clamped read.

Data movement only: any dtype for x, quantisation kept.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from nnrt.hdi.reference.kernel import Kernel, invalid, register, unsupported
from nnrt.hdi.reference.ops._common import (
    bad_shape,
    check_declared_shapes,
    index_values,
    moved_dtype,
    nd_index_columns,
    normalize_axis,
    require_index_dtype,
    run_failure,
)
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import DYNAMIC, NodeSpec, Shape


@register(na.NODE_TYPE_GATHER)
class Gather(Kernel):
    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        self.expect_counts(3)
        moved_dtype(node)
        require_index_dtype(node, 1)
        axis_spec = node.inputs[2]
        if not axis_spec.is_constant:
            raise unsupported(node, "a run-time axis")
        values = index_values(node, axis_spec.constant, "axis")
        if len(values) != 1:
            raise invalid(node, f"axis must hold one value, holds {list(values)}")
        self.rank = len(node.inputs[0].shape)
        self.axis = normalize_axis(node, values[0], self.rank)
        indices = node.inputs[1].constant
        size = node.inputs[0].shape[self.axis]
        if indices is not None and size != DYNAMIC:
            self._checked(indices, size, True)
        check_declared_shapes(self)

    def _checked(self, indices: np.ndarray, size: int, prepare: bool) -> np.ndarray:
        if indices.size and (indices.min() < -size or indices.max() >= size):
            why = (f"indices [{indices.min()}, {indices.max()}] fall outside [{-size}, {size}) "
                   f"of dimension {self.axis}")
            raise invalid(self.node, why) if prepare else run_failure(self.node, why)
        return np.where(indices < 0, indices + size, indices)

    def infer_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        x, indices = tuple(input_shapes[0]), tuple(input_shapes[1])
        if len(x) != self.rank:
            raise bad_shape(self.node, f"input rank {len(x)}, the model has {self.rank}")
        return [x[:self.axis] + indices + x[self.axis + 1:]]

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        x = inputs[0]
        indices = self._checked(inputs[1], x.shape[self.axis], False)
        return [np.asarray(np.take(x, indices, axis=self.axis))]  # 0-D stays an array


@register(na.NODE_TYPE_GATHER_ND)
class GatherNd(Kernel):
    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        self.expect_counts(2)
        moved_dtype(node)
        require_index_dtype(node, 1)
        self.rank = len(node.inputs[0].shape)
        indices = node.inputs[1]
        if not indices.shape:
            raise invalid(node, "indices must have rank >= 1")
        self.depth = indices.shape[-1]
        if self.depth == DYNAMIC:
            raise unsupported(node, "indices whose last dimension is DYNAMIC")
        if self.depth > self.rank:
            raise invalid(node, f"indices address {self.depth} dimensions of a rank-{self.rank} "
                                f"x")
        if indices.is_constant:
            x = node.inputs[0].shape
            if DYNAMIC not in x[:self.depth]:
                nd_index_columns(node, indices.constant, x, True)
        check_declared_shapes(self)

    def infer_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        x, indices = tuple(input_shapes[0]), tuple(input_shapes[1])
        if len(x) != self.rank:
            raise bad_shape(self.node, f"input rank {len(x)}, the model has {self.rank}")
        if not indices or indices[-1] not in (self.depth, DYNAMIC):
            raise bad_shape(self.node, f"indices of shape {list(indices)}, the model has "
                                       f"[..., {self.depth}]")
        return [indices[:-1] + x[self.depth:]]

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        x, indices = inputs
        self.infer_shapes([x.shape, indices.shape])
        if self.depth == 0:  # every row addresses the whole of x
            return [np.broadcast_to(x, indices.shape[:-1] + x.shape)]
        columns = nd_index_columns(self.node, indices, x.shape, False)
        return [np.asarray(x[columns])]  # 0-D stays an array
