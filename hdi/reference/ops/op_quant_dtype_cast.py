"""QuantDTypeCast (and QuantDTypeCastV2): conversion between float and quantised integer
tensors with the tensors' QuantParams (semantics.md "Quantisation", hdi.md 5.7).

* Quantise (float -> INT8/UINT8): q = clamp(round(r / scale + zeroPoint), qmin, qmax) with the
  OUTPUT tensor's parameters; round is to nearest, ties to even; [qmin, qmax] is the data
  type's range (INT8 [-128, 127], UINT8 [0, 255]; numBits is not consulted, semantics.md).
  The division is done in float64 on the exact input value.
* Dequantise (INT8/UINT8 -> float): r = (q - zeroPoint) * scale with the INPUT tensor's
  parameters, computed in float64 and rounded once to the output's float type.
* Requantise (INT8/UINT8 -> INT8/UINT8): dequantise with the input's parameters (float64),
  quantise with the output's.
* Parameters: one QuantParam = per tensor; several = per channel along `axis` (QuantDTypeCastV2;
  the v2.1 framework sends that layout under NODE_TYPE_QUANT_DTYPE_CAST, hdi.md 5.3.1) or
  along axis 0 when the node carries the v1 attribute layout without an axis
  (semantics.md). axis counts from the end when negative; with one QuantParam it is ignored.
  The count must equal the axis' size. The quantised side without parameters is invalid.
* srcT / dstT are HDI DataType codes (semantics.md) and must name the input's and the
  output's data types; 0 or any mismatch is invalid.
* Edge values: scale 0 (an all-zero tensor, hdi.md 5.7) quantises every value to zeroPoint
  and dequantises to 0; NaN quantises to zeroPoint (real 0); ±inf saturates.
* Anything that is not a quantise, dequantise or requantise between a float type and
  INT8/UINT8 (float -> float, other integer types) is unsupported. The node itself is
  QUANT_TYPE_NONE (a QUANT_TYPE_ALL node is refused before this kernel).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from nnrt.hdi.reference.kernel import Kernel, invalid, register, unsupported
from nnrt.hdi.reference.ops._common import FLOAT_DTYPES, bad_shape, check_declared_shapes
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import DYNAMIC, NodeSpec, QuantParam, Shape, TensorSpec

QUANTISED = {np.dtype(np.int8): (-128, 127), np.dtype(np.uint8): (0, 255)}


class _Params:
    """One side's QuantParams as arrays shaped to broadcast along its axis."""

    def __init__(self, params: Sequence[QuantParam], axis: int, rank: int) -> None:
        self.count = len(params)
        self.axis = axis
        shape = [1] * rank
        if self.count > 1:
            shape[axis] = self.count
        self.scale = np.array([p.scale for p in params], np.float64).reshape(shape)
        self.zero = np.array([p.zero_point for p in params], np.float64).reshape(shape)


@register(na.NODE_TYPE_QUANT_DTYPE_CAST, na.NODE_TYPE_QUANT_DTYPE_CAST_V2)
class QuantDTypeCast(Kernel):
    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        self.expect_counts(1)
        src, dst = node.inputs[0], node.outputs[0]
        attrs = node.attrs
        for name, code, spec in (("srcT", attrs.srcT, src), ("dstT", attrs.dstT, dst)):
            if code != spec.data_type:
                raise invalid(node, f"{name} {code} does not name the {spec.dtype} tensor's "
                                    f"data type {spec.data_type}")
        self.rank = len(src.shape)
        has_axis = "axis" in attrs.DESCRIPTOR.fields_by_name
        axis = int(attrs.axis) if has_axis else 0
        self.src = self._side(src, "input", axis)
        self.dst = self._side(dst, "output", axis)
        if self.src is None and self.dst is None:
            raise unsupported(node, f"{src.dtype} -> {dst.dtype} is not a quantise, dequantise "
                                    f"or requantise (float <-> INT8/UINT8)")
        if (self.src is None and src.dtype not in FLOAT_DTYPES) or \
                (self.dst is None and dst.dtype not in FLOAT_DTYPES):
            raise unsupported(node, f"{src.dtype} -> {dst.dtype}: only float <-> INT8/UINT8 "
                                    f"conversions are computed")
        self.out_dtype = dst.dtype
        check_declared_shapes(self)

    def _side(self, spec: TensorSpec, what: str, axis: int) -> _Params | None:
        """The parameters of a quantised side, None for a float side."""
        node = self.node
        if spec.dtype not in QUANTISED:
            return None
        params = spec.quant_params
        if not params:
            raise invalid(node, f"the quantised {what} ({spec.dtype}) has no QuantParam")
        if len(params) > 1:
            if not -self.rank <= axis < self.rank:
                raise invalid(node, f"axis {axis} is outside [{-self.rank}, {self.rank}) for "
                                    f"per-channel parameters")
            axis %= self.rank
            size = node.inputs[0].shape[axis]  # the output has the input's shape
            if size not in (DYNAMIC, len(params)):
                raise invalid(node, f"{len(params)} QuantParams for the {what}'s axis {axis} "
                                    f"of size {size}")
        return _Params(params, axis % self.rank if self.rank else 0, self.rank)

    def infer_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        shape = tuple(input_shapes[0])
        if len(shape) != self.rank:
            raise bad_shape(self.node, f"input rank {len(shape)}, the model has {self.rank}")
        for side in (self.src, self.dst):
            if side is not None and side.count > 1 and shape[side.axis] not in (DYNAMIC,
                                                                                 side.count):
                raise bad_shape(self.node, f"{side.count} QuantParams for axis {side.axis} of "
                                           f"size {shape[side.axis]}")
        return [shape]

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        x = inputs[0]
        self.infer_shapes([x.shape])
        real = x.astype(np.float64)
        if self.src is not None:  # dequantise: (q - zeroPoint) * scale
            real -= self.src.zero
            real *= self.src.scale
        if self.dst is None:
            with np.errstate(over="ignore"):
                return [real.astype(self.out_dtype)]
        low, high = QUANTISED[self.out_dtype]
        scale, zero = self.dst.scale, self.dst.zero
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            q = np.where(scale != 0, real / np.where(scale != 0, scale, 1.0), 0.0)
            q += zero
            np.rint(q, out=q)  # ties to even
            nan = np.isnan(q)
            if nan.any():  # NaN is real 0
                q[nan] = np.broadcast_to(zero, q.shape)[nan]
            np.clip(q, low, high, out=q)
        return [q.astype(self.out_dtype)]
