"""int8 models for the whole-model differential suite of the onnxruntime engine: deep, with
full-range int8 weights (the saturation of onnxruntime's U8S8 kernels without VNNI needs
large weights, and several layers to grow past one step), in the zoo's families (an MLP, a
ResNet-style CNN with residual adds, a MobileNet-style CNN with depthwise convolutions), plus
an int8 input quantised inside the model (a float input through QuantDTypeCast).

`exact_deep_cnn` is an independent reference for the deepest one: integer arithmetic in
int64 (im2col, one matrix product per layer), requantised in float64 as semantics.md says.

Also a script: `python -m tests.drivers.cpu.ort.int8_models` prints, for each model, the largest
difference in quantisation steps between the onnxruntime engine and the numpy kernels
(JSON), so that tests/drivers/cpu/ort/test_int8_kernels.py can run it on an emulated CPU."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from nnrt.common.dtypes import hdi_data_type
from nnrt.hdi.reference.plan import ExecutionPlan
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import Graph, QuantParam, TensorSpec
from tests.hdi.reference.util import GraphBuilder

ALL = ht.QUANT_TYPE_ALL
RELU = ht.ACTIVATION_TYPE_RELU


@dataclass
class Int8Model:
    name: str
    graph: Graph
    inputs: list[np.ndarray]


@dataclass(frozen=True)
class ConvLayer:
    """One int8 convolution of the deep CNN, with what the reference needs."""

    weights: np.ndarray  # int8 [O, 3, 3, C], zero point 0
    weight_scales: np.ndarray  # float64 [O]
    bias: np.ndarray  # int32 [O], at input scale x weight scale
    in_scale: float
    in_zero: int
    out_scale: float
    out_zero: int


def _full_range_weights(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """int8 weights that use the whole range (-127..127), as a per-channel quantiser makes
    them: every output channel reaches ±127."""
    w = rng.integers(-127, 128, shape).astype(np.int8)
    for o in range(shape[0]):
        w[o].flat[rng.integers(w[o].size)] = 127 if o % 2 else -127
    return w


def _conv_int64(x: np.ndarray, zero: int, w: np.ndarray) -> np.ndarray:
    """Σ (x − zero)·w over 3×3 SAME windows, NHWC, in int64 (im2col)."""
    n, h, wd, c = x.shape
    padded = np.zeros((n, h + 2, wd + 2, c), np.int64)
    padded[:, 1:-1, 1:-1] = x.astype(np.int64) - zero
    columns = np.stack([padded[:, i:i + h, j:j + wd] for i in range(3) for j in range(3)],
                       axis=3)  # [N, H, W, 9, C]
    return columns.reshape(n, h, wd, 9 * c) @ w.astype(np.int64).reshape(w.shape[0], -1).T


def _requantize(real: np.ndarray, scale: float, zero: int) -> np.ndarray:
    return np.clip(np.rint(real / scale) + zero, -128, 127).astype(np.int8)


def exact_deep_cnn(layers: list[ConvLayer], x: np.ndarray) -> np.ndarray:
    """The deep CNN by integer arithmetic: the reference the numpy kernels must equal."""
    for layer in layers:
        acc = _conv_int64(x, layer.in_zero, layer.weights) + layer.bias.astype(np.int64)
        real = np.maximum(acc * (layer.in_scale * layer.weight_scales), 0.0)  # ReLU
        x = _requantize(real, layer.out_scale, layer.out_zero)
    return x


def deep_cnn(depth: int = 8, channels: int = 16, size: int = 8, batch: int = 2,
             seed: int = 1) -> tuple[Int8Model, list[ConvLayer]]:
    """`depth` 3×3 int8 convolutions with ReLU, full-range weights; each output scale set
    from the exact result so that the activations spread over the int8 range (a scale
    too large would hide differences in a few values)."""
    rng = np.random.default_rng(seed)
    x = rng.integers(-128, 128, (batch, size, size, channels)).astype(np.int8)
    g = GraphBuilder()
    in_scale, in_zero = 0.02, 0
    t = g.tensor(x.shape, dtype=np.int8, quant=[QuantParam(8, in_zero, in_scale)])
    graph_input, value, layers = t, x, []
    for _ in range(depth):
        w = _full_range_weights(rng, (channels, 3, 3, channels))
        w_scales = rng.uniform(0.002, 0.006, channels)
        bias = rng.integers(-3000, 3000, channels).astype(np.int32)
        real = np.maximum((_conv_int64(value, in_zero, w) + bias) * (in_scale * w_scales), 0)
        out_scale = float(np.percentile(real, 99.5)) / 250 or 1.0
        layer = ConvLayer(w, w_scales, bias, in_scale, in_zero, out_scale, -128)
        layers.append(layer)
        wq = g.tensor(w.shape, w, np.int8, quant=[QuantParam(8, 0, float(s)) for s in w_scales])
        b = g.tensor((channels,), bias, np.int32)
        t = g.node(na.NODE_TYPE_CONV2D_FUSION,
                   na.Conv2DFusion(kernelSize=[3, 3], stride=[1, 1], dilation=[1, 1],
                                   padMode=ht.PAD_MODE_SAME, group=1, inChannel=channels,
                                   outChannel=channels, activationType=RELU),
                   [t, wq, b], x.shape, dtype=np.int8, quant=[QuantParam(8, -128, out_scale)],
                   quant_type=ALL)
        value = _requantize(real, out_scale, -128)
        in_scale, in_zero = out_scale, -128
    return Int8Model(f"deep_cnn{depth}", g.graph([graph_input], [t]), [x]), layers


def _fc(g: GraphBuilder, rng, t: TensorSpec, n_in: int, n_out: int, batch: int,
        out_scale: float, relu: bool) -> TensorSpec:
    w = _full_range_weights(rng, (n_out, n_in))
    scales = rng.uniform(0.002, 0.006, n_out)
    return g.node(na.NODE_TYPE_FULL_CONNECTION,
                  na.FullConnection(hasBias=True, activationType=RELU if relu else 0),
                  [t, g.tensor(w.shape, w, np.int8,
                               quant=[QuantParam(8, 0, float(s)) for s in scales]),
                   g.tensor((n_out,), rng.integers(-4000, 4000, n_out).astype(np.int32),
                            np.int32)],
                  (batch, n_out), dtype=np.int8,
                  quant=[QuantParam(8, -128 if relu else 0, out_scale)], quant_type=ALL)


def mlp(seed: int = 2, batch: int = 8, width: int = 128) -> Int8Model:
    """Four fully connected layers, width 128-256: 128-term dot products of full-range
    values."""
    rng = np.random.default_rng(seed)
    g = GraphBuilder()
    x = g.tensor((batch, width), dtype=np.int8, quant=[QuantParam(8, 0, 0.03)])
    sizes = (width, 2 * width, 2 * width, width, 10)
    t = x
    for k, (n_in, n_out) in enumerate(zip(sizes, sizes[1:])):
        last = k == len(sizes) - 2
        # the output scale of a layer of n_in full-range terms (weights ~0.004, inputs ~1)
        t = _fc(g, rng, t, n_in, n_out, batch, 0.004 * 73 * 2 * math.sqrt(n_in) / 64,
                relu=not last)
    return Int8Model("mlp", g.graph([x], [t]),
                     [rng.integers(-128, 128, (batch, width)).astype(np.int8)])


def _conv(g: GraphBuilder, rng, t: TensorSpec, shape: tuple[int, ...], out_c: int,
          out_scale: float, depthwise: bool = False, stride: int = 1,
          relu: bool = True) -> TensorSpec:
    n, h, w, c = shape
    weight_shape = (c, 3, 3, 1) if depthwise else (out_c, 3, 3, c)
    weights = _full_range_weights(rng, weight_shape)
    scales = rng.uniform(0.002, 0.006, weight_shape[0])
    oh, ow = -(-h // stride), -(-w // stride)
    return g.node(na.NODE_TYPE_CONV2D_FUSION,
                  na.Conv2DFusion(kernelSize=[3, 3], stride=[stride, stride], dilation=[1, 1],
                                  padMode=ht.PAD_MODE_SAME, group=c if depthwise else 1,
                                  inChannel=c, outChannel=out_c,
                                  activationType=RELU if relu else 0),
                  [t, g.tensor(weights.shape, weights, np.int8,
                               quant=[QuantParam(8, 0, float(s)) for s in scales]),
                   g.tensor((out_c,), rng.integers(-2000, 2000, out_c).astype(np.int32),
                            np.int32)],
                  (n, oh, ow, out_c), dtype=np.int8,
                  quant=[QuantParam(8, -128 if relu else 0, out_scale)], quant_type=ALL)


def resnet(seed: int = 3, batch: int = 2, size: int = 8, c: int = 32) -> Int8Model:
    """Two residual blocks: conv-relu, conv, int8 add of the block's input, relu."""
    rng = np.random.default_rng(seed)
    g = GraphBuilder()
    shape = (batch, size, size, c)
    x = g.tensor(shape, dtype=np.int8, quant=[QuantParam(8, 0, 0.05)])
    t = _conv(g, rng, x, shape, c, 0.4)
    for _ in range(2):
        h = _conv(g, rng, t, shape, c, 0.4)
        h = _conv(g, rng, h, shape, c, 0.5, relu=False)
        t = g.node(na.NODE_TYPE_ADD_FUSION, na.AddFusion(activationType=RELU), [t, h], shape,
                   dtype=np.int8, quant=[QuantParam(8, -128, 0.5)], quant_type=ALL)
    return Int8Model("resnet", g.graph([x], [t]),
                     [rng.integers(-128, 128, shape).astype(np.int8)])


def mobilenet(seed: int = 4, batch: int = 2, size: int = 16, c: int = 32) -> Int8Model:
    """Depthwise 3×3 then pointwise-as-3×3 blocks, one with stride 2."""
    rng = np.random.default_rng(seed)
    g = GraphBuilder()
    shape = (batch, size, size, c)
    x = g.tensor(shape, dtype=np.int8, quant=[QuantParam(8, 0, 0.05)])
    t = x
    for stride in (1, 2, 1):
        t = _conv(g, rng, t, shape, shape[3], 0.2, depthwise=True, stride=stride)
        shape = (shape[0], -(-shape[1] // stride), -(-shape[2] // stride), shape[3])
        t = _conv(g, rng, t, shape, c, 0.6)
    return Int8Model("mobilenet", g.graph([x], [t]),
                     [rng.integers(-128, 128, (batch, size, size, c)).astype(np.int8)])


def quantising_cnn(seed: int = 5, batch: int = 2, size: int = 8, c: int = 32) -> Int8Model:
    """A float input quantised inside the model (QuantDTypeCast), then three int8
    convolutions: the path our uint8-activations rewrite takes."""
    rng = np.random.default_rng(seed)
    g = GraphBuilder()
    shape = (batch, size, size, c)
    x = g.tensor(shape)
    t = g.node(na.NODE_TYPE_QUANT_DTYPE_CAST,
               na.QuantDTypeCast(srcT=hdi_data_type(np.float32), dstT=hdi_data_type(np.int8)),
               [x], shape, dtype=np.int8, quant=[QuantParam(8, 2, 1 / 100)])
    for _ in range(3):
        t = _conv(g, rng, t, shape, c, 0.3)
    return Int8Model("quantising_cnn", g.graph([x], [t]),
                     [rng.uniform(-1.3, 1.3, shape).astype(np.float32)])


MODELS: dict[str, Callable[[], Int8Model]] = {
    "deep_cnn8": lambda: deep_cnn()[0],
    "mlp": mlp,
    "resnet": resnet,
    "mobilenet": mobilenet,
    "quantising_cnn": quantising_cnn,
}


def never() -> bool:
    return False


def numpy_outputs(model: Int8Model) -> list[np.ndarray]:
    return ExecutionPlan(model.graph).run(model.inputs, never)


def ort_outputs(model: Int8Model) -> tuple[list[np.ndarray], str]:
    """The onnxruntime engine's outputs, and how the graph was split."""
    from nnrt.drivers.cpu.ort import engine

    holder = {}

    def partitioner(graph, kernels):
        holder["part"] = engine.partition(graph, kernels)
        return engine.units_with_tensors(holder["part"], graph)

    outputs = ExecutionPlan(model.graph, partitioner=partitioner).run(model.inputs, never)
    return outputs, holder["part"].describe()


def steps_apart(got: list[np.ndarray], want: list[np.ndarray]) -> int:
    return max(int(np.abs(a.astype(np.int64) - b.astype(np.int64)).max())
               for a, b in zip(got, want))


def differential() -> dict[str, dict[str, object]]:
    """Per model: the largest difference in steps between the engines, the share of outputs
    that differ, and the partition (what ran on onnxruntime)."""
    from nnrt.drivers.cpu.ort import int8_kernels

    found = {}
    for name, make in MODELS.items():
        model = make()
        want = numpy_outputs(model)
        got, partition = ort_outputs(model)
        found[name] = {
            "steps": steps_apart(got, want),
            "differing": float(np.mean(np.concatenate(
                [(a != b).reshape(-1) for a, b in zip(got, want)]))),
            "partition": partition,
            "int8_kernels": int8_kernels.in_force().describe(),
        }
    return found


if __name__ == "__main__":
    json.dump(differential(), sys.stdout)
