"""SliceFusion and StridedSlice as ONNX Slice (then Squeeze / Unsqueeze for StridedSlice's
shrunk and new axes), from the constant begin/size/end/strides the kernel resolved.

ONNX Slice clamps a window that leaves the dimension where our kernels fail the run, so a
sliced dimension must be static (its bounds were checked at prepare); a DYNAMIC dimension
is lowered only where it is kept whole (StridedSlice: covered by the ellipsis, or both
masks set with stride 1). Run-time begin/size/end/strides stay on numpy.
"""

from __future__ import annotations

from collections.abc import Sequence

from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import DYNAMIC
from nnrt.hdi.reference.kernel import Kernel
from ..lowering import NodeEmitter, NotLowerable, lowers
from .lower_reshape import require_moved

BEFORE_FIRST = -(2 ** 62)  # an ONNX end that clamps to "before the first element"


def emit_slice(e: NodeEmitter, x: str, cuts: Sequence[tuple[int, int, int, int]],
               out: str | None = None) -> str:
    """x sliced by (axis, start, end, step) cuts; x itself (or an Identity to `out`)
    when there are none."""
    if not cuts:
        return x if out is None else e.op("Identity", [x], out=out)
    axes, starts, ends, steps = zip(*cuts)
    return e.op("Slice", [x, e.int64s(starts, "starts"), e.int64s(ends, "ends"),
                          e.int64s(axes, "axes"), e.int64s(steps, "steps")], out=out)


@lowers(na.NODE_TYPE_SLICE_FUSION)
def slice_fusion(k: Kernel, e: NodeEmitter) -> None:
    require_moved(e)
    if k.begin is None or k.size is None:
        raise NotLowerable("run-time begin or size")
    x_shape = e.spec(0).shape
    if any(x_shape[a] == DYNAMIC for a in k.axes):
        raise NotLowerable("a sliced DYNAMIC dimension (its bounds are checked only at run)")
    bounds = k.bounds(x_shape, k.begin, k.size)
    cuts = [(a, bounds[a][0], bounds[a][0] + bounds[a][1], 1) for a in k.axes
            if bounds[a] != (0, x_shape[a])]
    emit_slice(e, e.input(0), cuts, out=e.output())


@lowers(na.NODE_TYPE_STRIDED_SLICE)
def strided_slice(k: Kernel, e: NodeEmitter) -> None:
    require_moved(e)
    if None in k.values:
        raise NotLowerable("run-time begin, end or strides")
    x_shape = e.spec(0).shape
    strides = k.values[2]
    for dim, d in zip(x_shape, k.dims):
        if dim == DYNAMIC and d.entry is not None and not (
                not d.shrink and d.begin_masked and d.end_masked and strides[d.entry] == 1):
            raise NotLowerable("a sliced DYNAMIC dimension (its bounds are checked only at run)")
    slices = k._slices(x_shape, k.values)
    cuts, shrunk = [], []
    for axis, (dim, s) in enumerate(zip(x_shape, slices)):
        if isinstance(s, int):  # a shrunk dimension: its one element, then squeezed
            cuts.append((axis, s, s + 1, 1))
            shrunk.append(axis)
            continue
        start, count, step = s
        if dim == DYNAMIC or (start, count, step) == (0, dim, 1):
            continue
        if count == 0:
            cuts.append((axis, 0, 0, 1))
            continue
        end = start + step * count
        cuts.append((axis, start, end if end >= 0 else BEFORE_FIRST, step))
    new_axes = [i for i, f in enumerate(k.final) if f < 0]
    y = emit_slice(e, e.input(0), cuts, out=None if shrunk or new_axes else e.output())
    if shrunk:
        y = e.op("Squeeze", [y, e.int64s(shrunk, "axes")], out=None if new_axes else e.output())
    if new_axes:
        e.op("Unsqueeze", [y, e.int64s(new_axes, "axes")], out=e.output())
