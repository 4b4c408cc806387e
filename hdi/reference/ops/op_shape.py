"""Shape and Rank: x's dimensions and rank as integer tensors (x's values are not read).

Shape: the 1-D tensor [rank(x)] of x's dimensions; Rank: x's rank. Both are produced in the
dtype the output tensor declares, INT32 or INT64 (hdi_ops.json names no dtype for Shape and
INT32 for Rank; INT64 is what ONNX's Shape produces); other output dtypes are unsupported.
Rank's output is 0-D (hdi_ops.json); a model that declares it [1] (MindSpore Lite's
shape for it) gets a one-element 1-D tensor. x may have any dtype, and DYNAMIC dimensions:
Shape's output length is the rank all the same.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from nnrt.hdi.reference.kernel import Kernel, invalid, register, unsupported
from nnrt.hdi.reference.ops._common import INDEX_DTYPES, bad_shape
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import NodeSpec, Shape


class _Describe(Kernel):
    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        self.expect_counts(1)
        out = node.outputs[0]
        if out.dtype not in INDEX_DTYPES:
            raise unsupported(node, f"output dtype {out.dtype} (INT32 or INT64 are supported)")
        if out.quant_params:
            raise unsupported(node, "a quantised output")
        self.dtype = out.dtype
        self.rank = len(node.inputs[0].shape)

    def check_rank(self, x: Shape) -> None:
        if len(x) != self.rank:
            raise bad_shape(self.node, f"input rank {len(x)}, the model has {self.rank}")


@register(na.NODE_TYPE_SHAPE)
class ShapeOp(_Describe):
    def infer_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        self.check_rank(tuple(input_shapes[0]))
        return [(self.rank,)]

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        return [np.array(inputs[0].shape, dtype=self.dtype).reshape(self.rank)]


@register(na.NODE_TYPE_RANK)
class Rank(_Describe):
    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        declared = node.outputs[0].shape
        if declared not in ((), (1,), (-1,)):
            raise invalid(node, f"output declared {list(declared)}; Rank gives one value")
        self.out_shape: Shape = () if declared == () else (1,)

    def infer_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        self.check_rank(tuple(input_shapes[0]))
        return [self.out_shape]

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        return [np.full(self.out_shape, inputs[0].ndim, dtype=self.dtype)]
