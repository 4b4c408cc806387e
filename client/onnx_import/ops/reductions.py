"""The Reduce* operators, with axes constant or given at run time; and the reductions without
an OH_NN operation of their own, composed as their definitions: ReduceL1 = ReduceSum(|x|),
ReduceSumSquare = ReduceSum(x * x), ReduceLogSum = Log(ReduceSum(x)), ReduceLogSumExp =
Log(ReduceSum(Exp(x))) (the definition's arithmetic, as onnx's reference computes it,
without the max shift)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..importer import _handles, _Importer
from ..loading import OnnxImportError
from ..values import _Attrs, _axis, _physical_axis, _Value


_REDUCE = {"ReduceMean": "REDUCE_MEAN", "ReduceSum": "REDUCE_SUM", "ReduceMax": "REDUCE_MAX",
           "ReduceMin": "REDUCE_MIN", "ReduceProd": "REDUCE_PROD", "ReduceL2": "REDUCE_L2"}


@_handles(*_REDUCE)
def _reduce(im: _Importer, node: Any, a: _Attrs) -> None:
    reduce_into(im, node, a, im.need(node, 0), _REDUCE[node.op_type], node.output[0])


def reduce_into(im: _Importer, node: Any, a: _Attrs, x: _Value, op_type: str,
                out: str) -> None:
    """The OH_NN reduction `op_type` of x over the node's axes (attribute, constant input, or
    an input given at run time, which the OH_NN reductions read at each run) into `out`."""
    rank = len(x.shape)
    axes = a.ints("axes")
    keep = int(a.get("keepdims", 1))
    noop = int(a.get("noop_with_empty_axes", 0))
    if axes is None:
        given = im.get(node, 1)
        if given is not None and given.const is None:
            _reduce_run_time_axes(im, node, x, given, op_type, out, keep, noop)
            return
        axes = None if given is None else [int(v) for v in np.asarray(given.const).reshape(-1)]
    if not axes:
        if noop:
            im.alias(out, x)
            return
        axes = list(range(rank))
    axes = sorted({_axis(ax, rank, node) for ax in axes})
    perm = x.perm
    phys = [_physical_axis(ax, perm) for ax in axes]
    if keep or perm is None:
        out_perm = perm
    else:
        out_perm = tuple(p - sum(ax < p for ax in axes) for p in perm if p not in axes)
    im.op(node, op_type, [im.view(x, perm), np.asarray(phys, np.int64)], out, out_perm,
          keepDims=bool(keep))


def _reduce_run_time_axes(im: _Importer, node: Any, x: _Value, axes: _Value, op_type: str,
                          out: str, keep: int, noop: int) -> None:
    """Axes fed at run time: the OH_NN reduction reads them (negative ones too) at each run,
    on x in the ONNX layout; the result's rank is known from keepdims and the axes' length."""
    if len(axes.shape) != 1 or axes.shape[0] < 0:
        raise OnnxImportError("run-time axes of unknown length (the result's rank depends on "
                              "it)", node)
    if axes.shape[0] == 0:
        if noop:
            im.alias(out, x)
            return
        raise OnnxImportError("empty run-time axes (every axis) are not read at run time",
                              node)
    if out not in im.shapes:
        rank = len(x.shape) if keep else len(x.shape) - axes.shape[0]
        im.shapes[out] = (-1,) * rank
    im.op(node, op_type, [im.view(x), im.view(axes)], out, None, keepDims=bool(keep))


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
