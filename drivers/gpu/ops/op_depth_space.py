"""DepthToSpace (DCR and CRD) and SpaceToDepth, NHWC or NCHW, any dtype: one strided copy
(program `movement`) over the six-dimensional view the reference rearranges
(hdi/reference/ops/op_depth_space.py), bit-exact. Strides are taken in the (n, h, w, c) order
whatever the layout, so NCHW is the same copy with other strides.

Refused: element sizes other than 1, 2, 4, 8 bytes; tensors of 2**31 elements or more.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..kernel import Builder, DeviceTensor, Epilogue, GpuOp, Launch, register
from .op_transpose import check_indexable, contiguous_strides, require_movable, strided_copy
from nnrt.hdi.reference.kernel import Kernel
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import NodeSpec


def nhwc_view(t: DeviceTensor, nchw: bool) -> tuple[list[int], list[int]]:
    """(sizes, element strides) of `t` in the order n, h, w, c."""
    strides = contiguous_strides(t.shape)
    order = (0, 2, 3, 1) if nchw else (0, 1, 2, 3)
    return [int(t.shape[a]) for a in order], [strides[a] for a in order]


@register(na.NODE_TYPE_DEPTH_TO_SPACE, na.NODE_TYPE_SPACE_TO_DEPTH)
class DepthSpace(GpuOp):
    def __init__(self, node: NodeSpec, ref: Kernel) -> None:
        super().__init__(node, ref)
        require_movable(node)
        self.to_space = node.node_type == na.NODE_TYPE_DEPTH_TO_SPACE
        self.crd = bool(getattr(ref, "crd", False))
        self.block: int = ref.block
        self.nchw: bool = ref.nchw

    def build(self, b: Builder, inputs: Sequence[DeviceTensor | None],
              outputs: Sequence[DeviceTensor], post: Epilogue) -> list[Launch]:
        x, (out,) = inputs[0], outputs
        check_indexable(self.node, x, out)
        (n, h, w, c), (xn, xh, xw, xc) = nhwc_view(x, self.nchw)
        _, (on, oh, ow, oc) = nhwc_view(out, self.nchw)
        k = self.block
        if self.to_space:  # out[n, h*k + i, w*k + j, c'] = x[n, h, w, channel(i, j, c')]
            depth = c // (k * k)
            ci, cj, cc = (k, 1, k * k) if self.crd else (k * depth, depth, 1)
            dims = [n, h, k, w, k, depth]
            src = [xn, xh, ci * xc, xw, cj * xc, cc * xc]
            dst = [on, k * oh, oh, k * ow, ow, oc]
        else:  # out[n, h', w', (i*k + j)*c + ch] = x[n, h'*k + i, w'*k + j, ch]
            dims = [n, h // k, w // k, k, k, c]
            src = [xn, k * xh, k * xw, xh, xw, xc]
            dst = [on, oh, ow, k * c * oc, c * oc, oc]
        return strided_copy(b, x, out, dims, src, dst,
                            label="depth_to_space" if self.to_space else "space_to_depth")
