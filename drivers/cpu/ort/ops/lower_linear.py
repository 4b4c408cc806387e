"""FullConnection and MatMulFusion as ONNX Gemm / MatMul with bias and fused activation.

FullConnection without useAxis flattens x to [-1, in] (Reshape) and is one Gemm against the
[out, in] weight (transB); with useAxis the dimensions from `axis` on are flattened and the
product is a broadcast MatMul against the transposed weight, plus the bias. MatMulFusion's
transposeA/B swap the last two dimensions of operands of rank 2 or more (numpy's matmul
rules, ONNX MatMul's too); float32 only: ONNX integer MatMul does not promise our wrapping.
"""

from __future__ import annotations

from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.reference.kernel import Kernel
from ..activation import emit_activation
from ..lowering import NodeEmitter, lowers


@lowers(na.NODE_TYPE_FULL_CONNECTION)
def full_connection(k: Kernel, e: NodeEmitter) -> None:
    e.require_float32()
    x = e.input(0)
    bias = [e.input(2)] if k.has_bias else []
    if not k.use_axis:
        flat = e.op("Reshape", [x, e.int64s([-1, k.n_in])])
        y = e.op("Gemm", [flat, e.input(1), *bias], transB=1)
    else:
        flat = e.op("Reshape", [x, e.int64s([0] * k.axis + [-1])])  # 0: that dim kept
        y = e.op("MatMul", [flat, e.input(1, perm=(1, 0))])
        if bias:
            y = e.op("Add", [y, *bias])
    emit_activation(e, y, k.activation, out=e.output())


def _operand(e: NodeEmitter, i: int, transpose: bool) -> str:
    rank = len(e.spec(i).shape)
    if not transpose or rank < 2:
        return e.input(i)
    return e.input(i, perm=(*range(rank - 2), rank - 1, rank - 2))


@lowers(na.NODE_TYPE_MATMUL_FUSION)
def matmul(k: Kernel, e: NodeEmitter) -> None:
    e.require_float32()
    y = e.op("MatMul", [_operand(e, 0, k.transpose_a), _operand(e, 1, k.transpose_b)])
    emit_activation(e, y, k.activation, out=e.output())
