"""Reshape and Flatten as ONNX Reshape; and what the data-movement lowerings share.

Reshape with a constant shape: on a static input the output shape the kernel resolved is
written out whole (allowzero=1: a 0 is a size, never a copy); on an input with DYNAMIC
dimensions the shape entries go as they are, ONNX reading 0 (copy) and -1 (infer) as we do
— except that onnxruntime counts a copied dimension in the size that -1 divides, so a
copied dimension that may be 0 at run time next to a -1 stays on numpy (onnxruntime would
refuse what we compute). A run-time shape tensor stays on numpy.

Flatten: the static output shape when it is known, ONNX Flatten (the same axis rule) for a
DYNAMIC input of rank >= 1.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import DYNAMIC
from nnrt.hdi.reference.kernel import Kernel
from ..lowering import NodeEmitter, NotLowerable, lowers

# What data movement may carry: every HDI dtype onnxruntime's CPU kernels move, float16
# excepted (float16 models stay on numpy).
MOVED = frozenset(np.dtype(t) for t in (
    np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
    np.uint64, np.float32, np.float64))


def require_moved(e: NodeEmitter, *specs: object) -> None:
    """NotLowerable unless the data tensors (default: input 0 and every output) are MOVED."""
    e.require_dtypes(MOVED, *(specs or (e.spec(0), *e.node.outputs)))


def static_shape(shape: Sequence[int]) -> bool:
    return DYNAMIC not in shape


def reshape_to(e: NodeEmitter, x: str, shape: Sequence[int], out: str | None = None) -> str:
    """x reshaped to the static `shape` (0 a size, not a copy)."""
    return e.op("Reshape", [x, e.int64s(list(shape), "shape")], out=out, allowzero=1)


@lowers(na.NODE_TYPE_RESHAPE)
def reshape(k: Kernel, e: NodeEmitter) -> None:
    require_moved(e)
    if k.target is None:
        raise NotLowerable("a run-time shape tensor")
    x_shape = e.spec(0).shape
    if static_shape(x_shape):
        reshape_to(e, e.input(0), k.resolve(k.target, x_shape), out=e.output())
        return
    target = list(k.target)
    if -1 in target and any(d == 0 and (i >= len(x_shape) or x_shape[i] in (0, DYNAMIC))
                            for i, d in enumerate(target)):
        raise NotLowerable("a copied dimension that may be 0 next to -1")
    e.op("Reshape", [e.input(0), e.int64s(target, "shape")], out=e.output())


@lowers(na.NODE_TYPE_FLATTEN)
def flatten(k: Kernel, e: NodeEmitter) -> None:
    require_moved(e)
    x_shape = e.spec(0).shape
    if static_shape(x_shape):
        reshape_to(e, e.input(0), k.infer_shapes([x_shape])[0], out=e.output())
        return
    e.op("Flatten", [e.input(0)], out=e.output(), axis=k.axis)
