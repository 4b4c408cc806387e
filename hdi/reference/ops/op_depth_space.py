"""DepthToSpace and SpaceToDepth: channels moved into blockSize x blockSize spatial blocks
and back (TensorFlow / ONNX semantics), on NHWC (semantics.md) or NCHW-tagged inputs.

With b = blockSize and NHWC tensors:

* DepthToSpace, mode "DCR" (depth-column-row, TensorFlow's and ONNX's default):
  out[n, h*b + i, w*b + j, c] = x[n, h, w, (i*b + j) * C/b² + c];
* DepthToSpace, mode "CRD" (column-row-depth, ONNX):
  out[n, h*b + i, w*b + j, c] = x[n, h, w, c * b² + i*b + j];
* SpaceToDepth (the inverse of DCR):
  out[n, h, w, (i*b + j) * C + c] = x[n, h*b + i, w*b + j, c].

NCHW tensors use the same element order with the channel dimension second (as ONNX).

Decisions where the spec is silent: the `format` attribute states the input's real layout
and must agree with a tagged input (semantics.md; an untagged input follows the attribute).
blockSize must be >= 2 (TensorFlow; hdi_ops.json for SpaceToDepth). An empty mode string,
what the upstream client sends when the mode is omitted, is "DCR" (the header's default);
any other mode is invalid. Channels (DepthToSpace) or height and width (SpaceToDepth) that
the block does not divide are invalid (NNRT_INVALID_SHAPE when only the run shows it).

Data movement only: any dtype, quantisation kept.
"""

from __future__ import annotations

import numpy as np

from nnrt.hdi.reference.kernel import invalid, register
from nnrt.hdi.reference.ops._common import check_declared_shapes
from nnrt.hdi.reference.ops._rearrange import Rearrange4D
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import DYNAMIC, NodeSpec, Shape


class _Block(Rearrange4D):
    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node, int(node.attrs.format))
        self.block = int(node.attrs.blockSize)
        if self.block < 2:
            raise invalid(node, f"blockSize {self.block} is not >= 2")


@register(na.NODE_TYPE_DEPTH_TO_SPACE)
class DepthToSpace(_Block):
    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        mode = node.attrs.mode or "DCR"
        if mode not in ("DCR", "CRD"):
            raise invalid(node, f"mode {node.attrs.mode!r} is not 'DCR' or 'CRD'")
        self.crd = mode == "CRD"
        check_declared_shapes(self)

    def nhwc_shape(self, x: Shape) -> Shape:
        n, h, w, c = x
        b = self.block
        c_out = self.divide(c, b * b, "channel count")
        grow = lambda d: DYNAMIC if d == DYNAMIC else d * b  # noqa: E731
        return n, grow(h), grow(w), c_out

    def nhwc(self, x: np.ndarray) -> np.ndarray:
        n, h, w, c = x.shape
        b = self.block
        # Split the channel index into (i, j, c') for DCR and (c', i, j) for CRD, then move
        # i next to h and j next to w.
        if self.crd:
            blocks = x.reshape(n, h, w, c // (b * b), b, b).transpose(0, 1, 4, 2, 5, 3)
        else:
            blocks = x.reshape(n, h, w, b, b, c // (b * b)).transpose(0, 1, 3, 2, 4, 5)
        return blocks.reshape(n, h * b, w * b, c // (b * b))


@register(na.NODE_TYPE_SPACE_TO_DEPTH)
class SpaceToDepth(_Block):
    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        check_declared_shapes(self)

    def nhwc_shape(self, x: Shape) -> Shape:
        n, h, w, c = x
        b = self.block
        c_out = DYNAMIC if c == DYNAMIC else c * b * b
        return n, self.divide(h, b, "height"), self.divide(w, b, "width"), c_out

    def nhwc(self, x: np.ndarray) -> np.ndarray:
        n, h, w, c = x.shape
        b = self.block
        blocks = x.reshape(n, h // b, b, w // b, b, c).transpose(0, 1, 3, 2, 4, 5)
        return blocks.reshape(n, h // b, w // b, b * b * c)
