"""Concat: the inputs (two or more, equal rank, equal dtype) joined along `axis`
(negative counts from the end); every other dimension must agree.

Data movement only: any dtype. Quantised tensors are joined as they are when every input
carries the output's quantisation parameters; differing ones would need requantisation,
which is not implemented (unsupported).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from nnrt.hdi.reference.kernel import Kernel, invalid, register, unsupported
from nnrt.hdi.reference.ops._common import (
    check_declared_shapes,
    expect_joined,
    normalize_axis,
    one_rank,
    same_dim,
    shapes_of_rank,
)
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import DYNAMIC, NodeSpec, Shape


@register(na.NODE_TYPE_CONCAT)
class Concat(Kernel):
    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        expect_joined(self)
        dtypes = {t.dtype for t in node.inputs} | {node.outputs[0].dtype}
        if len(dtypes) != 1:
            raise invalid(node, f"inputs and output of mixed dtypes "
                                f"{sorted(str(d) for d in dtypes)}")
        quant = node.outputs[0].quant_params
        if any(t.quant_params != quant for t in node.inputs):
            raise unsupported(node, "inputs quantised differently from the output")
        self.rank = one_rank(node)
        self.axis = normalize_axis(node, int(node.attrs.axis), self.rank)
        check_declared_shapes(self)

    def infer_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        shapes = shapes_of_rank(self.node, input_shapes, self.rank)
        out = list(shapes[0])
        for s in shapes[1:]:
            for d in range(self.rank):
                if d == self.axis:
                    out[d] = DYNAMIC if DYNAMIC in (out[d], s[d]) else out[d] + s[d]
                else:
                    out[d] = same_dim(self.node, out[d], s[d], f"dimension {d} of the inputs")
        return [tuple(out)]

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        self.infer_shapes([x.shape for x in inputs])
        return [np.concatenate(inputs, axis=self.axis)]
