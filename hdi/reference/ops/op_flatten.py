"""Flatten: x as the 2-D tensor [prod(x.shape[:axis]), prod(x.shape[axis:])] (ONNX Flatten).

`axis` is in [-r, r] for a rank-r x (negative counts from the end); 0 gives [1, total] and
r gives [total, 1]; a rank-0 x flattens to [1, 1]. The proto default 0 applies when the
attribute is not set (the OH_NN default of 1 is the client's to send). A product over a
DYNAMIC dimension is DYNAMIC.

Data movement only: any dtype, quantisation kept; the result is a view of x.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from nnrt.hdi.reference.kernel import Kernel, invalid, register
from nnrt.hdi.reference.ops._common import bad_shape, check_declared_shapes, moved_dtype, product
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import NodeSpec, Shape


@register(na.NODE_TYPE_FLATTEN)
class Flatten(Kernel):
    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        self.expect_counts(1)
        moved_dtype(node)
        self.rank = len(node.inputs[0].shape)
        axis = int(node.attrs.axis)
        if not -self.rank <= axis <= self.rank:
            raise invalid(node, f"axis {axis} is outside [{-self.rank}, {self.rank}]")
        self.axis = axis + self.rank if axis < 0 else axis
        check_declared_shapes(self)

    def infer_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        x = tuple(input_shapes[0])
        if len(x) != self.rank:
            raise bad_shape(self.node, f"input rank {len(x)}, the model has {self.rank}")
        return [(product(x[:self.axis]), product(x[self.axis:]))]

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        x = inputs[0]
        return [x.reshape(self.infer_shapes([x.shape])[0])]
