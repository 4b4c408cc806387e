"""Broadcast binary operators without a fused activation: Maximum, Minimum, Mod, RealDiv and
SquaredDifference. numpy broadcasting (rank 0 included, semantics.md), one dtype shared by
both inputs and the output. They reuse op_arithmetic's `_Binary` (shape inference, the
errstate guard, the truncating integer division) with the activation fixed to none.

Decisions where the spec is silent:

* Dtypes: every integer and float type; mixed input dtypes are unsupported (hdi_ops.json's
  "higher-precision type" promotion is not implemented), as is bool ("not both boolean":
  with one bool operand the pair is mixed anyway).
* Maximum / Minimum propagate NaN (a NaN operand gives NaN), as C's fmax does not but
  TensorFlow and ONNX do.
* Mod is C's fmod, the remainder of the division truncated toward zero: its sign follows
  the dividend (-7 mod 2 = -1, 7 mod -2 = 1). That is what MindSpore Lite's Mod kernel
  (nnacl ElementMod: fmodf for floats and integers alike) computes, and ONNX Mod with
  fmod = 1; the floor-mod variant is a different operator (FloorMod) there. Float x mod 0
  is NaN (IEEE); an integer zero divisor is an error as for DivFusion: invalid node when
  it is constant, NNRT_FAILED for the run otherwise.
* RealDiv is DivFusion without activation: IEEE division for floats, truncation toward
  zero for integers (as C, and as DivFusion here), zero integer divisors as for Mod.
* SquaredDifference is (x - y)^2; integers wrap (modulo 2^n, so an unsigned difference that
  wrapped still squares to the right residue); float16 is computed in float32 and rounded
  once.
"""

from __future__ import annotations

import numpy as np

from nnrt.hdi.reference.kernel import Kernel, invalid, register
from nnrt.hdi.reference.ops._common import (
    NUMERIC_DTYPES,
    cast,
    check_declared_shapes,
    common_dtype,
    compute_dtype,
    require_unquantised,
)
from nnrt.hdi.reference.ops.op_arithmetic import DivFusion, _Binary
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from nnrt.common.errors import NNRT_FAILED, DriverError
from nnrt.hdi.graph import NodeSpec


class PlainBinary(_Binary):
    """_Binary for attribute structs without an activationType (the activation is none)."""

    allowed: frozenset[np.dtype] = NUMERIC_DTYPES

    def __init__(self, node: NodeSpec) -> None:
        Kernel.__init__(self, node)  # not _Binary's: it reads node.attrs.activationType
        self.expect_counts(2)
        require_unquantised(node)
        self.dtype = common_dtype(node, node.inputs, self.allowed, "inputs")
        self.activation = ht.ACTIVATION_TYPE_NO_ACTIVATION
        self.integer = bool(np.issubdtype(self.dtype, np.integer))
        self.setup()
        check_declared_shapes(self)

    def setup(self) -> None:
        """Operator-specific validation, after the dtype is known."""

    def reject_constant_zero_divisor(self) -> None:
        divisor = self.node.inputs[1].constant
        if self.integer and divisor is not None and not divisor.all():
            raise invalid(self.node, "integer division by a constant divisor that holds 0")

    def check_divisor(self, y: np.ndarray) -> None:
        if self.integer and not np.all(y):
            raise DriverError(NNRT_FAILED, f"node {self.node.index} ({self.node.name}): "
                                           f"integer division by zero")


@register(na.NODE_TYPE_MAXIMUM)
class Maximum(PlainBinary):
    ufunc = staticmethod(np.maximum)


@register(na.NODE_TYPE_MINIMUM)
class Minimum(PlainBinary):
    ufunc = staticmethod(np.minimum)


@register(na.NODE_TYPE_MOD)
class Mod(PlainBinary):
    def setup(self) -> None:
        self.reject_constant_zero_divisor()

    def compute(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        self.check_divisor(y)
        return np.fmod(x, y)


@register(na.NODE_TYPE_REAL_DIV)
class RealDiv(PlainBinary):
    def setup(self) -> None:
        self.reject_constant_zero_divisor()

    compute = DivFusion.compute  # IEEE for floats, truncating checked division for integers


@register(na.NODE_TYPE_SQUARED_DIFFERENCE)
class SquaredDifference(PlainBinary):
    def compute(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        work = compute_dtype(self.dtype)
        d = np.subtract(x.astype(work, copy=False), y.astype(work, copy=False))
        d = np.multiply(d, d, out=d) if d.ndim else np.multiply(d, d)
        return cast(np.asarray(d), self.dtype)
