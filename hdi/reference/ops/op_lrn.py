"""LRN (local response normalisation across channels):
y[..., c] = x[..., c] / (bias + alpha * sum_{k=c-r}^{c+r} x[..., k]²) ** beta, r = depthRadius,
the window clipped at the first and last channel (TensorFlow's and MindSpore Lite's form:
alpha is not divided by the window size, unlike Caffe/ONNX).

* The channel is the last axis (semantics.md: NHWC); an input tagged FORMAT_NCHW (rank >= 2)
  has it on axis 1. Any rank >= 1.
* normRegion: "ACROSS_CHANNELS" (the framework's), the IDL's misspelt "ACROSS_CHNNEL" and
  the empty string (unset) all mean across-channel normalisation; any other region (e.g.
  Caffe's "WITHIN_CHANNEL") is not computed here: unsupported.
* depthRadius >= 0 (invalid otherwise); bias, alpha and beta are used as sent (all 0 is the
  identity, x / 1), non-finite values are invalid.
* Float dtypes only; computed in float64 (the window sums come from a running sum, whose
  differences need the wider type), rounded once to the tensor's type. For float16
  (semantics.md "Float16 mode": sums accumulate in float32, rounded once per output value)
  the float64 sums are at least as precise as float32 ones and the result is rounded once.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from nnrt.hdi.reference.kernel import Kernel, invalid, register, unsupported
from nnrt.hdi.reference.ops._common import (
    FLOAT_DTYPES,
    cast,
    common_dtype,
    require_unquantised,
)
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import NodeSpec, Shape

ACROSS_CHANNELS = frozenset({"", "ACROSS_CHANNELS", "ACROSS_CHNNEL"})


@register(na.NODE_TYPE_LRN)
class LRN(Kernel):
    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        self.expect_counts(1)
        require_unquantised(node)
        self.dtype = common_dtype(node, node.inputs, FLOAT_DTYPES, "input")
        attrs = node.attrs
        if attrs.normRegion.upper() not in ACROSS_CHANNELS:
            raise unsupported(node, f"normRegion {attrs.normRegion!r}: only across-channel "
                                    f"normalisation is computed")
        self.radius = int(attrs.depthRadius)
        if self.radius < 0:
            raise invalid(node, f"depthRadius {self.radius} is negative")
        self.bias, self.alpha, self.beta = float(attrs.bias), float(attrs.alpha), float(attrs.beta)
        if not all(math.isfinite(v) for v in (self.bias, self.alpha, self.beta)):
            raise invalid(node, "bias, alpha and beta must be finite")
        rank = len(node.inputs[0].shape)
        if rank == 0:
            raise invalid(node, "LRN needs an input with a channel dimension (rank >= 1)")
        self.axis = 1 if node.inputs[0].format == ht.FORMAT_NCHW and rank >= 2 else rank - 1

    def infer_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        return [tuple(input_shapes[0])]

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        x = np.moveaxis(inputs[0], self.axis, -1).astype(np.float64)
        c = x.shape[-1]
        # Running sum of squares with a leading 0: window [lo, hi) sums to run[hi] - run[lo].
        run = np.zeros(x.shape[:-1] + (c + 1,))
        np.cumsum(np.square(x), axis=-1, out=run[..., 1:])
        channels = np.arange(c)
        hi = np.minimum(channels + self.radius + 1, c)
        lo = np.maximum(channels - self.radius, 0)
        window = np.maximum(run[..., hi] - run[..., lo], 0)  # no rounding below zero
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            y = x * np.power(self.bias + self.alpha * window, -self.beta)
        return [cast(np.moveaxis(y, -1, self.axis), self.dtype)]
