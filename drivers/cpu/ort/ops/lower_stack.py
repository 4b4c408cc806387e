"""Stack as Unsqueeze of each input at the new axis then ONNX Concat; Unstack as ONNX Split
into pieces of 1 along the axis, each squeezed (a static dimension there: with a DYNAMIC
one the output count is checked only at run)."""

from __future__ import annotations

from onnx import helper

from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import DYNAMIC
from nnrt.hdi.reference.kernel import Kernel
from ..lowering import NodeEmitter, NotLowerable, lowers
from .lower_reshape import MOVED, require_moved


@lowers(na.NODE_TYPE_STACK)
def stack(k: Kernel, e: NodeEmitter) -> None:
    e.require_dtypes(MOVED)
    axes = e.int64s([k.axis], "axes")
    parts = [e.op("Unsqueeze", [e.input(i), axes]) for i in range(len(e.node.inputs))]
    e.op("Concat", parts, out=e.output(), axis=k.axis)


@lowers(na.NODE_TYPE_UNSTACK)
def unstack(k: Kernel, e: NodeEmitter) -> None:
    require_moved(e)
    count = len(e.node.outputs)
    if e.spec(0).shape[k.axis] == DYNAMIC:
        raise NotLowerable("an unstacked DYNAMIC dimension")
    axes = e.int64s([k.axis], "axes")
    if count == 1:
        e.op("Squeeze", [e.input(0), axes], out=e.output())
        return
    pieces = [e.graph.fresh(f"n{e.node.index}_piece") for _ in range(count)]
    e.graph.nodes.append(helper.make_node(  # e.op names one output only
        "Split", [e.input(0), e.int64s([1] * count, "split")], pieces,
        name=e.graph.fresh(f"node{e.node.index}"), axis=k.axis))
    for j, piece in enumerate(pieces):
        e.op("Squeeze", [piece, axes], out=e.output(j))
