"""Reshape: x with the shape given by input 1, same data and dtype (quantisation kept).

The shape input is a 1-D INT32/INT64 tensor (semantics.md), normally constant. Its entries
follow MindSpore Lite's Reshape (the engine behind NNRt), which are ONNX's defaults:

* -1 (at most one) stands for the size that keeps the element count;
* 0 copies the input's dimension at the same position (an error past the input's rank);
* any other negative value is invalid.

With a constant shape the output shape is known at prepare time (DYNAMIC only where it
depends on a DYNAMIC input dimension). A run-time shape tensor is read at each run; the
output rank is its length, the dimensions DYNAMIC until then.

The result is a view of the input whenever numpy can make one (always for the contiguous
arrays the host passes), so a Reshape costs only the host's one copy to the output buffer.
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
    product,
    require_output_dtype,
)
from nnrt.protos import node_attrs_pb2 as na
from nnrt.common.errors import DriverError
from nnrt.hdi.graph import DYNAMIC, NodeSpec, Shape

INFER = -1  # the shape entry whose size is inferred (numerically equal to DYNAMIC)
COPY = 0  # the shape entry that copies the input's dimension


def _check_entries(values: Sequence[int], error: Callable[[str], DriverError]) -> None:
    if any(v < INFER for v in values):
        raise error(f"shape {list(values)} holds a negative size other than -1")
    if list(values).count(INFER) > 1:
        raise error(f"shape {list(values)} holds more than one -1")


@register(na.NODE_TYPE_RESHAPE)
class Reshape(Kernel):
    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        self.expect_counts(2)
        require_output_dtype(node, node.inputs[0].dtype)
        self.target = constant_index_input(node, 1, "shape")
        if self.target is None:
            declared = node.inputs[1].shape
            self.rank = declared[0] if declared else 1
            if self.rank == DYNAMIC:
                raise unsupported(node, "a run-time shape tensor of unknown length")
        else:
            _check_entries(self.target, lambda why: invalid(node, why))
        check_declared_shapes(self)

    def resolve(self, target: Sequence[int], in_shape: Shape) -> Shape:
        """The output shape for these shape entries and this input shape (DYNAMIC-aware)."""
        node = self.node
        dims = []
        for i, d in enumerate(target):
            if d == COPY:
                if i >= len(in_shape):
                    raise bad_shape(node, f"shape entry {i} is 0 (copy) but the input "
                                          f"{list(in_shape)} has rank {len(in_shape)}")
                dims.append(in_shape[i])
            else:
                dims.append(d)
        # Copied dimensions are equal on both sides and cancel out, so a DYNAMIC one does
        # not make the -1 entry unknown: [0, -1] on (DYNAMIC, 4, 2) is (DYNAMIC, 8).
        copied = {i for i, d in enumerate(target) if d == COPY}
        at = list(target).index(INFER) if INFER in target else None
        in_rest = product(d for i, d in enumerate(in_shape) if i not in copied)
        out_rest = product(d for i, d in enumerate(dims) if i != at and i not in copied)
        if at is None:
            if DYNAMIC not in (in_rest, out_rest) and in_rest != out_rest:
                raise bad_shape(node, f"cannot reshape {list(in_shape)} to {list(target)}")
        elif DYNAMIC in (in_rest, out_rest):
            dims[at] = DYNAMIC
        elif out_rest == 0 or in_rest % out_rest:
            raise bad_shape(node, f"cannot reshape {list(in_shape)} to {list(target)}")
        else:
            dims[at] = in_rest // out_rest
        return tuple(dims)

    def infer_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        if self.target is None:
            return [(DYNAMIC,) * self.rank]
        return [self.resolve(self.target, tuple(input_shapes[0]))]

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        x = inputs[0]
        target = self.target
        if target is None:
            target = index_values(self.node, inputs[1], "shape")
            _check_entries(target, lambda why: bad_shape(self.node, why))
        return [x.reshape(self.resolve(target, x.shape))]
