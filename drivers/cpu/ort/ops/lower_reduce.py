"""ReduceFusion as ONNX ReduceMean / ReduceSum / ReduceSumSquare / ReduceL1 / ReduceL2 /
ReduceProd / ReduceMax / ReduceMin (axes as an input, opset 18+), times coeff.

Lowered: float32 tensors with constant axes (reduceToEnd and the empty list already
resolved by the kernel) and no reduced dimension of size 0 (ours gives the documented
identities there). A reduction of every axis without keepDims reduces with keepdims and
squeezes (some of onnxruntime's reductions give [1] there, not a scalar). Integer tensors (64-bit accumulation wrapped, MEAN truncating), bool
tensors, float16, run-time axes and empty reductions stay on numpy.

MAX / MIN: onnxruntime's ReduceMax / ReduceMin drop NaN (a NaN loses to a later number);
ours propagates it, so the lowering also reduces an IsNaN mask and writes NaN where a
reduced slice held one. ALL on floats is ReduceMin over (x != 0) as 1 / 0 (NaN != 0).
"""

from __future__ import annotations

import numpy as np

from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.reference.kernel import Kernel
from ..lowering import F32, FLOAT32_ONLY, NodeEmitter, NotLowerable, lowers

_OP = {ht.REDUCE_MODE_MEAN: "ReduceMean", ht.REDUCE_MODE_SUM: "ReduceSum",
       ht.REDUCE_MODE_SUM_SQUARE: "ReduceSumSquare", ht.REDUCE_MODE_ASUM: "ReduceL1",
       ht.REDUCE_MODE_L2: "ReduceL2", ht.REDUCE_MODE_PROD: "ReduceProd",
       ht.REDUCE_MODE_MAX: "ReduceMax", ht.REDUCE_MODE_MIN: "ReduceMin"}


@lowers(na.NODE_TYPE_REDUCE_FUSION)
def reduce(k: Kernel, e: NodeEmitter) -> None:
    e.require_dtypes(FLOAT32_ONLY, e.spec(0), e.node.outputs[0])
    if k.axes is None:
        raise NotLowerable("run-time axes")
    shape = e.spec(0).shape
    if any(shape[a] == 0 for a in k.axes):
        raise NotLowerable("an empty reduction")
    x = e.input(0)
    axes = e.int64s(list(k.axes))
    # onnxruntime's reductions of every axis without keepdims give [1] for some modes, not
    # a scalar: those keep the dimensions and squeeze them afterwards
    squeeze = not k.keep and len(k.axes) == len(shape)
    keep = int(k.keep or squeeze)
    last = k.coeff == 1.0 and not squeeze
    out = e.output() if last else None
    if k.mode == ht.REDUCE_MODE_ALL:
        nonzero = e.op("Cast", [e.op("Not", [e.op("Equal", [x, e.const(0.0, F32, "zero")])])],
                       to=1)
        y = e.op("ReduceMin", [nonzero, axes], keepdims=keep, out=out)
    elif k.mode in (ht.REDUCE_MODE_MAX, ht.REDUCE_MODE_MIN):
        if e.finite(0):
            y = e.op(_OP[k.mode], [x, axes], keepdims=keep, out=out)
        else:  # NaN where the reduced values held one (onnxruntime may drop it)
            y = e.op(_OP[k.mode], [x, axes], keepdims=keep)
            nan = e.op("ReduceMax", [e.op("Cast", [e.op("IsNaN", [x])], to=1), axes],
                       keepdims=keep)
            y = e.op("Where", [e.op("Cast", [nan], to=9), e.const(np.nan, F32, "nan"), y],
                     out=out)
    else:
        y = e.op(_OP[k.mode], [x, axes], keepdims=keep, out=out)
    if k.coeff != 1.0:
        y = e.op("Mul", [y, e.const(k.coeff, F32, "coeff")], out=None if squeeze else e.output())
    if squeeze:
        e.op("Squeeze", [y], out=e.output())
