"""LogicalAnd (x1 AND x2), LogicalOr (x1 OR x2) with numpy broadcasting, and LogicalNot
(NOT x); the output is a BOOL tensor (of the broadcast shape, or x's shape).

Decisions where the spec is silent: the operands are bool "or implicitly converted"
(hdi_ops.json): any integer or float operand is converted as C converts to bool, non-zero
(NaN included) is true. The two operands of And/Or may have different dtypes, since each
is converted on its own. An output declared with another dtype than BOOL is invalid.
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
CONVERTIBLE = NUMERIC_DTYPES | {BOOL}


def as_bool(x: np.ndarray) -> np.ndarray:
    """x as bool: itself when it is bool, else x != 0 (NaN != 0 is true, as in C)."""
    return x if x.dtype == BOOL else np.not_equal(x, 0)


class _Logical(Kernel):
    arity: int
    ufunc: Callable[..., np.ndarray]

    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        self.expect_counts(self.arity)
        require_unquantised(node)
        for t in node.inputs:
            if t.dtype not in CONVERTIBLE:
                raise unsupported(node, f"operand dtype {t.dtype}")
        if node.outputs[0].dtype != BOOL:
            raise invalid(node, f"output dtype {node.outputs[0].dtype} is not bool")
        check_declared_shapes(self)

    def infer_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        return [broadcast_shapes(self.node, *(tuple(s) for s in input_shapes))]

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        return [np.asarray(self.ufunc(*(as_bool(x) for x in inputs)))]


@register(na.NODE_TYPE_LOGICAL_AND)
class LogicalAnd(_Logical):
    arity = 2
    ufunc = staticmethod(np.logical_and)


@register(na.NODE_TYPE_LOGICAL_OR)
class LogicalOr(_Logical):
    arity = 2
    ufunc = staticmethod(np.logical_or)


@register(na.NODE_TYPE_LOGICAL_NOT)
class LogicalNot(_Logical):
    arity = 1
    ufunc = staticmethod(np.logical_not)
