"""Quantized (QUANT_TYPE_ALL) execution of any CPU operator, by the rule of semantics.md.

A node with `QUANT_TYPE_ALL` computes as if its inputs were dequantized to float32 and its
float result requantized with the output tensor's parameters (round to nearest, ties to
even, saturate to the data type's range). So one wrapper serves every operator: it builds
the operator's float kernel on a float32 view of the node (constants dequantized once, at
prepare time) and converts around it at run time.

* `r = (q - zeroPoint) * scale`; one QuantParam per tensor, or one per channel along
  axis 0 (semantics.md; the per-channel weights of convolution and FullConnection).
* A quantized bias is INT32 without parameters of its own: its scale is
  inputScale × weightScale (per channel where the weights are), zero point 0.
* Inputs that carry no parameters and are not such a bias (shape, axes, indices) pass
  through unchanged; so do outputs without parameters (e.g. ArgMax indices).
* QuantDTypeCast is the quantize/dequantize operator itself: it is never wrapped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from nnrt.hdi.reference.kernel import Kernel, register_quantized, unsupported
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import NodeSpec, QuantParam, Shape, TensorSpec

QUANTIZED_DTYPES = {np.dtype(np.int8): (-128, 127), np.dtype(np.uint8): (0, 255)}
SELF_QUANTIZING = frozenset({na.NODE_TYPE_QUANT_DTYPE_CAST, na.NODE_TYPE_QUANT_DTYPE_CAST_V2})
_FLOAT = np.dtype(np.float32)


def _per_axis0(values: Sequence[float], rank: int) -> np.ndarray:
    """Parameters shaped to broadcast along axis 0 of a tensor of `rank`."""
    array = np.asarray(values, dtype=np.float32)
    return array.reshape((-1,) + (1,) * (rank - 1)) if rank else array.reshape(())


class Quantization:
    """The affine mapping of one tensor: scale and zero point, per tensor or per channel."""

    def __init__(self, params: Sequence[QuantParam], rank: int, dtype: np.dtype) -> None:
        self.dtype = dtype
        self.low, self.high = QUANTIZED_DTYPES.get(dtype, (np.iinfo(np.int32).min,
                                                           np.iinfo(np.int32).max))
        if len(params) == 1:
            self.scale = np.float32(params[0].scale)
            self.zero_point = np.float32(params[0].zero_point)
        else:
            self.scale = _per_axis0([p.scale for p in params], rank)
            self.zero_point = _per_axis0([p.zero_point for p in params], rank)

    def dequantize(self, q: np.ndarray) -> np.ndarray:
        return (q.astype(np.float32) - self.zero_point) * self.scale

    def quantize(self, r: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            q = np.rint(np.asarray(r, dtype=np.float32) / self.scale + self.zero_point)
        return np.clip(np.nan_to_num(q), self.low, self.high).astype(self.dtype)


def _bias_quantization(node: NodeSpec, spec: TensorSpec) -> Quantization | None:
    """The derived quantization of an INT32 bias input (inputScale × weightScale)."""
    if len(node.inputs) < 3 or spec is not node.inputs[2] or spec.dtype != np.int32:
        return None
    x, w = node.inputs[0], node.inputs[1]
    if len(x.quant_params) != 1 or not w.quant_params:
        return None
    scales = [x.quant_params[0].scale * p.scale for p in w.quant_params]
    return Quantization([QuantParam(32, 0, s) for s in scales], 1, spec.dtype)


class QuantizedKernel(Kernel):
    """Runs `kernel_class` on dequantized inputs and requantizes its outputs."""

    def __init__(self, node: NodeSpec, kernel_class: type[Kernel]) -> None:
        super().__init__(node)
        self.input_maps: list[Quantization | None] = []
        float_inputs = []
        for spec in node.inputs:
            mapping = None
            if spec.quant_params:
                if spec.dtype not in QUANTIZED_DTYPES and spec.dtype != np.int32:
                    raise unsupported(node, f"quantized {spec.dtype} input {spec.name!r}")
                mapping = Quantization(spec.quant_params, len(spec.shape), spec.dtype)
            else:
                mapping = _bias_quantization(node, spec)
            self.input_maps.append(mapping)
            if mapping is None:
                float_inputs.append(spec)
                continue
            constant = None if spec.constant is None else mapping.dequantize(spec.constant)
            float_inputs.append(replace(spec, dtype=_FLOAT, data_type=ht.DATA_TYPE_FLOAT32,
                                        quant_params=(), constant=constant))
        self.output_maps: list[Quantization | None] = []
        float_outputs = []
        for spec in node.outputs:
            if spec.quant_params and spec.dtype in QUANTIZED_DTYPES:
                self.output_maps.append(Quantization(spec.quant_params, len(spec.shape), spec.dtype))
                float_outputs.append(replace(spec, dtype=_FLOAT, data_type=ht.DATA_TYPE_FLOAT32,
                                             quant_params=()))
            else:
                self.output_maps.append(None)
                float_outputs.append(spec)
        if all(m is None for m in self.input_maps + self.output_maps):
            raise unsupported(node, "QUANT_TYPE_ALL node without quantized tensors")
        float_node = replace(node, inputs=tuple(float_inputs), outputs=tuple(float_outputs),
                             quant_type=ht.QUANT_TYPE_NONE)
        self.inner = kernel_class(float_node)

    def infer_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        return self.inner.infer_shapes(input_shapes)

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        floats = [x if m is None else m.dequantize(x) for x, m in zip(inputs, self.input_maps)]
        results = self.inner.execute(floats)
        return [r if m is None else m.quantize(r) for r, m in zip(results, self.output_maps)]


def quantized_kernel(node: NodeSpec, cls: type[Kernel]) -> Kernel:
    """The kernel of a node of quant type ALL: the operator's own when it quantises by itself
    (QuantDTypeCast), else its float kernel between dequantisation and quantisation."""
    return cls(node) if node.node_type in SELF_QUANTIZING else QuantizedKernel(node, cls)


register_quantized(quantized_kernel)
