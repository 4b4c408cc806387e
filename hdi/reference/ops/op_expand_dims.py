"""ExpandDims: x with a dimension of size 1 inserted at `axis` (numpy.expand_dims).

`axis` (input 1) holds exactly one INT32/INT64 value (a scalar or a one-element 1-D
tensor) in [-n-1, n] for an n-D x; negative counts from the end of the OUTPUT, as in
TensorFlow (-1 appends). It is normally constant; a run-time axis is read at each run and
leaves every output dimension DYNAMIC until then (the position is unknown).

Data movement only: any dtype, quantisation kept; the result is a view of x.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from nnrt.hdi.reference.kernel import Kernel, invalid, register
from nnrt.hdi.reference.ops._common import (
    bad_shape,
    check_declared_shapes,
    constant_index_input,
    index_values,
    moved_dtype,
)
from nnrt.protos import node_attrs_pb2 as na
from nnrt.common.errors import DriverError
from nnrt.hdi.graph import DYNAMIC, NodeSpec, Shape


@register(na.NODE_TYPE_EXPAND_DIMS)
class ExpandDims(Kernel):
    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        self.expect_counts(2)
        moved_dtype(node)
        self.rank = len(node.inputs[0].shape)
        declared = node.inputs[1].shape
        if declared and declared[0] not in (1, DYNAMIC):
            raise invalid(node, f"axis must hold one value, has shape {list(declared)}")
        values = constant_index_input(node, 1, "axis")
        self.axis: int | None = None
        if values is not None:
            self.axis = self._axis(values, lambda why: invalid(node, why))
        check_declared_shapes(self)

    def _axis(self, values: Sequence[int], error: Callable[[str], DriverError]) -> int:
        """The insert position in the output for these axis values."""
        if len(values) != 1:
            raise error(f"axis must hold one value, holds {list(values)}")
        (axis,) = values
        if not -self.rank - 1 <= axis <= self.rank:
            raise error(f"axis {axis} is outside [{-self.rank - 1}, {self.rank}]")
        return axis + self.rank + 1 if axis < 0 else axis

    def infer_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        x = tuple(input_shapes[0])
        if len(x) != self.rank:
            raise bad_shape(self.node, f"input rank {len(x)}, the model has {self.rank}")
        if self.axis is None:
            return [(DYNAMIC,) * (self.rank + 1)]
        return [x[:self.axis] + (1,) + x[self.axis:]]

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        axis = self.axis
        if axis is None:
            axis = self._axis(index_values(self.node, inputs[1], "axis"),
                              lambda why: bad_shape(self.node, why))
        return [np.expand_dims(inputs[0], axis)]
