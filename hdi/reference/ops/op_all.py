"""All: logical AND ("every element non-zero") of x over the dimensions named by the axis
input; a BOOL output, the reduced dimensions kept with length 1 when keepDims is non-zero
(an int64 attribute), dropped otherwise.

Decisions where the spec is silent:

* x may be bool or any integer or float type; non-zero (NaN included) is true, as in C.
* The axis input is a scalar or a 1-D INT32/INT64 tensor; entries may be negative
  (counting from the end) and must lie in [-rank, rank); naming a dimension twice is
  invalid. An empty axis tensor reduces nothing (TensorFlow's All, where this operator
  comes from: the output is x as bool), unlike the ONNX reductions.
* A run-time axis tensor is read at each run (bad entries fail that run with
  NNRT_FAILED); the output dimensions are then DYNAMIC, and without keepDims its length
  must be known from the declared shape (the output rank depends on it): unsupported
  otherwise.
* An empty reduction (a dimension of size 0) is true, the identity of AND.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from nnrt.hdi.reference.kernel import Kernel, invalid, register, unsupported
from nnrt.hdi.reference.ops._common import (
    NUMERIC_DTYPES,
    check_declared_shapes,
    constant_index_input,
    index_values,
    require_unquantised,
)
from nnrt.protos import node_attrs_pb2 as na
from nnrt.common.errors import NNRT_FAILED, DriverError
from nnrt.hdi.graph import DYNAMIC, NodeSpec, Shape

BOOL = np.dtype(np.bool_)


@register(na.NODE_TYPE_ALL)
class All(Kernel):
    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        self.expect_counts(2)
        require_unquantised(node)
        x = node.inputs[0]
        if x.dtype not in NUMERIC_DTYPES | {BOOL}:
            raise unsupported(node, f"input dtype {x.dtype}")
        if node.outputs[0].dtype != BOOL:
            raise invalid(node, f"output dtype {node.outputs[0].dtype} is not bool")
        self.rank = len(x.shape)
        self.keep = bool(node.attrs.keepDims)
        values = constant_index_input(node, 1, "axis")
        self.axes = None if values is None else self.normalise(values, invalid)
        if self.axes is None:
            declared = node.inputs[1].shape
            self.count = declared[0] if declared else 1
            if self.count == DYNAMIC and not self.keep:
                raise unsupported(node, "a run-time axis tensor of unknown length without "
                                        "keepDims (the output rank is unknown)")
        check_declared_shapes(self)

    def normalise(self, values: Sequence[int],
                  error: Callable[[NodeSpec, str], DriverError]) -> tuple[int, ...]:
        axes = []
        for a in values:
            if not -self.rank <= a < self.rank:
                raise error(self.node, f"axis {a} is outside [{-self.rank}, {self.rank})")
            axes.append(a + self.rank if a < 0 else a)
        if len(set(axes)) != len(axes):
            raise error(self.node, f"axis {list(values)} names a dimension twice")
        return tuple(sorted(axes))

    def infer_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        x = tuple(input_shapes[0])
        if self.axes is None:
            return [(DYNAMIC,) * (self.rank if self.keep else self.rank - self.count)]
        if self.keep:
            return [tuple(1 if i in self.axes else d for i, d in enumerate(x))]
        return [tuple(d for i, d in enumerate(x) if i not in self.axes)]

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        x = inputs[0]
        axes = self.axes
        if axes is None:
            axes = self.normalise(index_values(self.node, inputs[1], "axis"), self.run_error)
        truth = x if x.dtype == BOOL else np.not_equal(x, 0)
        return [np.asarray(np.all(truth, axis=axes, keepdims=self.keep))]

    @staticmethod
    def run_error(node: NodeSpec, why: str) -> DriverError:
        return DriverError(NNRT_FAILED, f"node {node.index} ({node.name}): {why}")
