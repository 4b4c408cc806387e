"""What the block rearrangements of a 4-D tensor share (BatchToSpaceND / SpaceToBatchND,
DepthToSpace / SpaceToDepth): one input and one output of any dtype, quantisation kept;
the element order computed on NHWC, an NCHW input transposed in and its result out
(semantics.md "Layout"); shapes that a block does not divide are invalid.

The leading underscore keeps this module out of the `op_*` auto-import.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence

import numpy as np

from nnrt.hdi.reference.kernel import Kernel, invalid
from nnrt.hdi.reference.ops._common import (
    bad_shape,
    from_nhwc,
    moved_dtype,
    spatial_layout,
    to_nhwc,
)
from nnrt.hdi.graph import DYNAMIC, NodeSpec, Shape


class Rearrange4D(Kernel):
    """A data-movement kernel on a 4-D tensor; subclasses give the NHWC output shape and the
    NHWC rearrangement. `attr_format` is the operator's `format` attribute, for those that
    carry one (spatial_layout)."""

    def __init__(self, node: NodeSpec, attr_format: int | None = None) -> None:
        super().__init__(node)
        self.expect_counts(1)
        moved_dtype(node)
        if len(node.inputs[0].shape) != 4:
            raise invalid(node, f"input must be 4-D, has shape {list(node.inputs[0].shape)}")
        self.nchw = spatial_layout(node, attr_format)

    def divide(self, size: int, by: int, what: str) -> int:
        """size / by, DYNAMIC for DYNAMIC; invalid shape when `by` does not divide it."""
        if size == DYNAMIC:
            return DYNAMIC
        if size % by:
            raise bad_shape(self.node, f"{what} {size} is not a multiple of {by}")
        return size // by

    def infer_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        x = tuple(input_shapes[0])
        if len(x) != 4:
            raise bad_shape(self.node, f"input must be 4-D, has shape {list(x)}")
        return [from_nhwc(self.nhwc_shape(to_nhwc(x, self.nchw)), self.nchw)]

    @abstractmethod
    def nhwc_shape(self, x: Shape) -> Shape:
        """The output shape (NHWC) for an NHWC input shape."""

    @abstractmethod
    def nhwc(self, x: np.ndarray) -> np.ndarray:
        """The output for an NHWC input."""

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        x = inputs[0]
        self.infer_shapes([x.shape])
        if self.nchw:
            x = x.transpose(0, 2, 3, 1)
        out = self.nhwc(x)
        return [out.transpose(0, 3, 1, 2) if self.nchw else out]
