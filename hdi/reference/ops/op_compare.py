"""The comparisons: Equal (x1 == x2), NotEqual (!=), Greater (>), GreaterEqual (>=), Less (<)
and LessEqual (<=), element-wise with numpy broadcasting (rank 0 included); the output is
a BOOL tensor of the broadcast shape.

Decisions where the spec is silent:

* Both operands share one dtype: bool, any integer or any float type (bool orders
  false < true). Mixed dtypes are unsupported (no promotion is implemented); an output
  declared with another dtype than BOOL is invalid.
* Floats compare as IEEE 754 says: every comparison with NaN is false except NotEqual,
  which is true; -0.0 == +0.0.
* In quantized models the output still carries quantization parameters (capi_ops.json);
  they are ignored, as is the output's quantization in general (QUANT_TYPE_ALL nodes are
  refused centrally).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from nnrt.hdi.reference.kernel import Kernel, invalid, register, unsupported
from nnrt.hdi.reference.ops._common import (
    NUMERIC_DTYPES,
    broadcast_shapes,
    check_declared_shapes,
    require_unquantised,
)
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import NodeSpec, Shape

BOOL = np.dtype(np.bool_)
COMPARABLE = NUMERIC_DTYPES | {BOOL}


class _Compare(Kernel):
    ufunc: Callable[..., np.ndarray]

    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        self.expect_counts(2)
        require_unquantised(node)
        dtypes = {t.dtype for t in node.inputs}
        if len(dtypes) != 1:
            raise unsupported(node, f"operands of mixed dtypes {sorted(map(str, dtypes))}")
        (dtype,) = dtypes
        if dtype not in COMPARABLE:
            raise unsupported(node, f"dtype {dtype} is not supported for comparison")
        if node.outputs[0].dtype != BOOL:
            raise invalid(node, f"output dtype {node.outputs[0].dtype} is not bool")
        check_declared_shapes(self)

    def infer_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        return [broadcast_shapes(self.node, tuple(input_shapes[0]), tuple(input_shapes[1]))]

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        with np.errstate(invalid="ignore"):  # comparisons with NaN are simply false
            return [np.asarray(self.ufunc(inputs[0], inputs[1]))]


@register(na.NODE_TYPE_EQUAL)
class Equal(_Compare):
    ufunc = staticmethod(np.equal)


@register(na.NODE_TYPE_NOT_EQUAL)
class NotEqual(_Compare):
    ufunc = staticmethod(np.not_equal)


@register(na.NODE_TYPE_GREATER)
class Greater(_Compare):
    ufunc = staticmethod(np.greater)


@register(na.NODE_TYPE_GREATER_EQUAL)
class GreaterEqual(_Compare):
    ufunc = staticmethod(np.greater_equal)


@register(na.NODE_TYPE_LESS)
class Less(_Compare):
    ufunc = staticmethod(np.less)


@register(na.NODE_TYPE_LESS_EQUAL)
class LessEqual(_Compare):
    ufunc = staticmethod(np.less_equal)
