"""The ONNX reductions without an OH_NN operation of their own, composed as their definitions:
ReduceL1 = ReduceSum(|x|), ReduceSumSquare = ReduceSum(x * x), ReduceLogSum =
Log(ReduceSum(x)), ReduceLogSumExp = Log(ReduceSum(Exp(x))) (the definition's arithmetic, as
onnx's reference computes it, without the max shift)."""

from __future__ import annotations

from typing import Any

from ..onnx_import.importer import _handles, _Importer
from ..onnx_import.reductions import reduce_into
from ..onnx_import.values import _Attrs, _Value


@_handles("ReduceL1", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp")
def _composed_reduction(im: _Importer, node: Any, a: _Attrs) -> None:
    x = im.need(node, 0)
    out = node.output[0]
    source = x
    if node.op_type != "ReduceLogSum":
        operand = im.view(x)
        shape = tuple(x.shape)
        if node.op_type == "ReduceL1":
            pre = im.m.op("ABS", operand, shape=shape)
        elif node.op_type == "ReduceSumSquare":
            pre = im.m.op("MUL", operand, operand, shape=shape, activationType=0)
        else:
            pre = im.m.op("EXP", operand, shape=shape)
        source = _Value(shape, x.dtype, operand=pre, views={None: pre})
    if node.op_type in ("ReduceL1", "ReduceSumSquare"):
        reduce_into(im, node, a, source, "REDUCE_SUM", out)
        return
    summed = f"{out}::sum"
    im.shapes[summed] = im.shape(out, node)
    im.types[summed] = im.dtype(out, node)
    reduce_into(im, node, a, source, "REDUCE_SUM", summed)
    total = im.values[summed]
    if total is source:  # noop_with_empty_axes: Log of the (exponentiated) input
        im.op(node, "LOG", [im.view(total)], out, None)
        return
    im.op(node, "LOG", [im.view(total, total.perm)], out, total.perm)
