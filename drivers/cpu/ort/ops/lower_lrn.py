"""LRN written out as ours computes it, in float64, rather than ONNX's LRN.

ONNX's LRN divides alpha by the window size (size = 2·depthRadius + 1 would compensate)
but onnxruntime's kernel sums the squares with a float32 running sum whose differences
cancel (a large channel leaving the window wipes out the small ones after it, and an
infinity turns every later channel NaN), and it takes 4-D tensors only. So the lowering
follows op_lrn.py node by node: x cast to float64, squared; a zero and then a running sum
(CumSum) along the channel axis; window = run[hi] - run[lo] (Gather of the constant window
ends), negative differences set to 0 (a NaN stays NaN, as np.maximum keeps it);
y = x · (bias + alpha · window) ^ -beta, cast back once.

Lowered: float32 and float64, any rank, a static channel dimension. float16 stays on numpy.
"""

from __future__ import annotations

import numpy as np

from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import DYNAMIC
from nnrt.hdi.reference.kernel import Kernel
from ..lowering import NodeEmitter, NotLowerable, lowers, onnx_dtype

F64 = np.dtype(np.float64)
LRN_DTYPES = frozenset({np.dtype(np.float32), F64})


@lowers(na.NODE_TYPE_LRN)
def lrn(k: Kernel, e: NodeEmitter) -> None:
    e.require_dtypes(LRN_DTYPES)
    shape = e.spec(0).shape
    c = shape[k.axis]
    if c == DYNAMIC:
        raise NotLowerable("a DYNAMIC channel dimension")
    rank = len(shape)
    x = e.input(0)
    dtype = e.spec(0).dtype
    x64 = x if dtype == F64 else e.op("Cast", [x], to=onnx_dtype(F64))
    pads = [0] * (2 * rank)
    pads[k.axis] = 1  # one leading zero on the channel axis
    zero = e.const(0.0, F64, "zero")
    squares = e.op("Pad", [e.op("Mul", [x64, x64]), e.int64s(pads, "pads"), zero])
    run = e.op("CumSum", [squares, e.const(k.axis, np.int64, "axis")])
    channels = np.arange(c)
    hi = np.minimum(channels + k.radius + 1, c)
    lo = np.maximum(channels - k.radius, 0)
    window = e.op("Sub", [e.op("Gather", [run, e.int64s(hi, "hi")], axis=k.axis),
                          e.op("Gather", [run, e.int64s(lo, "lo")], axis=k.axis)])
    window = e.op("Where", [e.op("Less", [window, zero]), zero, window])
    base = e.op("Add", [e.const(k.bias, F64, "bias"),
                        e.op("Mul", [e.const(k.alpha, F64, "alpha"), window])])
    scale = e.op("Pow", [base, e.const(-k.beta, F64, "beta")])
    if dtype == F64:
        e.op("Mul", [x64, scale], out=e.output())
    else:
        e.op("Cast", [e.op("Mul", [x64, scale])], to=onnx_dtype(dtype), out=e.output())
