"""Transpose: y = x with its dimensions permuted, y.shape[i] = x.shape[perm[i]].

perm (input 1) is a 1-D INT32/INT64 tensor of length rank(x), normally constant; negative
entries count from the end as numpy's axes do (-1 is the last dimension). It must name every
dimension exactly once. Data movement only: any dtype, quantisation kept. The result is the
transposed view; the host's copy to the output buffer makes it contiguous.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from nnrt.hdi.reference.kernel import Kernel, invalid, register
from nnrt.hdi.reference.ops._common import (
    bad_shape,
    check_declared_shapes,
    constant_index_input,
    index_values,
    require_output_dtype,
)
from nnrt.protos import node_attrs_pb2 as na
from nnrt.common.errors import DriverError
from nnrt.hdi.graph import DYNAMIC, NodeSpec, Shape


def _permutation(values: Sequence[int], rank: int,
                 error: Callable[[str], DriverError]) -> tuple[int, ...]:
    if len(values) != rank:
        raise error(f"perm {list(values)} has {len(values)} entries for rank {rank}")
    perm = tuple(v + rank if v < 0 else v for v in values)
    if sorted(perm) != list(range(rank)):
        raise error(f"perm {list(values)} is not a permutation of the {rank} dimensions")
    return perm


@register(na.NODE_TYPE_TRANSPOSE)
class Transpose(Kernel):
    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        self.expect_counts(2)
        require_output_dtype(node, node.inputs[0].dtype)
        self.rank = len(node.inputs[0].shape)
        values = constant_index_input(node, 1, "perm")
        self.perm = None
        if values is not None:
            self.perm = _permutation(values, self.rank, lambda why: invalid(node, why))
        check_declared_shapes(self)

    def infer_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        x = tuple(input_shapes[0])
        if len(x) != self.rank:
            raise bad_shape(self.node, f"input rank {len(x)}, the model has {self.rank}")
        if self.perm is None:
            return [(DYNAMIC,) * self.rank]
        return [tuple(x[p] for p in self.perm)]

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        perm = self.perm
        if perm is None:
            perm = _permutation(index_values(self.node, inputs[1], "perm"), self.rank,
                                lambda why: bad_shape(self.node, why))
        return [np.transpose(inputs[0], perm)]
