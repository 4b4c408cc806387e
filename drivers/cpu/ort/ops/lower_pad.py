"""PadFusion as ONNX Pad with constant paddings: CONSTANT with the fill value the kernel
converted to x's dtype, REFLECT as ONNX's reflect (the edge not repeated, numpy's rule;
both fail a run whose padding exceeds size - 1). SYMMETRIC has no ONNX mode: it is written
out axis by axis as numpy.pad does, Concat(reversed first `before` cells, x, reversed last
`after` cells) (Slice with step -1), on padded dimensions that are static (the limit
`size` was checked at prepare). A run-time paddings tensor stays on numpy (ONNX would crop
by negative amounts). onnxruntime's Pad lacks int16 and uint16 (SYMMETRIC moves them)."""

from __future__ import annotations

import numpy as np

from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import DYNAMIC
from nnrt.hdi.reference.kernel import Kernel
from ..lowering import NodeEmitter, NotLowerable, lowers
from .lower_reshape import MOVED, require_moved
from .lower_slice import BEFORE_FIRST, emit_slice

PADDED = MOVED - {np.dtype(np.int16), np.dtype(np.uint16)}


@lowers(na.NODE_TYPE_PAD_FUSION)
def pad(k: Kernel, e: NodeEmitter) -> None:
    require_moved(e)
    if k.pads is None:
        raise NotLowerable("a run-time paddings tensor")
    if k.mode == "symmetric":
        _symmetric(k, e)
        return
    e.require_dtypes(PADDED, e.spec(0))
    pads = e.int64s([b for b, _ in k.pads] + [a for _, a in k.pads], "pads")
    inputs = [e.input(0), pads]
    if k.mode == "constant":
        inputs.append(e.const(k.fill, e.spec(0).dtype, "fill"))
    e.op("Pad", inputs, out=e.output(), mode=k.mode)


def _symmetric(k: Kernel, e: NodeEmitter) -> None:
    shape = e.spec(0).shape
    padded = [axis for axis, p in enumerate(k.pads) if p != (0, 0)]
    if any(shape[axis] == DYNAMIC for axis in padded):
        raise NotLowerable("symmetric padding of a DYNAMIC dimension (checked only at run)")
    y = e.input(0)
    for n, axis in enumerate(padded):
        (before, after), dim = k.pads[axis], shape[axis]
        parts = [y]
        if before:
            parts.insert(0, emit_slice(e, y, [(axis, before - 1, BEFORE_FIRST, -1)]))
        if after:
            end = dim - after - 1
            parts.append(emit_slice(e, y, [(axis, dim - 1, end if end >= 0 else BEFORE_FIRST,
                                             -1)]))
        y = e.op("Concat", parts, axis=axis, out=e.output() if n == len(padded) - 1 else None)
    if not padded:
        e.op("Identity", [y], out=e.output())
