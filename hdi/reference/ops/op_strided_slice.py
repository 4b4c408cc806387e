"""StridedSlice: TensorFlow's strided slice, with its five masks.

begin, end and strides (inputs 1-3) are 1-D INT32/INT64 tensors of one length L, the
"sparse" slice specification; entry i is read with mask bit i:

* ellipsisMask — entry i stands for every dimension not named by the other entries (at most
  one bit may be set); without it, an ellipsis is implied after the last entry;
* newAxisMask — entry i inserts an output dimension of size 1 and names no dimension of x
  (begin/end/strides ignored; an ellipsis bit at the same position wins);
* shrinkAxisMask — entry i takes the single element begin[i] (negative counts from the end,
  which must lie inside the dimension) and drops the dimension; end[i], strides[i] and the
  begin/end masks are ignored there (TensorFlow; a new-axis bit at the same position wins);
* beginMask / endMask — begin[i] / end[i] are ignored and the slice starts / stops at the
  first / last element in the direction of the stride.

Otherwise begin and end count from the end when negative and are clamped to the dimension
(to [0, size] for a positive stride, to [-1, size - 1] for a negative one, -1 standing for
"before the first element"), exactly as TensorFlow's ValidateStridedSliceOp does; strides
must be non-zero and may be negative. The spec naming more dimensions than x has is invalid.

Decisions where the spec is silent: mask bits at positions >= L are ignored (TensorFlow);
negative masks are invalid. begin/end/strides are normally constant; run-time ones leave the
sliced output dimensions DYNAMIC until the run (the output rank is known from the masks), and
their bad values then fail the run with NNRT_INVALID_SHAPE.

Data movement only: any dtype, quantisation kept; the result is a view of x.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from nnrt.hdi.reference.kernel import Kernel, invalid, register, unsupported
from nnrt.hdi.reference.ops._common import (
    bad_shape,
    check_declared_shapes,
    constant_index_input,
    index_values,
    moved_dtype,
)
from nnrt.protos import node_attrs_pb2 as na
from nnrt.common.errors import DriverError
from nnrt.hdi.graph import DYNAMIC, NodeSpec, Shape

NEW_AXIS = -1  # an output dimension that is a new axis rather than a dimension of x

Values = tuple[int, ...]
Sliced = int | tuple[int, int, int]  # a shrunk dimension's index, or (start, count, step)


@dataclass(frozen=True)
class _Dim:
    """How one dimension of x is sliced."""

    entry: int | None  # position in begin/end/strides; None when the ellipsis covers it
    shrink: bool = False
    begin_masked: bool = True
    end_masked: bool = True


def _canonical(dim: int, begin: int, end: int, stride: int, d: _Dim) -> tuple[int, int]:
    """(start, count) of a non-shrunk dimension of size `dim` (TensorFlow's canonical form)."""
    lo, hi = (0, dim) if stride > 0 else (-1, dim - 1)

    def clamp(value: int, masked: bool, at_start: bool) -> int:
        if masked:
            return lo if (stride > 0) == at_start else hi
        value = value + dim if value < 0 else value
        return min(max(value, lo), hi)

    start = clamp(begin, d.begin_masked, True)
    stop = clamp(end, d.end_masked, False)
    interval = stop - start
    if interval == 0 or (interval > 0) != (stride > 0):
        return start, 0
    return start, -(-interval // stride)  # ceil(interval / stride), both of one sign


@register(na.NODE_TYPE_STRIDED_SLICE)
class StridedSlice(Kernel):
    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        self.expect_counts(4)
        moved_dtype(node)
        self.rank = len(node.inputs[0].shape)
        names = ("begin", "end", "strides")
        self.values: list[Values | None] = [constant_index_input(node, p, n)
                                            for p, n in zip((1, 2, 3), names)]
        lengths = set()
        for p, v in zip((1, 2, 3), self.values):
            declared = node.inputs[p].shape
            lengths.add(len(v) if v is not None else declared[0] if declared else 1)
        if len(lengths) != 1:
            raise invalid(node, f"begin, end and strides differ in length ({sorted(lengths)})")
        (self.length,) = lengths
        if self.length == DYNAMIC:
            raise unsupported(node, "run-time begin/end/strides of unknown length")
        self._plan()
        self._check(self.values, lambda why: invalid(node, why))
        check_declared_shapes(self)

    def _plan(self) -> None:
        """Expand the sparse specification into one _Dim per dimension of x (self.dims) and
        the output's dimensions (self.final: indices into self.dims, or NEW_AXIS)."""
        node, attrs, n = self.node, self.node.attrs, self.length
        masks = {name: int(getattr(attrs, name)) for name in
                 ("beginMask", "endMask", "ellipsisMask", "newAxisMask", "shrinkAxisMask")}
        for name, value in masks.items():
            if value < 0:
                raise invalid(node, f"{name} {value} is negative")

        def bit(name: str, i: int) -> bool:
            return bool(masks[name] >> i & 1) and i < n

        ellipses = [i for i in range(n) if bit("ellipsisMask", i)]
        if len(ellipses) > 1:
            raise invalid(node, f"ellipsisMask {masks['ellipsisMask']} sets more than one bit")
        entries = n if ellipses else n + 1  # the implied ellipsis after the last entry
        ellipsis = ellipses[0] if ellipses else n
        new_after = sum(bit("newAxisMask", i) for i in range(ellipsis + 1, n))
        dims: list[_Dim] = []
        final: list[int] = []
        for i in range(entries):
            if i == ellipsis:
                upto = min(self.rank - (entries - i) + 1 + new_after, self.rank)
                for _ in range(len(dims), upto):
                    final.append(len(dims))
                    dims.append(_Dim(None))
            elif bit("newAxisMask", i):
                final.append(NEW_AXIS)
            else:
                if len(dims) == self.rank:
                    raise invalid(node, f"the slice names more dimensions than x's {self.rank}")
                shrink = bit("shrinkAxisMask", i)
                if not shrink:
                    final.append(len(dims))
                dims.append(_Dim(i, shrink, bit("beginMask", i), bit("endMask", i)))
        self.dims = tuple(dims)
        self.final = tuple(final)

    def _check(self, values: Sequence[Values | None], error: Callable[[str], DriverError]
               ) -> None:
        strides = values[2]
        if strides is None:
            return
        for d in self.dims:
            if d.entry is not None and strides[d.entry] == 0:
                raise error(f"strides {list(strides)} holds 0 at entry {d.entry}")

    def _slices(self, x: Shape, values: Sequence[Values | None]) -> list[Sliced]:
        """Per dimension of x: the index of a shrunk one, else (start, count, step); count
        DYNAMIC where the sizes or values are unknown."""
        begin, end, strides = values
        out: list[Sliced] = []
        for axis, (dim, d) in enumerate(zip(x, self.dims)):
            if d.entry is None:
                out.append((0, dim, 1))
                continue
            if d.shrink:
                b = None if begin is None else begin[d.entry]
                if b is not None and dim != DYNAMIC:
                    if not -dim <= b < dim:
                        raise bad_shape(self.node, f"index {b} of dimension {axis} is outside "
                                                   f"its size {dim}")
                    b = b + dim if b < 0 else b
                out.append(DYNAMIC if b is None else b)
                continue
            if dim == DYNAMIC or None in (begin, end, strides):
                out.append((0, DYNAMIC, 1))
                continue
            stride = strides[d.entry]
            start, count = _canonical(dim, begin[d.entry], end[d.entry], stride, d)
            out.append((start, count, stride))
        return out

    def _shape(self, slices: Sequence[Sliced]) -> Shape:
        return tuple(1 if f == NEW_AXIS else slices[f][1] for f in self.final)

    def infer_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        x = tuple(input_shapes[0])
        if len(x) != self.rank:
            raise bad_shape(self.node, f"input rank {len(x)}, the model has {self.rank}")
        return [self._shape(self._slices(x, self.values))]

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        x = inputs[0]
        values = list(self.values)
        if None in values:
            names = ("begin", "end", "strides")
            for k in range(3):
                if values[k] is None:
                    values[k] = index_values(self.node, inputs[k + 1], names[k])
                    if len(values[k]) != self.length:
                        raise bad_shape(self.node, f"{names[k]} has {len(values[k])} entries, "
                                                   f"expected {self.length}")
            self._check(values, lambda why: bad_shape(self.node, why))
        slices = self._slices(x.shape, values)
        index = []
        for s in slices:
            if isinstance(s, int):
                index.append(s)
            else:
                start, count, step = s
                stop = start + step * count
                index.append(slice(start, stop if stop >= 0 else None, step) if count
                             else slice(0, 0))
        out = x[(*index, ...)]  # the Ellipsis keeps an all-integer index an array view
        if NEW_AXIS in self.final:
            out = out.reshape(self._shape(slices))
        return [out]
