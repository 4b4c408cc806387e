"""SliceFusion: the slice x[begin[i] : begin[i] + size[i]] along each dimension axes[i];
every other dimension is kept whole.

`begin` (input 1) and `size` (input 2) are 1-D INT32/INT64 tensors of one entry per sliced
dimension, normally constant. Decisions where the spec is silent:

* `axes` empty means the first len(begin) dimensions, in order (ONNX Slice, TensorFlow
  when len(begin) is the rank); axes entries may be negative (counted from the end) and
  must be distinct.
* size -1 runs to the end of the dimension (TensorFlow, MindSpore Lite). size 0 gives an
  empty dimension; any other negative size is invalid.
* begin must be >= 0 (hdi_ops.json) and the slice must lie inside x: invalid for constant
  inputs, NNRT_INVALID_SHAPE for values or shapes only known at run time.
* A run-time begin or size gives DYNAMIC output dimensions where the size is not a constant
  other than -1.

Data movement only: any dtype, quantisation kept; the result is a view of x.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from nnrt.hdi.reference.kernel import Kernel, invalid, register, unsupported
from nnrt.hdi.reference.ops._common import (
    bad_shape,
    check_declared_shapes,
    constant_index_input,
    index_values,
    moved_dtype,
    normalize_axis,
)
from nnrt.protos import node_attrs_pb2 as na
from nnrt.common.errors import DriverError
from nnrt.hdi.graph import DYNAMIC, NodeSpec, Shape

TO_END = -1


def _check(begin: Sequence[int] | None, size: Sequence[int] | None, count: int,
           error: Callable[[str], DriverError]) -> None:
    for name, values in (("begin", begin), ("size", size)):
        if values is not None and len(values) != count:
            raise error(f"{name} {list(values)} has {len(values)} entries, expected {count}")
    if begin is not None and any(b < 0 for b in begin):
        raise error(f"begin {list(begin)} holds a negative offset")
    if size is not None and any(s < TO_END for s in size):
        raise error(f"size {list(size)} holds a negative size other than -1")


@register(na.NODE_TYPE_SLICE_FUSION)
class SliceFusion(Kernel):
    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        self.expect_counts(3)
        moved_dtype(node)
        self.rank = len(node.inputs[0].shape)
        self.begin = constant_index_input(node, 1, "begin")
        self.size = constant_index_input(node, 2, "size")
        counts = set()
        for position, values in ((1, self.begin), (2, self.size)):
            if values is not None:
                counts.add(len(values))
            else:
                declared = node.inputs[position].shape
                counts.add(declared[0] if declared else 1)
        if len(counts) != 1:
            raise invalid(node, f"begin and size differ in length ({sorted(counts)})")
        (count,) = counts
        if count == DYNAMIC:
            raise unsupported(node, "run-time begin and size of unknown length")
        if node.attrs.axes:
            axes = [normalize_axis(node, int(a), self.rank, "axes entry")
                    for a in node.attrs.axes]
            if len(set(axes)) != len(axes):
                raise invalid(node, f"axes {list(node.attrs.axes)} repeats a dimension")
            if len(axes) != count:
                raise invalid(node, f"axes {list(node.attrs.axes)} and begin/size ({count} "
                                    f"entries) differ in length")
        else:
            if count > self.rank:
                raise invalid(node, f"{count} begin/size entries for rank {self.rank}")
            axes = list(range(count))
        self.axes = tuple(axes)
        _check(self.begin, self.size, count, lambda why: invalid(node, why))
        check_declared_shapes(self)

    def bounds(self, x: Shape, begin: Sequence[int] | None, size: Sequence[int] | None
               ) -> list[tuple[int, int]]:
        """(start, output size) per dimension of x; DYNAMIC sizes where unknown."""
        out = [(0, d) for d in x]
        for i, axis in enumerate(self.axes):
            dim = x[axis]
            b = None if begin is None else begin[i]
            s = None if size is None else size[i]
            if s == TO_END:
                s = DYNAMIC if b is None or dim == DYNAMIC else dim - b
            elif s is None:
                s = DYNAMIC
            if dim != DYNAMIC and b is not None and (b > dim or (s != DYNAMIC and b + s > dim)):
                end = "the end" if s == DYNAMIC else b + s
                raise bad_shape(self.node, f"slice [{b}, {end}) of dimension {axis} lies "
                                           f"outside its size {dim}")
            out[axis] = (0 if b is None else b, s)
        return out

    def infer_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        x = tuple(input_shapes[0])
        if len(x) != self.rank:
            raise bad_shape(self.node, f"input rank {len(x)}, the model has {self.rank}")
        return [tuple(s for _, s in self.bounds(x, self.begin, self.size))]

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        x = inputs[0]
        begin, size = self.begin, self.size
        if begin is None or size is None:
            if begin is None:
                begin = index_values(self.node, inputs[1], "begin")
            if size is None:
                size = index_values(self.node, inputs[2], "size")
            _check(begin, size, len(self.axes), lambda why: bad_shape(self.node, why))
        index = tuple(slice(b, b + s) for b, s in self.bounds(x.shape, begin, size))
        return [x[index]]
