"""The broadcast binary family: AddFusion (x + y), SubFusion (x - y), MulFusion (x * y) and
DivFusion (x / y), numpy broadcasting (rank 0 included), then the fused activationType.

Decisions:

* Both inputs and the output share one dtype (any integer or float type). Mixed input
  dtypes are reported unsupported: hdi_ops.json's "the more precise type" promotion is not
  implemented. Bool is unsupported.
* Integer overflow wraps (two's complement), as the C kernels do in practice.
* Integer DivFusion truncates toward zero, as C's `/` does (-7 / 2 = -3). Division by zero
  has no value: a constant divisor holding a zero makes the node invalid at prepare time,
  a run-time one fails that run with NNRT_FAILED; the process is never at risk. The
  overflowing INT_MIN / -1 wraps to INT_MIN.
* Float division follows IEEE 754 (x / 0 = ±inf, 0 / 0 = NaN), no error.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from nnrt.hdi.reference import arena
from nnrt.hdi.reference.activations import apply_activation, fused_activation
from nnrt.hdi.reference.kernel import Kernel, invalid, register
from nnrt.hdi.reference.ops._common import (
    NUMERIC_DTYPES,
    broadcast_shapes,
    check_declared_shapes,
    common_dtype,
    require_unquantised,
)
from nnrt.protos import node_attrs_pb2 as na
from nnrt.common.errors import NNRT_FAILED, DriverError
from nnrt.hdi.graph import DYNAMIC, NodeSpec, Shape


def _int_divide(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """x / y truncated toward zero (C semantics); y holds no zero."""
    q = np.floor_divide(x, y)
    if np.issubdtype(q.dtype, np.signedinteger):
        # floor and truncation differ where the remainder is non-zero and the signs differ.
        fix = np.remainder(x, y) != 0
        fix &= (x < 0) != (y < 0)
        q += fix.astype(q.dtype)
    return q


class _Binary(Kernel):
    ufunc: Callable[..., np.ndarray]
    static: tuple[Shape, Shape, Shape] | None = None  # set by _Binary.__init__ (below)

    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        self.expect_counts(2)
        require_unquantised(node)
        self.dtype = common_dtype(node, node.inputs, NUMERIC_DTYPES, "inputs")
        self.activation = fused_activation(node, self.dtype)
        self.integer = np.issubdtype(self.dtype, np.integer)
        (declared,) = check_declared_shapes(self)
        # Input shapes and result shape of a run with the declared shapes, whose result the
        # ufunc then writes straight into the output's buffer in the run's arena.
        shapes = (tuple(node.inputs[0].shape), tuple(node.inputs[1].shape), tuple(declared))
        self.static = None if any(DYNAMIC in s for s in shapes) or not declared else shapes

    def writes_into(self) -> bool:
        """Whether compute() is the bare ufunc with the inputs' dtype as its result, which
        can then write into a given array."""
        return False

    def infer_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        return [broadcast_shapes(self.node, tuple(input_shapes[0]), tuple(input_shapes[1]))]

    def compute(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return self.ufunc(x, y)

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        x, y = inputs
        static = self.static
        with np.errstate(all="ignore"):  # wrap-around and IEEE specials are the semantics
            if static is not None and x.shape == static[0] and y.shape == static[1] \
                    and self.writes_into():
                result = self.ufunc(x, y, out=arena.output(self, 0, static[2], self.dtype))
            else:
                result = np.asarray(self.compute(x, y))
        return [apply_activation(result, self.activation, inplace=result.ndim > 0)]


@register(na.NODE_TYPE_ADD_FUSION)
class AddFusion(_Binary):
    ufunc = staticmethod(np.add)

    def writes_into(self) -> bool:
        return True


@register(na.NODE_TYPE_SUB_FUSION)
class SubFusion(_Binary):
    ufunc = staticmethod(np.subtract)

    def writes_into(self) -> bool:
        return True


@register(na.NODE_TYPE_MUL_FUSION)
class MulFusion(_Binary):
    ufunc = staticmethod(np.multiply)

    def writes_into(self) -> bool:
        return True


@register(na.NODE_TYPE_DIV_FUSION)
class DivFusion(_Binary):
    ufunc = staticmethod(np.true_divide)

    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        divisor = node.inputs[1].constant
        if self.integer and divisor is not None and not divisor.all():
            raise invalid(node, "integer division by a constant divisor that holds 0")

    def writes_into(self) -> bool:
        return not self.integer

    def compute(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        if not self.integer:
            return np.true_divide(x, y)
        if not np.all(y):
            raise DriverError(NNRT_FAILED, f"node {self.node.index} ({self.node.name}): "
                                           f"integer division by zero")
        return _int_divide(x, y)
