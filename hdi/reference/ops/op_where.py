"""Where and Select: y = condition ? x1 : x2 element-wise; Where with a single input gives the
coordinates of the true elements of its condition.

Decisions where the spec is silent:

* Three-input form (both operators): condition, x1 and x2 broadcast together by numpy's
  rules (semantics.md); the output has the broadcast shape (x1's shape whenever the other
  two broadcast to it). x1, x2 and the output share one dtype, any HDI type bool
  included; mixed dtypes are unsupported.
* Select also takes a 1-D condition over the FIRST dimension of higher-rank values, as
  hdi_ops.json says ("scalar, vector over the first dim, or same shape", TensorFlow's
  Select): condition[i] chooses the whole slice i. That rule wins over numpy's
  alignment with the last dimension when x1/x2 have rank >= 2; Where always broadcasts.
* The condition must be BOOL (other dtypes are unsupported: hdi_ops.json says boolean).
* One-input Where (the TensorFlow/MindSpore form, absent from hdi_ops.json): the output is
  [N, rank(condition)], the row-major coordinates of the N true elements, as INT32 or
  INT64 (the output tensor's declared dtype; any other is unsupported). N depends on the
  condition's values, so it is DYNAMIC unless the condition is constant. A rank-0 true
  condition gives shape [1, 0], a false one [0, 0].
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from nnrt.hdi.reference.kernel import Kernel, invalid, register, unsupported
from nnrt.hdi.reference.ops._common import (
    INDEX_DTYPES,
    bad_shape,
    broadcast_shapes,
    check_declared_shapes,
    common_dtype,
    require_unquantised,
)
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import DYNAMIC, NodeSpec, Shape

BOOL = np.dtype(np.bool_)
ANY_DTYPE = frozenset(np.dtype(t) for t in (
    np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
    np.uint64, np.float16, np.float32, np.float64))


class _Choose(Kernel):
    rows: bool = False  # Select's 1-D condition over the first dimension
    input_counts: tuple[int, ...] = (3,)

    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        counts = self.input_counts
        if len(node.inputs) not in counts:
            raise invalid(node, f"expects {' or '.join(map(str, counts))} inputs, has "
                                f"{len(node.inputs)}")
        self.expect_counts(len(node.inputs))  # and one output
        require_unquantised(node)
        cond = node.inputs[0]
        if cond.dtype != BOOL:
            raise unsupported(node, f"condition dtype {cond.dtype} (bool only)")
        self.coordinates = len(node.inputs) == 1
        if self.coordinates:
            if node.outputs[0].dtype not in INDEX_DTYPES:
                raise unsupported(node, f"coordinates as {node.outputs[0].dtype} (INT32 or "
                                        f"INT64 only)")
            self.count = None if not cond.is_constant else int(np.count_nonzero(cond.constant))
        else:
            common_dtype(node, node.inputs[1:], ANY_DTYPE, "values")
            value_rank = max(len(t.shape) for t in node.inputs[1:])
            self.by_rows = self.rows and len(cond.shape) == 1 and value_rank >= 2
            self.pad = (1,) * (value_rank - 1)
        check_declared_shapes(self)

    def infer_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        cond = tuple(input_shapes[0])
        if self.coordinates:
            return [(DYNAMIC if self.count is None else self.count, len(cond))]
        if self.by_rows:
            if len(cond) != 1:
                raise bad_shape(self.node, f"condition rank changed: {list(cond)}")
            cond = cond + self.pad
        return [broadcast_shapes(self.node, cond, tuple(input_shapes[1]),
                                 tuple(input_shapes[2]))]

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        cond = inputs[0]
        if self.coordinates:
            return [np.argwhere(cond).astype(self.node.outputs[0].dtype)]
        if self.by_rows:
            cond = cond.reshape(cond.shape + self.pad)
        return [np.asarray(np.where(cond, inputs[1], inputs[2]))]


@register(na.NODE_TYPE_WHERE)
class Where(_Choose):
    input_counts = (1, 3)  # coordinates or selection


@register(na.NODE_TYPE_SELECT)
class Select(_Choose):
    rows = True
