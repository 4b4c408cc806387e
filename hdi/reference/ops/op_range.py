"""Range: the 1-D tensor start, start + delta, start + 2*delta, ... of every value short of
`limit` (before it for delta > 0, above it for delta < 0); its length is
max(ceil((limit - start) / delta), 0) (ONNX Range, TensorFlow range).

start / limit / delta come from the attributes when the node has 0 or 1 input (the
framework passes one input, which is not read), or from three scalar (or one-element)
inputs, as MindSpore Lite's Range reads them when present; the inputs then win over the
attributes. Decisions where the spec is silent:

* the output dtype is the output tensor's (any integer or float dtype; bool is
  unsupported); `dataType` is an HDI DataType code that, when not 0 (what the framework
  sends), must name that dtype;
* three inputs share the output's dtype;
* delta 0 is invalid (NNRT_INVALID_SHAPE when a run-time input shows it); an integer output
  whose values would not fit its dtype is invalid too;
* the elements are start + i * delta, computed exactly for integers and in float64 for
  float outputs, then rounded once to the output dtype;
* with run-time inputs the length depends on their values: DYNAMIC until the run.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from nnrt.hdi.reference.kernel import Kernel, invalid, register, unsupported
from nnrt.hdi.reference.ops._common import (
    FLOAT_DTYPES,
    INT_DTYPES,
    bad_shape,
    cast,
    check_declared_shapes,
)
from nnrt.protos import node_attrs_pb2 as na
from nnrt.common.dtypes import numpy_dtype
from nnrt.common.errors import DriverError
from nnrt.hdi.graph import DYNAMIC, NodeSpec, Shape

Bounds = tuple[float | int, float | int, float | int]


def _length(node: NodeSpec, bounds: Bounds, dtype: np.dtype,
            error: Callable[[str], DriverError]) -> int:
    start, limit, delta = bounds
    if delta == 0:
        raise error("delta is 0")
    if dtype.kind == "f":
        if not all(math.isfinite(v) for v in bounds):
            raise error(f"start/limit/delta {list(bounds)} are not all finite")
        return max(math.ceil((limit - start) / delta), 0)
    length = max(-((start - limit) // delta), 0)  # exact ceil for integers
    if length:
        info = np.iinfo(dtype)
        last = start + (length - 1) * delta
        if not (info.min <= start <= info.max and info.min <= last <= info.max):
            raise error(f"range {start}..{last} does not fit {dtype}")
    return length


@register(na.NODE_TYPE_RANGE)
class Range(Kernel):
    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        count = len(node.inputs)
        if count not in (0, 1, 3):
            raise invalid(node, f"expects 0, 1 or 3 inputs, has {count}")
        self.expect_counts(count)
        out = node.outputs[0]
        self.dtype = out.dtype
        if self.dtype not in INT_DTYPES | FLOAT_DTYPES:
            raise unsupported(node, f"output dtype {self.dtype}")
        if out.quant_params:
            raise unsupported(node, "a quantised output")
        code = int(node.attrs.dataType)
        if code != 0 and numpy_dtype(code) != self.dtype:
            raise invalid(node, f"dataType {code} does not name the output dtype {self.dtype}")
        self.from_inputs = count == 3
        self.bounds: Bounds | None = None
        if self.from_inputs:
            for t, what in zip(node.inputs, ("start", "limit", "delta")):
                if t.dtype != self.dtype:
                    raise invalid(node, f"{what} of dtype {t.dtype}, the output is {self.dtype}")
                if len(t.shape) > 1 or (t.shape and t.shape[0] not in (1, DYNAMIC)):
                    raise invalid(node, f"{what} of shape {list(t.shape)} is not one value")
            if all(t.is_constant for t in node.inputs):
                self.bounds = self._read([t.constant for t in node.inputs])
        else:
            attrs = node.attrs
            self.bounds = (int(attrs.start), int(attrs.limit), int(attrs.delta))
        self.length = None if self.bounds is None else \
            _length(node, self.bounds, self.dtype, lambda why: invalid(node, why))
        check_declared_shapes(self)

    def _read(self, arrays: Sequence[np.ndarray]) -> Bounds:
        if any(a.size != 1 for a in arrays):
            raise bad_shape(self.node, "start, limit and delta must be one value each")
        return tuple(a.reshape(-1)[0].item() for a in arrays)  # type: ignore[return-value]

    def infer_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        return [(DYNAMIC if self.length is None else self.length,)]

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        bounds, length = self.bounds, self.length
        if bounds is None or length is None:
            bounds = self._read(inputs)
            length = _length(self.node, bounds, self.dtype,
                             lambda why: bad_shape(self.node, why))
        start, _, delta = bounds
        if self.dtype.kind == "f":
            values = start + np.arange(length, dtype=np.float64) * delta
            return [cast(values, self.dtype)]
        # Integers: start + i * delta in 64-bit arithmetic modulo 2**64, exact for every
        # element because each one fits the dtype (checked) even where i * delta alone would
        # not fit int64.
        steps = np.arange(length, dtype=np.uint64) * np.uint64(delta % 2 ** 64)
        values = steps + np.uint64(start % 2 ** 64)
        wide = np.int64 if self.dtype.kind == "i" else np.uint64
        return [values.astype(wide).astype(self.dtype)]
