"""FullConnection: y = activation(x · Wᵀ + b) with weight W [out, in] and optional bias b
[out] (semantics.md "Linear algebra").

* hasBias says the node has 3 inputs (x, W, b); without it exactly 2. A mismatch is invalid.
* Without useAxis, x is flattened to [-1, in] and y is [M, out] (a 1-D x gives [1, out]).
  With useAxis, the dimensions from `axis` on (negative counts from the end) are flattened,
  their product must be `in`, and y is x.shape[:axis] + [out].
* Float dtypes only (x, W, b and y alike). float16 (semantics.md "Float16 mode"): the
  products accumulate in float32, the bias and the activation apply to the float32 sum,
  and each output value is rounded to float16 once, at the end.
  A constant weight is transposed to a contiguous [in, out] matrix once, at prepare time;
  each run is one GEMM written into the output's buffer in the run's arena, the bias and
  the activation then applied in place.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np

from nnrt.hdi.reference import arena
from nnrt.hdi.reference.activations import apply_activation, fused_activation
from nnrt.hdi.reference.kernel import Kernel, invalid, register, unsupported
from nnrt.hdi.reference.ops._common import (
    FLOAT_DTYPES,
    add_bias,
    bad_shape,
    cast,
    check_declared_shapes,
    computed_dtypes,
    normalize_axis,
    product,
    tiled_bias,
)
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import DYNAMIC, NodeSpec, Shape

log = logging.getLogger(__name__)


@register(na.NODE_TYPE_FULL_CONNECTION)
class FullConnection(Kernel):
    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        attrs = node.attrs
        self.has_bias = bool(attrs.hasBias)
        self.expect_counts(3 if self.has_bias else 2)
        self.dtype, self.work = computed_dtypes(node, FLOAT_DTYPES, "inputs")
        self.activation = fused_activation(node, self.dtype)
        x, weight = node.inputs[0], node.inputs[1]
        if len(weight.shape) != 2:
            raise invalid(node, f"weight must be 2-D [out, in], has shape {list(weight.shape)}")
        if DYNAMIC in weight.shape:
            raise unsupported(node, "a weight of dynamic shape")
        self.n_out, self.n_in = weight.shape
        if self.has_bias and node.inputs[2].shape not in ((self.n_out,), (DYNAMIC,)):
            raise invalid(node, f"bias shape {list(node.inputs[2].shape)} is not [{self.n_out}]")
        self.use_axis = bool(attrs.useAxis)
        self.axis = 0
        if self.use_axis:
            self.axis = normalize_axis(node, int(attrs.axis), len(x.shape))
        (declared_out,) = check_declared_shapes(self)
        # The output shape of the declared input shape, looked up by a run with that shape.
        self.static = None if DYNAMIC in x.shape else (tuple(x.shape), tuple(declared_out))
        # W [out, in] -> Wᵀ [in, out], contiguous, so that each run is one GEMM.
        self.weight_t = self._weight(weight.constant) if weight.is_constant else None
        self.bias = self.bias_rows = None
        if self.has_bias and node.inputs[2].is_constant:
            self.bias = node.inputs[2].constant.astype(self.work, copy=False)
            self.bias_rows = tiled_bias(self.bias)
        log.debug("FullConnection node %d: in %s, out %s, useAxis %s", node.index, self.n_in,
                  self.n_out, self.use_axis)

    def _weight(self, w: np.ndarray) -> np.ndarray:
        if w.shape != (self.n_out, self.n_in):
            raise bad_shape(self.node, f"weight shape {list(w.shape)}, "
                                       f"expected {[self.n_out, self.n_in]}")
        return np.ascontiguousarray(w.T, dtype=self.work)

    def infer_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        x = tuple(input_shapes[0])
        if tuple(input_shapes[1]) != (self.n_out, self.n_in):
            raise bad_shape(self.node, f"weight shape {list(input_shapes[1])}, "
                                       f"expected {[self.n_out, self.n_in]}")
        if self.use_axis:
            if len(x) <= self.axis:
                raise bad_shape(self.node, f"input rank {len(x)} has no axis {self.axis}")
            inner = product(x[self.axis:])
            if inner != DYNAMIC and inner != self.n_in:
                raise bad_shape(self.node, f"input dims {list(x[self.axis:])} from axis "
                                           f"{self.axis} do not flatten to {self.n_in}")
            return [x[:self.axis] + (self.n_out,)]
        total = product(x)
        if total == DYNAMIC:
            return [(DYNAMIC, self.n_out)]
        if self.n_in == 0 or total % self.n_in:
            raise bad_shape(self.node, f"input {list(x)} does not flatten to [-1, {self.n_in}]")
        return [(total // self.n_in, self.n_out)]

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        x = inputs[0]
        weight_t = self.weight_t
        if weight_t is not None and self.static is not None and x.shape == self.static[0]:
            out_shape = self.static[1]
        else:
            (out_shape,) = self.infer_shapes([x.shape, inputs[1].shape])
            if weight_t is None:
                weight_t = self._weight(inputs[1])
        flat = x.reshape(-1, self.n_in).astype(self.work, copy=False)
        result = arena.output(self, 0, (flat.shape[0], self.n_out), self.work)
        np.matmul(flat, weight_t, out=result)
        if self.has_bias:
            bias = self.bias if self.bias is not None else inputs[2].astype(self.work, copy=False)
            if bias.shape != (self.n_out,):
                raise bad_shape(self.node, f"bias shape {list(bias.shape)} is not [{self.n_out}]")
            add_bias(result, bias, self.bias_rows if bias is self.bias else None)
        result = apply_activation(result, self.activation, inplace=True)
        return [cast(result.reshape(out_shape), self.dtype)]
