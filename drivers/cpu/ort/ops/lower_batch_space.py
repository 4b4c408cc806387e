"""BatchToSpaceND and SpaceToBatchND as Reshape, Transpose, Reshape (and Slice for the
crops, Pad for the paddings) in NHWC; an NCHW-tagged input is transposed to NHWC and its
result back (the kernel computes the same element order).

With block [bh, bw] (op_batch_space.py):

* BatchToSpaceND: x [bh·bw·N, h, w, c] reshaped [bh, bw, N, h, w, c], permuted
  (2, 3, 0, 4, 1, 5), reshaped [N, h·bh, w·bw, c], cropped [top, h·bh - bottom) x
  [left, w·bw - right).
* SpaceToBatchND: x padded with zeros (the zero point of a quantised x), [n, H, W, c]
  reshaped [n, H/bh, bh, W/bw, bw, c], permuted (2, 4, 0, 1, 3, 5), reshaped
  [bh·bw·n, H/bh, W/bw, c].

The batch may be DYNAMIC (its output size computed from the run's shape, a division by
the constant bh·bw that the kernel has checked divides it, 0 included); height, width and
channels must be static. Any moved dtype; with paddings not int16 / uint16 (onnxruntime's
Pad lacks them).
"""

from __future__ import annotations

from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import DYNAMIC
from nnrt.hdi.reference.kernel import Kernel
from ..lowering import NodeEmitter, NotLowerable, lowers
from .lower_pad import PADDED
from .lower_reshape import require_moved

TO_NHWC, TO_NCHW = (0, 2, 3, 1), (0, 3, 1, 2)


def _nhwc_input(k: Kernel, e: NodeEmitter) -> tuple[str, int, int, int, int]:
    require_moved(e)
    shape = e.spec(0).shape
    n, h, w, c = (shape[0], shape[2], shape[3], shape[1]) if k.nchw else shape
    if DYNAMIC in (h, w, c):
        raise NotLowerable("a DYNAMIC height, width or channel dimension")
    return e.input(0, TO_NHWC if k.nchw else None), n, h, w, c


def _shape(e: NodeEmitter, x: str, n: int, batch_op: str, factor: int,
           before: list[int], after: list[int]) -> str:
    """The shape [*before, batch, *after], batch = x's batch (op) factor."""
    if n != DYNAMIC:
        batch = n * factor if batch_op == "Mul" else n // factor
        return e.int64s([*before, batch, *after], "shape")
    dim = e.op(batch_op, [e.op("Shape", [x], start=0, end=1), e.int64s([factor], "factor")])
    parts = ([e.int64s(before, "before")] if before else []) + [dim] + \
        ([e.int64s(after, "after")] if after else [])
    return e.op("Concat", parts, axis=0)


def _finish(k: Kernel, e: NodeEmitter, y: str) -> None:
    if k.nchw:
        e.op("Transpose", [y], perm=list(TO_NCHW), out=e.output())
    else:
        e.op("Identity", [y], out=e.output())


@lowers(na.NODE_TYPE_BATCH_TO_SPACE_ND)
def batch_to_space(k: Kernel, e: NodeEmitter) -> None:
    x, n, h, w, c = _nhwc_input(k, e)
    bh, bw = k.bh, k.bw
    y = e.op("Reshape", [x, _shape(e, x, n, "Div", bh * bw, [bh, bw], [h, w, c])],
             allowzero=1)
    y = e.op("Transpose", [y], perm=[2, 3, 0, 4, 1, 5])
    y = e.op("Reshape", [y, _shape(e, x, n, "Div", bh * bw, [], [h * bh, w * bw, c])],
             allowzero=1)
    if k.top or k.bottom or k.left or k.right:
        y = e.op("Slice", [y, e.int64s([k.top, k.left], "starts"),
                           e.int64s([h * bh - k.bottom, w * bw - k.right], "ends"),
                           e.int64s([1, 2], "axes")])
    _finish(k, e, y)


@lowers(na.NODE_TYPE_SPACE_TO_BATCH_ND)
def space_to_batch(k: Kernel, e: NodeEmitter) -> None:
    x, n, h, w, c = _nhwc_input(k, e)
    bh, bw = k.bh, k.bw
    if k.top or k.bottom or k.left or k.right:
        e.require_dtypes(PADDED, e.spec(0))
        pads = e.int64s([0, k.top, k.left, 0, 0, k.bottom, k.right, 0], "pads")
        x = e.op("Pad", [x, pads, e.const(k.zero, e.spec(0).dtype, "zero")])
        h, w = h + k.top + k.bottom, w + k.left + k.right
    y = e.op("Reshape", [x, _shape(e, x, n, "Mul", 1, [], [h // bh, bh, w // bw, bw, c])],
             allowzero=1)
    y = e.op("Transpose", [y], perm=[2, 4, 0, 1, 3, 5])
    y = e.op("Reshape", [y, _shape(e, x, n, "Mul", bh * bw, [], [h // bh, w // bw, c])],
             allowzero=1)
    _finish(k, e, y)
