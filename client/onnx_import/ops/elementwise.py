"""Element-wise operators: Identity, the unary activations, Clip, HardSigmoid, the
binary arithmetic (with fused activations and the Gelu erf pattern), the variadic
Max / Min, Where and Cast."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from nnrt.client.api.dtypes import _OH_TYPES
from nnrt.client.api.operand import Operand

from ..importer import _handles, _Importer
from ..loading import OnnxImportError
from ..values import _Attrs, _FUSE, _permuted, _SQRT2, _Value


@_handles("Identity", "Dropout")
def _identity_op(im: _Importer, node: Any, a: _Attrs) -> None:
    a.get("seed")
    if node.op_type == "Dropout":
        training = im._maybe_const(node, 2)
        if training is False or (training is not None and bool(np.asarray(training))):
            raise OnnxImportError("training mode (a non-constant or true training_mode) "
                                  "is not inference", node)
        if len(node.output) > 1 and node.output[1] and node.output[1] in im.consumers:
            raise OnnxImportError("the mask output is not computed", node)
    im.alias(node.output[0], im.need(node, 0))


# unary element-wise: same shape, layout-agnostic
_UNARY = {"Relu": "RELU", "Sigmoid": "SIGMOID", "Tanh": "TANH", "HardSwish": "HSWISH",
          "Erf": "ERF", "Sqrt": "SQRT", "Exp": "EXP", "Log": "LOG", "Abs": "ABS", "Neg": "NEG",
          "Reciprocal": "RECIPROCAL", "Floor": "FLOOR", "Ceil": "CEIL", "Round": "ROUND",
          "Sin": "SIN", "Cos": "COS", "Not": "LOGICAL_NOT"}


@_handles(*_UNARY)
def _unary(im: _Importer, node: Any, a: _Attrs) -> None:
    x = im.need(node, 0)
    im.op(node, _UNARY[node.op_type], [im.view(x, x.perm)], node.output[0], x.perm)


@_handles("LeakyRelu")
def _leaky_relu(im: _Importer, node: Any, a: _Attrs) -> None:
    x = im.need(node, 0)
    im.op(node, "LEAKY_RELU", [im.view(x, x.perm)], node.output[0], x.perm,
          alpha=float(a.get("alpha", 0.01)))


@_handles("Gelu")
def _gelu(im: _Importer, node: Any, a: _Attrs) -> None:
    approximate = a.get("approximate", "none")
    if approximate not in ("none", "tanh"):
        raise OnnxImportError(f"approximate {approximate!r} is not 'none' or 'tanh'", node)
    x = im.need(node, 0)
    im.op(node, "GELU", [im.view(x, x.perm)], node.output[0], x.perm,
          approximate=approximate == "tanh")


@_handles("Clip")
def _clip(im: _Importer, node: Any, a: _Attrs) -> None:
    x = im.need(node, 0)
    bounds = [im.get(node, 1), im.get(node, 2)]
    if any(v is not None and v.const is None for v in bounds):
        _clip_run_time(im, node, x, bounds)
        return
    low = im.const(node, 1, "min")
    high = im.const(node, 2, "max")
    lo = None if low is None else float(np.asarray(low).reshape(-1)[0])
    hi = None if high is None else float(np.asarray(high).reshape(-1)[0])
    operand = im.view(x, x.perm)
    if lo == 0.0 and hi == 6.0:
        im.op(node, "RELU6", [operand], node.output[0], x.perm)
    elif lo == 0.0 and hi is None and x.dtype.kind == "f":
        im.op(node, "RELU", [operand], node.output[0], x.perm)
    else:
        im.op(node, "CLIP", [operand], node.output[0], x.perm, min=lo, max=hi)


def _clip_run_time(im: _Importer, node: Any, x: _Value, bounds: list[_Value | None]) -> None:
    """Clip with bounds fed at run time: Maximum with min, then Minimum with max (ONNX's
    definition, min(max(x, min), max))."""
    shape = tuple(x.shape)
    steps = [(op, v) for op, v in zip(("MAXIMUM", "MINIMUM"), bounds) if v is not None]
    source = im.view(x)
    for k, (op_type, v) in enumerate(steps):
        if v.dtype != x.dtype or v.shape not in ((), (1,)):
            raise OnnxImportError(f"a bound of type {v.dtype} and shape {list(v.shape)} (a "
                                  f"scalar of the input's type)", node)
        bound = im.m.constant(v.const) if v.const is not None else im.view(v)
        if k == len(steps) - 1:
            im.op(node, op_type, [source, bound], node.output[0], None)
        else:
            source = im.m.op(op_type, source, bound, shape=shape)


@_handles("HardSigmoid")
def _hard_sigmoid(im: _Importer, node: Any, a: _Attrs) -> None:
    """max(0, min(1, alpha * x + beta)) as Mul, Add, Clip (exact, no approximation)."""
    x = im.need(node, 0)
    alpha, beta = float(a.get("alpha", 0.2)), float(a.get("beta", 0.5))
    shape = _permuted(x.shape, x.perm)
    t = im.m.op("MUL", im.view(x, x.perm), np.asarray(alpha, x.dtype), shape=shape)
    t = im.m.op("ADD", t, np.asarray(beta, x.dtype), shape=shape)
    im.op(node, "CLIP", [t], node.output[0], x.perm, min=0.0, max=1.0)


_BINARY = {"Add": "ADD", "Sub": "SUB", "Mul": "MUL", "Div": "DIV", "Pow": "POW",
           "Max": "MAXIMUM", "Min": "MINIMUM", "Equal": "EQUAL", "Less": "LESS",
           "Greater": "GREATER", "LessOrEqual": "LESS_EQUAL", "GreaterOrEqual": "GREATER_EQUAL",
           "And": "LOGICAL_AND", "Or": "LOGICAL_OR"}
_FUSABLE = {"Add", "Sub", "Mul", "Div"}


def _common_perm(values: Sequence[_Value], rank: int) -> tuple[int, ...] | None:
    """The layout shared by every non-constant input of full rank (None: the ONNX one)."""
    perms = {v.perm for v in values if v.const is None}
    if len(perms) != 1:
        return None
    (perm,) = perms
    if perm is None or any(v.const is None and len(v.shape) != rank for v in values):
        return None
    return perm


def _operands_in(im: _Importer, values: Sequence[_Value], perm: tuple[int, ...] | None,
                 rank: int) -> list[Operand]:
    operands = []
    for v in values:
        if v.const is not None and perm is not None:
            c = v.const.reshape((1,) * (rank - v.const.ndim) + v.const.shape)
            operands.append(im.m.constant(np.ascontiguousarray(c.transpose(perm))))
        else:
            operands.append(im.view(v, perm))
    return operands


@_handles(*_BINARY)
def _binary(im: _Importer, node: Any, a: _Attrs) -> None:
    if node.op_type in ("Max", "Min") and len(node.input) != 2:
        _variadic(im, node, _BINARY[node.op_type])
        return
    x, y = im.need(node, 0), im.need(node, 1)
    out = node.output[0]
    if node.op_type == "Pow" and x.dtype.kind in "iu" and y.dtype.kind == "f" and not (
            y.const is not None and np.array_equal(y.const, np.round(y.const))):
        raise OnnxImportError(f"an integer base ({x.dtype}) with a {y.dtype} exponent (the "
                              f"OH_NN Pow computes in the base's type)", node)
    rank = len(im.shape(out, node))
    perm = _common_perm([x, y], rank)
    operands = _operands_in(im, [x, y], perm, rank)
    if node.op_type == "Pow":
        if y.dtype != x.dtype:
            operands[1] = im.m.constant(np.asarray(y.const, x.dtype)) if y.const is not None \
                else operands[1]
        im.op(node, "POW", operands, out, perm, scale=1.0, shift=0.0)
        return
    if x.dtype != y.dtype:
        raise OnnxImportError(f"operands of different types ({x.dtype}, {y.dtype})", node)
    if node.op_type in _FUSABLE:
        if _gelu_pattern(im, node, x, y):
            return
        activation, out = im.fused_activation(out)
        im.op(node, _BINARY[node.op_type], operands, out, perm,
              activationType=_FUSE[activation])
    else:
        im.op(node, _BINARY[node.op_type], operands, out, perm)


def _variadic(im: _Importer, node: Any, op_type: str) -> None:
    """Max / Min / Sum / Mean of any number of inputs: one input is itself, more a chain of
    the binary operation, left to right (numpy broadcasting at each step)."""
    values = [im.need(node, k) for k in range(len(node.input))]
    if not values:
        raise OnnxImportError("no inputs", node)
    if any(v.dtype != values[0].dtype for v in values):
        raise OnnxImportError(f"inputs of different types {[str(v.dtype) for v in values]}",
                              node)
    out = node.output[0]
    out_shape = im.shape(out, node)
    if len(values) == 1:
        if tuple(values[0].shape) != tuple(out_shape):
            raise OnnxImportError("internal: one input of another shape", node)
        im.alias(out, values[0])
        return
    acc = im.view(values[0])
    shape = tuple(values[0].shape)
    for k, v in enumerate(values[1:], 1):
        shape = tuple(np.broadcast_shapes(shape, tuple(v.shape))) if -1 not in shape and \
            -1 not in v.shape else out_shape
        if k == len(values) - 1:
            im.op(node, op_type, [acc, im.view(v)], out, None)
        else:
            acc = im.m.op(op_type, acc, im.view(v), shape=shape, dtype=values[0].dtype)


def _scalar(v: _Value | None) -> float | None:
    if v is None or v.const is None or v.const.size != 1:
        return None
    return float(v.const.reshape(-1)[0])


def _gelu_pattern(im: _Importer, node: Any, x: _Value, y: _Value) -> bool:
    """x / sqrt2 (or x * 1/sqrt2) → Erf → + 1 → * x → * 0.5 (the last two in either order,
    or * 0.5 first): PyTorch's export of the exact GELU. One GELU node when it matches."""
    if node.op_type not in ("Div", "Mul"):
        return False
    c = _scalar(y)
    if c is None or x.const is not None:
        return False
    if not (node.op_type == "Div" and abs(c - _SQRT2) < 1e-6 or
            node.op_type == "Mul" and abs(c - 1 / _SQRT2) < 1e-6):
        return False
    source = node.input[0]
    erf = im.sole_consumer(node.output[0])
    if erf is None or erf.op_type != "Erf":
        return False
    add = im.sole_consumer(erf.output[0])
    if add is None or add.op_type != "Add":
        return False
    one = im.values.get(add.input[1] if add.input[0] == erf.output[0] else add.input[0])
    if _scalar(one) != 1.0:
        return False
    first = im.sole_consumer(add.output[0])
    if first is None or first.op_type != "Mul":
        return False
    other = first.input[1] if first.input[0] == add.output[0] else first.input[0]
    chain = [erf, add, first]
    if other == source:  # (1 + erf) * x, then * 0.5
        second = im.sole_consumer(first.output[0])
        if second is None or second.op_type != "Mul":
            return False
        half = second.input[1] if second.input[0] == first.output[0] else second.input[0]
        if _scalar(im.values.get(half)) != 0.5:
            return False
        chain.append(second)
    elif _scalar(im.values.get(other)) == 0.5:  # (1 + erf) * 0.5, then * x
        second = im.sole_consumer(first.output[0])
        if second is None or second.op_type != "Mul":
            return False
        xs = second.input[1] if second.input[0] == first.output[0] else second.input[0]
        if xs != source:
            return False
        chain.append(second)
    else:
        return False
    for n in chain:
        im.skip.add(id(n))
    im.op(node, "GELU", [im.view(x, x.perm)], chain[-1].output[0], x.perm, approximate=False)
    return True


@_handles("Where")
def _where(im: _Importer, node: Any, a: _Attrs) -> None:
    values = [im.need(node, k) for k in range(3)]
    out = node.output[0]
    rank = len(im.shape(out, node))
    perm = _common_perm(values, rank)
    im.op(node, "WHERE", _operands_in(im, values, perm, rank), out, perm)


@_handles("Cast")
def _cast(im: _Importer, node: Any, a: _Attrs) -> None:
    from onnx import helper

    a.get("saturate")
    target = np.dtype(helper.tensor_dtype_to_np_dtype(int(a.get("to"))))
    if target not in _OH_TYPES:
        raise OnnxImportError(f"target type {target} has no OH_NN data type", node)
    x = im.need(node, 0)
    if target == x.dtype:
        im.alias(node.output[0], x)
        return
    im.op(node, "CAST", [im.view(x, x.perm), np.asarray([int(_OH_TYPES[target])], np.int32)],
          node.output[0], x.perm, dtype=target)
