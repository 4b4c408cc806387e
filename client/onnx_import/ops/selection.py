"""Selections: ArgMax / ArgMin (OH_NN ArgMax; ArgMin as the ArgMax of -x, exact for floats
and signed integers, first index on ties as ONNX's default), Trilu (a constant mask: Where;
k fed at run time: the mask is a comparison of the column - row offsets with k),
Hardmax (1 at the first maximum along an axis: ArgMax, then a comparison with the axis'
positions)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..importer import _handles, _Importer
from ..loading import OnnxImportError
from ..values import _Attrs, _axis


def _arg(im: _Importer, node: Any, x: Any, axis: int, keep: bool, out: str | None,
         shape: tuple) -> Any:
    operand = im.view(x)
    if node.op_type == "ArgMin":
        if x.dtype.kind == "u":
            raise OnnxImportError(f"ArgMin of {x.dtype} (negation overflows unsigned types)",
                                  node)
        if x.dtype.kind == "i":  # -min overflows to min: not exact
            raise OnnxImportError(f"ArgMin of {x.dtype} (negating the type's minimum "
                                  f"overflows)", node)
        operand = im.m.op("NEG", operand, shape=tuple(x.shape))
    params = dict(axis=axis, keepDims=keep, topK=1, outMaxValue=False)
    if out is not None:
        return im.op(node, "ARG_MAX", [operand], out, None, dtype=np.dtype(np.int64), **params)
    return im.m.op("ARG_MAX", operand, shape=shape, dtype=np.int64, **params)


@_handles("ArgMax", "ArgMin")
def _argmax(im: _Importer, node: Any, a: _Attrs) -> None:
    x = im.need(node, 0)
    if int(a.get("select_last_index", 0)):
        raise OnnxImportError("select_last_index=1 (OH_NN ArgMax takes the first index)",
                              node)
    axis = _axis(int(a.get("axis", 0)), len(x.shape), node)
    _arg(im, node, x, axis, bool(int(a.get("keepdims", 1))), node.output[0], ())


@_handles("Hardmax")
def _hardmax(im: _Importer, node: Any, a: _Attrs) -> None:
    x = im.need(node, 0)
    rank = len(x.shape)
    axis = _axis(int(a.get("axis", -1)), rank, node)
    shape = tuple(x.shape)
    if shape[axis] < 0:
        raise OnnxImportError("a dynamic size along the axis", node)
    kept = tuple(1 if i == axis else d for i, d in enumerate(shape))
    index = _arg(im, node, x, axis, True, None, kept)
    positions = np.arange(shape[axis], dtype=np.int64).reshape(
        [shape[axis] if i == axis else 1 for i in range(rank)])
    hit = im.m.op("EQUAL", index, positions, shape=shape, dtype=np.bool_)
    ones = im.m.constant(np.ones((1,) * rank, x.dtype))
    zeros = im.m.constant(np.zeros((1,) * rank, x.dtype))
    im.op(node, "WHERE", [hit, ones, zeros], node.output[0], None)


@_handles("Trilu")
def _trilu(im: _Importer, node: Any, a: _Attrs) -> None:
    x = im.need(node, 0)
    shape = tuple(x.shape)
    if len(shape) < 2 or shape[-1] < 0 or shape[-2] < 0:
        raise OnnxImportError("Trilu needs static sizes of the last two dimensions", node)
    rows, cols = shape[-2], shape[-1]
    upper = int(a.get("upper", 1))
    lead = (1,) * (len(shape) - 2)
    given = im.get(node, 1)
    if given is None or given.const is not None:
        k = 0 if given is None else int(np.asarray(given.const).reshape(-1)[0])
        keep = np.triu(np.ones((rows, cols), bool), k) if upper else \
            np.tril(np.ones((rows, cols), bool), k)
        mask: Any = keep.reshape(lead + keep.shape)
    else:  # k fed at run time: kept where column - row >= k (upper) or <= k (lower)
        if given.dtype != np.int64 or given.shape not in ((), (1,)):
            raise OnnxImportError(f"k of type {given.dtype} and shape {list(given.shape)} (an "
                                  f"int64 scalar)", node)
        offsets = (np.arange(cols, dtype=np.int64)[None, :] -
                   np.arange(rows, dtype=np.int64)[:, None]).reshape(lead + (rows, cols))
        mask = im.m.op("GREATER_EQUAL" if upper else "LESS_EQUAL", offsets, im.view(given),
                       shape=lead + (rows, cols), dtype=np.bool_)
    zeros = im.m.constant(np.zeros((1,) * len(shape), x.dtype))
    im.op(node, "WHERE", [mask, im.view(x), zeros], node.output[0], None)
