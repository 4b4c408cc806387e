"""ONNX import (client/onnx_import/): every mapped operator on a one-node (or tiny) model
made with onnx.helper, imported, compiled and run on a real CPU driver process, compared with
onnxruntime on the same model (float32, rtol 1e-4); end-to-end networks shaped like real ones
(ResNet, MobileNetV2, a BERT encoder layer, an MLP); refusals that name the node and why;
`Model.load` of .onnx and .nnrt files."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import onnx
import pytest
from nnrt.client import Model
from nnrt.common import model_file
from nnrt.client.onnx_import import OnnxImportError, import_onnx
from onnx import TensorProto, helper

from tests.helpers.onnx_models import OPSET, RTOL, check, f32, make, reference, shape_subgraph

F = TensorProto.FLOAT


# -- building models ---------------------------------------------------------------------------


def one(op_type: str, inputs: dict[str, np.ndarray], inits: dict | None = None,
        outputs: int = 1, **attrs) -> tuple[onnx.ModelProto, dict]:
    names = [*inputs, *(inits or {})]
    outs = [f"y{k}" for k in range(outputs)]
    node = helper.make_node(op_type, names, outs, name=f"the_{op_type.lower()}", **attrs)
    return make([node], inputs, outs, inits), inputs


# -- one node per operator ---------------------------------------------------------------------

X4 = f32(2, 3, 8, 8, seed=1)
X2 = f32(4, 6, seed=2)


def _conv_cases() -> dict[str, Callable]:
    return {
        "conv": lambda: one("Conv", {"x": X4}, {"w": f32(5, 3, 3, 3, seed=3), "b": f32(5)},
                            pads=[1, 1, 1, 1]),
        "conv_stride_asym_pads": lambda: one("Conv", {"x": X4}, {"w": f32(4, 3, 3, 2, seed=3)},
                                             strides=[2, 1], pads=[0, 1, 1, 0]),
        "conv_dilated": lambda: one("Conv", {"x": X4}, {"w": f32(4, 3, 3, 3, seed=4)},
                                    dilations=[2, 2]),
        "conv_same_upper": lambda: one("Conv", {"x": X4}, {"w": f32(4, 3, 3, 3, seed=5)},
                                       auto_pad="SAME_UPPER", strides=[2, 2]),
        "conv_same_lower": lambda: one("Conv", {"x": X4}, {"w": f32(4, 3, 2, 2, seed=5)},
                                       auto_pad="SAME_LOWER"),
        "conv_grouped": lambda: one("Conv", {"x": f32(1, 4, 6, 6)},
                                    {"w": f32(6, 2, 3, 3, seed=6), "b": f32(6)}, group=2),
        "conv_depthwise": lambda: one("Conv", {"x": X4}, {"w": f32(3, 1, 3, 3, seed=7)},
                                      group=3, pads=[1, 1, 1, 1]),
        "conv_depthwise_multiplier": lambda: one("Conv", {"x": X4},
                                                 {"w": f32(6, 1, 3, 3, seed=8)}, group=3),
        "maxpool": lambda: one("MaxPool", {"x": X4}, kernel_shape=[3, 3], strides=[2, 2],
                               pads=[1, 1, 1, 1]),
        "maxpool_ceil": lambda: one("MaxPool", {"x": f32(1, 2, 7, 7)}, kernel_shape=[2, 2],
                                    strides=[2, 2], ceil_mode=1),
        "avgpool": lambda: one("AveragePool", {"x": X4}, kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        "avgpool_include_pad": lambda: one("AveragePool", {"x": X4}, kernel_shape=[3, 3],
                                           pads=[1, 1, 1, 1], count_include_pad=1),
        "avgpool_ceil": lambda: one("AveragePool", {"x": f32(1, 2, 7, 7)}, kernel_shape=[3, 3],
                                    strides=[2, 2], ceil_mode=1),
        "avgpool_same": lambda: one("AveragePool", {"x": f32(1, 2, 7, 7)}, kernel_shape=[3, 3],
                                    strides=[2, 2], auto_pad="SAME_UPPER"),
        "global_avgpool": lambda: one("GlobalAveragePool", {"x": X4}),
        "global_maxpool": lambda: one("GlobalMaxPool", {"x": X4}),
        "batchnorm": lambda: one("BatchNormalization", {"x": X4},
                                 {"s": f32(3) + 2, "b": f32(3), "m": f32(3),
                                  "v": np.abs(f32(3)) + 0.5}, epsilon=1e-3),
        "resize_linear": lambda: one("Resize", {"x": X4},
                                     {"roi": np.zeros(0, np.float32),
                                      "scales": np.array([1, 1, 2, 2], np.float32)},
                                     mode="linear"),
        "resize_linear_align": lambda: one(
            "Resize", {"x": X4}, {"roi": np.zeros(0, np.float32),
                                  "scales": np.zeros(0, np.float32),
                                  "sizes": np.array([2, 3, 5, 11], np.int64)},
            mode="linear", coordinate_transformation_mode="align_corners"),
        "resize_linear_asym_down": lambda: one(
            "Resize", {"x": X4}, {"roi": np.zeros(0, np.float32),
                                  "scales": np.array([1, 1, 0.5, 0.5], np.float32)},
            mode="linear", coordinate_transformation_mode="asymmetric"),
        "resize_nearest": lambda: one("Resize", {"x": X4},
                                      {"roi": np.zeros(0, np.float32),
                                       "scales": np.array([1, 1, 2, 3], np.float32)},
                                      mode="nearest"),
        "resize_nearest_floor": lambda: one(
            "Resize", {"x": X4}, {"roi": np.zeros(0, np.float32),
                                  "scales": np.array([1, 1, 2, 2], np.float32)},
            mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
    }


def _activation_cases() -> dict[str, Callable]:
    x = {"x": f32(3, 4, 5, seed=9, scale=3)}
    return {
        "relu": lambda: one("Relu", x),
        "sigmoid": lambda: one("Sigmoid", x),
        "tanh": lambda: one("Tanh", x),
        "hardswish": lambda: one("HardSwish", x),
        "hardsigmoid": lambda: one("HardSigmoid", x, alpha=0.25, beta=0.4),
        "leakyrelu": lambda: one("LeakyRelu", x, alpha=0.1),
        "clip_relu6": lambda: one("Clip", x, {"lo": np.float32(0), "hi": np.float32(6)}),
        "clip_range": lambda: one("Clip", x, {"lo": np.float32(-1), "hi": np.float32(0.5)}),
        "clip_min_only": lambda: one("Clip", x, {"lo": np.float32(0)}),
        "gelu": lambda: _gelu(x, "none"),
        "gelu_tanh": lambda: _gelu(x, "tanh"),
        "gelu_erf_decomposed": lambda: _gelu_decomposed(x),
        "erf": lambda: one("Erf", x),
        "exp": lambda: one("Exp", x),
        "sqrt": lambda: one("Sqrt", {"x": np.abs(x["x"])}),
        "abs_neg": lambda: (make([helper.make_node("Abs", ["x"], ["a"]),
                                  helper.make_node("Neg", ["a"], ["y"])], x, ["y"]), x),
        "softmax": lambda: one("Softmax", x, axis=1),
        "softmax_last": lambda: one("Softmax", x),
        "logsoftmax": lambda: one("LogSoftmax", x),
    }


def _gelu(x: dict, approximate: str):
    node = helper.make_node("Gelu", ["x"], ["y"], approximate=approximate)
    return make([node], x, ["y"], opset=20), x


def _gelu_decomposed(x: dict):
    nodes = [helper.make_node("Div", ["x", "sqrt2"], ["d"]),
             helper.make_node("Erf", ["d"], ["e"]),
             helper.make_node("Add", ["e", "one"], ["p"]),
             helper.make_node("Mul", ["x", "p"], ["m"]),
             helper.make_node("Mul", ["m", "half"], ["y"])]
    return make(nodes, x, ["y"], {"sqrt2": np.float32(math.sqrt(2)), "one": np.float32(1),
                                  "half": np.float32(0.5)}), x


def _binary_cases() -> dict[str, Callable]:
    a, b = f32(2, 3, 4, seed=10), f32(2, 3, 4, seed=11)
    cases = {}
    for op in ("Add", "Sub", "Mul", "Div", "Max", "Min"):
        cases[op.lower()] = lambda op=op: one(op, {"a": a, "b": b})
    cases["add_broadcast_const"] = lambda: one("Add", {"a": a}, {"c": f32(4, seed=12)})
    cases["mul_broadcast_inputs"] = lambda: one("Mul", {"a": a, "b": f32(3, 1, seed=13)})
    cases["div_scalar"] = lambda: one("Div", {"a": a}, {"c": np.float32(3.0)})
    cases["pow"] = lambda: one("Pow", {"a": np.abs(a) + 0.1}, {"e": np.float32(2.0)})
    cases["where"] = lambda: (make([helper.make_node("Greater", ["a", "b"], ["g"]),
                                    helper.make_node("Where", ["g", "a", "b"], ["y"])],
                                   {"a": a, "b": b}, ["y"]), {"a": a, "b": b})
    # broadcasting against NHWC-held tensors: a per-channel constant [C, 1, 1]
    cases["conv_then_add_channel_const"] = lambda: (make(
        [helper.make_node("Conv", ["x", "w"], ["c"]),
         helper.make_node("Add", ["c", "k"], ["y"])],
        {"x": X4}, ["y"], {"w": f32(4, 3, 1, 1, seed=14), "k": f32(4, 1, 1, seed=15)}),
        {"x": X4})
    cases["conv_then_add_nchw_input"] = lambda: (make(
        [helper.make_node("Conv", ["x", "w"], ["c"]),
         helper.make_node("Add", ["c", "z"], ["y"])],
        {"x": X4, "z": f32(2, 4, 8, 8, seed=16)}, ["y"], {"w": f32(4, 3, 1, 1, seed=14)}),
        {"x": X4, "z": f32(2, 4, 8, 8, seed=16)})
    return cases


def _linear_cases() -> dict[str, Callable]:
    return {
        "gemm": lambda: one("Gemm", {"x": X2}, {"w": f32(6, 5, seed=20), "b": f32(5)}),
        "gemm_transB_alpha_beta": lambda: one("Gemm", {"x": X2},
                                              {"w": f32(5, 6, seed=21), "b": f32(1, 5)},
                                              transB=1, alpha=0.5, beta=2.0),
        "gemm_transA_full_c": lambda: one("Gemm", {"x": f32(6, 4, seed=22)},
                                          {"w": f32(6, 5, seed=23), "c": f32(4, 5, seed=24)},
                                          transA=1),
        "gemm_runtime_weight": lambda: one("Gemm", {"x": X2, "w": f32(5, 6, seed=25)},
                                           {"b": f32(5)}, transB=1),
        "matmul_const_3d": lambda: one("MatMul", {"x": f32(2, 3, 6)}, {"w": f32(6, 4, seed=26)}),
        "matmul_batched": lambda: one("MatMul", {"a": f32(2, 3, 4), "b": f32(2, 4, 5, seed=27)}),
        "matmul_bias_relu": lambda: (make(
            [helper.make_node("MatMul", ["x", "w"], ["m"]),
             helper.make_node("Add", ["m", "b"], ["a"]),
             helper.make_node("Relu", ["a"], ["y"])],
            {"x": f32(2, 3, 6)}, ["y"], {"w": f32(6, 4, seed=28), "b": f32(4, seed=29)}),
            {"x": f32(2, 3, 6)}),
        "layernorm": lambda: one("LayerNormalization", {"x": f32(2, 3, 8)},
                                 {"s": f32(8, seed=30) + 1, "b": f32(8, seed=31)},
                                 epsilon=1e-5),
        "layernorm_two_axes": lambda: one("LayerNormalization", {"x": f32(2, 3, 8)},
                                          {"s": f32(3, 8, seed=32) + 1}, axis=1),
    }


def _shape_cases() -> dict[str, Callable]:
    x3 = f32(2, 3, 4, seed=40)
    return {
        "reshape": lambda: one("Reshape", {"x": x3}, {"s": np.array([0, -1], np.int64)}),
        "transpose": lambda: one("Transpose", {"x": x3}, perm=[2, 0, 1]),
        "concat": lambda: one("Concat", {"a": x3, "b": f32(2, 5, 4, seed=41)}, axis=1),
        "split_sizes": lambda: one("Split", {"x": f32(2, 6, 4)},
                                   {"s": np.array([1, 5], np.int64)}, outputs=2, axis=1),
        "split_even": lambda: one("Split", {"x": f32(2, 6, 4)}, outputs=3, axis=1),
        "slice": lambda: one("Slice", {"x": f32(4, 6, 5)},
                             {"st": np.array([1, -4], np.int64), "en": np.array([3, 100], np.int64),
                              "ax": np.array([0, 1], np.int64)}),
        "slice_steps": lambda: one("Slice", {"x": f32(4, 6, 5)},
                                   {"st": np.array([-1, 0], np.int64),
                                    "en": np.array([-100, 5], np.int64),
                                    "ax": np.array([1, 2], np.int64),
                                    "sp": np.array([-2, 2], np.int64)}),
        "gather_const_indices": lambda: one("Gather", {"x": x3},
                                            {"i": np.array([[2, 0], [-1, 1]], np.int64)}, axis=2),
        "gather_embedding": _gather_embedding,
        "squeeze": lambda: one("Squeeze", {"x": f32(2, 1, 3, 1)}, {"a": np.array([1, 3], np.int64)}),
        "unsqueeze": lambda: one("Unsqueeze", {"x": x3}, {"a": np.array([0, 3], np.int64)}),
        "flatten": lambda: one("Flatten", {"x": f32(2, 3, 4, 5)}, axis=2),
        "pad_constant": lambda: one("Pad", {"x": x3}, {"p": np.array([0, 1, 2, 0, 2, 1], np.int64),
                                                       "v": np.float32(1.5)}),
        "pad_reflect": lambda: one("Pad", {"x": f32(1, 2, 5, 5)},
                                   {"p": np.array([0, 0, 2, 1, 0, 0, 1, 2], np.int64)},
                                   mode="reflect"),
        "reduce_mean": lambda: one("ReduceMean", {"x": x3}, axes=[1], keepdims=1),
        "reduce_sum": lambda: one("ReduceSum", {"x": x3}, {"a": np.array([0, 2], np.int64)},
                                  keepdims=0),
        "reduce_max_all": lambda: one("ReduceMax", {"x": x3}, keepdims=0),
        "cast": lambda: one("Cast", {"x": x3 * 10}, to=TensorProto.INT32),
        "expand": lambda: one("Expand", {"x": f32(3, 1)}, {"s": np.array([2, 3, 4], np.int64)}),
        "tile": lambda: one("Tile", {"x": x3}, {"r": np.array([1, 2, 1], np.int64)}),
        "identity": lambda: one("Identity", {"x": x3}),
        "shape_subgraph": shape_subgraph,
        # NHWC-held tensors through layout-agnostic operators back to NCHW
        "conv_reduce_squeeze": lambda: (make(
            [helper.make_node("Conv", ["x", "w"], ["c"]),
             helper.make_node("ReduceMean", ["c"], ["r"], axes=[2, 3], keepdims=0),
             helper.make_node("Softmax", ["r"], ["y"], axis=1)],
            {"x": X4}, ["y"], {"w": f32(4, 3, 3, 3, seed=43)}), {"x": X4}),
        "conv_concat_split_slice": lambda: (make(
            [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Concat", ["c", "x"], ["k"], axis=1),
             helper.make_node("Split", ["k"], ["s0", "s1"], axis=1, num_outputs=2),
             helper.make_node("Slice", ["s1", "st", "en", "ax"], ["sl"]),
             helper.make_node("Pad", ["sl", "p"], ["y"])],
            {"x": X4}, ["s0", "y"], {"w": f32(5, 3, 3, 3, seed=44),
                                     "st": np.array([1, 2], np.int64),
                                     "en": np.array([3, 6], np.int64),
                                     "ax": np.array([1, 3], np.int64),
                                     "p": np.array([0, 1, 0, 0, 0, 0, 1, 0], np.int64)},
            opset=18), {"x": X4}),
        "conv_transpose_to_nhwc": lambda: (make(
            [helper.make_node("Conv", ["x", "w"], ["c"]),
             helper.make_node("Transpose", ["c"], ["y"], perm=[0, 2, 3, 1])],
            {"x": X4}, ["y"], {"w": f32(4, 3, 3, 3, seed=45)}), {"x": X4}),
    }


def _gather_embedding():
    table = f32(5, 4, seed=42)
    feeds = {"i": np.array([[1, 3, 0], [4, 4, 2]], np.int64)}
    node = helper.make_node("Gather", ["table", "i"], ["y"], axis=0)
    return make([node], feeds, ["y"], {"table": table}), feeds


CASES: dict[str, Callable] = {**_conv_cases(), **_activation_cases(), **_binary_cases(),
                              **_linear_cases(), **_shape_cases()}


@pytest.mark.parametrize("case", sorted(CASES))
def test_operator_matches_onnxruntime(runtime, case):
    model, feeds = CASES[case]()
    check(model, feeds)


# -- fusions and layouts ---------------------------------------------------------------------


def node_types(model: Model) -> list[str]:
    from nnrt.protos import node_attrs_pb2 as na

    return [na.NodeType.Name(n.nodeType)[len("NODE_TYPE_"):]
            for n in model.handle.lowered().hdi.nodes]


def test_fusions_and_layout(runtime):
    x = f32(1, 3, 8, 8)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["n"]),
             helper.make_node("Relu", ["n"], ["r"]),
             helper.make_node("Conv", ["r", "w2"], ["c2"], group=4, pads=[1, 1, 1, 1]),
             helper.make_node("Clip", ["c2", "lo", "hi"], ["r2"]),
             helper.make_node("GlobalAveragePool", ["r2"], ["g"]),
             helper.make_node("Flatten", ["g"], ["f"]),
             helper.make_node("Gemm", ["f", "fw", "fb"], ["y"], transB=1)]
    inits = {"w": f32(4, 3, 3, 3, seed=1), "s": f32(4) + 2, "b": f32(4, seed=2),
             "m": f32(4, seed=3), "v": np.abs(f32(4, seed=4)) + 0.5,
             "w2": f32(4, 1, 3, 3, seed=5), "lo": np.float32(0), "hi": np.float32(6),
             "fw": f32(10, 4, seed=6), "fb": f32(10, seed=7)}
    model = make(nodes, {"x": x}, ["y"], inits)
    check(model, {"x": x})
    with import_onnx(model) as imported:
        # BN folded, Relu / Clip(0, 6) fused, one transpose in, none out (the [N, 1, 1, C]
        # pooled tensor is reshaped, a view), FullConnection with its bias.
        assert node_types(imported) == ["TRANSPOSE", "CONV2D_FUSION", "CONV2D_FUSION",
                                        "AVGPOOL_FUSION", "RESHAPE", "FLATTEN",
                                        "FULL_CONNECTION"]
        lowered = imported.handle.lowered()
        assert [d.name for d in lowered.inputs] == ["x"]
        assert [d.name for d in lowered.outputs] == ["y"]


def test_gelu_decomposition_becomes_one_node(runtime):
    model, feeds = _gelu_decomposed({"x": f32(3, 4, scale=3)})
    with import_onnx(model) as imported:
        assert node_types(imported) == ["ACTIVATION"]
    check(model, feeds)


def test_transposes_cancel(runtime):
    """NCHW -> Conv -> Transpose to NHWC: the importer's NHWC tensor is the output as is."""
    model, _ = CASES["conv_transpose_to_nhwc"]()
    with import_onnx(model) as imported:
        assert node_types(imported) == ["TRANSPOSE", "CONV2D_FUSION", "RESHAPE"]  # a view


# -- real-model-shaped networks ------------------------------------------------------------------


class Graph:
    """A small onnx.helper graph builder for the end-to-end networks."""

    def __init__(self, seed: int = 0) -> None:
        self.nodes: list = []
        self.inits: dict[str, np.ndarray] = {}
        self.rng = np.random.default_rng(seed)
        self.count = 0

    def name(self, base: str) -> str:
        self.count += 1
        return f"{base}{self.count}"

    def const(self, value: np.ndarray, base: str = "c") -> str:
        name = self.name(base)
        self.inits[name] = np.asarray(value)
        return name

    def weight(self, *shape: int, scale: float | None = None) -> str:
        fan_in = math.prod(shape[1:]) or shape[0]
        s = scale if scale is not None else 1 / math.sqrt(fan_in)
        return self.const((self.rng.standard_normal(shape) * s).astype(np.float32), "w")

    def node(self, op: str, inputs: list[str], outputs: int = 1, **attrs) -> str | list[str]:
        outs = [self.name(op.lower()) for _ in range(outputs)]
        self.nodes.append(helper.make_node(op, inputs, outs, name=self.name(f"n_{op}"), **attrs))
        return outs[0] if outputs == 1 else outs

    def conv_bn(self, x: str, c_in: int, c_out: int, k: int, stride: int = 1,
                group: int = 1, act: str | None = "relu") -> str:
        y = self.node("Conv", [x, self.weight(c_out, c_in // group, k, k)],
                      pads=[k // 2] * 4, strides=[stride] * 2, group=group)
        y = self.node("BatchNormalization", [
            y, self.const((1 + 0.1 * self.rng.standard_normal(c_out)).astype(np.float32)),
            self.const((0.1 * self.rng.standard_normal(c_out)).astype(np.float32)),
            self.const((0.1 * self.rng.standard_normal(c_out)).astype(np.float32)),
            self.const((1 + 0.1 * self.rng.random(c_out)).astype(np.float32))])
        if act == "relu":
            y = self.node("Relu", [y])
        elif act == "relu6":
            y = self.node("Clip", [y, self.const(np.float32(0)), self.const(np.float32(6))])
        return y

    def model(self, inputs: dict[str, np.ndarray], outputs: list[str],
              opset: int = OPSET) -> onnx.ModelProto:
        return make(self.nodes, inputs, outputs, self.inits, opset=opset)


def resnet_onnx(batch: int = 2, size: int = 32) -> tuple[onnx.ModelProto, dict]:
    g = Graph(1)
    h = g.conv_bn("x", 3, 16, 3)
    h = g.node("MaxPool", [h], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    channels = 16
    for out_c, stride in ((16, 1), (32, 2), (64, 2)):
        y = g.conv_bn(h, channels, out_c, 3, stride)
        y = g.conv_bn(y, out_c, out_c, 3, act=None)
        shortcut = h if stride == 1 and out_c == channels else \
            g.conv_bn(h, channels, out_c, 1, stride, act=None)
        h = g.node("Relu", [g.node("Add", [y, shortcut])])
        channels = out_c
    h = g.node("Flatten", [g.node("GlobalAveragePool", [h])])
    y = g.node("Gemm", [h, g.weight(10, channels), g.const(f32(10, seed=9))], transB=1)
    x = f32(batch, 3, size, size, seed=10)
    return g.model({"x": x}, [y]), {"x": x}


def mobilenet_onnx(batch: int = 2, size: int = 32) -> tuple[onnx.ModelProto, dict]:
    """Inverted residual blocks: 1x1 expand (ReLU6), 3x3 depthwise (ReLU6), 1x1 project,
    residual when the shape allows; PyTorch's Shape/Gather/Concat/Reshape flatten."""
    g = Graph(2)
    h = g.conv_bn("x", 3, 16, 3, stride=2, act="relu6")
    channels = 16
    for out_c, stride, expand in ((16, 1, 1), (24, 2, 4), (24, 1, 4), (32, 2, 4)):
        hidden = channels * expand
        y = h if expand == 1 else g.conv_bn(h, channels, hidden, 1, act="relu6")
        y = g.conv_bn(y, hidden, hidden, 3, stride, group=hidden, act="relu6")
        y = g.conv_bn(y, hidden, out_c, 1, act=None)
        h = g.node("Add", [h, y]) if stride == 1 and out_c == channels else y
        channels = out_c
    pooled = g.node("GlobalAveragePool", [h])
    shape = g.node("Shape", [pooled])
    n = g.node("Gather", [shape, g.const(np.array(0, np.int64))], axis=0)
    target = g.node("Concat", [g.node("Unsqueeze", [n, g.const(np.array([0], np.int64))]),
                               g.const(np.array([-1], np.int64))], axis=0)
    flat = g.node("Reshape", [pooled, target])
    y = g.node("Gemm", [flat, g.weight(10, channels), g.const(f32(10, seed=11))], transB=1)
    x = f32(batch, 3, size, size, seed=12)
    return g.model({"x": x}, [y]), {"x": x}


def encoder_onnx(batch: int = 2, seq: int = 16, d: int = 32,
                 heads: int = 4) -> tuple[onnx.ModelProto, dict]:
    """A BERT encoder layer as PyTorch exports it: MatMul + Add projections, heads split by
    Reshape/Transpose, scaled scores, additive mask, Softmax, LayerNormalization, erf GELU."""
    g = Graph(3)
    hd = d // heads

    def linear(x: str, n_in: int, n_out: int) -> str:
        return g.node("Add", [g.node("MatMul", [x, g.weight(n_in, n_out, scale=1 / math.sqrt(n_in))]),
                              g.const(f32(n_out, seed=g.count, scale=0.02))])

    def split_heads(t: str) -> str:
        r = g.node("Reshape", [t, g.const(np.array([batch, seq, heads, hd], np.int64))])
        return g.node("Transpose", [r], perm=[0, 2, 1, 3])

    def layer_norm(t: str) -> str:
        return g.node("LayerNormalization", [t, g.const(1 + f32(d, seed=g.count, scale=0.1)),
                                             g.const(f32(d, seed=g.count + 1, scale=0.1))],
                      axis=-1, epsilon=1e-12)

    q, k, v = (split_heads(linear("x", d, d)) for _ in range(3))
    scores = g.node("Div", [g.node("MatMul", [q, g.node("Transpose", [k], perm=[0, 1, 3, 2])]),
                            g.const(np.float32(math.sqrt(hd)))])
    mask = g.node("Mul", [g.node("Sub", [g.const(np.float32(1)), "mask"]),
                          g.const(np.float32(-10000.0))])
    probs = g.node("Softmax", [g.node("Add", [scores, mask])], axis=-1)
    context = g.node("Transpose", [g.node("MatMul", [probs, v])], perm=[0, 2, 1, 3])
    merged = g.node("Reshape", [context, g.const(np.array([batch, seq, d], np.int64))])
    h = layer_norm(g.node("Add", ["x", linear(merged, d, d)]))
    up = linear(h, d, 4 * d)
    erf = g.node("Erf", [g.node("Div", [up, g.const(np.float32(math.sqrt(2)))])])
    gelu = g.node("Mul", [g.node("Mul", [up, g.node("Add", [erf, g.const(np.float32(1))])]),
                          g.const(np.float32(0.5))])
    y = layer_norm(g.node("Add", [h, linear(gelu, 4 * d, d)]))
    x = f32(batch, seq, d, seed=13)
    mask_value = np.ones((batch, 1, 1, seq), np.float32)
    mask_value[1, ..., seq - 3:] = 0
    return g.model({"x": x, "mask": mask_value}, [y]), {"x": x, "mask": mask_value}


def mlp_onnx(batch: int = 4) -> tuple[onnx.ModelProto, dict]:
    g = Graph(4)
    h = "x"
    sizes = (16, 64, 32, 10)
    for k, (n_in, n_out) in enumerate(zip(sizes, sizes[1:])):
        h = g.node("Gemm", [h, g.weight(n_out, n_in), g.const(f32(n_out, seed=k, scale=0.1))],
                   transB=1)
        if k < len(sizes) - 2:
            h = g.node("Relu", [h])
    y = g.node("Softmax", [h], axis=-1)
    x = f32(batch, 16, seed=14)
    return g.model({"x": x}, [y]), {"x": x}


NETWORKS = {"resnet": resnet_onnx, "mobilenetv2": mobilenet_onnx, "encoder": encoder_onnx,
            "mlp": mlp_onnx}


@pytest.mark.parametrize("network", sorted(NETWORKS))
def test_network_matches_onnxruntime(runtime, network):
    model, feeds = NETWORKS[network]()
    check(model, feeds, atol=1e-4)


def test_dynamic_batch_mlp(runtime):
    model, _ = mlp_onnx()
    for value in (model.graph.input[0], model.graph.output[0]):
        value.type.tensor_type.shape.dim[0].dim_param = "batch"
    del model.graph.value_info[:]
    for batch in (1, 5):
        x = f32(batch, 16, seed=batch)
        check(model, {"x": x})


# -- refusals ------------------------------------------------------------------------------------


def test_unsupported_operator_names_node_and_operator():
    model, _ = one("Einsum", {"a": X2, "b": X2}, equation="ij,ij->i")
    with pytest.raises(OnnxImportError, match=r"node 'the_einsum' \(Einsum\): operator Einsum "
                                              r"is not supported") as info:
        import_onnx(model)
    assert info.value.op_type == "Einsum" and info.value.node_name == "the_einsum"


@pytest.mark.parametrize("build, pattern", [
    (lambda: one("Pad", {"x": X2}, {"p": np.array([1, 1, 1, 1], np.int64)}, mode="edge"),
     r"\(Pad\): mode 'edge'"),
    (lambda: one("AveragePool", {"x": X4}, kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                 ceil_mode=1, count_include_pad=1), r"count_include_pad with ceil_mode"),
    (lambda: one("Resize", {"x": X4}, {"roi": np.zeros(0, np.float32),
                                       "scales": np.array([1, 1, 2, 2], np.float32)},
                 mode="cubic"), r"mode 'cubic'"),
    (lambda: one("MaxPool", {"x": X4}, kernel_shape=[2, 2], dilations=[2, 2]),
     r"dilations \[2, 2\]"),
    (lambda: one("GRU", {"x": f32(3, 2, 4)}, {"w": f32(1, 6, 4), "r": f32(1, 6, 2)},
                 hidden_size=2), r"GRU has no OH_NN operation"),
    (lambda: (helper.make_model(
        helper.make_graph([helper.make_node("Relu", ["x"], ["y"], domain="com.microsoft")],
                          "g", [helper.make_tensor_value_info("x", F, [2])],
                          [helper.make_tensor_value_info("y", F, [2])]),
        opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid("com.microsoft", 1)]),
        None), r"domain 'com.microsoft'"),
    (lambda: one("Conv", {"x": f32(1, 2, 8)}, {"w": f32(2, 2, 3)}), r"only 2-D convolutions"),
])
def test_refusals(build, pattern):
    model, _ = build()
    with pytest.raises(OnnxImportError, match=pattern):
        import_onnx(model)


def test_unread_attribute_is_refused():
    node = helper.make_node("Relu", ["x"], ["y"], name="r", bogus=3)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", F, [2])],
                              [helper.make_tensor_value_info("y", F, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    with pytest.raises(OnnxImportError, match=r"node 'r' \(Relu\): attribute\(s\) \['bogus'\]"):
        import_onnx(model)


def test_shape_of_dynamic_tensor_runs_on_the_device(runtime):
    """A Shape of a tensor with a dynamic dimension is the OH_NN Shape operation (more in
    tests/client/onnx/test_import_lstm_qdq.py); input_shapes= still folds it away."""
    model, _ = shape_subgraph()
    for value in (model.graph.input[0], model.graph.output[0]):
        value.type.tensor_type.shape.dim[0].dim_param = "batch"
    del model.graph.value_info[:]
    for batch in (2, 5):
        check(model, {"x": f32(batch, 3, 4, 4, seed=batch)})
    with import_onnx(model, input_shapes={"x": [2, 3, 4, 4]}) as imported:
        lowered = imported.handle.lowered()
        assert lowered.inputs[0].shape == [2, 3, 4, 4]
        assert len(lowered.hdi.nodes) == 1  # folded: one Reshape


# -- Model.load --------------------------------------------------------------------------------


def test_model_load_onnx_and_nnrt(runtime, tmp_path):
    model, feeds = mlp_onnx()
    path = tmp_path / "mlp.onnx"
    onnx.save(model, path)
    expected = reference(model, feeds)[0]
    with Model.load(path) as loaded, loaded.compile("cpu") as compiled:
        np.testing.assert_allclose(compiled.run(feeds["x"]), expected, rtol=RTOL, atol=1e-6)
        saved = model_file.save_model(loaded, tmp_path / "mlp.nnrt")
    with Model.load(saved) as again, again.compile("cpu") as compiled:
        np.testing.assert_allclose(compiled.run(feeds["x"]), expected, rtol=RTOL, atol=1e-6)
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(ValueError, match=r"\.onnx or \.nnrt"):
        Model.load(tmp_path / "notes.txt")
