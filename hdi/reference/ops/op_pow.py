"""PowFusion: y = (scale * x + shift) ^ e element-wise, x the base (input 0), e the exponent
(input 1); numpy broadcasting (semantics.md), the output has x's dtype.

Decisions where the spec is silent:

* The attributes are used as they arrive (proto3 floats have no presence: the client's
  lowering sends the C API defaults scale = 1, shift = 0). Non-finite values are invalid.
* Float base (float16/32/64): the exponent may be any float or integer type (ONNX's Pow
  also lets the exponent's type differ); it is converted to the computing type. float16
  is computed in float32 and rounded once. IEEE results, no error: a negative base with a
  non-integral exponent gives NaN, 0 ^ negative gives +inf.
* Integer base: only the plain power (scale 1, shift 0) with an integer exponent is
  computed (anything else would need a float intermediate whose rounding back the spec
  does not define: unsupported). Results wrap (two's complement), 0 ^ 0 = 1. A negative
  exponent has no integer result: a constant one makes the node invalid, a run-time one
  fails that run with NNRT_FAILED.
* Bool tensors are unsupported, as are mixed-type pairs other than those above.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from nnrt.hdi.reference.kernel import Kernel, invalid, register, unsupported
from nnrt.hdi.reference.ops._common import (
    INT_DTYPES,
    NUMERIC_DTYPES,
    broadcast_shapes,
    cast,
    check_declared_shapes,
    common_dtype,
    compute_dtype,
    require_unquantised,
)
from nnrt.protos import node_attrs_pb2 as na
from nnrt.common.errors import NNRT_FAILED, DriverError
from nnrt.hdi.graph import NodeSpec, Shape


@register(na.NODE_TYPE_POW_FUSION)
class PowFusion(Kernel):
    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        self.expect_counts(2)
        require_unquantised(node)
        self.dtype = common_dtype(node, node.inputs[:1], NUMERIC_DTYPES, "base")
        exponent = node.inputs[1]
        self.scale = float(node.attrs.scale)
        self.shift = float(node.attrs.shift)
        if not (math.isfinite(self.scale) and math.isfinite(self.shift)):
            raise invalid(node, f"scale {self.scale} and shift {self.shift} must be finite")
        self.integer = self.dtype in INT_DTYPES
        if self.integer:
            if exponent.dtype not in INT_DTYPES:
                raise unsupported(node, f"integer base {self.dtype} with a {exponent.dtype} "
                                        f"exponent")
            if (self.scale, self.shift) != (1.0, 0.0):
                raise unsupported(node, f"integer power with scale {self.scale} and shift "
                                        f"{self.shift} (only scale 1, shift 0)")
            if exponent.is_constant and (exponent.constant < 0).any():
                raise invalid(node, "integer power with a negative constant exponent")
        elif exponent.dtype not in NUMERIC_DTYPES:
            raise unsupported(node, f"exponent dtype {exponent.dtype}")
        self.work = compute_dtype(self.dtype)
        check_declared_shapes(self)

    def infer_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        return [broadcast_shapes(self.node, tuple(input_shapes[0]), tuple(input_shapes[1]))]

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        x, e = inputs
        if self.integer:
            if (e < 0).any():
                raise DriverError(NNRT_FAILED, f"node {self.node.index} ({self.node.name}): "
                                               f"integer power with a negative exponent")
            # In uint64, which is arithmetic modulo 2^64: the low bits of x^e do not depend
            # on the high ones, so narrowing at the end wraps exactly as the narrow
            # power would, for signed bases too (two's complement), and a large exponent
            # is never truncated first.
            wide = x.astype(np.int64).view(np.uint64) if x.dtype.kind == "i" else \
                x.astype(np.uint64)
            with np.errstate(all="ignore"):
                result = np.power(wide, e.astype(np.uint64))
            return [np.asarray(result).astype(self.dtype)]
        t = self.work.type
        base = x.astype(self.work, copy=False)
        with np.errstate(all="ignore"):  # IEEE specials are the semantics
            if self.scale != 1.0:
                base = np.multiply(base, t(self.scale))  # fresh arrays: x is never written
            if self.shift != 0.0:
                base = np.add(base, t(self.shift))
            result = np.power(base, e.astype(self.work, copy=False))
        return [cast(np.asarray(result), self.dtype)]
