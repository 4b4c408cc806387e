"""Resize as the numpy kernel computes it, axis by axis (H then W) from the same taps
(`Resize._taps`: indices and weights fixed by the static input and output sizes): NEAREST
is two Gathers (any dtype moves); LINEAR and CUBIC gather each tap, multiply by its weight
and add the taps in the kernel's order, in its work dtype (float32 for float32, float64
otherwise), integers then rounded half to even (ONNX Round) and clipped to their range.

ONNX Resize is not used: its scale is out/in where ours divides in by out, which moves
nearest-neighbour picks that fall on a boundary. The spatial dimensions must be static
(the taps depend on them); INT64/UINT64 interpolation stays on numpy (their range ends are
not float64 values).
"""

from __future__ import annotations

import numpy as np

from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import DYNAMIC
from nnrt.hdi.reference.kernel import Kernel
from ..lowering import NodeEmitter, NotLowerable, lowers, onnx_dtype
from .lower_reshape import require_moved


@lowers(na.NODE_TYPE_RESIZE)
def resize(k: Kernel, e: NodeEmitter) -> None:
    require_moved(e)
    shape = e.spec(0).shape
    h, w = (shape[a] for a in k.axes)
    if DYNAMIC in (h, w) or 0 in (h, w):
        raise NotLowerable("a DYNAMIC or empty image size")
    nearest = k.method == ht.RESIZE_METHOD_NEAREST
    dtype, work = np.dtype(k.dtype), np.dtype(k.work)
    if not nearest and dtype.kind in "iu" and dtype.itemsize > 4:
        raise NotLowerable(f"interpolating {dtype} values")
    y = e.input(0)
    if not nearest and work != dtype:
        y = e.op("Cast", [y], to=onnx_dtype(work))
    for axis, size_in, size_out in zip(k.axes, (h, w), k._out_size(h, w)):
        idx, weights = k._taps(size_in, size_out)
        if weights is None:
            y = e.op("Gather", [y, e.const(idx[0], np.int64, "idx")], axis=axis)
            continue
        wshape = [1] * 4
        wshape[axis] = size_out
        acc = None
        for tap in range(idx.shape[0]):
            term = e.op("Mul", [e.op("Gather", [y, e.const(idx[tap], np.int64, "idx")],
                                     axis=axis),
                                e.const(weights[tap].astype(work).reshape(wshape), work, "w")])
            acc = term if acc is None else e.op("Add", [acc, term])
        y = acc
    if nearest or dtype == work:
        e.op("Identity", [y], out=e.output())
    elif dtype.kind == "f":
        e.op("Cast", [y], out=e.output(), to=onnx_dtype(dtype))
    else:
        info = np.iinfo(dtype)
        y = e.op("Clip", [e.op("Round", [y]), e.const(info.min, work), e.const(info.max, work)])
        e.op("Cast", [y], out=e.output(), to=onnx_dtype(dtype))
