"""PadFusion as ONNX Pad with constant paddings: CONSTANT with the fill value the kernel
converted to x's dtype, REFLECT as ONNX's reflect (the edge not repeated, numpy's rule;
both fail a run whose padding exceeds size - 1). SYMMETRIC has no ONNX mode and stays on
numpy, as does a run-time paddings tensor (ONNX would crop by negative amounts). onnxruntime's
Pad lacks int16 and uint16."""

from __future__ import annotations

import numpy as np

from .....protos import node_attrs_pb2 as na
from ...kernel import Kernel
from ..lowering import NodeEmitter, NotLowerable, lowers
from .lower_reshape import MOVED, require_moved, scalar

PADDED = MOVED - {np.dtype(np.int16), np.dtype(np.uint16)}


@lowers(na.NODE_TYPE_PAD_FUSION)
def pad(k: Kernel, e: NodeEmitter) -> None:
    require_moved(e)
    e.require_dtypes(PADDED, e.spec(0))
    if k.pads is None:
        raise NotLowerable("a run-time paddings tensor")
    if k.mode not in ("constant", "reflect"):
        raise NotLowerable(f"{k.mode} padding")
    pads = e.int64s([b for b, _ in k.pads] + [a for _, a in k.pads], "pads")
    inputs = [e.input(0), pads]
    if k.mode == "constant":
        inputs.append(scalar(e, k.fill, e.spec(0).dtype, "fill"))
    e.op("Pad", inputs, out=e.output(), mode=k.mode)
