"""Split as ONNX Split with the piece sizes the kernel resolved (a static dimension along
the axis: with a DYNAMIC one the equal pieces or the -1 piece are only known at run, and
ONNX's uneven last piece is not our error). One output is an Identity."""

from __future__ import annotations

from onnx import helper

from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import DYNAMIC
from nnrt.hdi.reference.kernel import Kernel
from ..lowering import NodeEmitter, NotLowerable, lowers
from .lower_reshape import require_moved


@lowers(na.NODE_TYPE_SPLIT)
def split(k: Kernel, e: NodeEmitter) -> None:
    require_moved(e)
    dim = e.spec(0).shape[k.axis]
    if dim == DYNAMIC:
        raise NotLowerable("a split DYNAMIC dimension")
    sizes = k.piece_sizes(dim)
    outputs = [e.output(j) for j in range(len(e.node.outputs))]
    if len(outputs) == 1:
        e.op("Identity", [e.input(0)], out=outputs[0])
        return
    inputs = [e.input(0), e.int64s(sizes, "split")]
    e.graph.nodes.append(helper.make_node(  # e.op names one output only
        "Split", inputs, outputs, name=e.graph.fresh(f"node{e.node.index}"), axis=k.axis))
