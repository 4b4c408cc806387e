"""Stack and Unstack (TensorFlow's stack / unstack).

Stack: two or more inputs of one dtype and shape joined along a new dimension at `axis` of
the (n+1)-D output, axis in [-(n+1), n+1) (negative counts from the end of the output).

Unstack: x (rank R >= 1) cut along `axis` in [-R, R) into x.shape[axis] slices of rank
R - 1, one per output. The node's output count must equal that dimension (checked at run
when it is DYNAMIC).

Data movement only: any dtype. Quantised tensors pass as they are when every input and
output carries the same parameters (requantising is not implemented: unsupported). Unstack's
outputs are views of x.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from nnrt.hdi.reference.kernel import Kernel, invalid, register, unsupported
from nnrt.hdi.reference.ops._common import (
    bad_shape,
    check_declared_shapes,
    expect_joined,
    moved_dtype,
    normalize_axis,
    one_rank,
    same_dim,
    shapes_of_rank,
)
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import DYNAMIC, NodeSpec, Shape


@register(na.NODE_TYPE_STACK)
class Stack(Kernel):
    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        expect_joined(self)
        dtype = moved_dtype(node)
        for t in node.inputs[1:]:
            if t.dtype != dtype:
                raise invalid(node, f"inputs of mixed dtypes {dtype} and {t.dtype}")
            if t.quant_params != node.inputs[0].quant_params:
                raise unsupported(node, "inputs quantised differently")
        self.rank = one_rank(node)
        self.axis = normalize_axis(node, int(node.attrs.axis), self.rank + 1)
        check_declared_shapes(self)

    def infer_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        shapes = shapes_of_rank(self.node, input_shapes, self.rank)
        out = list(shapes[0])
        for s in shapes[1:]:
            out = [same_dim(self.node, a, b, f"dimension {d} of the inputs")
                   for d, (a, b) in enumerate(zip(out, s))]
        out.insert(self.axis, len(shapes))
        return [tuple(out)]

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        self.infer_shapes([x.shape for x in inputs])
        return [np.stack(inputs, axis=self.axis)]


@register(na.NODE_TYPE_UNSTACK)
class Unstack(Kernel):
    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        if not node.outputs:
            raise invalid(node, "expects 1 or more outputs, has 0")
        self.expect_counts(1, len(node.outputs))
        moved_dtype(node)
        self.rank = len(node.inputs[0].shape)
        self.axis = normalize_axis(node, int(node.attrs.axis), self.rank)
        check_declared_shapes(self)

    def infer_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        x = tuple(input_shapes[0])
        if len(x) != self.rank:
            raise bad_shape(self.node, f"input rank {len(x)}, the model has {self.rank}")
        count = len(self.node.outputs)
        if x[self.axis] not in (count, DYNAMIC):
            raise bad_shape(self.node, f"dimension {self.axis} of size {x[self.axis]} does not "
                                       f"unstack into {count} outputs")
        return [x[:self.axis] + x[self.axis + 1:]] * count

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        x = inputs[0]
        self.infer_shapes([x.shape])
        # the trailing Ellipsis keeps each slice a (0-D) array view, never a scalar
        return [x[(slice(None),) * self.axis + (k, ...)] for k in range(x.shape[self.axis])]
