"""Whole models on the CPU driver against onnxruntime, measured side by side in one run.

Four models, the same weights on both sides:

* mlp        an MLP, batch 1: 1024 -> 2048 (ReLU) -> 2048 (ReLU) -> 1000, softmax
* resnet     a ResNet-style CNN on a 1x64x64x3 image: conv stem, max pool, residual blocks
             (conv + folded-BN bias + ReLU, identity or strided 1x1 projection shortcut)
             at 64, 128 and 256 channels, global average pool, fully connected
* mobilenet  a MobileNet-style CNN on a 1x96x96x3 image: conv stem, depthwise-separable
             blocks (3x3 depthwise + ReLU6, 1x1 pointwise + ReLU6) from 32 to 256 channels
* encoder    a transformer encoder block, seq 64 x d 256, 4 heads, FFN 1024: projections,
             scaled dot-product attention (MatMul, Softmax), residuals, LayerNorm, GELU

and a fifth line, `floor`: one ReLU on 4 values, the fixed cost of a run on each side (for
nnrt the client, the gRPC round trip and the driver's request handling), not a target.

nnrt runs them through the full client (`nnrt.client.api`) against a CPU driver in its own
process (an embedded driver, NHWC); onnxruntime runs the same models built as ONNX graphs
(NCHW, weights transposed). Both outputs are compared first (allclose), then each round
runs every model on both engines, in alternating order, so that machine noise hits both
alike; the medians of every call's latency are printed with the ratio nnrt / onnxruntime.
Between one engine's calls and the other's the benchmark pauses (`--settle`): both keep
their worker threads spinning for a while after a call (OpenBLAS in the driver for about
0.1 s, onnxruntime's pool briefly), which would otherwise take the cores from the other.

Target (issue "The CPU driver, complete"): nnrt within 2x of onnxruntime on each model.

    pip install -e '.[bench]'
    python benchmarks/models.py [--rounds 15] [--calls 10] [--models mlp,encoder]
    python benchmarks/models.py --in-process     # also the driver's plan alone, no IPC
    python benchmarks/models.py --per-node --models encoder   # the plan's time per node

`--in-process` adds a column: the same prepared model run directly in this process (the
driver's execution plan without the client, gRPC and shared-memory copies), which
separates the kernels' cost from the transport's. `--per-node` then lists where the plan's
time goes: each node's median time inside the plan, the slowest first.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

try:
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper
except ImportError as exc:  # pragma: no cover - a benchmark-only dependency
    sys.exit(f"benchmarks/models.py needs onnx and onnxruntime: pip install -e '.[bench]' ({exc})")

from nnrt.client.api import Model
from nnrt.client.capi import model_cache
from nnrt.client.devices import registry
from nnrt.client.embedded import EmbeddedDrivers
from nnrt.drivers.cpu.device import CpuDevice
from nnrt.server.device import PrepareConfig
from nnrt.server.runtime_dir import ENV as RUNTIME_ENV

OPSET = 17
TARGET = 2.0  # nnrt / onnxruntime median latency
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
    x: np.ndarray  # the nnrt input (NHWC for images)
    onnx_x: np.ndarray  # the same values in the ONNX layout
    build_nnrt: Callable[[Model], None]
    onnx_bytes: bytes  # every model ends flat ([batch, classes] or [seq, d]): one layout


def mlp_case() -> Case:
    batch, sizes = 1, (1024, 2048, 2048, 1000)
    layers = [(rand(o, i, scale=1 / math.sqrt(i)), rand(o, scale=0.1))
              for i, o in zip(sizes, sizes[1:])]
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


CASES = {"mlp": mlp_case, "resnet": resnet_case, "mobilenet": mobilenet_case,
         "encoder": encoder_case, "floor": floor_case}
DEFAULT_MODELS = "mlp,resnet,mobilenet,encoder,floor"


# ----------------------------------------------------------------------------- engines


class NnrtEngine:
    def __init__(self, case: Case) -> None:
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


class InProcessEngine:
    """The driver's prepared model, restored from the compilation's cache, in this process:
    its execution plan with no client, gRPC or shared memory around it."""

    def __init__(self, engine: NnrtEngine) -> None:
        _, contents = model_cache.unpack(engine.compiled.export_cache())
        self.prepared = CpuDevice().prepare_from_cache(contents.blobs, PrepareConfig())

    def __call__(self, x: np.ndarray) -> np.ndarray:
        (y,) = self.prepared.run([x], lambda: False)
        return y


class OrtEngine:
    def __init__(self, case: Case, threads: int) -> None:
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


def per_node_times(engine: InProcessEngine, x: np.ndarray, runs: int) -> list[tuple[float, str]]:
    """(median seconds, description) of every node of the plan over `runs` runs, each
    kernel's execute timed where the plan calls it."""
    steps = engine.prepared.plan.steps
    samples: list[list[float]] = [[] for _ in steps]
    originals = [step.kernel.execute for step in steps]

    def timed_execute(execute, sink):
        def run(inputs):
            start = time.perf_counter()
            result = execute(inputs)
            sink.append(time.perf_counter() - start)
            return result
        return run

    try:
        for step, sink in zip(steps, samples):
            step.kernel.execute = timed_execute(step.kernel.execute, sink)
        for _ in range(runs):
            engine(x)
    finally:
        for step, execute in zip(steps, originals):
            step.kernel.execute = execute
    plan = engine.prepared.plan
    rows = []
    for step, sink in zip(steps, samples):
        node = step.kernel.node
        shapes = " ".join(str(list(plan.shapes[i])) if plan.shapes else "?" for i in step.inputs
                          if i not in plan.constants)
        rows.append((statistics.median(sink), f"{node.index:3d} {type(step.kernel).__name__} "
                                              f"{shapes}"))
    return sorted(rows, reverse=True)


# ----------------------------------------------------------------------------- main


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=10, help="calls per engine per round")
    parser.add_argument("--models", default=DEFAULT_MODELS, help="comma-separated subset")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                        help="onnxruntime intra-op threads (default: every core, as numpy's "
                             "BLAS in the driver)")
    parser.add_argument("--settle", type=float, default=0.2,
                        help="seconds of pause before each engine's calls (default 0.2)")
    parser.add_argument("--in-process", action="store_true",
                        help="also time the driver's plan in this process (no transport)")
    parser.add_argument("--per-node", action="store_true",
                        help="with --in-process implied: each node's median time in the plan")
    args = parser.parse_args()
    args.in_process |= args.per_node
    names = [n.strip() for n in args.models.split(",") if n.strip()]
    unknown = set(names) - set(CASES)
    if unknown:
        parser.error(f"unknown models {sorted(unknown)} (known: {', '.join(CASES)})")

    cases = [CASES[n]() for n in names]
    with EmbeddedDrivers(["cpu"]) as directory:
        os.environ[RUNTIME_ENV] = str(directory)
        engines = []
        try:
            for case in cases:
                nnrt = NnrtEngine(case)
                onnxrt = OrtEngine(case, args.threads)
                local = InProcessEngine(nnrt) if args.in_process else None
                engines.append((case, nnrt, onnxrt, local))
            print(f"onnxruntime {ort.__version__} ({args.threads} intra-op threads), numpy "
                  f"{np.__version__}, {os.cpu_count()} CPUs; {args.rounds} rounds x "
                  f"{args.calls} calls per engine and model\n")
            ok = True
            for case, nnrt, onnxrt, local in engines:
                got = np.array(nnrt(case.x))
                want = onnxrt(case.onnx_x)
                err = float(np.max(np.abs(got - want)))
                same = got.shape == want.shape and np.allclose(got, want, rtol=1e-3, atol=1e-4)
                ok &= same
                print(f"{case.name:10s} {case.describe}\n{'':10s} outputs {list(want.shape)}, "
                      f"max |nnrt - onnxruntime| = {err:.2e}  {'OK' if same else 'MISMATCH'}")
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
            print(f"\nmedian latency per call (target: nnrt/ort <= {TARGET:g}x)")
            head = f"{'model':10s} {'nnrt ms':>9s} {'ort ms':>9s} {'nnrt/ort':>9s}"
            if args.in_process:
                head += f" {'plan ms':>9s} {'plan/ort':>9s}"
            print(head)
            for case in cases:
                a, b, c = (statistics.median(s) * 1e3 if s else 0.0
                           for s in samples[case.name])
                line = f"{case.name:10s} {a:9.3f} {b:9.3f} {a / b:8.2f}x"
                if args.in_process:
                    line += f" {c:9.3f} {c / b:8.2f}x"
                if case.name == "floor":
                    line += "   (fixed cost of a run; no target)"
                else:
                    line += "   met" if a / b <= TARGET else "   missed"
                print(line)
            if args.per_node:
                for case, _, _, local in engines:
                    rows = per_node_times(local, case.x, args.rounds * args.calls)
                    total = sum(t for t, _ in rows)
                    print(f"\n{case.name}: plan time per node (median ms; sum {total * 1e3:.3f})")
                    for seconds, what in rows[:12]:
                        print(f"  {seconds * 1e3:7.3f}  {what}")
                    if len(rows) > 12:
                        rest = sum(t for t, _ in rows[12:])
                        print(f"  {rest * 1e3:7.3f}  the {len(rows) - 12} other nodes")
        finally:
            for _, nnrt, _, _ in engines:
                nnrt.close()
            registry().close()  # end our sessions before the driver goes
    return 0


if __name__ == "__main__":
    sys.exit(main())
