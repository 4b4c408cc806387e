"""All ("every element non-zero" over the axis input's dimensions) as Cast to bool (C's
non-zero test: NaN and denormals true) and ReduceMin over the 0 / 1 values as uint8.

Lowered: constant axes (resolved by the kernel) whose reduced dimensions are static and
non-zero; an empty axis list is the cast alone (no reduction, as ours). Stay on numpy:
run-time axes, a reduced dimension that is DYNAMIC or 0 (onnxruntime has no empty
ReduceMin for these types; ours gives true), float16.
"""

from __future__ import annotations

import numpy as np

from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import DYNAMIC
from nnrt.hdi.reference.kernel import Kernel
from ..lowering import NodeEmitter, NotLowerable, lowers, onnx_dtype
from .lower_reshape import MOVED

BOOL = np.dtype(np.bool_)


@lowers(na.NODE_TYPE_ALL)
def all_(k: Kernel, e: NodeEmitter) -> None:
    e.require_dtypes(MOVED, e.spec(0))
    if k.axes is None:
        raise NotLowerable("run-time axes")
    shape = e.spec(0).shape
    if any(shape[a] in (0, DYNAMIC) for a in k.axes):
        raise NotLowerable("a reduced dimension that is DYNAMIC or 0")
    x = e.input(0)
    truth = x if e.spec(0).dtype == BOOL else e.op("Cast", [x], to=onnx_dtype(BOOL))
    if not k.axes:
        e.op("Identity", [truth], out=e.output())
        return
    low = e.op("ReduceMin", [e.op("Cast", [truth], to=onnx_dtype(np.uint8)),
                             e.int64s(k.axes, "axes")], keepdims=int(k.keep))
    e.op("Cast", [low], to=onnx_dtype(BOOL), out=e.output())
