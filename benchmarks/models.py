"""Whole models on the CPU driver against onnxruntime, measured side by side in one run.

Seven models, the same weights on both sides:

* mlp        an MLP, batch 1: 1024 -> 2048 (ReLU) -> 2048 (ReLU) -> 1000, softmax
* resnet     a ResNet-style CNN on a 1x64x64x3 image: conv stem, max pool, residual blocks
             (conv + folded-BN bias + ReLU, identity or strided 1x1 projection shortcut)
             at 64, 128 and 256 channels, global average pool, fully connected
* mobilenet  a MobileNet-style CNN on a 1x96x96x3 image: conv stem, depthwise-separable
             blocks (3x3 depthwise + ReLU6, 1x1 pointwise + ReLU6) from 32 to 256 channels
* encoder    a transformer encoder block, seq 64 x d 256, 4 heads, FFN 1024: projections,
             scaled dot-product attention (MatMul, Softmax), residuals, LayerNorm, GELU
* minilm     a MiniLM-L6-sized encoder (all-MiniLM-L6-v2's shapes, random weights): 6
             layers, batch 1 x seq 128 x hidden 384, 12 heads, FFN 1536, exact (erf) GELU
* lstm       one LSTM layer, seq 32 x batch 1 x 64 inputs -> hidden 128, and a fully
             connected head (10) on the last hidden state
* int8cnn    an int8 QDQ CNN on a 1x3x64x64 image, as onnxruntime's static quantisation
             writes one: QuantizeLinear -> DequantizeLinear around every activation
             (per tensor, calibrated on the float model's run), int8 weights per output
             channel, int32 biases; 3 x (conv 3x3 + ReLU, 2x2 max pool) at 32-128
             channels, global average pool, Gemm

and an eighth line, `floor`: one ReLU on 4 values, the fixed cost of a run on each side (for
nnrt the client, the gRPC round trip and the driver's request handling).

nnrt runs them through the full client (`nnrt.client.api`) against a CPU driver in its own
process (an embedded driver, on its default engine: onnxruntime, `nnrt-driver cpu --engine
ort`). mlp, resnet, mobilenet, encoder, lstm and floor are written twice, with nnrt's
Pythonic builder (NHWC images) and as ONNX graphs (NCHW, weights transposed, LSTM gates in
ONNX's order); minilm and int8cnn are built once, as ONNX, and nnrt loads that graph
through its ONNX import (`Model.load` of the .onnx), so both sides run the same graph
(int8cnn: onnxruntime runs the QDQ graph with its QDQ fusions, nnrt imports it onto
quantised OH_NN operations). Outputs are compared first: allclose, and for int8cnn within
two quantisation steps of the output and the same top-1. onnxruntime runs each model with
its faster intra-op thread count, 1 or every core, timed per model at startup (printed,
and as `thr` in the table; `--threads N` fixes it). Then each round runs every model on
both engines, in alternating order, so that machine noise hits both alike; the medians of
every call's latency are printed. Between one engine's calls and the other's the benchmark
pauses (`--settle`): both keep their worker threads spinning for a while after a call,
which would otherwise take the cores from the other.

Targets (issue "The CPU driver, complete"), printed per model with met / missed:

  (a) nnrt / onnxruntime <= 1.25x, for every model where onnxruntime takes >= 1 ms
      (`-` below that);
  (b) nnrt - onnxruntime <= 0.15 ms + 10% of onnxruntime, for every model, floor included
      (the `allowed` column).

Issue 32's targets, in the last columns (`p90`, `i32`): a model onnxruntime runs in under
1 ms gets nnrt's p50 <= onnxruntime's + 0.1 ms and nnrt's p90 <= 1.5x its own p50 (no
bimodal sleeping), in these rounds and in a steady stream (`--stream N`: N calls back to
back per model and engine after the rounds, a second table); a model of >= 1 ms gets
nnrt <= 1.1x onnxruntime.

    python benchmarks/models.py [--rounds 15] [--calls 10] [--models minilm,lstm,int8cnn]
    python benchmarks/models.py --in-process     # also the driver's plan alone, no IPC
    python benchmarks/models.py --per-node --models encoder   # the plan's time per step

`--in-process` adds a column: the same prepared model run directly in this process (the
driver's execution plan, restored from the compilation's cache — the graph and, with the
onnxruntime engine, its optimised models — without the client, gRPC and shared-memory
copies), which separates the computation's cost from the transport's. `--per-node` then
lists where the plan's time goes: each step's median time inside the plan, the slowest
first; a step is a numpy kernel (one node) or an onnxruntime segment (several nodes).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

try:
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper
except ImportError as exc:  # pragma: no cover - a benchmark-only dependency
    sys.exit(f"benchmarks/models.py needs onnx and onnxruntime (dependencies of nnrt): {exc}")

from nnrt.client.api import Model
from nnrt.client.core import model_cache
from nnrt.client.core.device import registry
from nnrt.client.core.embedded import EmbeddedDrivers
from nnrt.drivers.cpu.device import CpuDevice
from nnrt.hdi.device import PrepareConfig
from nnrt.common.runtime_dir import ENV as RUNTIME_ENV

OPSET = 17
# Targets: (a) nnrt / onnxruntime median latency, for models where onnxruntime takes at
# least RATIO_FROM_MS; (b) for every model, nnrt - onnxruntime at most OVERHEAD_MS plus
# OVERHEAD_SHARE of onnxruntime's time.
RATIO_TARGET = 1.25
RATIO_FROM_MS = 1.0
OVERHEAD_MS = 0.15
OVERHEAD_SHARE = 0.10
# Issue 32: sub-millisecond models within SUB_MS_EXTRA_MS of onnxruntime at p50 and with
# p90 <= SPREAD_TARGET x p50; models of >= 1 ms within LARGE_RATIO_TARGET.
SUB_MS_EXTRA_MS = 0.1
SPREAD_TARGET = 1.5
LARGE_RATIO_TARGET = 1.1
RNG = np.random.default_rng(20240611)


def rand(*shape: int, scale: float = 1.0) -> np.ndarray:
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


# ----------------------------------------------------------------------------- ONNX building


class OnnxGraph:
    """A small helper around onnx.helper: named initializers, nodes, one input and output."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self._n = 0

    def fresh(self, stem: str) -> str:
        self._n += 1
        return f"{stem}_{self._n}"

    def const(self, value: np.ndarray, stem: str = "c") -> str:
        name = self.fresh(stem)
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def node(self, op: str, inputs: list[str], stem: str | None = None, **attrs) -> str:
        out = self.fresh(stem or op.lower())
        self.nodes.append(helper.make_node(op, inputs, [out], **attrs))
        return out

    def node_outputs(self, op: str, inputs: list[str], wanted: list[bool], **attrs) -> list[str]:
        """A node of several outputs, "" for those not wanted; their names."""
        outs = [self.fresh(op.lower()) if w else "" for w in wanted]
        self.nodes.append(helper.make_node(op, inputs, outs, **attrs))
        return outs

    def model(self, x_shape: list[int], out: str, out_shape: list[int]) -> bytes:
        graph = helper.make_graph(
            self.nodes, self.name,
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
            [helper.make_tensor_value_info(out, TensorProto.FLOAT, out_shape)],
            self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
        model.ir_version = 8
        onnx.checker.check_model(model)
        return model.SerializeToString()


# ----------------------------------------------------------------------------- the four models


@dataclass
class Case:
    name: str
    describe: str
    x: np.ndarray  # the nnrt input (NHWC for images; the ONNX layout for imported models)
    onnx_x: np.ndarray  # the same values in the ONNX layout
    # The nnrt model written with the Pythonic builder; None: the ONNX graph itself, through
    # the ONNX import (Model.load), so that both sides run the same graph.
    build_nnrt: Callable[[Model], None] | None
    onnx_bytes: bytes  # every model ends in one layout on both sides
    # Quantised models: outputs compared within two steps of this size and by top-1, not by
    # allclose (the two engines may round an intermediate differently).
    quant_step: float | None = None


def mlp_case() -> Case:
    batch, sizes = 1, (1024, 2048, 2048, 1000)
    layers = [(rand(o, i, scale=1 / math.sqrt(i)), rand(o, scale=0.1))
              for i, o in itertools.pairwise(sizes)]
    x = rand(batch, sizes[0])

    def build(m: Model) -> None:
        h = m.input(x.shape)
        for k, (w, b) in enumerate(layers):
            last = k == len(layers) - 1
            h = m.fully_connected(h, w, b, activation=None if last else "relu")
        m.outputs(m.softmax(h))

    g = OnnxGraph("mlp")
    h = "x"
    for k, (w, b) in enumerate(layers):
        h = g.node("Gemm", [h, g.const(w, "w"), g.const(b, "b")], transB=1)
        if k < len(layers) - 1:
            h = g.node("Relu", [h])
    y = g.node("Softmax", [h], axis=-1)
    return Case("mlp", f"MLP batch {batch}, {' -> '.join(map(str, sizes))}", x, x, build,
                g.model(list(x.shape), y, [batch, sizes[-1]]))


class ConvNet:
    """Builds the same CNN twice: nnrt (NHWC, weight [out, kh, kw, in/group]) and ONNX
    (NCHW, weight [out, in/group, kh, kw])."""

    def __init__(self, m: Model | None, g: OnnxGraph | None) -> None:
        self.m, self.g = m, g

    def conv(self, x, w: np.ndarray, b: np.ndarray, stride: int, pad: int, act: str | None,
             group: int = 1):
        if self.m is not None:
            return self.m.conv2d(x, w, b, stride=stride, padding=[pad] * 4, group=group,
                                 activation=act)
        y = self.g.node("Conv", [x, self.g.const(w.transpose(0, 3, 1, 2), "w"),
                                 self.g.const(b, "b")],
                        strides=[stride, stride], pads=[pad] * 4, group=group,
                        kernel_shape=list(w.shape[1:3]))
        if act == "relu":
            y = self.g.node("Relu", [y])
        elif act == "relu6":
            y = self.g.node("Clip", [y, self.g.const(np.float32(0)), self.g.const(np.float32(6))])
        return y

    def add_relu(self, a, b):
        if self.m is not None:
            return self.m.add(a, b, activation="relu")
        return self.g.node("Relu", [self.g.node("Add", [a, b])])

    def max_pool(self, x, k: int, stride: int, pad: int):
        if self.m is not None:
            return self.m.max_pool(x, k, stride, padding=[pad] * 4)
        return self.g.node("MaxPool", [x], kernel_shape=[k, k], strides=[stride, stride],
                           pads=[pad] * 4)

    def head(self, x, spatial: int, channels: int, w: np.ndarray, b: np.ndarray):
        """Global average pool, flatten, fully connected."""
        if self.m is not None:
            pooled = self.m.avg_pool(x, spatial, 1)
            flat = self.m.reshape(pooled, [1, channels])
            return self.m.fully_connected(flat, w, b)
        pooled = self.g.node("GlobalAveragePool", [x])
        flat = self.g.node("Flatten", [pooled], axis=1)
        return self.g.node("Gemm", [flat, self.g.const(w, "fc_w"), self.g.const(b, "fc_b")],
                           transB=1)


def conv_weight(out_c: int, k: int, in_c: int, gain: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """A conv weight [out, k, k, in] and a bias (a folded batch norm's shift)."""
    return rand(out_c, k, k, in_c, scale=gain / math.sqrt(k * k * in_c)), rand(out_c, scale=0.05)


def conv_net_case(name: str, description: str, x: np.ndarray, network: Callable,
                  classes: int) -> Case:
    """A Case of one `network(net, h)` over ConvNet, written once for both engines: nnrt's
    Model on the NHWC input x, and an ONNX graph on its NCHW transpose."""

    def build(m: Model) -> None:
        m.outputs(network(ConvNet(m, None), m.input(x.shape)))

    g = OnnxGraph(name)
    y = network(ConvNet(None, g), "x")
    onnx_x = np.ascontiguousarray(x.transpose(0, 3, 1, 2))
    return Case(name, description, x, onnx_x, build,
                g.model(list(onnx_x.shape), y, [1, classes]))


def resnet_case() -> Case:
    size, classes = 64, 10
    stem = conv_weight(64, 3, 3, 1.4)
    # (in, out, stride): identity blocks, then strided blocks with a 1x1 projection
    plan = [(64, 64, 1), (64, 64, 1), (64, 128, 2), (128, 128, 1), (128, 256, 2)]
    blocks = [(conv_weight(o, 3, i, 1.4), conv_weight(o, 3, o, 0.5),
               conv_weight(o, 1, i) if s != 1 or i != o else None, s) for i, o, s in plan]
    fc = (rand(classes, 256, scale=1 / 16), rand(classes, scale=0.1))
    x = rand(1, size, size, 3)

    def network(net: ConvNet, h):
        h = net.conv(h, *stem, 1, 1, "relu")
        h = net.max_pool(h, 3, 2, 1)
        for first, second, project, stride in blocks:
            y = net.conv(h, *first, stride, 1, "relu")
            y = net.conv(y, *second, 1, 1, None)
            shortcut = h if project is None else net.conv(h, *project, stride, 0, None)
            h = net.add_relu(y, shortcut)
        return net.head(h, size // 8, 256, *fc)

    return conv_net_case("resnet", f"ResNet-style, 1x{size}x{size}x3, 64-256 channels, "
                                   f"{len(blocks)} residual blocks", x, network, classes)


def mobilenet_case() -> Case:
    size, classes = 96, 10
    stem = conv_weight(32, 3, 3, 1.4)
    # (in, out, stride) of each depthwise-separable block
    plan = [(32, 64, 1), (64, 128, 2), (128, 128, 1), (128, 256, 2), (256, 256, 1),
            (256, 256, 1)]
    blocks = [(conv_weight(i, 3, 1, 1.4), conv_weight(o, 1, i, 1.4), s) for i, o, s in plan]
    fc = (rand(classes, 256, scale=1 / 16), rand(classes, scale=0.1))
    x = rand(1, size, size, 3)

    def network(net: ConvNet, h):
        h = net.conv(h, *stem, 2, 1, "relu6")
        for (dw, pw, stride), (c, _, _) in zip(blocks, plan):
            h = net.conv(h, *dw, stride, 1, "relu6", group=c)
            h = net.conv(h, *pw, 1, 0, "relu6")
        return net.head(h, size // 8, 256, *fc)

    return conv_net_case("mobilenet", f"MobileNet-style, 1x{size}x{size}x3, 32-256 channels, "
                                      f"{len(blocks)} depthwise-separable blocks", x, network,
                         classes)


def encoder_case() -> Case:
    seq, d, heads, ffn = 64, 256, 4, 1024
    hd = d // heads
    s = 1 / math.sqrt(d)
    wq, wk, wv, wo = (rand(d, d, scale=s) for _ in range(4))  # [out, in]
    bq, bk, bv, bo = (rand(d, scale=0.02) for _ in range(4))
    w1, b1 = rand(ffn, d, scale=s), rand(ffn, scale=0.02)
    w2, b2 = rand(d, ffn, scale=1 / math.sqrt(ffn)), rand(d, scale=0.02)
    g1, be1, g2, be2 = (1 + rand(d, scale=0.1), rand(d, scale=0.1),
                        1 + rand(d, scale=0.1), rand(d, scale=0.1))
    eps = 1e-5
    scale = np.float32(1 / math.sqrt(hd))
    x = rand(seq, d)

    def build(m: Model) -> None:
        xin = m.input(x.shape)

        def heads_first(t):  # [seq, d] -> [heads, seq, hd]
            return m.transpose(m.reshape(t, [seq, heads, hd]), [1, 0, 2])

        def layer_norm(t, gamma, beta):
            return m.op("LAYER_NORM", t, gamma, beta, beginNormAxis=1, epsilon=eps,
                        beginParamsAxis=1)

        q = heads_first(m.fully_connected(xin, wq, bq))
        k = heads_first(m.fully_connected(xin, wk, bk))
        v = heads_first(m.fully_connected(xin, wv, bv))
        scores = m.mul(m.matmul(q, k, transpose_b=True), scale)
        context = m.matmul(m.softmax(scores), v)  # [heads, seq, hd]
        merged = m.reshape(m.transpose(context, [1, 0, 2]), [seq, d])
        h = layer_norm(m.add(xin, m.fully_connected(merged, wo, bo)), g1, be1)
        f = m.fully_connected(m.op("GELU", m.fully_connected(h, w1, b1)), w2, b2)
        m.outputs(layer_norm(m.add(h, f), g2, be2))

    g = OnnxGraph("encoder")

    def linear(t: str, w: np.ndarray, b: np.ndarray) -> str:
        return g.node("Add", [g.node("MatMul", [t, g.const(np.ascontiguousarray(w.T), "w")]),
                              g.const(b, "b")])

    def heads_first_onnx(t: str, perm: list[int]) -> str:
        shaped = g.node("Reshape", [t, g.const(np.array([seq, heads, hd], np.int64))])
        return g.node("Transpose", [shaped], perm=perm)

    def layer_norm_onnx(t: str, gamma: np.ndarray, beta: np.ndarray) -> str:
        return g.node("LayerNormalization", [t, g.const(gamma), g.const(beta)], axis=-1,
                      epsilon=eps)

    q = heads_first_onnx(linear("x", wq, bq), [1, 0, 2])
    kt = heads_first_onnx(linear("x", wk, bk), [1, 2, 0])
    v = heads_first_onnx(linear("x", wv, bv), [1, 0, 2])
    scores = g.node("Mul", [g.node("MatMul", [q, kt]), g.const(scale)])
    context = g.node("MatMul", [g.node("Softmax", [scores], axis=-1), v])
    merged = g.node("Reshape", [g.node("Transpose", [context], perm=[1, 0, 2]),
                                g.const(np.array([seq, d], np.int64))])
    h = layer_norm_onnx(g.node("Add", ["x", linear(merged, wo, bo)]), g1, be1)
    pre = linear(h, w1, b1)  # GELU, exact: x * 0.5 * (1 + erf(x / sqrt 2))
    erf = g.node("Erf", [g.node("Div", [pre, g.const(np.float32(math.sqrt(2)))])])
    gelu = g.node("Mul", [g.node("Mul", [pre, g.const(np.float32(0.5))]),
                          g.node("Add", [erf, g.const(np.float32(1))])])
    y = layer_norm_onnx(g.node("Add", [h, linear(gelu, w2, b2)]), g2, be2)
    return Case("encoder", f"transformer encoder block, seq {seq} x d {d}, {heads} heads, "
                           f"FFN {ffn}", x, x, build, g.model([seq, d], y, [seq, d]))


def floor_case() -> Case:
    """One ReLU on 4 values: what a run costs on each side when there is nothing to compute
    (for nnrt: the client, the gRPC round trip and the driver's request handling)."""
    x = rand(1, 4)

    def build(m: Model) -> None:
        m.outputs(m.relu(m.input(x.shape)))

    g = OnnxGraph("floor")
    return Case("floor", "one ReLU on [1, 4]: the fixed cost of a run", x, x, build,
                g.model([1, 4], g.node("Relu", ["x"]), [1, 4]))


def minilm_case() -> Case:
    """A MiniLM-L6-sized encoder (all-MiniLM-L6-v2's shapes), built once as ONNX and
    imported into nnrt: both sides run this graph."""
    layers, batch, seq, d, heads, ffn = 6, 1, 128, 384, 12, 1536
    hd = d // heads
    eps = 1e-12
    x = rand(batch, seq, d)  # the embeddings (token + position, normalised)
    g = OnnxGraph("minilm")

    def linear(t: str, n_in: int, n_out: int) -> str:
        w = rand(n_in, n_out, scale=1 / math.sqrt(n_in))  # [in, out], as PyTorch exports
        return g.node("Add", [g.node("MatMul", [t, g.const(w, "w")]),
                              g.const(rand(n_out, scale=0.02), "b")])

    def heads_first(t: str, perm: list[int]) -> str:  # [b, s, d] -> [b, h, s, hd] (K: hd, s)
        shaped = g.node("Reshape", [t, g.const(np.array([batch, seq, heads, hd], np.int64))])
        return g.node("Transpose", [shaped], perm=perm)

    def layer_norm(t: str) -> str:
        return g.node("LayerNormalization", [t, g.const(1 + rand(d, scale=0.1)),
                                             g.const(rand(d, scale=0.1))], axis=-1, epsilon=eps)

    h = "x"
    scale = np.float32(1 / math.sqrt(hd))
    for _ in range(layers):
        q = heads_first(linear(h, d, d), [0, 2, 1, 3])
        kt = heads_first(linear(h, d, d), [0, 2, 3, 1])
        v = heads_first(linear(h, d, d), [0, 2, 1, 3])
        scores = g.node("Mul", [g.node("MatMul", [q, kt]), g.const(scale)])
        context = g.node("MatMul", [g.node("Softmax", [scores], axis=-1), v])
        merged = g.node("Reshape", [g.node("Transpose", [context], perm=[0, 2, 1, 3]),
                                    g.const(np.array([batch, seq, d], np.int64))])
        h = layer_norm(g.node("Add", [h, linear(merged, d, d)]))
        pre = linear(h, d, ffn)  # GELU, exact: x * 0.5 * (1 + erf(x / sqrt 2))
        erf = g.node("Erf", [g.node("Div", [pre, g.const(np.float32(math.sqrt(2)))])])
        gelu = g.node("Mul", [g.node("Mul", [pre, g.const(np.float32(0.5))]),
                              g.node("Add", [erf, g.const(np.float32(1))])])
        h = layer_norm(g.node("Add", [h, linear(gelu, ffn, d)]))
    return Case("minilm", f"MiniLM-L6-sized encoder: {layers} layers, batch {batch} x seq {seq} "
                          f"x hidden {d}, {heads} heads, FFN {ffn} (ONNX import)", x, x, None,
                g.model(list(x.shape), h, list(x.shape)))


def lstm_case() -> Case:
    """One LSTM layer over the sequence, a fully connected head on the last hidden state."""
    seq, batch, n_in, hidden, classes = 32, 1, 64, 128, 10
    s = 1 / math.sqrt(hidden)
    # ONNX's layout and gate order (i, o, f, c); OH_NN's LSTM takes i, f, g (= c), o.
    w, r, b = rand(1, 4 * hidden, n_in, scale=s), rand(1, 4 * hidden, hidden, scale=s), \
        rand(1, 8 * hidden, scale=s)
    fc_w, fc_b = rand(classes, hidden, scale=s), rand(classes, scale=0.1)
    x = rand(seq, batch, n_in)

    def gates(a: np.ndarray) -> np.ndarray:
        i, o, f, c = np.split(a, 4, axis=1)
        return np.ascontiguousarray(np.concatenate([i, f, c, o], axis=1))

    def build(m: Model) -> None:
        zeros = np.zeros((1, batch, hidden), np.float32)
        bias = np.concatenate([gates(half) for half in np.split(b, 2, axis=1)], axis=1)
        _, h_n, _ = m.op("LSTM", m.input(x.shape), gates(w), gates(r), bias, zeros, zeros,
                         bidirectional=False, hasBias=True, inputSize=n_in, hiddenSize=hidden,
                         numLayers=1, numDirections=1, outputs=3,
                         shapes=[(seq, batch, hidden), (1, batch, hidden), (1, batch, hidden)])
        m.outputs(m.fully_connected(m.reshape(h_n, [batch, hidden]), fc_w, fc_b))

    g = OnnxGraph("lstm")
    _, y_h = g.node_outputs("LSTM", ["x", g.const(w, "w"), g.const(r, "r"), g.const(b, "b")],
                            [False, True], hidden_size=hidden)
    last = g.node("Reshape", [y_h, g.const(np.array([batch, hidden], np.int64))])
    y = g.node("Gemm", [last, g.const(fc_w, "fc_w"), g.const(fc_b, "fc_b")], transB=1)
    return Case("lstm", f"LSTM, seq {seq} x batch {batch} x {n_in} -> hidden {hidden}, "
                        f"fully connected to {classes}", x, x, build,
                g.model(list(x.shape), y, [batch, classes]))


def int8cnn_case() -> Case:
    """A QDQ CNN as onnxruntime's static quantisation writes one: activations
    QuantizeLinear -> DequantizeLinear (int8, per tensor, calibrated on the float model's
    run), weights int8 per output channel, biases int32 at input scale x weight scale.
    onnxruntime runs the QDQ graph (its QDQ fusions); nnrt imports it onto quantised OH_NN
    operations."""
    size, classes = 64, 10
    plan = [(3, 32), (32, 64), (64, 128)]  # 3x3 conv + ReLU, then 2x2 max pool, each
    convs = [conv_weight(o, 3, i, 1.4) for i, o in plan]
    fc_w, fc_b = rand(classes, plan[-1][1], scale=1 / math.sqrt(plan[-1][1])), \
        rand(classes, scale=0.1)
    x = np.ascontiguousarray(rand(1, size, size, 3).transpose(0, 3, 1, 2))  # NCHW

    def network(g: OnnxGraph, q: Callable[[str], str], weight: Callable, bias: Callable,
                h: str) -> tuple[str, list[str]]:
        """The CNN over `h`, `q` around every activation (identity for the float model);
        the output and the activations in order (calibration)."""
        seen = [h]
        h = q(h)
        for k, (w, b) in enumerate(convs):
            wname = weight(w.transpose(0, 3, 1, 2), axis=0)
            h = g.node("Conv", [h, wname, bias(b, seen[-1], wname)], pads=[1, 1, 1, 1],
                       kernel_shape=[3, 3])
            h = g.node("Relu", [h])
            seen.append(h)
            h = q(h)
            h = g.node("MaxPool", [h], kernel_shape=[2, 2], strides=[2, 2])
            seen.append(h)
            h = q(h)
        h = g.node("GlobalAveragePool", [h])
        seen.append(h)
        h = q(h)
        h = g.node("Flatten", [h], axis=1)
        seen.append(h)
        h = q(h)
        wname = weight(fc_w, axis=0)  # Gemm transB=1: [N, K], the channels on axis 0
        h = g.node("Gemm", [h, wname, bias(fc_b, seen[-1], wname)], transB=1)
        seen.append(h)
        return q(h), seen

    # Calibration: the float model, every activation an output.
    f = OnnxGraph("int8cnn_float")
    y, seen = network(f, lambda t: t, lambda w, axis: f.const(w, "w"),
                      lambda b, _x, _w: f.const(b, "b"), "x")
    graph = helper.make_graph(
        f.nodes, f.name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
        [helper.make_tensor_value_info(t, TensorProto.FLOAT, None) for t in seen], f.inits)
    calib = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    calib.ir_version = 8
    results = ort.InferenceSession(calib.SerializeToString(),
                                   providers=["CPUExecutionProvider"]).run(seen, {"x": x})
    # in the order q() meets the activations below (once each, as `seen` lists them)
    ranges = iter([(min(float(r.min()), 0.0), max(float(r.max()), 0.0)) for r in results])

    g = OnnxGraph("int8cnn")
    scales: dict[str, float] = {}  # activation (float name) -> its scale
    weight_scales: dict[str, np.ndarray] = {}

    def q(t: str) -> str:
        low, high = next(ranges)
        scale = np.float32((high - low) / 255)
        zero = np.int8(np.clip(np.rint(-128 - low / scale), -128, 127))
        scales[t] = float(scale)
        s, z = g.const(np.asarray(scale, np.float32), "s"), g.const(np.asarray(zero), "z")
        return g.node("DequantizeLinear", [g.node("QuantizeLinear", [t, s, z]), s, z])

    def weight(w: np.ndarray, axis: int) -> str:
        moved = np.moveaxis(w, axis, 0)
        s = (np.abs(moved.reshape(len(moved), -1)).max(axis=1) / 127).astype(np.float32)
        shape = [1] * w.ndim
        shape[axis] = -1
        wq = np.clip(np.rint(w / s.reshape(shape)), -127, 127).astype(np.int8)
        out = g.node("DequantizeLinear", [g.const(wq, "wq"), g.const(s, "ws"),
                                          g.const(np.zeros(len(s), np.int8), "wz")], axis=axis)
        weight_scales[out] = s
        return out

    def bias(b: np.ndarray, x_name: str, w_name: str) -> str:
        s = (np.float32(scales[x_name]) * weight_scales[w_name]).astype(np.float32)
        return g.node("DequantizeLinear", [g.const(np.rint(b / s).astype(np.int32), "bq"),
                                           g.const(s, "bs"),
                                           g.const(np.zeros(len(s), np.int32), "bz")], axis=0)

    y, seen = network(g, q, weight, bias, "x")
    return Case("int8cnn", f"int8 QDQ CNN, 1x3x{size}x{size}, 3 x (conv 3x3 + ReLU, max pool) "
                           f"{plan[0][1]}-{plan[-1][1]} channels, per-channel weights, global "
                           f"average pool, Gemm (ONNX import)", x, x, None,
                g.model(list(x.shape), y, [1, classes]), quant_step=scales[seen[-1]])


CASES = {"mlp": mlp_case, "resnet": resnet_case, "mobilenet": mobilenet_case,
         "encoder": encoder_case, "minilm": minilm_case, "lstm": lstm_case,
         "int8cnn": int8cnn_case, "floor": floor_case}
DEFAULT_MODELS = ",".join(CASES)


# ----------------------------------------------------------------------------- engines


class NnrtEngine:
    def __init__(self, case: Case) -> None:
        if case.build_nnrt is None:  # the ONNX graph itself, through the ONNX import
            with tempfile.TemporaryDirectory(prefix="nnrt-bench-") as folder:
                path = os.path.join(folder, f"{case.name}.onnx")
                with open(path, "wb") as f:
                    f.write(case.onnx_bytes)
                self.model = Model.load(path)
        else:
            self.model = Model()
            case.build_nnrt(self.model)
        self.compiled = self.model.compile("cpu")
        self.executor = self.compiled.executor()

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return self.executor.run(x)

    def close(self) -> None:
        self.executor.close()
        self.compiled.close()
        self.model.close()


def use_drivers_key() -> None:
    """Authenticate cache blobs with the key of the driver in $NNRT_RUNTIME_DIR (its state
    directory by the driver's own rule, hdi/cache_key.py): the blobs this process restores
    were sealed by that driver."""
    from pathlib import Path

    from nnrt.common.runtime_dir import ENV
    from nnrt.hdi import cache_key

    cache_key.configure(cache_key.state_dir(None, Path(os.environ[ENV])))


class InProcessEngine:
    """The driver's prepared model, restored from the compilation's cache in this process
    (CpuDevice.prepare_from_cache: the graph and, with the onnxruntime engine, a second blob
    of its optimised models): its execution plan with no client, gRPC or shared memory
    around it."""

    def __init__(self, engine: NnrtEngine) -> None:
        _, contents = model_cache.unpack(engine.compiled.export_cache())
        use_drivers_key()
        self.prepared = CpuDevice().prepare_from_cache(contents.blobs, PrepareConfig())

    def __call__(self, x: np.ndarray) -> np.ndarray:
        (y,) = self.prepared.run([x], lambda: False)
        return y


class OrtEngine:
    def __init__(self, case: Case, threads: int) -> None:
        self.threads = threads
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        self.session = ort.InferenceSession(case.onnx_bytes, options,
                                            providers=["CPUExecutionProvider"])
        self.name = self.session.get_inputs()[0].name

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return self.session.run(None, {self.name: x})[0]


def timed(fn: Callable[[np.ndarray], np.ndarray], x: np.ndarray, calls: int,
          settle: float = 0.0) -> list[float]:
    time.sleep(settle)  # the other engine's spinning threads go to sleep
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        y = fn(x)
        times.append(time.perf_counter() - start)
        del y  # nnrt's result views must die so that the executor reuses its tensors
    return times


def fastest_ort(case: Case, choices: list[int], calls: int, settle: float,
                rounds: int = 3) -> tuple[OrtEngine, dict[int, float]]:
    """onnxruntime's best intra-op thread count for this model among `choices`: each
    choice's session timed in alternating rounds; the fastest session and every choice's
    median seconds."""
    engines = [OrtEngine(case, n) for n in choices]
    samples: dict[int, list[float]] = {n: [] for n in choices}
    for engine in engines:
        timed(engine, case.onnx_x, 3)
    for r in range(rounds):
        for engine in (engines if r % 2 == 0 else engines[::-1]):
            samples[engine.threads] += timed(engine, case.onnx_x, calls, settle)
    medians = {n: statistics.median(t) for n, t in samples.items()}
    best = min(engines, key=lambda e: medians[e.threads])
    return best, medians


def per_node_times(engine: InProcessEngine, x: np.ndarray, runs: int) -> list[tuple[float, str]]:
    """(median seconds, description) of every step of the plan over `runs` runs: a numpy
    kernel (one node) or an onnxruntime segment (several), its execute timed where the plan
    calls it."""
    steps = engine.prepared.plan.steps
    samples: list[list[float]] = [[] for _ in steps]
    units = [step.unit for step in steps]
    # what each unit held as an instance attribute `execute` before (normally nothing)
    before = {id(u): (u, vars(u).get("execute")) for u in units}

    def timed_execute(execute, sink):
        def run(inputs):
            start = time.perf_counter()
            result = execute(inputs)
            sink.append(time.perf_counter() - start)
            return result
        return run

    try:
        for unit, sink in zip(units, samples):
            # an attribute of the instance shadows the class's method; deleted afterwards
            unit.execute = timed_execute(unit.execute, sink)
        for _ in range(runs):
            engine(x)
    finally:
        for unit, execute in before.values():
            if execute is None:
                vars(unit).pop("execute", None)
            else:
                unit.execute = execute
    plan = engine.prepared.plan
    rows = []
    for step, sink in zip(steps, samples):
        unit = step.unit
        shapes = " ".join(str(list(plan.shapes[i])) if plan.shapes else "?" for i in step.inputs
                          if i not in plan.constants)
        node = getattr(unit, "node", None)
        what = (f"{node.index:3d} {type(unit).__name__}" if node is not None
                else f"{type(unit).__name__}: {unit.label}")
        rows.append((statistics.median(sink) if sink else 0.0, f"{what} {shapes}"))
    return sorted(rows, reverse=True)


# ----------------------------------------------------------------------------- main


def compare(case: Case, got: np.ndarray, want: np.ndarray) -> tuple[bool, str]:
    """Whether nnrt's output agrees with onnxruntime's, and how far apart they are."""
    if got.shape != want.shape:
        return False, f"shapes {list(got.shape)} and {list(want.shape)}"
    err = float(np.max(np.abs(got - want)))
    if case.quant_step is None:
        return bool(np.allclose(got, want, rtol=1e-3, atol=1e-4)), \
            f"max |nnrt - onnxruntime| = {err:.2e}"
    steps = err / case.quant_step
    same_top1 = bool(np.all(np.argmax(got, axis=-1) == np.argmax(want, axis=-1)))
    ok = steps <= 2 + 1e-3 and same_top1
    return ok, (f"max |nnrt - onnxruntime| = {err:.2e} = {steps:.2f} quantisation steps "
                f"(<= 2), top-1 {'the same' if same_top1 else 'DIFFERS'}")


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def issue32(nnrt: list[float], ort: list[float]) -> tuple[float, float, str]:
    """(nnrt p90 ms, its p90/p50, verdict): sub-ms models p50 <= ort + 0.1 ms and p90 <=
    1.5x p50; the others nnrt / ort <= 1.1x at p50."""
    p50, p90 = statistics.median(nnrt) * 1e3, percentile(nnrt, 0.9) * 1e3
    ort_ms = statistics.median(ort) * 1e3
    if ort_ms < RATIO_FROM_MS:
        met = p50 <= ort_ms + SUB_MS_EXTRA_MS and p90 <= SPREAD_TARGET * p50
    else:
        met = p50 <= LARGE_RATIO_TARGET * ort_ms
    return p90, p90 / p50 if p50 else 0.0, "met" if met else "missed"


def targets(nnrt_ms: float, ort_ms: float) -> tuple[str, str, float]:
    """(a)'s and (b)'s verdicts and (b)'s allowance in ms."""
    if ort_ms >= RATIO_FROM_MS:
        ratio = "met" if nnrt_ms / ort_ms <= RATIO_TARGET else "missed"
    else:
        ratio = "-"  # below 1 ms of onnxruntime: (b) alone
    allowed = OVERHEAD_MS + OVERHEAD_SHARE * ort_ms
    return ratio, "met" if nnrt_ms - ort_ms <= allowed else "missed", allowed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=10, help="calls per engine per round")
    parser.add_argument("--models", default=DEFAULT_MODELS,
                        help=f"comma-separated subset of {DEFAULT_MODELS}")
    parser.add_argument("--threads", type=int, default=None,
                        help="onnxruntime intra-op threads (default: per model the faster of "
                             "1 and every core, measured at startup)")
    parser.add_argument("--settle", type=float, default=0.2,
                        help="seconds of pause before each engine's calls (default 0.2)")
    parser.add_argument("--in-process", action="store_true",
                        help="also time the driver's plan in this process (no transport)")
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    parser.add_argument("--stream", type=int, default=0, metavar="N",
                        help="after the rounds, N calls back to back per model and engine "
                             "(issue 32's steady stream)")
    parser.add_argument("--per-node", action="store_true",
                        help="with --in-process implied: each step's median time in the plan")
    args = parser.parse_args()
    args.in_process |= args.per_node
    names = [n.strip() for n in args.models.split(",") if n.strip()]
    unknown = set(names) - set(CASES)
    if unknown:
        parser.error(f"unknown models {sorted(unknown)} (known: {', '.join(CASES)})")
    cores = os.cpu_count() or 1
    choices = [args.threads] if args.threads else sorted({1, cores})

    cases = [CASES[n]() for n in names]
    with EmbeddedDrivers(["cpu"]) as directory:
        os.environ[RUNTIME_ENV] = str(directory)
        engines = []
        try:
            medians = {}
            for case in cases:
                nnrt = NnrtEngine(case)
                engines.append((case, nnrt))
                onnxrt, medians[case.name] = fastest_ort(case, choices, args.calls,
                                                         args.settle)
                engines[-1] += (onnxrt,)
            # Every onnxruntime session of ours before the in-process plans': their engine
            # sizes onnxruntime's global thread pool, after which sessions with threads of
            # their own are refused (the plans' sessions then get their own, of its size).
            engines = [(case, nnrt, onnxrt, InProcessEngine(nnrt) if args.in_process else None)
                       for case, nnrt, onnxrt in engines]
            threads = f"the faster of {' and '.join(map(str, choices))} per model" \
                if len(choices) > 1 else str(choices[0])
            print(f"onnxruntime {ort.__version__} (intra-op threads: {threads}"
                  f"), numpy {np.__version__}, {cores} CPUs; {args.rounds} rounds x "
                  f"{args.calls} calls per engine and model\n")
            ok = True
            for case, nnrt, onnxrt, local in engines:
                got = np.array(nnrt(case.x))
                want = onnxrt(case.onnx_x)
                same, detail = compare(case, got, want)
                ok &= same
                picked = ", ".join(f"{n}: {t * 1e3:.3f} ms"
                                   for n, t in medians[case.name].items())
                print(f"{case.name:10s} {case.describe}\n{'':10s} outputs {list(want.shape)}, "
                      f"{detail}  {'OK' if same else 'MISMATCH'}\n{'':10s} onnxruntime "
                      f"threads {picked}: {onnxrt.threads} kept")
                if local is not None:
                    np.testing.assert_allclose(np.array(local(case.x)), np.array(nnrt(case.x)),
                                               rtol=1e-6, atol=1e-6)
            if not ok:
                print("\noutputs differ: no timing")
                return 1
            for case, nnrt, onnxrt, local in engines:  # warm-up
                timed(nnrt, case.x, 3), timed(onnxrt, case.onnx_x, 3)
                if local is not None:
                    timed(local, case.x, 3)
            samples = {c.name: ([], [], []) for c in cases}
            for r in range(args.rounds):
                for case, nnrt, onnxrt, local in engines:
                    a, b, c = samples[case.name]
                    runs = [(a, nnrt, case.x), (b, onnxrt, case.onnx_x)]
                    if local is not None:
                        runs.append((c, local, case.x))
                    for sink, fn, x in (runs if r % 2 == 0 else runs[::-1]):
                        sink += timed(fn, x, args.calls, args.settle)
            print(f"\nmedian latency per call; targets: (a) nnrt/ort <= {RATIO_TARGET:g}x where "
                  f"ort >= {RATIO_FROM_MS:g} ms, (b) nnrt - ort <= {OVERHEAD_MS:g} ms + "
                  f"{OVERHEAD_SHARE:.0%} of ort")
            head = (f"{'model':10s} {'nnrt ms':>9s} {'ort ms':>9s} {'thr':>3s} {'nnrt/ort':>9s} "
                    f"{'(a)':>6s} {'nnrt-ort':>9s} {'allowed':>8s} {'(b)':>6s} {'p90':>7s} "
                    f"{'p90/p50':>7s} {'i32':>6s}")
            if args.in_process:
                head += f" {'plan ms':>9s} {'plan/ort':>9s}"
            print(head)
            tally = {"a": [0, 0], "b": [0, 0]}
            figures: dict[str, dict] = {}
            for case, _, onnxrt, _ in engines:
                a, b, c = (statistics.median(s) * 1e3 if s else 0.0
                           for s in samples[case.name])
                ratio, overhead, allowed = targets(a, b)
                if ratio != "-":
                    tally["a"][0] += ratio == "met"
                    tally["a"][1] += 1
                tally["b"][0] += overhead == "met"
                tally["b"][1] += 1
                line = (f"{case.name:10s} {a:9.3f} {b:9.3f} {onnxrt.threads:3d} {a / b:8.2f}x "
                        f"{ratio:>6s} {a - b:+9.3f} {allowed:8.3f} {overhead:>6s}")
                p90, spread, verdict = issue32(samples[case.name][0], samples[case.name][1])
                line += f" {p90:7.3f} {spread:6.2f}x {verdict:>6s}"
                figures[case.name] = {"rounds": {"nnrt_p50": a, "nnrt_p90": p90, "ort_p50": b,
                                                 "plan_p50": c if args.in_process else None,
                                                 "verdict": verdict}}
                if args.in_process:
                    line += f" {c:9.3f} {c / b:8.2f}x"
                if case.name == "floor":
                    line += "   (fixed cost of a run)"
                print(line)
            print(f"\n(a) met by {tally['a'][0]} of the {tally['a'][1]} models where onnxruntime "
                  f"takes >= {RATIO_FROM_MS:g} ms; (b) met by {tally['b'][0]} of {tally['b'][1]}")
            if args.stream:
                print(f"\nsteady stream: {args.stream} calls back to back per model and engine "
                      f"(ms); issue 32: sub-ms p50 <= ort + {SUB_MS_EXTRA_MS:g} ms and p90 <= "
                      f"{SPREAD_TARGET:g}x p50, else p50 <= {LARGE_RATIO_TARGET:g}x ort")
                print(f"{'model':10s} {'nnrt p50':>9s} {'nnrt p90':>9s} {'ort p50':>9s} "
                      f"{'ort p90':>9s} {'p90/p50':>7s} {'i32':>6s}")
                for case, nnrt, onnxrt, _ in engines:
                    ours = timed(nnrt, case.x, args.stream, args.settle)
                    theirs = timed(onnxrt, case.onnx_x, args.stream, args.settle)
                    p90, spread, verdict = issue32(ours, theirs)
                    figures[case.name]["stream"] = {
                        "nnrt_p50": statistics.median(ours) * 1e3, "nnrt_p90": p90,
                        "ort_p50": statistics.median(theirs) * 1e3, "verdict": verdict}
                    print(f"{case.name:10s} {statistics.median(ours) * 1e3:9.3f} {p90:9.3f} "
                          f"{statistics.median(theirs) * 1e3:9.3f} "
                          f"{percentile(theirs, 0.9) * 1e3:9.3f} {spread:6.2f}x {verdict:>6s}")
            if args.json:
                with open(args.json, "w") as f:
                    json.dump(figures, f)
            if args.per_node:
                for case, _, _, local in engines:
                    rows = per_node_times(local, case.x, args.rounds * args.calls)
                    total = sum(t for t, _ in rows)
                    print(f"\n{case.name}: plan time per step (median ms; sum {total * 1e3:.3f})")
                    for seconds, what in rows[:12]:
                        print(f"  {seconds * 1e3:7.3f}  {what}")
                    if len(rows) > 12:
                        rest = sum(t for t, _ in rows[12:])
                        print(f"  {rest * 1e3:7.3f}  the {len(rows) - 12} other steps")
        finally:
            for _, nnrt, *_ in engines:
                nnrt.close()
            registry().close()  # end our sessions before the driver goes
    return 0


if __name__ == "__main__":
    sys.exit(main())
