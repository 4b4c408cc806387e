"""Transpose with a constant perm as ONNX Transpose (the perm the kernel normalised); a
run-time perm stays on numpy."""

from __future__ import annotations

from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.reference.kernel import Kernel
from ..lowering import NodeEmitter, NotLowerable, lowers
from .lower_reshape import require_moved


@lowers(na.NODE_TYPE_TRANSPOSE)
def transpose(k: Kernel, e: NodeEmitter) -> None:
    require_moved(e)
    if k.perm is None:
        raise NotLowerable("a run-time perm")
    if k.perm == tuple(range(len(k.perm))):  # rank 0 included (ONNX wants a non-empty perm)
        e.op("Identity", [e.input(0)], out=e.output())
        return
    e.op("Transpose", [e.input(0)], out=e.output(), perm=list(k.perm))
