"""ReduceFusion: one reduction (ReduceMode, hdi.md 6.13) of x over the axes of input 1, times
`coeff`, keeping the reduced dimensions as size 1 when `keepDims`.

Modes: MEAN, MAX, MIN, PROD, SUM, SUM_SQUARE (sum of x²), ASUM (sum of |x|), ALL (logical
AND of x != 0), L2 (sqrt of the sum of x²).

Decisions where the spec is silent:

* Axes (input 1) are a 1-D INT32/INT64 tensor, each in [-rank, rank), negative counting from
  the end; a repeated axis is invalid. An **empty** axes tensor, or a node without input 1,
  reduces **every** axis (MindSpore Lite's and ONNX's default), giving a scalar (or all-ones
  shape with keepDims).
* reduceToEnd: the axis list must hold one axis `a` (or be empty: every axis), which is
  replaced by [a, a+1, ..., rank-1] (MindSpore Lite); more axes are invalid.
* coeff multiplies the reduced result and defaults to 1.0 (semantics.md). proto3 cannot tell
  an unset float from 0.0, and upstream's C API sends 0.0 when the application sets nothing,
  so **coeff 0.0 is read as "unset", i.e. 1.0**: an unparameterised reduction never returns
  zeros. A reduction that should return zeros cannot be expressed (nor is it useful).
  coeff NaN/inf is invalid. On integer tensors only coeff 1 is computed (others unsupported:
  the scaled result would not be an integer); on ALL, a coeff other than 1 is invalid
  (a logical result has no scale).
* dtypes: output dtype = input dtype. Floats take every mode. float16 (semantics.md
  "Float16 mode"): SUM, MEAN, SUM_SQUARE, ASUM, L2 and PROD accumulate in float32 (the
  square, the division by the count, the square root and coeff in float32 too), each
  output value rounded to float16 once; MAX, MIN and ALL are exact in float16. Integers
  take every mode but L2; they are accumulated in 64 bits and the result wraps to the
  tensor type (as C arithmetic in that type would), and integer MEAN truncates toward zero
  (C division). Bool takes ALL, MAX (any) and MIN (all).
  ALL on a numeric tensor gives 1 or 0 in that type.
* Empty reductions (a reduced dimension of size 0): SUM/SUM_SQUARE/ASUM/L2 give 0, PROD 1,
  ALL true, MAX/MIN the identity (-inf/+inf, or the integer type's min/max), float MEAN NaN,
  integer MEAN 0.
* A run-time axes tensor is read at each run: the output dimensions are DYNAMIC until then
  (rank = input rank with keepDims, input rank - number of axes otherwise; an axes tensor of
  unknown length is then unsupported, and so is reduceToEnd without keepDims, whose rank
  depends on the axis value).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from nnrt.hdi.reference.kernel import Kernel, invalid, register, unsupported
from nnrt.hdi.reference.ops._common import (
    FLOAT_DTYPES,
    INT_DTYPES,
    bad_shape,
    cast,
    check_declared_shapes,
    constant_index_input,
    index_values,
    require_output_dtype,
    require_unquantised,
)
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from nnrt.common.errors import DriverError
from nnrt.hdi.graph import DYNAMIC, NodeSpec, Shape

_BOOL = np.dtype(np.bool_)
_MODES = {
    ht.REDUCE_MODE_MEAN: "MEAN", ht.REDUCE_MODE_MAX: "MAX", ht.REDUCE_MODE_MIN: "MIN",
    ht.REDUCE_MODE_PROD: "PROD", ht.REDUCE_MODE_SUM: "SUM",
    ht.REDUCE_MODE_SUM_SQUARE: "SUM_SQUARE", ht.REDUCE_MODE_ASUM: "ASUM",
    ht.REDUCE_MODE_ALL: "ALL", ht.REDUCE_MODE_L2: "L2",
}
_BOOL_MODES = frozenset({ht.REDUCE_MODE_ALL, ht.REDUCE_MODE_MAX, ht.REDUCE_MODE_MIN})


def resolve_axes(values: Sequence[int], rank: int, to_end: bool,
                 error: Callable[[str], DriverError]) -> tuple[int, ...]:
    """Sorted, normalised axes to reduce (every axis for an empty list)."""
    axes = []
    for a in values:
        if not -rank <= a < rank:
            raise error(f"axis {a} is outside [{-rank}, {rank}) for rank {rank}")
        axes.append(a % rank)
    if len(set(axes)) != len(axes):
        raise error(f"axes {list(values)} name a dimension twice")
    if not axes:
        return tuple(range(rank))
    if to_end:
        if len(axes) != 1:
            raise error(f"reduceToEnd needs one axis, has {list(values)}")
        return tuple(range(axes[0], rank))
    return tuple(sorted(axes))


@register(na.NODE_TYPE_REDUCE_FUSION)
class ReduceFusion(Kernel):
    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        self.expect_counts(range(1, 3))
        require_unquantised(node)
        attrs = node.attrs
        self.mode = int(attrs.mode)
        if self.mode not in _MODES:
            raise invalid(node, f"mode {self.mode} is not a ReduceMode")
        self.dtype = node.inputs[0].dtype
        require_output_dtype(node, self.dtype)
        self.integer = self.dtype in INT_DTYPES
        if self.dtype == _BOOL:
            if self.mode not in _BOOL_MODES:
                raise unsupported(node, f"REDUCE_MODE_{_MODES[self.mode]} on bool")
        elif self.dtype not in FLOAT_DTYPES and not self.integer:
            raise unsupported(node, f"dtype {self.dtype} is not supported")
        if self.integer and self.mode == ht.REDUCE_MODE_L2:
            raise unsupported(node, "REDUCE_MODE_L2 on an integer tensor")
        coeff = float(attrs.coeff)
        if not math.isfinite(coeff):
            raise invalid(node, f"coeff {coeff} is not finite")
        self.coeff = 1.0 if coeff == 0.0 else coeff  # 0.0 = unset (module docstring)
        if self.coeff != 1.0:
            if self.mode == ht.REDUCE_MODE_ALL:
                raise invalid(node, f"coeff {coeff} on REDUCE_MODE_ALL")
            if self.dtype not in FLOAT_DTYPES:
                raise unsupported(node, f"coeff {coeff} on a {self.dtype} tensor")
        self.keep = bool(attrs.keepDims)
        self.to_end = bool(attrs.reduceToEnd)
        self.rank = len(node.inputs[0].shape)
        self.axes: tuple[int, ...] | None = ()
        self.n_axes = 0
        if len(node.inputs) == 2:
            values = constant_index_input(node, 1, "axes")
            if values is None:
                self.axes = None
                declared = node.inputs[1].shape
                self.n_axes = declared[0] if declared else 1
                if not self.keep and (self.n_axes == DYNAMIC or self.to_end):
                    raise unsupported(node, "a run-time axes tensor whose output rank is "
                                            "only known at run time")
            else:
                self.axes = resolve_axes(values, self.rank, self.to_end,
                                         lambda why: invalid(node, why))
        if len(node.inputs) == 1:
            self.axes = tuple(range(self.rank))
        check_declared_shapes(self)

    def _out_shape(self, x: Shape, axes: tuple[int, ...]) -> Shape:
        if self.keep:
            return tuple(1 if i in axes else d for i, d in enumerate(x))
        return tuple(d for i, d in enumerate(x) if i not in axes)

    def infer_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        x = tuple(input_shapes[0])
        if len(x) != self.rank:
            raise bad_shape(self.node, f"input rank {len(x)}, the model has {self.rank}")
        if self.axes is not None:
            return [self._out_shape(x, self.axes)]
        if self.keep:
            return [(DYNAMIC,) * self.rank]
        return [(DYNAMIC,) * (self.rank - self.n_axes if self.n_axes else 0)]

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        x = inputs[0]
        axes = self.axes
        if axes is None:
            axes = resolve_axes(index_values(self.node, inputs[1], "axes"), x.ndim, self.to_end,
                                lambda why: bad_shape(self.node, why))
        out = self._reduce(x, axes)
        if self.coeff != 1.0:
            out = out * out.dtype.type(self.coeff)
        return [cast(np.asarray(out), self.dtype).reshape(self._out_shape(x.shape, axes))]

    def _reduce(self, x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
        mode = self.mode
        if mode == ht.REDUCE_MODE_ALL:
            return np.all(x != 0, axis=axes)
        if x.dtype == _BOOL:
            return (np.any if mode == ht.REDUCE_MODE_MAX else np.all)(x, axis=axes)
        if mode in (ht.REDUCE_MODE_MAX, ht.REDUCE_MODE_MIN):
            high = mode == ht.REDUCE_MODE_MAX
            if self.integer:
                info = np.iinfo(x.dtype)
                identity = info.min if high else info.max
            else:
                identity = -np.inf if high else np.inf
            return (np.maximum if high else np.minimum).reduce(x, axis=axes,
                                                              initial=identity)
        if self.integer:
            # Exact in 64 bits, wrapped to the tensor's type by the final cast.
            work = np.dtype(np.uint64 if x.dtype.kind == "u" else np.int64)
        else:
            work = np.dtype(np.float32) if x.dtype == np.float16 else x.dtype
        x = x.astype(work, copy=False)
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            if mode == ht.REDUCE_MODE_PROD:
                return np.prod(x, axis=axes, dtype=work)
            if mode in (ht.REDUCE_MODE_SUM_SQUARE, ht.REDUCE_MODE_L2):
                total = np.sum(np.square(x), axis=axes, dtype=work)
                return np.sqrt(total) if mode == ht.REDUCE_MODE_L2 else total
            if mode == ht.REDUCE_MODE_ASUM:
                return np.sum(np.abs(x) if work.kind != "u" else x, axis=axes, dtype=work)
            total = np.sum(x, axis=axes, dtype=work)
            if mode == ht.REDUCE_MODE_SUM:
                return total
            count = math.prod(x.shape[a] for a in axes)
            if not self.integer:
                return total / work.type(count) if count else total * work.type(np.nan)
            if count == 0:
                return np.zeros_like(total)
            if work.kind == "u":
                return total // work.type(count)
            quotient = np.abs(total) // count  # truncation toward zero
            return np.where(total < 0, -quotient, quotient)
