"""DepthToSpace and SpaceToDepth as Reshape, Transpose, Reshape in the input's own layout
(NHWC or NCHW), so any dtype moves (onnxruntime's DepthToSpace / SpaceToDepth take few).

The element orders, b the block and C' = C / b²:

* NHWC DCR: [N, H, W, b, b, C'] permuted (0, 1, 3, 2, 4, 5);
  NHWC CRD: [N, H, W, C', b, b] permuted (0, 1, 4, 2, 5, 3);
  NHWC SpaceToDepth: [N, H/b, b, W/b, b, C] permuted (0, 1, 3, 2, 4, 5);
* NCHW DCR: [N, b, b, C', H, W] permuted (0, 3, 4, 1, 5, 2) (ONNX's definition);
  NCHW CRD: [N, C', b, b, H, W] permuted (0, 1, 4, 2, 5, 3);
  NCHW SpaceToDepth: [N, C, H/b, b, W/b, b] permuted (0, 3, 5, 1, 2, 4).

The batch may be DYNAMIC (a Reshape 0 copies it); height, width and channels must be
static and non-zero (their divisibility was checked at prepare).
"""

from __future__ import annotations

from collections.abc import Sequence

from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import DYNAMIC
from nnrt.hdi.reference.kernel import Kernel
from ..lowering import NodeEmitter, NotLowerable, lowers
from .lower_reshape import require_moved


def _rearrange(e: NodeEmitter, blocks: Sequence[int], perm: Sequence[int],
               out: Sequence[int]) -> None:
    """x reshaped to [N, *blocks], permuted, reshaped to [N, *out] (N copied)."""
    x = e.op("Reshape", [e.input(0), e.int64s([0, *blocks], "shape")])
    y = e.op("Transpose", [x], perm=list(perm))
    e.op("Reshape", [y, e.int64s([0, *out], "shape")], out=e.output())


def _dims(k: Kernel, e: NodeEmitter) -> tuple[int, int, int]:
    require_moved(e)
    shape = e.spec(0).shape
    rest = shape[1:]
    if DYNAMIC in rest or 0 in rest:
        raise NotLowerable(f"input shape {list(shape)} (height, width, channels must be "
                           f"static and non-zero)")
    if k.nchw:
        c, h, w = rest
    else:
        h, w, c = rest
    return h, w, c


@lowers(na.NODE_TYPE_DEPTH_TO_SPACE)
def depth_to_space(k: Kernel, e: NodeEmitter) -> None:
    h, w, c = _dims(k, e)
    b = k.block
    cc = c // (b * b)
    if k.nchw:
        if k.crd:
            _rearrange(e, [cc, b, b, h, w], (0, 1, 4, 2, 5, 3), [cc, h * b, w * b])
        else:
            _rearrange(e, [b, b, cc, h, w], (0, 3, 4, 1, 5, 2), [cc, h * b, w * b])
    elif k.crd:
        _rearrange(e, [h, w, cc, b, b], (0, 1, 4, 2, 5, 3), [h * b, w * b, cc])
    else:
        _rearrange(e, [h, w, b, b, cc], (0, 1, 3, 2, 4, 5), [h * b, w * b, cc])


@lowers(na.NODE_TYPE_SPACE_TO_DEPTH)
def space_to_depth(k: Kernel, e: NodeEmitter) -> None:
    h, w, c = _dims(k, e)
    b = k.block
    if k.nchw:
        _rearrange(e, [c, h // b, b, w // b, b], (0, 3, 5, 1, 2, 4), [c * b * b, h // b, w // b])
    else:
        _rearrange(e, [h // b, b, w // b, b, c], (0, 1, 3, 2, 4, 5), [h // b, w // b, b * b * c])
