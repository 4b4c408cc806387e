"""LayerNormFusion: y = (x - mean) / sqrt(var + epsilon) * gamma + beta, mean and (biased)
variance over the dimensions [beginNormAxis:] (semantics.md).

* beginNormAxis and beginParamsAxis lie in [-rank, rank), negative counting from the end;
  their proto3 default 0 is used as sent (the C API client sends 1 by default). gamma and
  beta have the shape x.shape[beginParamsAxis:] and broadcast against x.
* Inputs: x, gamma, beta (3), or x alone (1: no affine step). elementwiseAffine true needs
  gamma and beta. proto3 cannot tell an unset elementwiseAffine from false, and the C API
  always sends true, so gamma and beta, when given, are applied whatever the flag says.
* epsilon is used as sent; negative or non-finite is invalid.
* Float dtypes, one for every input and the output. float16 (semantics.md "Float16
  mode"): the whole normalisation — mean, variance, the normalised values, gamma and beta —
  is computed in float32 and each output value rounded to float16 once.

Computation, on x seen as rows [R, L] (the normalised dimensions are the trailing ones),
in the output's buffer of the run's arena: the row means from `_common.row_sum` (a
matrix product with a ones vector), x - mean into the output, the variances from the centred rows' dot products
with themselves (the two-pass form, as accurate as before), one multiplication by
1 / sqrt(var + epsilon) (computed once per row), then gamma and beta in place. Rows of
more than SUM_BY_MATMUL values take numpy's pairwise sums instead of matrix products.
Constant gamma and beta are converted to the work dtype once, at prepare time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from nnrt.hdi.reference import arena
from nnrt.hdi.reference.kernel import Kernel, invalid, register
from nnrt.hdi.reference.ops._common import (
    FLOAT_DTYPES,
    bad_shape,
    cast,
    check_declared_shapes,
    computed_dtypes,
    epsilon_attr,
    normalize_axis,
    SUM_BY_MATMUL,
    product,
    row_ones,
    row_sum,
    same_dim,
)
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import NodeSpec, Shape


@register(na.NODE_TYPE_LAYER_NORM_FUSION)
class LayerNormFusion(Kernel):
    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        if len(node.inputs) not in (1, 3):
            raise invalid(node, f"expects 1 or 3 inputs (x[, gamma, beta]), has "
                                f"{len(node.inputs)}")
        self.expect_counts(len(node.inputs), 1)  # the output count
        self.dtype, self.work = computed_dtypes(node, FLOAT_DTYPES, "inputs")
        attrs = node.attrs
        self.affine = len(node.inputs) == 3
        if attrs.elementwiseAffine and not self.affine:
            raise invalid(node, "elementwiseAffine needs the gamma and beta inputs")
        self.epsilon = epsilon_attr(node)
        self.rank = len(node.inputs[0].shape)
        if self.rank == 0:
            raise invalid(node, "LayerNorm needs an input of rank >= 1")
        self.norm_axes = tuple(range(normalize_axis(node, int(attrs.beginNormAxis), self.rank,
                                                    "beginNormAxis"), self.rank))
        self.params_axis = normalize_axis(node, int(attrs.beginParamsAxis), self.rank,
                                          "beginParamsAxis")
        if self.affine:
            for name, spec in (("gamma", node.inputs[1]), ("beta", node.inputs[2])):
                if len(spec.shape) != self.rank - self.params_axis:
                    raise invalid(node, f"{name} shape {list(spec.shape)} must be x.shape"
                                        f"[{self.params_axis}:]")
        check_declared_shapes(self)
        # gamma and beta in the work dtype when constant (None: converted at each run).
        self.params = [spec.constant.astype(self.work) if spec.is_constant else None
                       for spec in node.inputs[1:]]
        # [L, 1] for the row means: the declared row length L
        self.ones = row_ones(product(node.inputs[0].shape[self.norm_axes[0]:]), self.work)

    def infer_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        x = tuple(input_shapes[0])
        if len(x) != self.rank:
            raise bad_shape(self.node, f"input rank {len(x)}, the model has {self.rank}")
        if self.affine:
            want = x[self.params_axis:]
            for name, shape in (("gamma", input_shapes[1]), ("beta", input_shapes[2])):
                if len(shape) != len(want):
                    raise bad_shape(self.node, f"{name} shape {list(shape)} is not x.shape"
                                               f"[{self.params_axis}:] = {list(want)}")
                for a, b in zip(want, shape):
                    same_dim(self.node, a, b, f"{name} shape vs x.shape[{self.params_axis}:]")
        return [x]

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        self.infer_shapes([a.shape for a in inputs])
        x = inputs[0].astype(self.work, copy=False)
        out = arena.output(self, 0, x.shape, self.work)  # x untouched
        if x.size:
            length = math.prod(x.shape[self.norm_axes[0]:])
            rows, y = x.reshape(-1, length), out.reshape(-1, length)
            with np.errstate(divide="ignore", invalid="ignore"):
                mean = row_sum(rows, self.ones)
                mean /= self.work.type(length)
                np.subtract(rows, mean, out=y)
                if length <= SUM_BY_MATMUL:
                    var = np.matmul(y[:, None, :], y[:, :, None]).reshape(-1, 1)
                else:
                    squares = np.square(y, out=arena.workspace("layer_norm", y.shape,
                                                               self.work))
                    var = squares.sum(axis=1, keepdims=True)
                var /= self.work.type(length)
                var += self.work.type(self.epsilon)
                np.sqrt(var, out=var)
                y *= np.reciprocal(var, out=var)
        if self.affine:
            gamma, beta = (inputs[i + 1].astype(self.work, copy=False) if p is None else p
                           for i, p in enumerate(self.params))
            out *= gamma
            out += beta
        return [cast(out, self.dtype)]
