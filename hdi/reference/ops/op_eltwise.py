"""Eltwise: x1 (mode) x2 element-wise, mode an EltwiseMode (hdi.md 6.14): PROD (0) x1 * x2,
SUM (1) x1 + x2, MAXIMUM (2) max(x1, x2).

Decisions where the spec is silent:

* ELTWISE_MODE_UNKNOWN (3) and values outside the enum are invalid nodes.
* hdi_ops.json says "same shape as x1"; the operands broadcast by numpy's rules like every
  element-wise operator (semantics.md), so the output has the broadcast shape (x1's shape
  whenever x2 broadcasts to it).
* Dtypes, integer wrap-around, NaN propagation of MAXIMUM and the refusal of mixed dtypes
  and bool are those of AddFusion / MulFusion / Maximum (op_arithmetic, op_binary_math).
"""

from __future__ import annotations

import numpy as np

from nnrt.hdi.reference.kernel import invalid, register
from nnrt.hdi.reference.ops.op_binary_math import PlainBinary
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na

_MODES = {
    ht.ELTWISE_MODE_PROD: np.multiply,
    ht.ELTWISE_MODE_SUM: np.add,
    ht.ELTWISE_MODE_MAXIMUM: np.maximum,
}


@register(na.NODE_TYPE_ELTWISE)
class Eltwise(PlainBinary):
    def setup(self) -> None:
        mode = int(self.node.attrs.mode)
        if mode not in _MODES:
            raise invalid(self.node, f"Eltwise mode {mode} is not PROD (0), SUM (1) or "
                                     f"MAXIMUM (2)")
        self.ufunc = _MODES[mode]
