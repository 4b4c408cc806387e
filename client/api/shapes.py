"""Shapes in the Pythonic builder: inferred while a model is built, and again for the
input shapes of a run (`_ShapePlan`: the model's recorded steps replayed)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from nnrt.client.capi.operation_table import OPERATIONS, ParamSpec

from .dtypes import Shape
from .operand import Operand


def _shape(dims: Sequence[int | None] | int) -> Shape:
    if isinstance(dims, int):
        dims = (dims,)
    return tuple(-1 if d is None else int(d) for d in dims)


def _broadcast(*shapes: Shape) -> Shape:
    rank = max(len(s) for s in shapes)
    out = []
    for axis in range(rank):
        dims = [s[axis - rank + len(s)] for s in shapes if axis - rank + len(s) >= 0]
        known = [d for d in dims if d not in (-1, 1)]
        if known:
            out.append(max(known))
        elif -1 in dims:
            out.append(-1)
        else:
            out.append(1)
    return tuple(out)


def _prod(dims: Sequence[int]) -> int:
    return -1 if any(d < 0 for d in dims) else math.prod(dims)


def _window(size: int, kernel: int, stride: int, dilation: int, pads: tuple[int, int],
            same: bool) -> int:
    if size < 0:
        return -1
    if same:
        return -(-size // stride)
    return (size + pads[0] + pads[1] - dilation * (kernel - 1) - 1) // stride + 1


@dataclass
class _Step:
    """One recorded operation, for computing concrete output shapes at run time."""

    op: int
    inputs: list[int]
    outputs: list[int]
    params: dict[str, Any]


_ELEMENTWISE = {"ADD", "SUB", "MUL", "DIV", "MAXIMUM", "MINIMUM", "POW", "SQUARED_DIFFERENCE",
                "EQUAL", "NOT_EQUAL", "LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL",
                "LOGICAL_AND", "LOGICAL_OR", "MOD", "BIAS_ADD", "PRELU"}
_SAME_SHAPE = {"RELU", "RELU6", "SIGMOID", "TANH", "HSWISH", "SWISH", "HARD_SIGMOID", "GELU",
               "ABS", "ERF", "EXP", "SQRT", "RSQRT", "SQUARE", "NEG", "RECIPROCAL", "SIN", "COS",
               "LOG", "CEIL", "FLOOR", "ROUND", "LOGICAL_NOT", "SOFTMAX", "LOG_SOFTMAX",
               "LEAKY_RELU", "CLIP", "LAYER_NORM", "BATCH_NORM", "INSTANCE_NORM",
               "L2_NORMALIZE", "LRN"}


def _infer(op_type: int, shapes: list[Shape], operands: Sequence[Operand | Any],
           params: Mapping[str, Any] | Sequence[tuple[ParamSpec, Any]]) -> list[Shape] | None:
    """Output shapes (-1 where unknown) from input shapes; None when not known here.

    `operands` may be the Operands at build time or the constant values (None for
    non-constants) at run time; `params` are (ParamSpec, value) pairs or a field → value map.
    """
    name = OPERATIONS[op_type].name[len("OH_NN_OPS_"):]
    fields = dict(params) if isinstance(params, Mapping) else {p.field: v for p, v in params}

    def const(i: int) -> np.ndarray | None:
        o = operands[i]
        return o.value if isinstance(o, Operand) else o

    try:
        if name in _ELEMENTWISE:
            return [_broadcast(*shapes)]
        if name in _SAME_SHAPE:
            return [shapes[0]]
        if name == "MATMUL":
            a, b = list(shapes[0]), list(shapes[1])
            if fields.get("transposeA"):
                a[-2:] = a[-1], a[-2]
            if fields.get("transposeB"):
                b[-2:] = b[-1], b[-2]
            vector_a, vector_b = len(a) == 1, len(b) == 1
            if vector_a:
                a = [1, *a]
            if vector_b:
                b = [*b, 1]
            batch = _broadcast(tuple(a[:-2]), tuple(b[:-2])) if len(a) > 2 or len(b) > 2 else ()
            rows = () if vector_a else (a[-2],)
            cols = () if vector_b else (b[-1],)
            return [(*batch, *rows, *cols)]  # numpy's rules for 1-D operands
        if name == "FULL_CONNECTION":
            x, w = shapes[0], shapes[1]
            return [(_prod(x[:-1]), w[0])]
        if name == "RESHAPE":
            target = [int(d) for d in const(1).reshape(-1)]
            total = _prod(shapes[0])
            if -1 in target and total >= 0:
                known = math.prod(d for d in target if d != -1)
                target[target.index(-1)] = total // known if known else 0
            return [tuple(target)]
        if name == "TRANSPOSE":
            perm = [int(p) for p in const(1).reshape(-1)]
            return [tuple(shapes[0][p] for p in perm)]
        if name == "CONCAT":
            axis = int(np.asarray(fields.get("axis", 0)).reshape(-1)[0])
            axis %= len(shapes[0])
            out = list(shapes[0])
            sizes = [s[axis] for s in shapes]
            out[axis] = -1 if any(d < 0 for d in sizes) else sum(sizes)
            return [tuple(out)]
        if name in ("CONV2D", "MAX_POOL", "AVG_POOL"):
            n, h, w, c = shapes[0]
            if name == "CONV2D":
                out_c, kh, kw = shapes[1][0], shapes[1][1], shapes[1][2]
                strides = fields.get("stride") or [1, 1]
                dilation = fields.get("dilation") or [1, 1]
                pads = fields.get("padList")
            else:
                out_c = c
                kh, kw = fields["kernelSize"]
                strides = fields.get("strides") or [kh, kw]
                dilation = [1, 1]
                pads = fields.get("pad")
            same = fields.get("padMode") == 0
            pads = list(pads) if pads is not None and len(pads) == 4 else [0, 0, 0, 0]
            return [(n, _window(h, kh, strides[0], dilation[0], pads[0:2], same),
                     _window(w, kw, strides[1], dilation[1], pads[2:4], same), out_c)]
    except (TypeError, ValueError, IndexError, KeyError, AttributeError, ZeroDivisionError):
        return None
    return None


@dataclass
class _ShapePlan:
    """What a Compiled keeps of its Model to size output tensors for given input shapes."""

    inputs: list[int]
    outputs: list[int]
    shapes: dict[int, Shape]
    constants: dict[int, np.ndarray]
    steps: list[_Step]

    def output_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        known = dict(self.shapes)
        known.update(zip(self.inputs, input_shapes))
        if all(d >= 0 for i in self.outputs for d in known[i]):
            return [known[i] for i in self.outputs]
        for step in self.steps:
            inferred = _infer(step.op, [known[i] for i in step.inputs],
                              [self.constants.get(i) for i in step.inputs], step.params)
            if inferred is not None:
                for index, shape in zip(step.outputs, inferred):
                    declared = self.shapes[index]
                    known[index] = tuple(d if d >= 0 else s for d, s in zip(declared, shape)) \
                        if len(declared) == len(shape) else shape
        return [known[i] for i in self.outputs]
