"""MaxPoolFusion and AvgPoolFusion on the GPU: 2-D max / average pooling, float32, NHWC or
NCHW (the reference's `nchw`), with the node's fused activation and the plan's epilogue.

The window geometry is the reference's (`hdi/reference/ops/op_pool.py`): kernelSize,
strides, padMode PAD / SAME / VALID, roundMode FLOOR / CEIL (`_common.window_axis`),
global pooling. Padding is never read: max pooling ignores it, average pooling divides
each window's sum by its count of real cells (count-include-pad is false), also for the
CEIL windows running past the input.

Computation (cl/pool.cl):

* A window covering the whole plane (global pooling, or one output cell whose window holds
  every input cell: the MobileNet head written as a kernel of the input's size) is one
  work-group reduction per (image, channel tile): `pool_plane`, lanes striding over the
  H*W cells, a tree reduction in local memory. NHWC reads 16 adjacent channels per row of
  lanes; NCHW gives the 256 lanes of a group to one channel's contiguous plane.
* Other windows: `pool_window`, one work-item per output element looping over its
  window's real cells (windows are small).

Refused: dtypes other than float32 and float16 (max pooling of integers included).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from nnrt.hdi.reference.kernel import Kernel
from nnrt.hdi.reference.ops._common import to_nhwc, window_axis
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import NodeSpec

from ..kernel import (
    WORK_GROUP,
    Builder,
    DeviceTensor,
    Epilogue,
    GpuOp,
    Launch,
    register,
    require_dtypes,
)


@register(na.NODE_TYPE_MAX_POOL_FUSION, na.NODE_TYPE_AVGPOOL_FUSION)
class Pool(GpuOp):
    accepts_epilogue = True

    def __init__(self, node: NodeSpec, ref: Kernel) -> None:
        super().__init__(node, ref)
        require_dtypes(node)
        self.is_max = node.node_type == na.NODE_TYPE_MAX_POOL_FUSION
        self.nchw = bool(ref.nchw)
        self.act = int(ref.activation)

    def build(self, b: Builder, inputs: Sequence[DeviceTensor | None],
              outputs: Sequence[DeviceTensor], post: Epilogue) -> list[Launch]:
        (x,), (out,) = inputs, outputs
        if out.size == 0:
            return []
        ref = self.ref
        n, h, w, c = to_nhwc(x.shape, self.nchw)
        program = b.program("pool")
        flags = [np.int32(self.nchw), np.int32(self.is_max), np.int32(self.act)]
        if not ref.global_:
            ax_h, ax_w = (window_axis(self.node, size, ref.kernel[d], ref.strides[d], 1,
                                      ref.pad_mode, ref.pads[d], ref.ceil)
                          for d, size in ((0, h), (1, w)))
            whole = all(ax.out == 1 and k - ax.pad_before >= size
                        for ax, k, size in ((ax_h, ref.kernel[0], h), (ax_w, ref.kernel[1], w)))
            if not whole:
                geo = [n, h, w, c, ax_h.out, ax_w.out, *ref.kernel, *ref.strides,
                       ax_h.pad_before, ax_w.pad_before]
                args = [x.buffer, out.buffer, np.int32(out.size), b.ints(geo, "pool geometry"),
                        *flags, *post.args(b.dummy)]
                return [b.launch(program, "pool_window", args, [out.size], [WORK_GROUP],
                                 label="pool_window")]
        local = (1, 256, 1) if self.nchw else (16, 16, 1)
        args = [x.buffer, out.buffer, np.int32(c), np.int32(h * w), *flags,
                *post.args(b.dummy)]
        return [b.launch(program, "pool_plane", args, [c, local[1], n], local,
                         label="pool_plane")]
