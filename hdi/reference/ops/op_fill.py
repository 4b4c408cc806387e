"""Fill and ConstantOfShape: a tensor of a given shape with every element equal to one value.

Fill (value, shape): `value` is a scalar or one-element tensor whose dtype is the output
dtype (any); `shape` is a 1-D INT32/INT64 tensor of sizes >= 0 (empty: a scalar).

ConstantOfShape (shape): the value is the `value` attribute — empty means 0 (ONNX's
default), more than one element is invalid — converted to the output dtype as a C cast
would (_common.float_attr_as). `dataType` is an HDI DataType code (the numbering MindSpore
Lite's TypeId shares, semantics.md): 0 means "the output tensor's dtype"; any other code
must name the output tensor's dtype (invalid otherwise).

In both, a constant shape gives a static output shape; a run-time one gives DYNAMIC
dimensions until the run, where its bad values fail the run with NNRT_INVALID_SHAPE. The
result is a read-only broadcast of the value; the host's copy to the output buffer
materialises it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from nnrt.hdi.reference.kernel import Kernel, invalid, register, unsupported
from nnrt.hdi.reference.ops._common import (
    bad_shape,
    check_declared_shapes,
    float_attr_as,
    run_shape_input,
    shape_input,
)
from nnrt.protos import node_attrs_pb2 as na
from nnrt.common.dtypes import numpy_dtype
from nnrt.hdi.graph import DYNAMIC, NodeSpec, Shape


class _Filled(Kernel):
    """A kernel whose output shape is the values of its input `shape_input`."""

    shape_input = 0

    def plan_shape(self) -> None:
        node = self.node
        if node.outputs[0].quant_params:
            raise unsupported(node, "a quantised output")
        self.shape, self.rank = shape_input(node, self.shape_input)

    def infer_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        return [tuple(self.shape) if self.shape is not None else (DYNAMIC,) * self.rank]

    def run_shape(self, inputs: Sequence[np.ndarray]) -> tuple[int, ...]:
        if self.shape is not None:
            return tuple(self.shape)
        return run_shape_input(self.node, inputs[self.shape_input], self.rank)


@register(na.NODE_TYPE_FILL)
class Fill(_Filled):
    shape_input = 1

    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        self.expect_counts(2)
        value = node.inputs[0]
        if node.outputs[0].dtype != value.dtype:
            raise invalid(node, f"output dtype {node.outputs[0].dtype} differs from the "
                                f"value's {value.dtype}")
        if len(value.shape) > 1 or (value.shape and value.shape[0] not in (1, DYNAMIC)):
            raise invalid(node, f"value of shape {list(value.shape)} is not one value")
        self.plan_shape()
        check_declared_shapes(self)

    def infer_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        value = tuple(input_shapes[0])
        if DYNAMIC not in value and int(np.prod(value)) != 1:
            raise bad_shape(self.node, f"value of shape {list(value)} is not one value")
        return super().infer_shapes(input_shapes)

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        shape = self.run_shape(inputs)
        self.infer_shapes([a.shape for a in inputs])
        return [np.broadcast_to(inputs[0].reshape(()), shape)]


@register(na.NODE_TYPE_CONSTANT_OF_SHAPE)
class ConstantOfShape(_Filled):
    shape_input = 0

    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        self.expect_counts(1)
        attrs = node.attrs
        dtype = node.outputs[0].dtype
        code = int(attrs.dataType)
        if code != 0:
            named = numpy_dtype(code)
            if named is None:
                raise invalid(node, f"dataType {code} is not an HDI DataType")
            if named != dtype:
                raise invalid(node, f"dataType {code} ({named}) differs from the output "
                                    f"tensor's {dtype}")
        values = list(attrs.value)
        if len(values) > 1:
            raise invalid(node, f"value holds {len(values)} elements, expected one")
        self.value = np.array(float_attr_as(node, float(values[0]) if values else 0.0, dtype,
                                            "value"), dtype=dtype)
        self.plan_shape()
        check_declared_shapes(self)

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        return [np.broadcast_to(self.value, self.run_shape(inputs))]
