"""Fill, ConstantOfShape and Range.

Fill and ConstantOfShape with a constant shape are ONNX Expand of the one value (Fill's
input reshaped to a scalar: a run whose value is not one element fails in both). A
run-time shape stays on numpy (its bad values must fail the run; Expand would broadcast).

Range with constant bounds is a constant: the kernel's own values (up to 1M elements), so
the segment need not end there. Run-time bounds stay on numpy (onnxruntime accumulates
start + delta + ... where we compute start + i * delta).
"""

from __future__ import annotations

import numpy as np

from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.reference.kernel import Kernel
from ..lowering import NodeEmitter, NotLowerable, lowers
from .lower_reshape import MOVED

RANGE_LIMIT = 1 << 20


@lowers(na.NODE_TYPE_FILL, na.NODE_TYPE_CONSTANT_OF_SHAPE)
def fill(k: Kernel, e: NodeEmitter) -> None:
    e.require_dtypes(MOVED, *e.node.outputs)
    if k.shape is None:
        raise NotLowerable("a run-time shape")
    if e.node.node_type == na.NODE_TYPE_FILL:
        value = e.op("Reshape", [e.input(0), e.int64s([], "scalar")])
    else:
        value = e.const(k.value, k.value.dtype, "value")
    e.op("Expand", [value, e.int64s(k.shape, "shape")], out=e.output())


@lowers(na.NODE_TYPE_RANGE)
def range_(k: Kernel, e: NodeEmitter) -> None:
    e.require_dtypes(MOVED, *e.node.outputs)
    if k.bounds is None:
        raise NotLowerable("run-time bounds")
    if k.length > RANGE_LIMIT:
        raise NotLowerable(f"{k.length} values (a constant of at most {RANGE_LIMIT})")
    (values,) = k.execute([None] * len(e.node.inputs))
    e.op("Identity", [e.const(np.asarray(values), values.dtype, "range")], out=e.output())
