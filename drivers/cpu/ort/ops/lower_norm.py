"""LayerNormFusion, FusedBatchNorm, InstanceNorm and L2NormalizeFusion, each written out
node by node as the numpy kernel computes it. float32 only (float16 mode stays on numpy).

LayerNorm and InstanceNorm are not ONNX LayerNormalization / InstanceNormalization of x:
onnxruntime's kernels take the variance in one pass, E[x²] - E[x]², which loses every
digit when the mean is large against the spread (an error of 2e-3 on rows of 1000 ± 0.01).
Ours is two-pass. LayerNorm with a positive epsilon is LayerNormalization of the rows less
their ReduceMean: once centred, the one-pass variance is exact enough, and the kernel's own
mean takes off the first mean's rounding error (`_layer_norm_of_centred`; the encoder's two
layer norms 13 operators each → 3). Otherwise the lowering is mean = ReduceMean(x), d = x - mean,
var = ReduceMean(d·d), then d / sqrt(var + epsilon) (LayerNorm: times its reciprocal, as
ours), gamma and beta (LayerNorm: applied whenever given, broadcast from beginParamsAxis;
InstanceNorm: reshaped onto the channel axis). The graph avoids Pow and Div so that
onnxruntime's LayerNormalization fusion does not turn it back into the one-pass kernel.
onnxruntime's ReduceMean sums less accurately than numpy's pairwise sums (rows of ~1000
values far from 0 differed by 1e-5 relative), so the mean is corrected once by the mean of
x - mean (LayerNorm on x flattened to rows [R, L], one reduced axis).

FusedBatchNorm with all four parameters constant is x · factor + shift with the factor
and shift the kernel computed in float64 at prepare; with run-time parameters (computed in
float64 at each run by ours) it stays on numpy.

L2Normalize: x / Max(sqrt(ReduceSumSquare(x)), epsilon) over its axes (Max propagates NaN
as np.maximum does), then the fused activation.
"""

from __future__ import annotations

import numpy as np

from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import DYNAMIC
from nnrt.hdi.reference.kernel import Kernel
from ..activation import emit_activation
from ..lowering import F32, NodeEmitter, NotLowerable, lowers


def _centred(e: NodeEmitter, x: str, axes: list[int], correct: bool = False) -> tuple[str, str]:
    """(x - mean, biased variance) over `axes`, two-pass, keepdims."""
    axes_name = e.int64s(axes)
    mean = e.op("ReduceMean", [x, axes_name], keepdims=1)
    if correct:  # plus the mean of what is left: the first sum's rounding error
        mean = e.op("Add", [mean, e.op("ReduceMean", [e.op("Sub", [x, mean]), axes_name],
                                       keepdims=1)])
    d = e.op("Sub", [x, mean])
    var = e.op("ReduceMean", [e.op("Mul", [d, d]), axes_name], keepdims=1)
    return d, var


@lowers(na.NODE_TYPE_LAYER_NORM_FUSION)
def layer_norm(k: Kernel, e: NodeEmitter) -> None:
    e.require_float32()
    x = e.input(0)
    flat = k.norm_axes[0] != k.rank - 1
    if flat:  # rows [R, L]: onnxruntime's sums over several axes are less accurate
        x = e.op("Flatten", [x], axis=k.norm_axes[0])
    if k.epsilon > 0:
        _layer_norm_of_centred(k, e, x, flat)
        return
    d, var = _centred(e, x, [-1], correct=True)
    std = e.op("Sqrt", [e.op("Add", [var, e.const(k.epsilon, F32, "eps")])])
    last = not k.affine and not flat
    y = e.op("Mul", [d, e.op("Reciprocal", [std])], out=e.output() if last else None)
    if flat:
        y = e.op("Reshape", [y, e.op("Shape", [e.input(0)])],
                 out=e.output() if not k.affine else None)
    if k.affine:
        e.op("Add", [e.op("Mul", [y, e.input(1)]), e.input(2)], out=e.output())


def _layer_norm_of_centred(k: Kernel, e: NodeEmitter, rows: str, flat: bool) -> None:
    """ONNX LayerNormalization of the rows less their mean: its one-pass variance,
    E[d²] − E[d]², is exact enough once the rows are centred (E[d] is the first mean's
    rounding error, which it also takes off, as `_centred(correct=True)` does), and its one
    kernel replaces the dozen operators written out. gamma and beta go in when they cover
    exactly the normalised dimensions, else after it. A positive epsilon only: with 0, a
    variance the subtraction leaves a hair below 0 would be NaN where ours divides by 0."""
    d = e.op("Sub", [rows, e.op("ReduceMean", [rows, e.int64s([-1])], keepdims=1)])
    length = e.spec(0).shape[k.norm_axes[0]:]
    inside = k.affine and k.params_axis == k.norm_axes[0] and DYNAMIC not in length
    if inside:
        flat_params = [e.int64s([int(np.prod(length))], "shape")]
        scale, bias = (e.op("Reshape", [e.input(i), *flat_params]) if flat else e.input(i)
                       for i in (1, 2))
    else:
        # identity parameters, as long as a row (read from the rows when it is dynamic)
        size = [int(np.prod(length))] if DYNAMIC not in length else None
        row = e.int64s(size, "row") if size else e.op("Shape", [rows], start=-1)
        scale, bias = (e.op("Expand", [e.const(v, F32, n), row])
                       for v, n in ((1.0, "one"), (0.0, "zero")))
    last = inside or not k.affine
    y = e.op("LayerNormalization", [d, scale, bias], axis=-1, epsilon=float(k.epsilon),
             out=e.output() if last and not flat else None)
    if flat:
        y = e.op("Reshape", [y, e.op("Shape", [e.input(0)])],
                 out=e.output() if last else None)
    if not last:
        e.op("Add", [e.op("Mul", [y, e.input(1)]), e.input(2)], out=e.output())


def _channel_param(k: Kernel, e: NodeEmitter, i: int) -> str:
    """Parameter input i [C] shaped to broadcast along x's channel axis."""
    spec = e.spec(i)
    shape = k.param_shape()
    if spec.is_constant:
        return e.const(spec.constant.reshape(shape), F32, "p")
    return e.op("Reshape", [e.input(i), e.int64s(shape)])


@lowers(na.NODE_TYPE_FUSED_BATCH_NORM)
def batch_norm(k: Kernel, e: NodeEmitter) -> None:
    e.require_float32()
    if k.affine is None:
        raise NotLowerable("run-time batch-norm parameters (ours: float64 at each run)")
    factor, shift = k.affine
    y = e.op("Mul", [e.input(0), e.const(factor, F32, "factor")])
    e.op("Add", [y, e.const(shift, F32, "shift")], out=e.output())


@lowers(na.NODE_TYPE_INSTANCE_NORM)
def instance_norm(k: Kernel, e: NodeEmitter) -> None:
    e.require_float32()
    d, var = _centred(e, e.input(0), list(k.spatial), correct=True)
    std = e.op("Sqrt", [e.op("Add", [var, e.const(k.epsilon, F32, "eps")])])
    factor = e.op("Div", [_channel_param(k, e, 1), std])
    e.op("Add", [e.op("Mul", [d, factor]), _channel_param(k, e, 2)], out=e.output())


@lowers(na.NODE_TYPE_L2_NORMALIZE_FUSION)
def l2_normalize(k: Kernel, e: NodeEmitter) -> None:
    e.require_float32()
    x = e.input(0)
    norm = e.op("Sqrt", [e.op("ReduceSumSquare", [x, e.int64s(list(k.axes))], keepdims=1)])
    y = e.op("Div", [x, e.op("Max", [norm, e.const(k.epsilon, F32, "eps")])])
    emit_activation(e, y, k.activation, out=e.output())
