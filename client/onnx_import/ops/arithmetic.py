"""Element-wise arithmetic and logic composed from OH_NN operations: Mod (fmod = 1 is OH_NN
Mod, C's fmod; fmod = 0 corrects its sign to the divisor's), Sum and Mean of any number of
inputs, Xor, IsNaN, IsInf, Sign."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..importer import _handles, _Importer
from ..loading import OnnxImportError
from ..values import _Attrs
from .elementwise import _variadic


def _zero_like(dtype: np.dtype) -> np.ndarray:
    return np.asarray(0, dtype)


@_handles("Mod")
def _mod(im: _Importer, node: Any, a: _Attrs) -> None:
    x, y = im.need(node, 0), im.need(node, 1)
    if x.dtype != y.dtype:
        raise OnnxImportError(f"operands of different types ({x.dtype}, {y.dtype})", node)
    fmod = int(a.get("fmod", 0))
    if not fmod and x.dtype.kind == "f":
        raise OnnxImportError("fmod=0 on floats is invalid ONNX", node)
    out = node.output[0]
    shape = im.shape(out, node)
    xs, ys = im.view(x), (im.m.constant(y.const) if y.const is not None else im.view(y))
    if fmod or x.dtype.kind == "u":  # unsigned: both signs agree
        im.op(node, "MOD", [xs, ys], out, None)
        return
    # the sign of the divisor: r + y where r != 0 and r, y have different signs
    m, zero, b = im.m, _zero_like(x.dtype), np.bool_
    r = m.op("MOD", xs, ys, shape=shape)
    nonzero = m.op("NOT_EQUAL", r, zero, shape=shape, dtype=b)
    differ = m.op("NOT_EQUAL", m.op("LESS", r, zero, shape=shape, dtype=b),
                  m.op("LESS", ys, zero, shape=tuple(y.shape), dtype=b), shape=shape, dtype=b)
    fix = m.op("LOGICAL_AND", nonzero, differ, shape=shape, dtype=b)
    im.op(node, "WHERE", [fix, m.op("ADD", r, ys, shape=shape, activationType=0), r], out,
          None)


@_handles("Sum", "Mean")
def _sum_mean(im: _Importer, node: Any, a: _Attrs) -> None:
    if node.op_type == "Sum" or len(node.input) == 1:
        _variadic(im, node, "ADD")
        return
    x = im.need(node, 0)
    if x.dtype.kind != "f":
        raise OnnxImportError(f"Mean of {x.dtype} inputs (float types only)", node)
    out = node.output[0]
    total = f"{out}::sum"
    im.shapes[total], im.types[total] = im.shape(out, node), x.dtype
    inner = type(node)()
    inner.CopyFrom(node)
    inner.output[0] = total
    _variadic(im, inner, "ADD")
    v = im.values[total]
    im.op(node, "DIV", [im.view(v), np.asarray(len(node.input), x.dtype)], out, None,
          activationType=0)


@_handles("Xor")
def _xor(im: _Importer, node: Any, a: _Attrs) -> None:
    x, y = im.need(node, 0), im.need(node, 1)
    im.op(node, "NOT_EQUAL", [im.view(x), im.view(y)], node.output[0], None)


@_handles("IsNaN", "IsInf")
def _is_special(im: _Importer, node: Any, a: _Attrs) -> None:
    x = im.need(node, 0)
    if x.dtype.kind != "f":
        raise OnnxImportError(f"input of type {x.dtype} (a float type is required)", node)
    operand, shape, m = im.view(x), tuple(x.shape), im.m
    if node.op_type == "IsNaN":  # NaN is the one value unequal to itself
        im.op(node, "NOT_EQUAL", [operand, operand], node.output[0], None)
        return
    pos, neg = int(a.get("detect_positive", 1)), int(a.get("detect_negative", 1))
    inf = np.asarray(np.inf, x.dtype)
    if pos and neg:
        im.op(node, "EQUAL", [m.op("ABS", operand, shape=shape), inf], node.output[0], None)
    elif pos:
        im.op(node, "EQUAL", [operand, inf], node.output[0], None)
    elif neg:
        im.op(node, "EQUAL", [operand, -inf], node.output[0], None)
    else:  # nothing detected: false everywhere
        im.op(node, "LOGICAL_AND", [m.op("EQUAL", operand, inf, shape=shape, dtype=np.bool_),
                                    m.op("EQUAL", operand, -inf, shape=shape,
                                         dtype=np.bool_)], node.output[0], None)


@_handles("Sign")
def _sign(im: _Importer, node: Any, a: _Attrs) -> None:
    """1 where x > 0, -1 where x < 0, else x itself (0, or NaN)."""
    x = im.need(node, 0)
    operand, shape, m, b = im.view(x), tuple(x.shape), im.m, np.bool_
    zero = np.asarray(0, x.dtype)
    ones = m.constant(np.ones((1,) * len(shape) or (1,), x.dtype))
    out = node.output[0]
    if x.dtype.kind == "u":
        im.op(node, "WHERE", [m.op("GREATER", operand, zero, shape=shape, dtype=b), ones,
                              operand], out, None)
        return
    minus = m.constant(np.full((1,) * len(shape) or (1,), -1, x.dtype))
    low = m.op("WHERE", m.op("LESS", operand, zero, shape=shape, dtype=b), minus, operand,
               shape=shape, dtype=x.dtype)
    im.op(node, "WHERE", [m.op("GREATER", operand, zero, shape=shape, dtype=b), ones, low],
          out, None)
