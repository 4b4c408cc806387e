"""Quantised (QUANT_TYPE_ALL) nodes as QDQ: DequantizeLinear → the float lowering →
QuantizeLinear, the pattern onnxruntime fuses into its int8 kernels (QLinearConv,
QLinearMatMul, QLinearAdd, ...).

Our rule (semantics.md, hdi/reference/quantized.py) is exactly what QDQ says: inputs
dequantized as (q − zeroPoint)·scale, the float result requantized with round-half-to-even
and saturation, per tensor or per channel along axis 0, an INT32 bias at inputScale ×
weightScale. Constants stay int8 (permuted, when the lowering asks, before the
DequantizeLinear, so that onnxruntime still sees a quantised weight).

One difference is accepted: onnxruntime's fused int8 kernels accumulate in int32 and
requantize once, where our reference dequantizes to float32 first; the rounding of the
float32 sum can land on the other side of a .5 boundary, so an output may differ by one
quantisation step (tests/drivers/cpu/ort/differential.py allows that for quantised outputs, and only
that).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from nnrt.hdi.reference.quantized import QuantizedKernel, Quantization
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


def unsigned_activations(graph: SegmentGraph, kept: set[str]) -> None:
    """int8 values that a Cast makes inside the segment from a clipped float (QuantDTypeCast's
    exact quantisation) and that only DequantizeLinear nodes read become uint8 + 128, their
    zero points too. onnxruntime's x86 int8 kernels take uint8 activations, and its own
    conversion (qdq_s8_to_u8) rewrites only the QuantizeLinear → DequantizeLinear pairs: a
    Cast-made int8 input kept an imported QDQ CNN's first convolution in float, followed by
    a plain int8 MaxPool (0.65 of its 1.0 ms). Exact: (q + 128) − (z + 128) = q − z. Only in
    the u8s8 form: onnxruntime's uint8 × int8 kernels saturate without VNNI (int8_kernels.py).
    `kept`: the segment's outputs (their dtype is the HDI tensor's)."""
    init = {t.name: t for t in graph.initializers}
    made_by = {out: node for node in graph.nodes for out in node.output}
    readers: dict[str, list] = {}
    for node in graph.nodes:
        for name in node.input:
            readers.setdefault(name, []).append(node)
    for cast in list(graph.nodes):
        if cast.op_type != "Cast" or _attr(cast, "to") != TensorProto.INT8 or \
                cast.output[0] in kept:
            continue
        clip = made_by.get(cast.input[0])
        bounds = [init.get(n) for n in clip.input[1:3]] if clip is not None and \
            clip.op_type == "Clip" and len(clip.input) == 3 else []
        if len(bounds) != 2 or None in bounds:
            continue
        low, high = (numpy_helper.to_array(b) for b in bounds)
        dqs = _dequantizing_readers(cast.output[0], readers, kept)
        if low.size != 1 or high.size != 1 or low < -128 or high > 127 or not dqs or \
                any(len(d.input) != 3 or d.input[2] not in init or
                    init[d.input[2]].data_type != TensorProto.INT8 for d in dqs):
            continue
        shifted = graph.fresh("u8_shift")
        graph.nodes.insert(graph.nodes.index(cast), helper.make_node(
            "Add", [cast.input[0], graph.add_array(np.array(128, low.dtype), "u8_offset")],
            [shifted], name=shifted))
        cast.input[0] = shifted
        for a in cast.attribute:
            if a.name == "to":
                a.i = TensorProto.UINT8
        for dq in dqs:
            zero = numpy_helper.to_array(init[dq.input[2]]).astype(np.int16) + 128
            dq.input[2] = graph.add_array(zero.astype(np.uint8), "u8_zp")


_MOVES = frozenset({"Transpose", "Reshape", "Squeeze", "Unsqueeze", "Identity"})


def _dequantizing_readers(name: str, readers: dict[str, list], kept: set[str]) -> list:
    """The DequantizeLinear nodes that read `name` as their data, through data movement
    (the NCHW transposes of lowered NHWC tensors), when nothing else reads it; else []."""
    found = []
    for node in readers.get(name, []):
        if node.op_type == "DequantizeLinear" and node.input[0] == name and \
                name not in node.input[1:]:
            found.append(node)
        elif node.op_type in _MOVES and node.input[0] == name and \
                name not in node.input[1:] and node.output[0] not in kept:
            further = _dequantizing_readers(node.output[0], readers, kept)
            if not further:
                return []
            found += further
        else:
            return []
    return found


def _attr(node, name: str):
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return None
