"""Squeeze, Unsqueeze and ExpandDims as ONNX Squeeze / Unsqueeze.

Squeeze with axes is ONNX Squeeze with them (both fail a run whose listed dimension is not
1); without axes both remove every dimension that is 1 at run time. Unsqueeze's axes are
output positions in both. ExpandDims with a constant axis is Unsqueeze at the output
position the kernel resolved; a run-time axis stays on numpy.
"""

from __future__ import annotations

from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.reference.kernel import Kernel
from ..lowering import NodeEmitter, NotLowerable, lowers
from .lower_reshape import require_moved


@lowers(na.NODE_TYPE_SQUEEZE)
def squeeze(k: Kernel, e: NodeEmitter) -> None:
    require_moved(e)
    inputs = [e.input(0)]
    if k.axes is not None:
        inputs.append(e.int64s(k.axes, "axes"))
    e.op("Squeeze", inputs, out=e.output())


@lowers(na.NODE_TYPE_UNSQUEEZE)
def unsqueeze(k: Kernel, e: NodeEmitter) -> None:
    require_moved(e)
    e.op("Unsqueeze", [e.input(0), e.int64s(k.axes, "axes")], out=e.output())


@lowers(na.NODE_TYPE_EXPAND_DIMS)
def expand_dims(k: Kernel, e: NodeEmitter) -> None:
    require_moved(e)
    if k.axis is None:
        raise NotLowerable("a run-time axis")
    e.op("Unsqueeze", [e.input(0), e.int64s([k.axis], "axes")], out=e.output())
