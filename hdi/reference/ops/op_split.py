"""Split: x cut along `axis` (negative counts from the end) into consecutive pieces, one per
output.

`sizeSplits` gives each piece's size; empty means equal pieces, x.shape[axis] then being a
multiple of the number of outputs. Decisions where the spec is silent:

* `outputNum` must equal the node's output count; 0 (the value of an omitted
  OH_NN_SPLIT_OUTPUT_NUM) means "as many as the node has outputs".
* `sizeSplits` needs one entry per output. One entry may be -1, standing for what the others
  leave (TensorFlow's SplitV); sizes 0 give empty pieces; any other negative is invalid.
  The sizes must add up to x.shape[axis] (checked at run when that dimension is DYNAMIC).

Data movement only: any dtype, quantisation kept; the outputs are views of x.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from nnrt.hdi.reference.kernel import Kernel, invalid, register
from nnrt.hdi.reference.ops._common import (
    bad_shape,
    check_declared_shapes,
    moved_dtype,
    normalize_axis,
)
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import DYNAMIC, NodeSpec, Shape

REST = -1  # the sizeSplits entry that takes what the others leave


@register(na.NODE_TYPE_SPLIT)
class Split(Kernel):
    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        count = len(node.outputs)
        if count == 0:
            raise invalid(node, "expects 1 or more outputs, has 0")
        self.expect_counts(1, count)
        moved_dtype(node)
        attrs = node.attrs
        if int(attrs.outputNum) not in (0, count):
            raise invalid(node, f"outputNum {attrs.outputNum} differs from the node's {count} "
                                f"outputs")
        self.rank = len(node.inputs[0].shape)
        self.axis = normalize_axis(node, int(attrs.axis), self.rank)
        sizes = tuple(int(s) for s in attrs.sizeSplits)
        if sizes:
            if len(sizes) != count:
                raise invalid(node, f"sizeSplits {list(sizes)} has {len(sizes)} entries for "
                                    f"{count} outputs")
            if any(s < REST for s in sizes) or sizes.count(REST) > 1:
                raise invalid(node, f"sizeSplits {list(sizes)} holds a negative size other "
                                    f"than one -1")
        self.sizes = sizes or None
        check_declared_shapes(self)

    def piece_sizes(self, dim: int) -> list[int]:
        """The size of every piece along the axis (DYNAMIC where unknown)."""
        count = len(self.node.outputs)
        if self.sizes is None:
            if dim == DYNAMIC:
                return [DYNAMIC] * count
            if dim % count:
                raise bad_shape(self.node, f"dimension {self.axis} of size {dim} does not split "
                                           f"into {count} equal pieces")
            return [dim // count] * count
        sizes = list(self.sizes)
        known = sum(s for s in sizes if s != REST)
        if REST in sizes:
            if dim == DYNAMIC:
                sizes[sizes.index(REST)] = DYNAMIC
            elif known > dim:
                raise bad_shape(self.node, f"sizeSplits {list(self.sizes)} exceed dimension "
                                           f"{self.axis} of size {dim}")
            else:
                sizes[sizes.index(REST)] = dim - known
        elif dim != DYNAMIC and known != dim:
            raise bad_shape(self.node, f"sizeSplits {list(self.sizes)} do not add up to "
                                       f"dimension {self.axis} of size {dim}")
        return sizes

    def infer_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        x = tuple(input_shapes[0])
        if len(x) != self.rank:
            raise bad_shape(self.node, f"input rank {len(x)}, the model has {self.rank}")
        a = self.axis
        return [x[:a] + (s,) + x[a + 1:] for s in self.piece_sizes(x[a])]

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        x = inputs[0]
        cuts = np.cumsum(self.piece_sizes(x.shape[self.axis]))[:-1]
        return list(np.split(x, cuts, axis=self.axis))
