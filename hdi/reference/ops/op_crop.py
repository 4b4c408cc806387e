"""Crop: a window of x. Dimensions from `axis` on (negative counts from the end) are cut
at `offset`; the window's size comes from input 1.

Input 1 is read two ways, told apart by its rank:

* a 1-D INT32/INT64 tensor (hdi_ops.json: "1-D tensor giving the size of the crop
  window") holds the window size, either for the cropped dimensions only
  (rank(x) - axis entries; the leading dimensions are kept whole) or for every dimension
  (rank(x) entries; the leading dimensions are then cut from 0, as MindSpore Lite does).
  It is normally constant; a run-time one gives DYNAMIC output dimensions until the run.
* a tensor of x's rank other than 1-D is a reference tensor (Caffe's and MindSpore Lite's
  Crop): the window is its shape, its values are not read.

A 1-D input 1 is always read as sizes, also when x itself is 1-D.

`offset` holds one offset per cropped dimension, or a single offset for all of them
(Caffe, MindSpore Lite), or nothing (all 0). Offsets must be >= 0 and every window must lie
inside x (invalid, or NNRT_INVALID_SHAPE when only the run's shapes show it).

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


@register(na.NODE_TYPE_CROP)
class Crop(Kernel):
    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        self.expect_counts(2)
        moved_dtype(node)
        self.rank = len(node.inputs[0].shape)
        if self.rank == 0:
            raise invalid(node, "a scalar cannot be cropped")
        self.axis = normalize_axis(node, int(node.attrs.axis), self.rank)
        cropped = self.rank - self.axis
        offsets = [int(v) for v in node.attrs.offset]
        if not offsets:
            offsets = [0] * cropped
        elif len(offsets) == 1:
            offsets = offsets * cropped
        elif len(offsets) != cropped:
            raise invalid(node, f"offset {offsets} needs 1 or {cropped} entries (dimensions "
                                f"{self.axis}..{self.rank - 1})")
        if min(offsets) < 0:
            raise invalid(node, f"offset {list(node.attrs.offset)} holds a negative value")
        self.starts = (0,) * self.axis + tuple(offsets)  # per dimension of x
        ref = node.inputs[1]
        self.size: tuple[int | None, ...] | None = None  # None: run-time window sizes
        if len(ref.shape) != 1:
            if len(ref.shape) != self.rank:
                raise invalid(node, f"reference tensor of rank {len(ref.shape)} for x of rank "
                                    f"{self.rank}")
            self.reference = True
        else:
            self.reference = False
            values = constant_index_input(node, 1, "shape")
            if values is not None:
                self.size = self._window(values, lambda why: invalid(node, why))
            elif ref.shape[0] == DYNAMIC:
                raise unsupported(node, "a run-time window tensor of unknown length")
            elif ref.shape[0] not in (self.rank, cropped):
                raise invalid(node, f"shape holds {ref.shape[0]} sizes, expected {cropped} or "
                                    f"{self.rank}")
        check_declared_shapes(self)

    def _window(self, values: Sequence[int], error: Callable[[str], DriverError]
                ) -> tuple[int | None, ...]:
        """Per dimension of x: the window size, None where x's own size is kept."""
        cropped = self.rank - self.axis
        if len(values) == cropped:
            sizes = (None,) * self.axis + tuple(values)
        elif len(values) == self.rank:
            sizes = tuple(values)
        else:
            raise error(f"shape {list(values)} holds {len(values)} sizes, expected {cropped} "
                        f"or {self.rank}")
        if any(s is not None and s < 0 for s in sizes):
            raise error(f"shape {list(values)} holds a negative size")
        return sizes

    def _out(self, x: Shape, sizes: Sequence[int | None]) -> Shape:
        out = []
        for d, (dim, start, size) in enumerate(zip(x, self.starts, sizes)):
            size = dim if size is None else size
            if DYNAMIC not in (dim, size) and start + size > dim:
                raise bad_shape(self.node, f"window [{start}, {start + size}) of dimension {d} "
                                           f"lies outside its size {dim}")
            out.append(size)
        return tuple(out)

    def infer_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        x, ref = tuple(input_shapes[0]), tuple(input_shapes[1])
        if len(x) != self.rank:
            raise bad_shape(self.node, f"input rank {len(x)}, the model has {self.rank}")
        if self.reference:
            return [self._out(x, ref)]
        if self.size is None:
            return [(DYNAMIC,) * self.rank]
        return [self._out(x, self.size)]

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        x = inputs[0]
        if self.reference:
            sizes: Sequence[int | None] = inputs[1].shape
        elif self.size is None:
            sizes = self._window(index_values(self.node, inputs[1], "shape"),
                                 lambda why: bad_shape(self.node, why))
        else:
            sizes = self.size
        out = self._out(x.shape, sizes)
        return [x[tuple(slice(s, s + n) for s, n in zip(self.starts, out))]]
