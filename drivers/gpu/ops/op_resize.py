"""Resize of a 4-D x (NHWC, or NCHW when the reference's `nchw` says so) to the
reference's output size (newHeight/newWidth, preserveAspectRatio), every coordinate
transform (ASYMMETRIC, ALIGN_CORNERS, HALF_PIXEL) and nearest mode the reference has:

* NEAREST, any dtype (values moved as raw 1/2/4/8-byte elements): per output row and
  column the source index, from the reference's own `_taps`;
* LINEAR and CUBIC, float32: per output row and column the reference's 2 / 4 source
  indices and float32 weights (excludeOutside and cubicCoeff applied by it), interpolated
  along H first, then along W, in the reference's order of summation.

The tap tables are computed on the host per specialisation (tiny: taps x output length per
axis); the kernels do one work-item per output element.

Refused: LINEAR / CUBIC on other dtypes than float32 (the reference computes integers in
float64 with rounding); element sizes other than 1, 2, 4, 8 bytes; tensors of 2**31
elements or more.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..kernel import (
    FLOAT32,
    WORK_GROUP,
    Builder,
    DeviceTensor,
    Epilogue,
    GpuOp,
    Launch,
    register,
    require_dtypes,
)
from .op_transpose import check_indexable, contiguous_strides, movement, require_movable
from nnrt.hdi.reference.kernel import Kernel
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import NodeSpec


@register(na.NODE_TYPE_RESIZE)
class Resize(GpuOp):
    def __init__(self, node: NodeSpec, ref: Kernel) -> None:
        super().__init__(node, ref)
        require_movable(node)
        self.nearest = ref.method == ht.RESIZE_METHOD_NEAREST
        if not self.nearest:
            require_dtypes(node, (FLOAT32,))
        self.axes: tuple[int, int] = tuple(ref.axes)

    def build(self, b: Builder, inputs: Sequence[DeviceTensor | None],
              outputs: Sequence[DeviceTensor], post: Epilogue) -> list[Launch]:
        x, (out,) = inputs[0], outputs
        check_indexable(self.node, x, out)
        if out.size == 0:
            return []
        ah, aw = self.axes
        table = b.ints([*out.shape, *contiguous_strides(x.shape), ah, aw], "resize table")
        hidx, hw = self.ref._taps(x.shape[ah], out.shape[ah])
        widx, ww = self.ref._taps(x.shape[aw], out.shape[aw])
        program = movement(b, x.dtype)
        n = np.int32(out.size)
        if self.nearest:
            args = [x.buffer, out.buffer, n, table, b.ints(hidx.ravel().tolist(), "resize rows"),
                    b.ints(widx.ravel().tolist(), "resize columns")]
            return [b.launch(program, "resize_nearest", args, [out.size], [WORK_GROUP])]
        weights = [b.memory.upload(np.ascontiguousarray(w, np.float32).ravel(), what)
                   for w, what in ((hw, "resize row weights"), (ww, "resize column weights"))]
        args = [x.buffer, out.buffer, n, table, b.ints(hidx.ravel().tolist(), "resize rows"),
                weights[0], b.ints(widx.ravel().tolist(), "resize columns"), weights[1],
                np.int32(hidx.shape[0])]
        return [b.launch(program, "resize_interp", args, [out.size], [WORK_GROUP])]
