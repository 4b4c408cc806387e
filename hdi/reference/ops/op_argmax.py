"""ArgMaxFusion: the positions (or values) of the topK largest entries of x along `axis`.

Decisions (MindSpore Lite's ArgMinMax, the engine behind NNRt, where the spec is silent):

* topK 0 (proto3's unset value) means 1; a negative topK is invalid, one larger than the
  axis is an invalid shape.
* Output shape: the axis is kept with size topK when keepDims is set or topK > 1, and
  removed otherwise (topK == 1 without keepDims).
* Output 0 holds the indices (INT32 or INT64, as declared) or, with outMaxValue, the values
  themselves (the input's dtype). An optional second output always receives the values
  (MindSpore Lite's two-output form). 1 or 2 outputs.
* Order: largest first; ties keep the lower index first (np.argmax's first maximum); NaN
  counts as larger than every number.
* dtypes: every integer and float type.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from nnrt.hdi.reference.kernel import Kernel, invalid, register, unsupported
from nnrt.hdi.reference.ops._common import (
    INDEX_DTYPES,
    NUMERIC_DTYPES,
    bad_shape,
    check_declared_shapes,
    normalize_axis,
    require_unquantised,
)
from nnrt.hdi.reference.ops.op_topk import top_k_indices
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import DYNAMIC, NodeSpec, Shape


@register(na.NODE_TYPE_ARGMAX_FUSION)
class ArgMaxFusion(Kernel):
    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        self.expect_counts(1, range(1, 3))
        require_unquantised(node)
        x = node.inputs[0]
        if x.dtype not in NUMERIC_DTYPES:
            raise unsupported(node, f"dtype {x.dtype} is not supported")
        attrs = node.attrs
        self.values_out = bool(attrs.outMaxValue)
        first = node.outputs[0].dtype
        if self.values_out and first != x.dtype:
            raise invalid(node, f"outMaxValue: output dtype {first} differs from the input's "
                                f"{x.dtype}")
        if not self.values_out and first not in INDEX_DTYPES:
            raise invalid(node, f"index output must be INT32 or INT64, is {first}")
        if len(node.outputs) == 2 and node.outputs[1].dtype != x.dtype:
            raise invalid(node, f"value output dtype {node.outputs[1].dtype} differs from the "
                                f"input's {x.dtype}")
        self.rank = len(x.shape)
        if self.rank == 0:
            raise invalid(node, "ArgMax needs an input of rank >= 1")
        self.axis = normalize_axis(node, int(attrs.axis), self.rank)
        self.k = int(attrs.topK) or 1
        if self.k < 0:
            raise invalid(node, f"topK {attrs.topK} is negative")
        self.keep = bool(attrs.keepDims) or self.k > 1
        check_declared_shapes(self)

    def infer_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        x = list(input_shapes[0])
        if len(x) != self.rank:
            raise bad_shape(self.node, f"input rank {len(x)}, the model has {self.rank}")
        size = x[self.axis]
        if size != DYNAMIC and self.k > size:
            raise bad_shape(self.node, f"topK {self.k} exceeds the axis' size {size}")
        if self.keep:
            x[self.axis] = self.k
        else:
            del x[self.axis]
        return [tuple(x)] * len(self.node.outputs)

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        x = inputs[0]
        (shape, *_) = self.infer_shapes([x.shape])
        idx = top_k_indices(x, self.k, self.axis)
        values = np.take_along_axis(x, idx, axis=self.axis).reshape(shape)
        first = values if self.values_out else \
            idx.reshape(shape).astype(self.node.outputs[0].dtype, copy=False)
        return [first, values][:len(self.node.outputs)]
