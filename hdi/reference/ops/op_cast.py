"""Cast: x converted to the target data type, same shape. The target is named by input 1, a
constant holding an HDI DataType code (semantics.md "Data types on the wire": the client
converts the OH_NN_DataType value when lowering), and must agree with the output tensor's
declared dtype.

Decisions where the spec is silent:

* The type input holds one entry (rank 0 or 1-D of length 1) of any integer dtype. An
  unknown code, a code naming another dtype than the declared output's, or more than one
  entry make the node invalid. A run-time type input is accepted: its value is checked at
  each run (a mismatch fails that run with NNRT_FAILED). A node with the type input left
  out (one input) converts to the declared output dtype.
* Every pair of the 12 HDI types is converted:
  - float -> integer truncates toward zero; values beyond the target's range (±inf
    included) saturate to its minimum/maximum and NaN becomes 0 (numpy leaves these
    undefined and platform-dependent; saturation is what ARM's conversion instructions
    and most NN runtimes do). So float -> unsigned maps negative values to 0.
  - integer -> integer wraps (two's complement, as C's conversion does in practice).
  - integer -> float and float -> float round to nearest even; beyond the target's range
    the result is ±inf (IEEE).
  - anything -> bool is "non-zero" (NaN is true); bool -> anything is 0 or 1.
* Casting to the input's own dtype returns the input unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from nnrt.hdi.reference.kernel import Kernel, invalid, register, unsupported
from nnrt.hdi.reference.ops._common import cast, require_unquantised
from nnrt.protos import node_attrs_pb2 as na
from nnrt.common.dtypes import NUMPY_DTYPES, numpy_dtype
from nnrt.common.errors import NNRT_FAILED, DriverError
from nnrt.hdi.graph import NodeSpec, Shape

BOOL = np.dtype(np.bool_)


def convert(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """x as dtype with the rules of the module docstring (a fresh array unless x already
    has that dtype)."""
    if x.dtype == dtype:
        return x
    if dtype == BOOL:
        return np.asarray(np.not_equal(x, 0))
    if x.dtype.kind == "f" and dtype.kind in "iu":
        info = np.iinfo(dtype)
        t = np.trunc(x.astype(np.float64))  # exact for every float type
        low = t < info.min  # info.min is a power of two: exact as a float
        high = t >= float(info.max) + 1.0  # float(max) + 1 = 2^bits, exact
        bad = low | high | np.isnan(t)
        out = np.where(bad, 0.0, t).astype(dtype)
        out[low] = info.min
        out[high] = info.max
        return out
    return np.asarray(cast(x, dtype))  # int -> int wraps; to float: nearest, ±inf beyond


@register(na.NODE_TYPE_CAST)
class Cast(Kernel):
    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        self.expect_counts(range(1, 3))
        require_unquantised(node)
        self.dtype = np.dtype(node.outputs[0].dtype)
        self.check_at_run = False
        if len(node.inputs) == 2:
            spec = node.inputs[1]
            if spec.dtype.kind not in "iu":
                raise invalid(node, f"the target-type input must be an integer, is {spec.dtype}")
            if len(spec.shape) > 1 or (spec.shape and spec.shape[0] not in (1, -1)):
                raise invalid(node, f"the target-type input must hold one value, has shape "
                                    f"{list(spec.shape)}")
            if spec.is_constant:
                self.check_code(int(spec.constant.reshape(-1)[0]), invalid)
            else:
                self.check_at_run = True
        if node.inputs[0].dtype not in NUMPY_DTYPES.values():
            raise unsupported(node, f"input dtype {node.inputs[0].dtype}")

    def check_code(self, code: int, error: Callable[[NodeSpec, str], DriverError]) -> None:
        target = numpy_dtype(code)
        if target is None:
            raise error(self.node, f"target type {code} is not an HDI DataType")
        if target != self.dtype:
            raise error(self.node, f"target type {code} ({target}) differs from the output "
                                   f"dtype {self.dtype}")

    def infer_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        return [tuple(input_shapes[0])]

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        if self.check_at_run:
            codes = inputs[1].reshape(-1)
            if codes.size != 1:
                raise self.run_error(f"the target-type input holds {codes.size} values")
            self.check_code(int(codes[0]), lambda _node, why: self.run_error(why))
        with np.errstate(all="ignore"):
            return [convert(inputs[0], self.dtype)]

    def run_error(self, why: str) -> DriverError:
        return DriverError(NNRT_FAILED, f"node {self.node.index} ({self.node.name}): {why}")
