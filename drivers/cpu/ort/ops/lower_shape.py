"""Shape and Rank. Shape is ONNX Shape (INT64), cast to an INT32 output (exact). Rank is
the static rank, a constant."""

from __future__ import annotations

import numpy as np

from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.reference.kernel import Kernel
from ..lowering import NodeEmitter, lowers, onnx_dtype
from .lower_reshape import MOVED, require_moved


@lowers(na.NODE_TYPE_SHAPE)
def shape(k: Kernel, e: NodeEmitter) -> None:
    e.require_dtypes(MOVED, e.spec(0))
    if k.dtype == np.int64:
        e.op("Shape", [e.input(0)], out=e.output())
        return
    e.op("Cast", [e.op("Shape", [e.input(0)])], out=e.output(), to=onnx_dtype(k.dtype))


@lowers(na.NODE_TYPE_RANK)
def rank(k: Kernel, e: NodeEmitter) -> None:
    require_moved(e)
    value = e.const(np.full(k.out_shape or (1,), k.rank), k.dtype, "rank")
    if not k.out_shape:
        value = e.op("Squeeze", [value])
    e.op("Identity", [value], out=e.output())
