"""AddFusion, SubFusion, MulFusion, DivFusion: ONNX's broadcasting binary operators (numpy
rules, as ours) and the fused activation. float32 only: integer Div would trap inside
onnxruntime on a zero divisor (our semantics fail the run instead), and integer wrapping is
not ONNX's promise."""

from __future__ import annotations

from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.reference.kernel import Kernel
from ..activation import emit_activation
from ..lowering import NodeEmitter, lowers

_OP = {na.NODE_TYPE_ADD_FUSION: "Add", na.NODE_TYPE_SUB_FUSION: "Sub",
       na.NODE_TYPE_MUL_FUSION: "Mul", na.NODE_TYPE_DIV_FUSION: "Div"}


@lowers(*_OP)
def arithmetic(k: Kernel, e: NodeEmitter) -> None:
    e.require_float32()
    y = e.op(_OP[k.node.node_type], [e.input(0), e.input(1)])
    emit_activation(e, y, k.activation, out=e.output())
