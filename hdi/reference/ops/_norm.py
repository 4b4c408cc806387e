"""What FusedBatchNorm and InstanceNorm share: x [N, ..., C] with its channel last, or on
axis 1 for an input tagged FORMAT_NCHW, followed by per-channel 1-D parameters [C]; one
float dtype for every input and the output (float16 computed in float32); the `epsilon`
attribute; an output of x's shape.

The leading underscore keeps this module out of the `op_*` auto-import.
"""

from __future__ import annotations

from collections.abc import Sequence

from nnrt.hdi.reference.kernel import Kernel, invalid
from nnrt.hdi.reference.ops._common import (
    FLOAT_DTYPES,
    bad_shape,
    computed_dtypes,
    epsilon_attr,
    same_dim,
)
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.hdi.graph import NodeSpec, Shape


class ChannelNorm(Kernel):
    """Sets dtype, work, epsilon, rank and nchw; a subclass checks x's rank, then calls
    `check_params` with its channel axis."""

    params: tuple[str, ...] = ()  # the names of inputs 1.., each 1-D [C]

    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        self.expect_counts(1 + len(self.params))
        self.dtype, self.work = computed_dtypes(node, FLOAT_DTYPES, "inputs")
        self.epsilon = epsilon_attr(node)
        self.rank = len(node.inputs[0].shape)
        self.nchw = node.inputs[0].format == ht.FORMAT_NCHW

    def check_params(self, channel: int) -> None:
        """The parameters are 1-D; `channel` is x's channel axis."""
        self.channel = channel
        for name, spec in zip(self.params, self.node.inputs[1:]):
            if len(spec.shape) != 1:
                raise invalid(self.node, f"{name} must be 1-D [C], has shape "
                                         f"{list(spec.shape)}")

    def param_shape(self) -> list[int]:
        """The shape a parameter [C] takes to broadcast along x's channel axis."""
        shape = [1] * self.rank
        shape[self.channel] = -1
        return shape

    def infer_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        x = tuple(input_shapes[0])
        if len(x) != self.rank:
            raise bad_shape(self.node, f"input rank {len(x)}, the model has {self.rank}")
        c = x[self.channel]
        for name, shape in zip(self.params, input_shapes[1:]):
            if len(shape) != 1:
                raise bad_shape(self.node, f"{name} must be 1-D, has shape {list(shape)}")
            c = same_dim(self.node, c, shape[0], f"{name} length vs channels")
        return [x]
