"""Concat as ONNX Concat on the axis the kernel normalised (every input of one dtype, the
other dimensions equal: both fail a run where they are not)."""

from __future__ import annotations

from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.reference.kernel import Kernel
from ..lowering import NodeEmitter, lowers
from .lower_reshape import MOVED


@lowers(na.NODE_TYPE_CONCAT)
def concat(k: Kernel, e: NodeEmitter) -> None:
    e.require_dtypes(MOVED)
    e.op("Concat", [e.input(i) for i in range(len(e.node.inputs))], out=e.output(),
         axis=k.axis)
