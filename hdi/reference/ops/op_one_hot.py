"""OneHot (indices, depth, onValue, offValue): an (n+1)-D tensor holding onValue where the
new dimension's position equals the index and offValue elsewhere (TensorFlow's one_hot).

The new dimension of size `depth` is inserted at `axis`, in [-(n+1), n] for n-D indices
(-1, the default upstream, appends it; other negatives count from the end of the output,
as ONNX). For indices [N, C]: axis 0 gives [D, N, C], axis 1 gives [N, D, C], axis -1 gives
[N, C, D] (hdi_ops.json).

Decisions where the spec is silent:

* an index outside [0, depth) — negative ones included — gives a row of offValue
  (TensorFlow, MindSpore Lite; ONNX would count negative ones from the end);
* indices may have any integer dtype; depth is an INT32/INT64 scalar or one-element tensor,
  > 0 (invalid when constant, NNRT_INVALID_SHAPE at run otherwise), normally constant — a
  run-time one leaves the new dimension DYNAMIC until the run;
* onValue and offValue are scalars or one-element tensors of one dtype, which is the output
  dtype (any numeric dtype or bool); they may be run-time inputs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from nnrt.hdi.reference.kernel import Kernel, invalid, register, unsupported
from nnrt.hdi.reference.ops._common import (
    INT_DTYPES,
    bad_shape,
    check_declared_shapes,
    constant_index_input,
    index_values,
)
from nnrt.protos import node_attrs_pb2 as na
from nnrt.common.errors import DriverError
from nnrt.hdi.graph import DYNAMIC, NodeSpec, Shape


def _depth(values: Sequence[int], error: Callable[[str], DriverError]) -> int:
    if len(values) != 1:
        raise error(f"depth must hold one value, holds {list(values)}")
    if values[0] <= 0:
        raise error(f"depth {values[0]} is not > 0")
    return values[0]


@register(na.NODE_TYPE_ONE_HOT)
class OneHot(Kernel):
    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        self.expect_counts(4)
        indices, on, off = node.inputs[0], node.inputs[2], node.inputs[3]
        if indices.dtype not in INT_DTYPES:
            raise unsupported(node, f"indices of dtype {indices.dtype} (integer dtypes are "
                                    f"supported)")
        if on.dtype != off.dtype:
            raise invalid(node, f"onValue {on.dtype} and offValue {off.dtype} differ in dtype")
        if node.outputs[0].dtype != on.dtype:
            raise invalid(node, f"output dtype {node.outputs[0].dtype} differs from onValue's "
                                f"{on.dtype}")
        if on.quant_params or off.quant_params or node.outputs[0].quant_params:
            raise unsupported(node, "quantised on/off values")
        for what, t in (("depth", node.inputs[1]), ("onValue", on), ("offValue", off)):
            if len(t.shape) > 1 or (t.shape and t.shape[0] not in (1, DYNAMIC)):
                raise invalid(node, f"{what} must hold one value, has shape {list(t.shape)}")
        self.rank = len(indices.shape)
        axis = int(node.attrs.axis)
        if not -self.rank - 1 <= axis <= self.rank:
            raise invalid(node, f"axis {axis} is outside [{-self.rank - 1}, {self.rank}]")
        self.axis = axis + self.rank + 1 if axis < 0 else axis
        values = constant_index_input(node, 1, "depth")
        self.depth = None if values is None else _depth(values, lambda why: invalid(node, why))
        check_declared_shapes(self)

    def infer_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        indices = tuple(input_shapes[0])
        if len(indices) != self.rank:
            raise bad_shape(self.node, f"indices rank {len(indices)}, the model has {self.rank}")
        for what, shape in (("onValue", input_shapes[2]), ("offValue", input_shapes[3])):
            if DYNAMIC not in shape and int(np.prod(shape)) != 1:
                raise bad_shape(self.node, f"{what} of shape {list(shape)} is not one value")
        depth = DYNAMIC if self.depth is None else self.depth
        return [indices[:self.axis] + (depth,) + indices[self.axis:]]

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        indices, _, on, off = inputs
        depth = self.depth
        if depth is None:
            depth = _depth(index_values(self.node, inputs[1], "depth"),
                           lambda why: bad_shape(self.node, why))
        self.infer_shapes([a.shape for a in inputs])  # one on/off value each
        if indices.dtype == np.uint64:  # beyond int64 is beyond depth anyway
            indices = np.minimum(indices, np.uint64(depth))
        hot = indices.astype(np.int64)[..., np.newaxis] == np.arange(depth)
        out = np.where(hot, on.reshape(()), off.reshape(()))
        return [np.moveaxis(out, -1, self.axis)]
