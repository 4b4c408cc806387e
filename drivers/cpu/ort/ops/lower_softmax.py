"""Softmax as ONNX Softmax (opset 13+: along one axis, the other dimensions independent, as
ours); LogSoftmax written out as ours computes it. float32 only (float16 mode stays on
numpy).

LogSoftmax is not ONNX's LogSoftmax: ours subtracts the slice's maximum with an infinite
maximum taken as 0 (a slice holding +inf gives NaN at the +inf and -inf elsewhere, not NaN
throughout), so the lowering is x - m - log(sum(exp(x - m))) with m = ReduceMax, 0 where
infinite. ReduceMax may drop a NaN here; the NaN then reaches exp and the sum, and the
slice is NaN throughout either way, as ours.
"""

from __future__ import annotations

import numpy as np

from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.reference.kernel import Kernel
from ..lowering import NodeEmitter, lowers


@lowers(na.NODE_TYPE_SOFTMAX)
def softmax(k: Kernel, e: NodeEmitter) -> None:
    e.require_float32()
    e.op("Softmax", [e.input(0)], out=e.output(), axis=k.axis)


@lowers(na.NODE_TYPE_LOG_SOFTMAX)
def log_softmax(k: Kernel, e: NodeEmitter) -> None:
    e.require_float32()
    x = e.input(0)
    axes = e.int64s([k.axis])
    top = e.op("ReduceMax", [x, axes], keepdims=1)
    top = e.op("Where", [e.op("IsInf", [top]), e.const(0.0, np.float32, "zero"), top])
    shifted = e.op("Sub", [x, top])
    total = e.op("ReduceSum", [e.op("Exp", [shifted]), axes], keepdims=1)
    e.op("Sub", [shifted, e.op("Log", [total])], out=e.output())
