"""BatchToSpaceND and SpaceToBatchND on 4-D NHWC tensors (TensorFlow semantics with two
spatial dimensions; NCHW-tagged inputs are computed in the same element order with the
channel dimension second).

With block [bh, bw] and N the batch of the smaller-batch side:

* SpaceToBatchND: x is padded by paddings [[top, bottom], [left, right]] with zeros (the
  zero point for a quantised x); then
  out[(i*bw + j)*N + n, h, w, c] = padded[n, h*bh + i, w*bw + j, c];
  the padded height and width must be multiples of bh and bw.
* BatchToSpaceND, its inverse, followed by the crop [[top, bottom], [left, right]]:
  full[n, h*bh + i, w*bw + j, c] = x[(i*bw + j)*N + n, h, w, c], N = x's batch / (bh*bw)
  (which must divide it); the output is full[:, top:H*bh-bottom, left:W*bw-right, :].

Decisions where the spec is silent: block sizes must be >= 1 (capi_ops.json; hdi_ops.json's
"> 1" would refuse a 1 that is merely the identity on that axis); blockShape must hold two
values; an empty crops / paddings attribute (what the client sends when the parameter is
omitted) means no crop / padding; amounts must be >= 0 and crops must leave sizes >= 0.
Shapes that do not divide are invalid (NNRT_INVALID_SHAPE when only the run shows it).

Data movement only: any dtype, quantisation kept.
"""

from __future__ import annotations

import numpy as np

from nnrt.hdi.reference.kernel import invalid, register, unsupported
from nnrt.hdi.reference.ops._common import bad_shape, check_declared_shapes
from nnrt.hdi.reference.ops._rearrange import Rearrange4D
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import DYNAMIC, NodeSpec, Shape


class _BatchSpace(Rearrange4D):
    amounts_attr = ""  # "crops" or "paddings"

    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        block = [int(b) for b in node.attrs.blockShape]
        if len(block) != 2 or min(block) < 1:
            raise invalid(node, f"blockShape {block} must be two sizes >= 1")
        self.bh, self.bw = block
        rows = [list(r.values) for r in getattr(node.attrs, self.amounts_attr)]
        if not rows:
            rows = [[0, 0], [0, 0]]
        if len(rows) != 2 or any(len(r) != 2 for r in rows) or min(min(r) for r in rows) < 0:
            raise invalid(node, f"{self.amounts_attr} {rows} must be [[top, bottom], "
                                f"[left, right]] of amounts >= 0")
        (self.top, self.bottom), (self.left, self.right) = rows


@register(na.NODE_TYPE_BATCH_TO_SPACE_ND)
class BatchToSpaceND(_BatchSpace):
    amounts_attr = "crops"

    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        check_declared_shapes(self)

    def nhwc_shape(self, x: Shape) -> Shape:
        n, h, w, c = x
        out = [self.divide(n, self.bh * self.bw, "batch")]
        for size, block, crop in ((h, self.bh, self.top + self.bottom),
                                  (w, self.bw, self.left + self.right)):
            if size == DYNAMIC:
                out.append(DYNAMIC)
            elif size * block < crop:
                raise bad_shape(self.node, f"crops of {crop} exceed the enlarged size "
                                           f"{size * block}")
            else:
                out.append(size * block - crop)
        return out[0], out[1], out[2], c

    def nhwc(self, x: np.ndarray) -> np.ndarray:
        n, h, w, c = x.shape
        bh, bw = self.bh, self.bw
        batch = n // (bh * bw)
        full = x.reshape(bh, bw, batch, h, w, c).transpose(2, 3, 0, 4, 1, 5)
        full = full.reshape(batch, h * bh, w * bw, c)
        return full[:, self.top:h * bh - self.bottom, self.left:w * bw - self.right, :]


@register(na.NODE_TYPE_SPACE_TO_BATCH_ND)
class SpaceToBatchND(_BatchSpace):
    amounts_attr = "paddings"

    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        quant = node.inputs[0].quant_params
        if len(quant) > 1:
            raise unsupported(node, "per-channel quantised input")
        self.zero = quant[0].zero_point if quant else 0
        check_declared_shapes(self)

    def nhwc_shape(self, x: Shape) -> Shape:
        n, h, w, c = x
        grow = (lambda size, by: DYNAMIC if DYNAMIC in (size, by) else size * by)
        out_h = self.divide(DYNAMIC if h == DYNAMIC else h + self.top + self.bottom, self.bh,
                             "padded height")
        out_w = self.divide(DYNAMIC if w == DYNAMIC else w + self.left + self.right, self.bw,
                             "padded width")
        return grow(n, self.bh * self.bw), out_h, out_w, c

    def nhwc(self, x: np.ndarray) -> np.ndarray:
        bh, bw = self.bh, self.bw
        if self.top or self.bottom or self.left or self.right:
            x = np.pad(x, ((0, 0), (self.top, self.bottom), (self.left, self.right), (0, 0)),
                       constant_values=x.dtype.type(self.zero))
        n, h, w, c = x.shape
        blocks = x.reshape(n, h // bh, bh, w // bw, bw, c).transpose(2, 4, 0, 1, 3, 5)
        return blocks.reshape(bh * bw * n, h // bh, w // bw, c)
