"""Cast as ONNX Cast where onnxruntime's conversion (a C static_cast) is ours: integer ->
integer wraps, -> float rounds to nearest (±inf beyond), -> bool is "non-zero", bool ->
0 / 1, and to the same dtype an Identity.

float -> integer saturates in our semantics (NaN -> 0) where a C cast is undefined: written
out in float64 as Where(IsNaN(x), 0, x), clipped to the target's range (exact in float64
for targets up to 32 bits), then cast — the cast truncates toward zero as ours. INT64 and
UINT64 targets stay on numpy (their bounds are not float64 values). A run-time target-type
input stays on numpy (its check must fail the run).
"""

from __future__ import annotations

import numpy as np

from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.reference.kernel import Kernel
from ..lowering import NodeEmitter, NotLowerable, lowers, onnx_dtype
from .lower_reshape import require_moved

F64 = np.dtype(np.float64)


@lowers(na.NODE_TYPE_CAST)
def cast(k: Kernel, e: NodeEmitter) -> None:
    require_moved(e)
    if k.check_at_run:
        raise NotLowerable("a run-time target-type input")
    src, dst = e.spec(0).dtype, k.dtype
    x = e.input(0)
    if src == dst:
        e.op("Identity", [x], out=e.output())
        return
    if src.kind == "f" and dst.kind in "iu":
        if dst.itemsize > 4:
            raise NotLowerable(f"saturating {src} -> {dst}")
        info = np.iinfo(dst)
        if src != F64:
            x = e.op("Cast", [x], to=onnx_dtype(F64))
        x = e.op("Where", [e.op("IsNaN", [x]), e.const(0.0, F64), x])
        x = e.op("Clip", [x, e.const(info.min, F64), e.const(info.max, F64)])
    e.op("Cast", [x], out=e.output(), to=onnx_dtype(dst))
