"""Scans along an axis: CumSum, each output the sum of the inputs up to it (a triangular mask
selects them, Where, then ReduceSum over the inputs' axis; no multiplication, so infinities
and NaN sum as numpy's cumsum sums them)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..importer import _handles, _Importer
from ..loading import OnnxImportError
from ..values import _Attrs, _axis


_RUN_TIME_AXES_UP_TO = 4  # a run-time axis: one scan per possible axis, then a selection


def _scan(im: _Importer, x: Any, axis: int, reverse: int, exclusive: int,
          out: str | None, node: Any) -> Any:
    """CumSum of x along a known axis: into `out`, or an operand when out is None."""
    shape = tuple(x.shape)
    rank = len(shape)
    n = shape[axis]
    out_pos = np.arange(n)[:, None]
    in_pos = np.arange(n)[None, :]
    if reverse:
        mask = in_pos > out_pos if exclusive else in_pos >= out_pos
    else:
        mask = in_pos < out_pos if exclusive else in_pos <= out_pos
    mask = mask.reshape((1,) * axis + (n, n) + (1,) * (rank - axis - 1))
    spread = shape[:axis] + (1,) + shape[axis:]
    wide = shape[:axis] + (n, n) + shape[axis + 1:]
    source = im.m.op("RESHAPE", im.view(x), np.asarray(spread, np.int64), shape=spread,
                     dtype=x.dtype)
    zeros = np.zeros((1,) * (rank + 1), x.dtype)
    picked = im.m.op("WHERE", mask, source, zeros, shape=wide, dtype=x.dtype)
    axes = np.asarray([axis + 1], np.int64)
    if out is None:
        return im.m.op("REDUCE_SUM", picked, axes, shape=shape, dtype=x.dtype, keepDims=False)
    return im.op(node, "REDUCE_SUM", [picked, axes], out, None, keepDims=False)


@_handles("CumSum")
def _cumsum(im: _Importer, node: Any, a: _Attrs) -> None:
    x, axis_v = im.need(node, 0), im.need(node, 1)
    shape = tuple(x.shape)
    rank = len(shape)
    if any(d < 0 for d in shape):
        raise OnnxImportError("CumSum needs static dimensions", node)
    reverse, exclusive = int(a.get("reverse", 0)), int(a.get("exclusive", 0))
    out = node.output[0]
    if axis_v.const is not None or rank == 1:  # rank 1: the only axis a valid value names
        axis = 0 if axis_v.const is None else \
            _axis(int(np.asarray(axis_v.const).reshape(-1)[0]), rank, node)
        _scan(im, x, axis, reverse, exclusive, out, node)
        return
    if rank > _RUN_TIME_AXES_UP_TO or axis_v.shape not in ((), (1,)):
        raise OnnxImportError(f"an axis fed at run time for a rank-{rank} tensor (selected "
                              f"among the scans of every axis up to rank "
                              f"{_RUN_TIME_AXES_UP_TO})", node)
    # An axis fed at run time: the scan along each axis, the one it names selected (axis i
    # or i - rank; a value naming no axis gives the last scan, where ONNX's is an error).
    axis_op = im.view(axis_v)
    result = _scan(im, x, rank - 1, reverse, exclusive, None, node)
    for i in range(rank - 2, -1, -1):
        scanned = _scan(im, x, i, reverse, exclusive, None, node)
        named = [im.m.op("EQUAL", axis_op, np.asarray([v], axis_v.dtype), shape=(1,),
                         dtype=np.bool_) for v in (i, i - rank)]
        either = im.m.op("LOGICAL_OR", *named, shape=(1,), dtype=np.bool_)
        if i == 0:
            im.op(node, "WHERE", [either, scanned, result], out, None)
        else:
            result = im.m.op("WHERE", either, scanned, result, shape=shape, dtype=x.dtype)
