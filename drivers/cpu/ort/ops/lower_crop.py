"""Crop as ONNX Slice from the kernel's offsets and the window sizes: constant sizes, or a
reference tensor's declared shape, on cropped dimensions that are static — ONNX Slice would
clamp a window that our kernel refuses, so every bound must have been checked at prepare."""

from __future__ import annotations

from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import DYNAMIC
from nnrt.hdi.reference.kernel import Kernel
from ..lowering import NodeEmitter, NotLowerable, lowers
from .lower_reshape import require_moved
from .lower_slice import emit_slice


@lowers(na.NODE_TYPE_CROP)
def crop(k: Kernel, e: NodeEmitter) -> None:
    require_moved(e)
    x_shape = e.spec(0).shape
    sizes = e.spec(1).shape if k.reference else k.size
    if sizes is None:
        raise NotLowerable("run-time window sizes")
    cuts = []
    for axis, (dim, start, size) in enumerate(zip(x_shape, k.starts, sizes)):
        if size is None and start == 0:
            continue  # kept whole
        if DYNAMIC in (dim, size if size is not None else dim):
            raise NotLowerable("a cropped DYNAMIC dimension (its window is checked only at run)")
        size = dim if size is None else size
        if (start, size) != (0, dim):
            cuts.append((axis, start, start + size, 1))
    emit_slice(e, e.input(0), cuts, out=e.output())
