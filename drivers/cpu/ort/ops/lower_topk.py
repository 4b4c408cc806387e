"""TopKFusion as ONNX TopK over an order-preserving key, values gathered from x.

onnxruntime's TopK (largest=1, sorted=1) puts equal values in increasing index order, as
ours does (checked exhaustively on tie-heavy data, -0 and +0 equal, k from 0 to the axis'
size). What it does not share is NaN: ours counts NaN as larger than every number (+inf
included) and onnxruntime's comparisons do not order it. So TopK runs on a key:

* float32: the values cast to float64 (exact), NaN -> +inf and +inf -> 1e300 (above every
  float32 value, below NaN's key): the key orders as ours does, ties unchanged.
* int8 / int16 / uint8 / uint16 / int32: cast to int32; int64 as it is (no NaN).

The values are x gathered at the chosen positions (GatherElements: the exact input values,
NaN and -0 included); indices cast to the declared INT32 / INT64. `sorted` false gives the
same k positions in increasing order: a second TopK (smallest first) over the positions.
A run-time k is read as ONNX reads it (one entry, cast to int64); a k outside [0, size]
fails the run in both engines.

Stay on numpy: float64 (no wider key to tell NaN from +inf), uint32 / uint64 (no TopK
kernel, no exact signed key for uint64), float16.
"""

from __future__ import annotations

import numpy as np

from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.reference.kernel import Kernel
from ..lowering import NodeEmitter, NotLowerable, lowers, onnx_dtype

F32 = np.dtype(np.float32)
INT32_KEY = frozenset(np.dtype(t) for t in (np.int8, np.int16, np.uint8, np.uint16, np.int32))
I64 = np.dtype(np.int64)
DOUBLE = 11  # TensorProto.DOUBLE


def order_key(e: NodeEmitter, x: str, dtype: np.dtype) -> str:
    """A tensor whose descending order (ties by index) is ours over x's values."""
    dtype = np.dtype(dtype)
    if dtype == F32:
        wide = e.op("Cast", [x], to=DOUBLE)
        inf = e.const(np.inf, np.float64, "inf")
        wide = e.op("Where", [e.op("Equal", [wide, inf]), e.const(1e300, np.float64, "big"),
                              wide])
        return e.op("Where", [e.op("IsNaN", [x]), inf, wide])
    if dtype in INT32_KEY:
        return x if dtype == np.int32 else e.op("Cast", [x], to=onnx_dtype(np.int32))
    if dtype == I64:
        return x
    raise NotLowerable(f"{dtype} values (no exact TopK key)")


def emit_top(e: NodeEmitter, x: str, dtype: np.dtype, k: str, axis: int,
             by_index: bool = False) -> tuple[str, str]:
    """(values, int64 indices) of the k largest along `axis`, ties by lower index first;
    by_index: the same entries in increasing position order."""
    key = order_key(e, x, dtype)
    _, idx = e.op("TopK", [key, k], n_out=2, axis=axis, largest=1, sorted=1)
    if by_index:
        idx, _ = e.op("TopK", [idx, k], n_out=2, axis=axis, largest=0, sorted=1)
    return e.op("GatherElements", [x, idx], axis=axis), idx


def cast_to(e: NodeEmitter, x: str, have: np.dtype, want: np.dtype, out: str) -> str:
    if np.dtype(have) == np.dtype(want):
        return e.op("Identity", [x], out=out)
    return e.op("Cast", [x], to=onnx_dtype(want), out=out)


@lowers(na.NODE_TYPE_TOPK_FUSION)
def topk(k: Kernel, e: NodeEmitter) -> None:
    dtype = e.spec(0).dtype
    if k.k is not None:
        count = e.int64s([k.k], "k")
    else:
        count = e.input(1)
        if e.spec(1).dtype != I64:
            count = e.op("Cast", [count], to=onnx_dtype(I64))
        count = e.op("Reshape", [count, e.int64s([1], "shape")])
    values, idx = emit_top(e, e.input(0), dtype, count, k.axis, by_index=not k.sorted)
    e.op("Identity", [values], out=e.output(0))
    cast_to(e, idx, I64, e.node.outputs[1].dtype, e.output(1))
