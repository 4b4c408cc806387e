"""Gather and GatherNd as ONNX Gather / GatherND (batch_dims 0): the same reading of
negative indices (counting from the end of their dimension).

Out-of-range indices: constant ones were refused at prepare wherever the dimension is
static; constant indices into a DYNAMIC dimension stay on numpy (onnxruntime's optimiser
may turn a Gather of constant indices into a Slice, which would clamp). Run-time indices
are lowered: onnxruntime's Gather and GatherND check every index and fail the run with an
error, as our kernels fail it. GatherND takes INT64 indices only: INT32 ones are cast
(exact). A GatherNd whose rows address no dimension (depth 0) stays on numpy.
"""

from __future__ import annotations

import numpy as np

from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import DYNAMIC
from nnrt.hdi.reference.kernel import Kernel
from ..lowering import NodeEmitter, NotLowerable, lowers
from .lower_reshape import require_moved


@lowers(na.NODE_TYPE_GATHER)
def gather(k: Kernel, e: NodeEmitter) -> None:
    require_moved(e)
    if e.spec(1).is_constant and e.spec(0).shape[k.axis] == DYNAMIC:
        raise NotLowerable("constant indices into a DYNAMIC dimension (checked only at run)")
    e.op("Gather", [e.input(0), e.input(1)], out=e.output(), axis=k.axis)


@lowers(na.NODE_TYPE_GATHER_ND)
def gather_nd(k: Kernel, e: NodeEmitter) -> None:
    require_moved(e)
    if k.depth == 0:
        raise NotLowerable("index rows of length 0")
    indices = e.spec(1)
    if indices.is_constant and DYNAMIC in e.spec(0).shape[:k.depth]:
        raise NotLowerable("constant indices into a DYNAMIC dimension (checked only at run)")
    if indices.is_constant:
        i = e.const(indices.constant.astype(np.int64), np.int64, "indices")
    else:
        i = e.input(1)
        if indices.dtype != np.int64:
            i = e.op("Cast", [i], to=7)  # TensorProto.INT64
    e.op("GatherND", [e.input(0), i], out=e.output())
