"""Quantised (QUANT_TYPE_ALL) nodes as QDQ: DequantizeLinear → the float lowering →
QuantizeLinear, the pattern onnxruntime fuses into its int8 kernels (QLinearConv,
QLinearMatMul, QLinearAdd, ...).

Our rule (semantics.md, drivers/cpu/quantized.py) is exactly what QDQ says: inputs
dequantized as (q − zeroPoint)·scale, the float result requantized with round-half-to-even
and saturation, per tensor or per channel along axis 0, an INT32 bias at inputScale ×
weightScale. Constants stay int8 (permuted, when the lowering asks, before the
DequantizeLinear, so that onnxruntime still sees a quantised weight).

One difference is accepted: onnxruntime's fused int8 kernels accumulate in int32 and
requantize once, where our reference dequantizes to float32 first; the rounding of the
float32 sum can land on the other side of a .5 boundary, so an output may differ by one
quantisation step (tests/ort/differential.py allows that for quantised outputs, and only
that).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..quantized import QuantizedKernel, Quantization
from .lowering import LOWERINGS, NodeEmitter, NotLowerable, SegmentGraph, value_name

_QUANTISED = frozenset({np.dtype(np.int8), np.dtype(np.uint8)})


class QuantizedEmitter(NodeEmitter):
    """A NodeEmitter whose inputs arrive dequantized and whose outputs are requantized."""

    def __init__(self, graph: SegmentGraph, kernel: QuantizedKernel) -> None:
        super().__init__(graph, kernel.inner)  # the lowering reads the float node
        self.quantized = kernel
        self.original = kernel.node
        self.pending: list[tuple[str, int]] = []  # (float result, output k) to requantize

    def _params(self, mapping: Quantization, moved_axis: int) -> tuple[str, str, dict]:
        scale = np.asarray(mapping.scale, dtype=np.float32).reshape(-1)
        zero = np.asarray(mapping.zero_point).reshape(-1).astype(mapping.dtype)
        attrs = {"axis": moved_axis} if scale.size > 1 else {}
        if scale.size == 1:
            scale, zero = scale.reshape(()), zero.reshape(())
        return self.const(scale, np.float32, "scale"), self.const(zero, mapping.dtype, "zp"), attrs

    def input(self, i: int, perm: Sequence[int] | None = None) -> str:
        mapping = self.quantized.input_maps[i]
        spec = self.original.inputs[i]
        if mapping is None:
            return self.tensor(spec, perm)
        if mapping.dtype not in _QUANTISED and mapping.dtype != np.int32:
            raise NotLowerable(f"quantised {mapping.dtype} input")
        if mapping.dtype == np.int32 and np.any(np.asarray(mapping.zero_point) != 0):
            raise NotLowerable("an INT32 input with a zero point")
        axis = 0 if perm is None else list(perm).index(0)
        scale, zero, attrs = self._params(mapping, axis)
        return self.op("DequantizeLinear", [self.tensor(spec, perm), scale, zero], **attrs)

    def finite(self, i: int) -> bool:
        mapping = self.quantized.input_maps[i]
        return mapping is not None and bool(np.all(np.isfinite(mapping.scale)))

    def output(self, k: int = 0) -> str:
        if self.quantized.output_maps[k] is None:
            spec = self.original.outputs[k]
            self.graph.written[spec.index] = spec
            return value_name(spec.index)
        name = self.graph.fresh(f"n{self.node.index}_float{k}")
        self.pending.append((name, k))
        return name

    def finish(self) -> None:
        for name, k in self.pending:
            mapping = self.quantized.output_maps[k]
            if mapping.dtype not in _QUANTISED:
                raise NotLowerable(f"quantised {mapping.dtype} output")
            spec = self.original.outputs[k]
            self.graph.written[spec.index] = spec
            scale, zero, attrs = self._params(mapping, 0)
            self.op("QuantizeLinear", [name, scale, zero], out=value_name(spec.index), **attrs)


def lower_quantized(kernel: QuantizedKernel, graph: SegmentGraph) -> None:
    """Lower a QUANT_TYPE_ALL node; NotLowerable when its float lowering is."""
    lower = LOWERINGS.get(kernel.inner.node.node_type)
    if lower is None:
        raise NotLowerable("no lowering")
    emitter = QuantizedEmitter(graph, kernel)
    lower(kernel.inner, emitter)
    emitter.finish()
