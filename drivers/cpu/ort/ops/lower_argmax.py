"""ArgMaxFusion through the TopK lowering's exact order (lower_topk.emit_top): the topK
largest along the axis, largest first, ties by lower index, NaN above every number — what
ours computes for topK 1 (np.argmax's first maximum) and for topK > 1.

Output 0: the indices cast to INT32 / INT64, or with outMaxValue the values; a second
output the values. Without keepDims (and topK 1) the axis is squeezed. ONNX's ArgMax is
not used: it has no NaN order of ours.

A topK beyond a DYNAMIC axis' size fails the run in both engines.

Stay on numpy: what lower_topk keeps there (float64, uint32, uint64 inputs, float16).
"""

from __future__ import annotations

from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.reference.kernel import Kernel
from ..lowering import NodeEmitter, lowers
from .lower_topk import I64, cast_to, emit_top


@lowers(na.NODE_TYPE_ARGMAX_FUSION)
def argmax(k: Kernel, e: NodeEmitter) -> None:
    x_spec = e.spec(0)
    values, idx = emit_top(e, e.input(0), x_spec.dtype, e.int64s([k.k], "k"), k.axis)
    if not k.keep:
        axes = e.int64s([k.axis], "axes")
        values = e.op("Squeeze", [values, axes])
        idx = e.op("Squeeze", [idx, axes])
    if k.values_out:
        e.op("Identity", [values], out=e.output(0))
    else:
        cast_to(e, idx, I64, e.node.outputs[0].dtype, e.output(0))
    if len(e.node.outputs) == 2:
        e.op("Identity", [values], out=e.output(1))

