"""int8 / uint8 on the GPU: QuantDTypeCast, and the QUANT_TYPE_ALL forms of Conv2DFusion
(ordinary, grouped, depthwise), FullConnection, MatMulFusion, AddFusion, MulFusion,
MaxPoolFusion and AvgPoolFusion, as integer kernels (cl/quantized.cl).

semantics.md defines a quantised node as its float computation on the dequantised inputs,
requantised once (ties to even, saturated), and lets integer kernels land within one step of
that. These kernels are exact where the reference computation is: products of (q - zero
point) summed in int32 with the int32 bias, one requantisation per output value in float64
(`real = acc * (inputScale * weightScale)`, the scale product taken on the host, then
`rint(real / outputScale) + outputZero`) where the device has cl_khr_fp64, float32 where it
has not. The numpy reference (hdi/reference/quantized.py) dequantises to float32 and sums in
float32, so it may differ by one step where a value falls near a rounding boundary.

Per-channel weights (one QuantParam per output channel, axis 0) for convolution and
FullConnection; per-tensor parameters elsewhere. QUANT_TYPE_ALL nodes that only move data
(Reshape, Transpose, Concat, ...) whose tensors keep one set of parameters run as the plain
movement ops (`plain_movement`): their bytes need no arithmetic.

Refused (unsupported): other quantised node types; NCHW convolution and pooling; a
quantised tensor other than INT8 / UINT8 (an INT32 bias without parameters excepted);
per-channel parameters on an activation; a weight that is not constant (convolution and
FullConnection); a fused activation other than ReLU / ReLU6; an output scale of 0.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from ..kernel import (
    WORK_GROUP,
    Builder,
    DeviceTensor,
    Epilogue,
    GpuOp,
    Launch,
    Preparer,
    broadcast_strides,
    register,
    register_quantised,
)
from .op_cast import CL_TYPES
from nnrt.hdi.reference.kernel import Kernel, unsupported
from nnrt.hdi.reference.ops._common import window_axis
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import NodeSpec, TensorSpec

QUANTISED = {np.dtype(np.int8): (-128, 127), np.dtype(np.uint8): (0, 255)}
INT32 = np.dtype(np.int32)
HALF = np.dtype(np.float16)
ACTIVATIONS = (ht.ACTIVATION_TYPE_NO_ACTIVATION, ht.ACTIVATION_TYPE_RELU,
               ht.ACTIVATION_TYPE_RELU6)
# Operators whose output is their input's values moved: with the same parameters on every
# quantised tensor, their QUANT_TYPE_ALL form is their plain form.
MOVEMENT = frozenset({
    na.NODE_TYPE_RESHAPE, na.NODE_TYPE_FLATTEN, na.NODE_TYPE_SQUEEZE, na.NODE_TYPE_UNSQUEEZE,
    na.NODE_TYPE_TRANSPOSE, na.NODE_TYPE_CONCAT, na.NODE_TYPE_SLICE_FUSION,
    na.NODE_TYPE_STRIDED_SLICE, na.NODE_TYPE_GATHER, na.NODE_TYPE_SPLIT,
})


def plain_movement(node: NodeSpec) -> NodeSpec | None:
    """A QUANT_TYPE_ALL node that only moves data, with one per-tensor QuantParam on every
    quantised tensor, as the QUANT_TYPE_NONE node that computes the same bytes; else None."""
    if node.node_type not in MOVEMENT:
        return None
    quantised = [t for t in (*node.inputs, *node.outputs) if t.dtype in QUANTISED]
    if not quantised or any(t.dtype != quantised[0].dtype for t in quantised):
        return None
    if len({tuple(t.quant_params) for t in quantised}) != 1 or \
            len(quantised[0].quant_params) != 1:
        return None
    return dataclasses.replace(node, quant_type=ht.QUANT_TYPE_NONE)


def real_dtype(fp64: bool) -> np.dtype:
    """real_t of cl/quantized.cl."""
    return np.dtype(np.float64 if fp64 else np.float32)


def program_options(b: Builder, **types: np.dtype) -> list[str]:
    """Build options of cl/quantized.cl: -DNNRT_FP64 where the device has it, the types."""
    options = [f"-D{name}={CL_TYPES[np.dtype(dtype)]}" for name, dtype in sorted(types.items())]
    if b.runtime.fp64:
        options.append("-DNNRT_FP64")
    return options


@dataclasses.dataclass(frozen=True)
class Affine:
    """One tensor's quantisation: scales and zero points (one per tensor or per channel)."""

    scales: tuple[float, ...]
    zeros: tuple[int, ...]
    low: int
    high: int

    @property
    def scale(self) -> float:
        return self.scales[0]

    @property
    def zero(self) -> int:
        return self.zeros[0]


def affine(node: NodeSpec, spec: TensorSpec, per_channel: bool = False) -> Affine:
    """The parameters of a quantised INT8 / UINT8 tensor; unsupported() otherwise."""
    if spec.dtype not in QUANTISED:
        raise unsupported(node, f"the GPU computes quantised {node.name or 'nodes'} on INT8 / "
                                f"UINT8 tensors, not {spec.dtype} ({spec.name!r})")
    params = spec.quant_params
    if not params:
        raise unsupported(node, f"the quantised tensor {spec.name!r} has no QuantParam")
    if len(params) > 1 and not per_channel:
        raise unsupported(node, f"per-channel parameters on {spec.name!r}")
    low, high = QUANTISED[spec.dtype]
    return Affine(tuple(float(p.scale) for p in params), tuple(int(p.zero_point) for p in params),
                  low, high)


def output_affine(node: NodeSpec) -> Affine:
    out = affine(node, node.outputs[0])
    if out.scale == 0 or not np.isfinite(out.scale):
        raise unsupported(node, f"output scale {out.scale}")
    return out


def activation(node: NodeSpec) -> int:
    act = int(getattr(node.attrs, "activationType", 0))
    if act not in ACTIVATIONS:
        raise unsupported(node, f"a quantised node with the fused activation "
                                f"{ht.ActivationType.Name(act)} (ReLU and ReLU6 are computed)")
    return act


def int32_bias(node: NodeSpec, position: int) -> np.ndarray | None:
    """The constant INT32 bias at `position` (semantics.md: no parameters of its own)."""
    if len(node.inputs) <= position:
        return None
    spec = node.inputs[position]
    if spec.dtype != INT32 or spec.quant_params or not spec.is_constant:
        raise unsupported(node, f"a quantised bias that is not a constant INT32 tensor "
                                f"without parameters ({spec.name!r})")
    return np.ascontiguousarray(spec.constant, INT32).reshape(-1)


class QuantisedOp(GpuOp):
    """The parts every integer kernel shares: the output's parameters and activation."""

    def __init__(self, node: NodeSpec, ref: Kernel) -> None:
        super().__init__(node, ref)
        self.geometry = getattr(ref, "inner", ref)  # the float kernel: geometry, shapes
        self.out = output_affine(node)
        self.act = activation(node)

    def requantise_args(self, b: Builder) -> list:
        real = real_dtype(b.runtime.fp64).type
        return [np.int32(self.act), real(self.out.scale), np.int32(self.out.zero),
                np.int32(self.out.low), np.int32(self.out.high)]

    def reals(self, b: Builder, values: Sequence[float], what: str):
        return b.memory.upload(np.asarray(values, real_dtype(b.runtime.fp64)), what)


class WeightedOp(QuantisedOp):
    """Convolution and FullConnection: a constant per-channel int8 weight (axis 0) and an
    optional INT32 bias, uploaded once with the per-channel multipliers."""

    own_constants = frozenset({1, 2})

    def __init__(self, node: NodeSpec, ref: Kernel, has_bias: bool) -> None:
        super().__init__(node, ref)
        self.x = affine(node, node.inputs[0])
        weight = node.inputs[1]
        if not weight.is_constant:
            raise unsupported(node, "a quantised weight that is not a constant")
        self.w = affine(node, weight, per_channel=True)
        self.channels = int(weight.shape[0])
        if len(self.w.scales) not in (1, self.channels):
            raise unsupported(node, f"{len(self.w.scales)} weight QuantParams for "
                                    f"{self.channels} output channels")
        self.bias = int32_bias(node, 2) if has_bias else None
        self.buffers: dict[str, object] = {}

    def load(self, prep: Preparer) -> None:
        def per_channel(values: tuple) -> list:
            return list(values) * self.channels if len(values) == 1 else list(values)

        scales = np.asarray(per_channel(self.w.scales), np.float64) * self.x.scale
        mult = scales.astype(real_dtype(prep.runtime.fp64))
        name = self.node.name
        self.buffers = {
            "weight": prep.upload(np.ascontiguousarray(self.node.inputs[1].constant),
                                  f"{name}: int8 weight"),
            "mult": prep.upload(mult, f"{name}: requantisation multipliers"),
            "wzero": prep.upload(np.asarray(per_channel(self.w.zeros), np.int32),
                                 f"{name}: weight zero points"),
        }
        if self.bias is not None:
            self.buffers["bias"] = prep.upload(self.bias, f"{name}: int32 bias")

    def weight_args(self, b: Builder) -> list:
        bufs = self.buffers
        return [bufs["weight"], bufs.get("bias", b.dummy)]


@register(na.NODE_TYPE_QUANT_DTYPE_CAST, na.NODE_TYPE_QUANT_DTYPE_CAST_V2)
class QuantDTypeCast(GpuOp):
    """Quantise, dequantise, requantise (the reference: hdi/reference/ops/op_quant_dtype_cast)."""

    def __init__(self, node: NodeSpec, ref: Kernel) -> None:
        super().__init__(node, ref)
        self.src_type, self.dst_type = node.inputs[0].dtype, node.outputs[0].dtype
        if np.dtype(np.float64) in (self.src_type, self.dst_type):
            raise unsupported(node, "QuantDTypeCast with float64 on the GPU")
        self.tables: list = []

    def load(self, prep: Preparer) -> None:
        real = real_dtype(prep.runtime.fp64)
        for side in (self.ref.src, self.ref.dst):
            if side is None:  # the float side: its tables are not read
                self.tables.append((prep.upload(np.zeros(1, real), "no scales"),
                                    prep.upload(np.zeros(1, np.int32), "no zero points"), 1, 0))
                continue
            self.tables.append((prep.upload(side.scale.reshape(-1).astype(real), "quant scales"),
                                prep.upload(side.zero.reshape(-1).astype(np.int32),
                                            "quant zero points"), side.count, side.axis))

    def build(self, b: Builder, inputs: Sequence[DeviceTensor | None],
              outputs: Sequence[DeviceTensor], post: Epilogue) -> list[Launch]:
        (x,), (out,) = inputs, outputs
        if out.size == 0:
            return []
        options = [f"-DSRC={CL_TYPES[self.src_type]}", f"-DDST={CL_TYPES[self.dst_type]}"]
        options += ["-DSRC_Q"] if self.ref.src is not None else []
        options += ["-DDST_Q"] if self.ref.dst is not None else []
        options += ["-DSRC_HALF"] if self.src_type == HALF else []
        options += ["-DDST_HALF"] if self.dst_type == HALF else []
        if b.runtime.fp64:
            options.append("-DNNRT_FP64")
        low, high = QUANTISED.get(self.dst_type, (0, 0))
        args: list = [x.buffer, out.buffer, np.int32(out.size)]
        for scale, zero, count, axis in self.tables:
            inner = int(np.prod(out.shape[axis + 1:], dtype=np.int64)) if count > 1 else 1
            args += [scale, zero, np.int32(count), np.int32(inner)]
        args += [np.int32(low), np.int32(high)]
        return [b.launch(b.program("quantized", options), "quant_cast", args, [out.size],
                         [WORK_GROUP], label=f"{self.node.name} quant_cast")]


@register_quantised(na.NODE_TYPE_CONV2D_FUSION)
class QuantConv2D(WeightedOp):
    def __init__(self, node: NodeSpec, ref: Kernel) -> None:
        super().__init__(node, ref, bool(ref.inner.has_bias))
        if self.geometry.nchw:
            raise unsupported(node, "a quantised NCHW convolution (NHWC is computed)")

    def build(self, b: Builder, inputs: Sequence[DeviceTensor | None],
              outputs: Sequence[DeviceTensor], post: Epilogue) -> list[Launch]:
        g = self.geometry
        x, (out,) = inputs[0], outputs
        n, h, w, c = x.shape
        ax_h, ax_w = g._axis(0, h), g._axis(1, w)
        if out.size == 0:
            return []
        geo = [n, h, w, c, ax_h.out, ax_w.out, g.out_c, *g.kernel, *g.stride, *g.dilation,
               ax_h.pad_before, ax_w.pad_before, g.group_c, g.out_c // g.group]
        options = program_options(b, XT=x.dtype, WT=self.node.inputs[1].dtype, OT=out.dtype)
        bufs = self.buffers
        args = [x.buffer, *self.weight_args(b), out.buffer, bufs["mult"], bufs["wzero"],
                b.ints(geo, "conv geometry"), np.int32(out.size), np.int32(self.x.zero),
                np.int32(self.bias is not None), *self.requantise_args(b)]
        return [b.launch(b.program("quantized", options), "qconv", args, [out.size],
                         [WORK_GROUP], label=f"{self.node.name} qconv")]


def _gemm_launch(op: QuantisedOp, b: Builder, a: DeviceTensor, weight, bias, out: DeviceTensor,
                 mult, wzero, azero: int, wtype: np.dtype, batch: int, m: int, j: int, k: int,
                 a_strides: Sequence[int], w_strides: Sequence[int]) -> list[Launch]:
    if out.size == 0:
        return []
    options = program_options(b, XT=a.dtype, WT=wtype, OT=out.dtype)
    geo = [m, j, k, *a_strides, *w_strides]
    args = [a.buffer, weight, b.dummy if bias is None else bias, out.buffer, mult, wzero,
            b.ints(geo, "gemm geometry"), np.int32(azero), np.int32(bias is not None),
            *op.requantise_args(b)]
    return [b.launch(b.program("quantized", options), "qgemm", args, [j, m, batch],
                     None,
                     label=f"{op.node.name} qgemm")]


@register_quantised(na.NODE_TYPE_FULL_CONNECTION)
class QuantFullConnection(WeightedOp):
    def __init__(self, node: NodeSpec, ref: Kernel) -> None:
        super().__init__(node, ref, bool(ref.inner.has_bias))

    def build(self, b: Builder, inputs: Sequence[DeviceTensor | None],
              outputs: Sequence[DeviceTensor], post: Epilogue) -> list[Launch]:
        x, (out,) = inputs[0], outputs
        k, j = int(self.geometry.n_in), int(self.geometry.n_out)
        m = x.size // k if k else 0
        bufs = self.buffers
        # W [out, in]: column j of the product is row j of W
        return _gemm_launch(self, b, x, bufs["weight"], bufs.get("bias"), out, bufs["mult"],
                            bufs["wzero"], self.x.zero, self.node.inputs[1].dtype, 1, m, j, k,
                            (0, k, 1), (0, 1, k))


@register_quantised(na.NODE_TYPE_MATMUL_FUSION)
class QuantMatMul(QuantisedOp):
    """Both operands per tensor; batch dimensions equal, or one operand without them."""

    def __init__(self, node: NodeSpec, ref: Kernel) -> None:
        super().__init__(node, ref)
        self.a, self.b = affine(node, node.inputs[0]), affine(node, node.inputs[1])
        if any(len(t.shape) < 2 for t in node.inputs):
            raise unsupported(node, "a quantised MatMul of a vector")
        self.tables: dict[int, tuple] = {}

    def build(self, b: Builder, inputs: Sequence[DeviceTensor | None],
              outputs: Sequence[DeviceTensor], post: Epilogue) -> list[Launch]:
        x, y = inputs
        (out,) = outputs
        g = self.geometry
        m, k = (x.shape[-1], x.shape[-2]) if g.transpose_a else x.shape[-2:]
        j = y.shape[-2] if g.transpose_b else y.shape[-1]
        batch = out.size // (m * j) if m * j else 0

        def strides(t: DeviceTensor, transpose: bool) -> tuple[int, int, int]:
            rows, cols = t.shape[-2:]
            if len(t.shape) > 2 and tuple(t.shape[:-2]) != tuple(out.shape[:-2]):
                raise unsupported(self.node, f"a quantised MatMul broadcasting batch "
                                             f"dimensions {list(t.shape)} to {list(out.shape)}")
            step = rows * cols if len(t.shape) > 2 else 0
            return (step, 1, cols) if transpose else (step, cols, 1)

        a_strides = strides(x, g.transpose_a)  # (batch, row m, k)
        bs = strides(y, g.transpose_b)  # (batch, k, column j)
        mult = self.reals(b, [self.a.scale * self.b.scale] * max(j, 1), "matmul multipliers")
        wzero = b.ints([self.b.zero] * max(j, 1), "matmul zero points")
        return _gemm_launch(self, b, x, y.buffer, None, out, mult, wzero, self.a.zero, y.dtype,
                            batch, m, j, k, a_strides, bs)


@register_quantised(na.NODE_TYPE_ADD_FUSION, na.NODE_TYPE_MUL_FUSION)
class QuantBinary(QuantisedOp):
    def __init__(self, node: NodeSpec, ref: Kernel) -> None:
        super().__init__(node, ref)
        self.a, self.b = affine(node, node.inputs[0]), affine(node, node.inputs[1])
        self.is_mul = node.node_type == na.NODE_TYPE_MUL_FUSION

    def build(self, b: Builder, inputs: Sequence[DeviceTensor | None],
              outputs: Sequence[DeviceTensor], post: Epilogue) -> list[Launch]:
        x, y = inputs
        (out,) = outputs
        if out.size == 0:
            return []
        if x.shape == y.shape == out.shape:
            table = [0]
        else:
            table = [len(out.shape), *out.shape, *broadcast_strides(x.shape, out.shape),
                     *broadcast_strides(y.shape, out.shape)]
        real = real_dtype(b.runtime.fp64).type
        options = program_options(b, XT=x.dtype, BT=y.dtype, OT=out.dtype)
        args = [x.buffer, y.buffer, out.buffer, np.int32(out.size), b.ints(table),
                np.int32(self.is_mul), np.int32(self.a.zero), real(self.a.scale),
                np.int32(self.b.zero), real(self.b.scale), *self.requantise_args(b)]
        return [b.launch(b.program("quantized", options), "qbinary", args, [out.size],
                         [WORK_GROUP], label=f"{self.node.name} qbinary")]


@register_quantised(na.NODE_TYPE_MAX_POOL_FUSION, na.NODE_TYPE_AVGPOOL_FUSION)
class QuantPool(QuantisedOp):
    def __init__(self, node: NodeSpec, ref: Kernel) -> None:
        super().__init__(node, ref)
        self.x = affine(node, node.inputs[0])
        self.is_max = node.node_type == na.NODE_TYPE_MAX_POOL_FUSION
        if self.geometry.nchw:
            raise unsupported(node, "quantised NCHW pooling (NHWC is computed)")

    def build(self, b: Builder, inputs: Sequence[DeviceTensor | None],
              outputs: Sequence[DeviceTensor], post: Epilogue) -> list[Launch]:
        (x,), (out,) = inputs, outputs
        if out.size == 0:
            return []
        g = self.geometry
        n, h, w, c = x.shape
        if g.global_:
            geo = [n, h, w, c, 1, 1, h, w, 1, 1, 0, 0]
        else:
            ax_h, ax_w = (window_axis(self.node, size, g.kernel[d], g.strides[d], 1, g.pad_mode,
                                      g.pads[d], g.ceil) for d, size in ((0, h), (1, w)))
            geo = [n, h, w, c, ax_h.out, ax_w.out, *g.kernel, *g.strides, ax_h.pad_before,
                   ax_w.pad_before]
        real = real_dtype(b.runtime.fp64).type
        options = program_options(b, XT=x.dtype, OT=out.dtype)
        args = [x.buffer, out.buffer, np.int32(out.size), b.ints(geo, "pool geometry"),
                np.int32(self.is_max), np.int32(self.x.zero), real(self.x.scale),
                *self.requantise_args(b)]
        return [b.launch(b.program("quantized", options), "qpool", args, [out.size],
                         [WORK_GROUP], label=f"{self.node.name} qpool")]

