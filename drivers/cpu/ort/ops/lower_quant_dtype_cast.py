"""QuantDTypeCast: quantise, dequantise and requantise written out in float64, as the numpy
kernel computes them — ONNX's QuantizeLinear divides in float32, which can round a value
near a .5 boundary to the other step. Dequantise: (q − zeroPoint)·scale; quantise:
round-half-even(r / scale + zeroPoint) (ONNX Round is half-to-even), NaN as real 0,
saturated to the type's range. A zero scale (every value to the zero point) stays on numpy."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.reference.kernel import Kernel
from nnrt.hdi.reference.ops.op_quant_dtype_cast import QUANTISED
from ..lowering import F32, NodeEmitter, NotLowerable, lowers, onnx_dtype

F64 = np.float64


@lowers(na.NODE_TYPE_QUANT_DTYPE_CAST, na.NODE_TYPE_QUANT_DTYPE_CAST_V2)
def quant_dtype_cast(k: Kernel, e: NodeEmitter) -> None:
    src, dst = e.spec(0), e.node.outputs[0]
    for spec, side in ((src, k.src), (dst, k.dst)):
        if side is None and spec.dtype != F32:
            raise NotLowerable(f"{spec.dtype} float side")
    real = e.op("Cast", [e.input(0)], to=TensorProto.DOUBLE)
    if k.src is not None:
        real = e.op("Mul", [e.op("Sub", [real, e.const(k.src.zero, F64, "zp")]),
                            e.const(k.src.scale, F64, "scale")])
    if k.dst is None:
        e.op("Cast", [real], to=TensorProto.FLOAT, out=e.output())
        return
    if np.any(k.dst.scale == 0):
        raise NotLowerable("a zero scale")
    zero = e.const(k.dst.zero, F64, "zp")
    q = e.op("Round", [e.op("Add", [e.op("Div", [real, e.const(k.dst.scale, F64, "scale")]),
                                    zero])])
    q = e.op("Where", [e.op("IsNaN", [q]), zero, q])  # NaN is real 0
    low, high = QUANTISED[k.out_dtype]
    q = e.op("Clip", [q, e.const(low, F64, "low"), e.const(high, F64, "high")])
    e.op("Cast", [q], to=onnx_dtype(k.out_dtype), out=e.output())
