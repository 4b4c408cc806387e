"""PadFusion: x padded by paddings[i] = [before, after] cells along each dimension i;
output.shape[i] = x.shape[i] + before + after.

The amounts come from the second input, an [n, 2] INT32/INT64 tensor (the framework always
sends an empty `paddings` attribute, hdi_ops.json); a non-empty attribute is used when the
node has no second input, and must agree with a constant one when it has both. The
paddingMode values follow hdi.md 6.17 (numpy.pad's modes of the same names):

* CONSTANT — the new cells hold constantValue, converted to x's dtype as a C cast would
  (truncated toward zero for integers, nonzero → True for bool; a value outside an integer
  dtype's range is invalid). A quantised x keeps its parameters and pads with
  round(constantValue / scale) + zeroPoint, saturated (the zero point for 0.0).
* REFLECT — mirrored around the edge cell, which is not repeated: needs before, after <=
  size - 1 (x = [[1,2,3],[4,5,6],[7,8,9]] by 2 gives the first row [9,8,7,8,9,8,7]).
* SYMMETRIC — mirrored including the edge cell: needs before, after <= size (first row
  [5,4,4,5,6,6,5]).
* RESERVED (3) is unsupported; any other value is invalid.

Amounts must be >= 0 (no cropping by negative padding, as TensorFlow). A run-time paddings
tensor gives DYNAMIC output dimensions until the run; its bad values then fail the run with
NNRT_INVALID_SHAPE. Any dtype.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from nnrt.hdi.reference.kernel import Kernel, invalid, register, unsupported
from nnrt.hdi.reference.ops._common import (
    INDEX_DTYPES,
    bad_shape,
    check_declared_shapes,
    float_attr_as,
    moved_dtype,
)
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from nnrt.common.errors import DriverError
from nnrt.hdi.graph import DYNAMIC, NodeSpec, Shape

Pads = tuple[tuple[int, int], ...]

_NUMPY_MODES = {
    ht.PADDING_MODE_CONSTANT: "constant",
    ht.PADDING_MODE_REFLECT: "reflect",
    ht.PADDING_MODE_SYMMETRIC: "symmetric",
}


def _pads(values: np.ndarray | Sequence[Sequence[int]], rank: int,
          error: Callable[[str], DriverError]) -> Pads:
    array = np.asarray(values)
    if array.shape != (rank, 2):
        raise error(f"paddings of shape {list(array.shape)}, expected [{rank}, 2]")
    pads = tuple((int(b), int(a)) for b, a in array.tolist())
    if any(min(p) < 0 for p in pads):
        raise error(f"paddings {[list(p) for p in pads]} hold a negative amount")
    return pads


def _fill_value(node: NodeSpec, value: float, dtype: np.dtype) -> np.generic:
    """constantValue in x's dtype (see the module docstring)."""
    quant = node.inputs[0].quant_params
    if quant:
        if len(quant) != 1:
            raise unsupported(node, "per-channel quantised input")
        q = quant[0]
        value = round(value / q.scale) + q.zero_point if q.scale else q.zero_point
        info = np.iinfo(dtype)
        return dtype.type(min(max(value, info.min), info.max))
    return float_attr_as(node, value, dtype, "constantValue")


@register(na.NODE_TYPE_PAD_FUSION)
class PadFusion(Kernel):
    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        self.expect_counts(range(1, 3))
        dtype = moved_dtype(node)
        self.rank = len(node.inputs[0].shape)
        attrs = node.attrs
        mode = int(attrs.paddingMode)
        if mode == ht.PADDING_MODE_RESERVED:
            raise unsupported(node, "paddingMode RESERVED (3)")
        if mode not in _NUMPY_MODES:
            raise invalid(node, f"paddingMode {mode} is not CONSTANT (0), REFLECT (1) or "
                                f"SYMMETRIC (2)")
        self.mode = _NUMPY_MODES[mode]
        self.fill = _fill_value(node, float(attrs.constantValue), dtype) \
            if self.mode == "constant" else None
        attr = [list(row.values) for row in attrs.paddings]
        self.pads: Pads | None = None
        if attr:
            self.pads = _pads(attr, self.rank, lambda why: invalid(node, why))
        if len(node.inputs) == 2:
            spec = node.inputs[1]
            if spec.dtype not in INDEX_DTYPES:
                raise invalid(node, f"paddings must be INT32 or INT64, is {spec.dtype}")
            if spec.is_constant:
                pads = _pads(spec.constant, self.rank, lambda why: invalid(node, why))
                if self.pads is not None and pads != self.pads:
                    raise invalid(node, "the paddings attribute and input disagree")
                self.pads = pads
            elif self.pads is not None:
                raise unsupported(node, "a paddings attribute together with a run-time "
                                        "paddings input")
            elif len(spec.shape) != 2 or spec.shape[0] not in (self.rank, DYNAMIC) or \
                    spec.shape[1] not in (2, DYNAMIC):
                raise invalid(node, f"paddings of shape {list(spec.shape)}, expected "
                                    f"[{self.rank}, 2]")
        elif self.pads is None:
            raise invalid(node, "no paddings: the attribute is empty and there is no input 1")
        check_declared_shapes(self)

    def _output(self, x: Shape, pads: Pads) -> Shape:
        out = []
        for d, (dim, (before, after)) in enumerate(zip(x, pads)):
            if dim != DYNAMIC:
                limit = {"reflect": dim - 1, "symmetric": dim}.get(self.mode)
                if limit is not None and max(before, after) > limit:
                    raise bad_shape(self.node, f"{self.mode} padding {[before, after]} of "
                                               f"dimension {d} exceeds {limit} (size {dim})")
            out.append(DYNAMIC if dim == DYNAMIC else dim + before + after)
        return tuple(out)

    def infer_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        x = tuple(input_shapes[0])
        if len(x) != self.rank:
            raise bad_shape(self.node, f"input rank {len(x)}, the model has {self.rank}")
        if self.pads is None:
            return [(DYNAMIC,) * self.rank]
        return [self._output(x, self.pads)]

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        x = inputs[0]
        pads = self.pads
        if pads is None:
            if inputs[1].dtype not in INDEX_DTYPES:
                raise bad_shape(self.node, f"paddings of dtype {inputs[1].dtype}")
            pads = _pads(inputs[1], self.rank, lambda why: bad_shape(self.node, why))
        self._output(x.shape, pads)
        if self.mode == "constant":
            return [np.pad(x, pads, mode="constant", constant_values=self.fill)]
        return [np.pad(x, pads, mode=self.mode)]
