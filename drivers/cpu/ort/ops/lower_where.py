"""Where and Select.

Three inputs: ONNX Where (numpy broadcasting, as ours; both fail a run whose shapes do not
broadcast); Select's 1-D condition over the first dimension gets trailing size-1
dimensions first, as the kernel reshapes it. onnxruntime's Where lacks bool, int16 and uint16
values: they are chosen as uint8 / int32 / uint32 and cast back (exact); uint64 values stay
on numpy.

One input (coordinates of the true elements): ONNX NonZero ([rank, N], row-major order as
numpy.argwhere) transposed, cast to an INT32 output. A rank-0 condition stays on numpy.
"""

from __future__ import annotations

import numpy as np

from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.reference.kernel import Kernel
from ..lowering import NodeEmitter, NotLowerable, lowers, onnx_dtype

CHOSEN = frozenset(np.dtype(t) for t in (np.int8, np.int32, np.int64, np.uint8, np.uint32,
                                         np.float32, np.float64))
WIDENED = {np.dtype(np.bool_): np.dtype(np.uint8), np.dtype(np.int16): np.dtype(np.int32),
           np.dtype(np.uint16): np.dtype(np.uint32)}


@lowers(na.NODE_TYPE_WHERE, na.NODE_TYPE_SELECT)
def where(k: Kernel, e: NodeEmitter) -> None:
    cond = e.input(0)
    if k.coordinates:
        if not e.spec(0).shape:
            raise NotLowerable("coordinates of a rank-0 condition")
        coords = e.op("Transpose", [e.op("NonZero", [cond])], perm=[1, 0])
        dtype = e.node.outputs[0].dtype
        if dtype == np.int64:
            e.op("Identity", [coords], out=e.output())
        else:
            e.op("Cast", [coords], out=e.output(), to=onnx_dtype(dtype))
        return
    dtype = e.node.outputs[0].dtype
    wide = WIDENED.get(dtype)
    e.require_dtypes(CHOSEN | set(WIDENED), *e.node.inputs[1:], *e.node.outputs)
    if k.by_rows:
        cond = e.op("Unsqueeze", [cond, e.int64s(range(1, 1 + len(k.pad)), "axes")])
    values = [e.input(1), e.input(2)]
    if wide is None:
        e.op("Where", [cond, *values], out=e.output())
        return
    values = [e.op("Cast", [v], to=onnx_dtype(wide)) for v in values]
    e.op("Cast", [e.op("Where", [cond, *values])], out=e.output(), to=onnx_dtype(dtype))
