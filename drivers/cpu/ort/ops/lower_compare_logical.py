"""Comparisons (Equal, NotEqual as Not(Equal): true with NaN, Greater, GreaterEqual, Less,
LessEqual) and LogicalAnd / Or / Not, BOOL outputs. Exact in every dtype lowered: float32,
int32 and int64 operands (IEEE comparisons, NaN false but for NotEqual, -0 == +0, as
numpy), and bool for Equal / NotEqual and the logical operators; a non-bool logical operand
becomes x != 0 (NaN true) as ours. Other dtypes (those onnxruntime's kernels lack, float16)
stay on numpy.
"""

from __future__ import annotations

import numpy as np

from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.reference.kernel import Kernel
from ..lowering import NodeEmitter, NotLowerable, lowers

_NUMBERS = frozenset({np.dtype(np.float32), np.dtype(np.int32), np.dtype(np.int64)})
_BOOL = np.dtype(np.bool_)
_ORDER = {na.NODE_TYPE_GREATER: "Greater", na.NODE_TYPE_GREATER_EQUAL: "GreaterOrEqual",
          na.NODE_TYPE_LESS: "Less", na.NODE_TYPE_LESS_EQUAL: "LessOrEqual"}
_LOGICAL = {na.NODE_TYPE_LOGICAL_AND: "And", na.NODE_TYPE_LOGICAL_OR: "Or"}


@lowers(*_ORDER, na.NODE_TYPE_EQUAL, na.NODE_TYPE_NOT_EQUAL)
def compare(k: Kernel, e: NodeEmitter) -> None:
    kind = k.node.node_type
    allowed = _NUMBERS if kind in _ORDER else _NUMBERS | {_BOOL}
    e.require_dtypes(allowed, *e.node.inputs)
    args = [e.input(0), e.input(1)]
    if kind == na.NODE_TYPE_EQUAL:
        e.op("Equal", args, out=e.output())
    elif kind == na.NODE_TYPE_NOT_EQUAL:
        e.op("Not", [e.op("Equal", args)], out=e.output())
    else:
        e.op(_ORDER[kind], args, out=e.output())


def _truth(e: NodeEmitter, i: int) -> str:
    spec = e.spec(i)
    if spec.dtype == _BOOL:
        return e.input(i)
    if spec.dtype not in _NUMBERS:
        raise NotLowerable(f"{spec.dtype} tensor {spec.name!r}")
    return e.op("Not", [e.op("Equal", [e.input(i), e.const(0, spec.dtype, "zero")])])


@lowers(*_LOGICAL, na.NODE_TYPE_LOGICAL_NOT)
def logical(k: Kernel, e: NodeEmitter) -> None:
    kind = k.node.node_type
    if kind == na.NODE_TYPE_LOGICAL_NOT:
        e.op("Not", [_truth(e, 0)], out=e.output())
    else:
        e.op(_LOGICAL[kind], [_truth(e, 0), _truth(e, 1)], out=e.output())
