"""OneHot with a constant depth, as the kernel computes it: Equal(indices as INT64 with a
size-1 dimension at `axis`, 0..depth-1 along that axis) chooses onValue or offValue
(Where). An index outside [0, depth) matches nothing and gives offValue — negative ones
too (ONNX's OneHot would count those from the end, so it is not used); UINT64 indices
beyond INT64 wrap negative in the cast and match nothing, as the kernel's clamp gives.
on/off values are reshaped to scalars (a run where one is not one element fails in both).
Values of a dtype onnxruntime's Where lacks are chosen widened (lower_where); uint64 and a
run-time depth stay on numpy."""

from __future__ import annotations

import numpy as np

from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.reference.kernel import Kernel
from ..lowering import NodeEmitter, NotLowerable, lowers, onnx_dtype
from .lower_where import CHOSEN, WIDENED


@lowers(na.NODE_TYPE_ONE_HOT)
def one_hot(k: Kernel, e: NodeEmitter) -> None:
    dtype = e.node.outputs[0].dtype
    e.require_dtypes(CHOSEN | set(WIDENED), *e.node.inputs[2:], *e.node.outputs)
    if k.depth is None:
        raise NotLowerable("a run-time depth")
    indices = e.input(0)
    if e.spec(0).dtype != np.int64:
        indices = e.op("Cast", [indices], to=onnx_dtype(np.dtype(np.int64)))
    indices = e.op("Unsqueeze", [indices, e.int64s([k.axis], "axes")])
    positions = np.arange(k.depth, dtype=np.int64).reshape((k.depth,) + (1,) * (k.rank - k.axis))
    hot = e.op("Equal", [indices, e.const(positions, np.int64, "positions")])
    scalar_shape = e.int64s([], "scalar")
    values = [e.op("Reshape", [e.input(i), scalar_shape]) for i in (2, 3)]
    wide = WIDENED.get(dtype)
    if wide is None:
        e.op("Where", [hot, *values], out=e.output())
        return
    values = [e.op("Cast", [v], to=onnx_dtype(wide)) for v in values]
    e.op("Cast", [e.op("Where", [hot, *values])], out=e.output(), to=onnx_dtype(dtype))
