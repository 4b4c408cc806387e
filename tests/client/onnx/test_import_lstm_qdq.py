"""ONNX import (client/onnx_import/), the later parts: LSTM onto the OH_NN LSTM operation
(gate order and layouts compensated), QuantizeLinear / DequantizeLinear (QDQ) models onto
quantised OH_NN operations, Shape of a tensor with dynamic dimensions onto the OH_NN Shape
operation. Each against onnxruntime on the same ONNX model, on a real CPU driver process;
each refusal names the node, the operator and why."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from nnrt.client import InferenceSession, Model
from nnrt.client.onnx_import import OnnxImportError, import_onnx
from onnx import TensorProto, helper

from tests.helpers.onnx_models import check, f32, make, ours, reference, shape_subgraph

F = TensorProto.FLOAT



# -- LSTM --------------------------------------------------------------------------------------


def lstm_model(seq=5, batch=3, inputs=4, hidden=6, direction="forward", layout=0, bias=True,
               states=True, outputs=("y", "y_h", "y_c"), seed=0, **attrs):
    dirs = 2 if direction == "bidirectional" else 1
    x = f32(*((batch, seq, inputs) if layout else (seq, batch, inputs)), seed=seed)
    inits = {"w": f32(dirs, 4 * hidden, inputs, seed=seed + 1, scale=0.5),
             "r": f32(dirs, 4 * hidden, hidden, seed=seed + 2, scale=0.5)}
    names = ["x", "w", "r"]
    if bias:
        inits["b"] = f32(dirs, 8 * hidden, seed=seed + 3, scale=0.3)
    names.append("b" if bias else "")
    feeds = {"x": x}
    if states:
        state = (batch, dirs, hidden) if layout else (dirs, batch, hidden)
        feeds["h0"] = f32(*state, seed=seed + 4, scale=0.5)
        feeds["c0"] = f32(*state, seed=seed + 5, scale=0.5)
        names += ["", "h0", "c0"]
    node = helper.make_node("LSTM", names, list(outputs), name="the_lstm", hidden_size=hidden,
                            direction=direction, layout=layout, **attrs)
    return make([node], feeds, [o for o in outputs if o], inits), feeds


LSTM_CASES = {
    "forward": {},
    "reverse": {"direction": "reverse"},
    "bidirectional": {"direction": "bidirectional"},
    "no_bias_no_states": {"bias": False, "states": False},
    "only_y_h": {"outputs": ("", "y_h")},
    "seq_1": {"seq": 1, "batch": 1},
}


@pytest.mark.parametrize("case", sorted(LSTM_CASES))
def test_lstm_matches_onnxruntime(runtime, case):
    model, feeds = lstm_model(**LSTM_CASES[case])
    check(model, feeds)


def test_lstm_batch_first_layout(runtime):
    """layout=1 (onnxruntime refuses it): against onnxruntime on the same LSTM in layout 0,
    the inputs and outputs transposed."""
    model, feeds = lstm_model(layout=1, direction="bidirectional")
    plain, _ = lstm_model(layout=0, direction="bidirectional")
    expected = reference(plain, {"x": feeds["x"].transpose(1, 0, 2),
                                 "h0": feeds["h0"].transpose(1, 0, 2),
                                 "c0": feeds["c0"].transpose(1, 0, 2)})
    expected = [expected[0].transpose(2, 0, 1, 3), expected[1].transpose(1, 0, 2),
                expected[2].transpose(1, 0, 2)]
    for got, want in zip(ours(model, feeds), expected):
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_lstm_full_sequence_lens_and_zero_peepholes_are_accepted(runtime):
    seq, batch, hidden = 4, 2, 3
    x = f32(seq, batch, 5)
    inits = {"w": f32(1, 4 * hidden, 5, seed=1), "r": f32(1, 4 * hidden, hidden, seed=2),
             "lens": np.full(batch, seq, np.int32), "p": np.zeros((1, 3 * hidden), np.float32)}
    node = helper.make_node("LSTM", ["x", "w", "r", "", "lens", "", "", "p"], ["y"],
                            hidden_size=hidden,
                            activations=["Sigmoid", "Tanh", "Tanh"])
    check(make([node], {"x": x}, ["y"], inits), {"x": x})


@pytest.mark.parametrize("dynamic", ["seq", "batch"])
def test_lstm_dynamic_sequence_or_batch(runtime, dynamic):
    model, _ = lstm_model(direction="bidirectional")
    axes = {"x": {"seq": 0, "batch": 1}, "h0": {"batch": 1}, "c0": {"batch": 1},
            "y": {"seq": 0, "batch": 2}, "y_h": {"batch": 1}, "y_c": {"batch": 1}}
    for v in (*model.graph.input, *model.graph.output):
        if dynamic in axes[v.name]:
            v.type.tensor_type.shape.dim[axes[v.name][dynamic]].dim_param = dynamic
    del model.graph.value_info[:]
    for seq, batch in ((5, 3), (2, 3)) if dynamic == "seq" else ((5, 3), (5, 1)):
        feeds = {"x": f32(seq, batch, 4, seed=seq), "h0": f32(2, batch, 6, seed=batch),
                 "c0": f32(2, batch, 6, seed=batch + 7)}
        check(model, feeds)


def lstm_network():
    """A sequence classifier as PyTorch exports one: Transpose to time-major, a
    bidirectional LSTM, a second (forward) LSTM over its [seq, batch, 2H] output, the last
    step's hidden state through Gemm and Softmax."""
    batch, seq, features, hidden = 2, 7, 8, 5
    x = f32(batch, seq, features, seed=30)
    inits = {
        "w1": f32(2, 4 * hidden, features, seed=31, scale=0.4),
        "r1": f32(2, 4 * hidden, hidden, seed=32, scale=0.4),
        "b1": f32(2, 8 * hidden, seed=33, scale=0.2),
        "w2": f32(1, 4 * hidden, 2 * hidden, seed=34, scale=0.4),
        "r2": f32(1, 4 * hidden, hidden, seed=35, scale=0.4),
        "b2": f32(1, 8 * hidden, seed=36, scale=0.2),
        "fc": f32(3, hidden, seed=37),
        "fc_b": f32(3, seed=38),
        "perm_shape": np.array([0, 0, -1], np.int64),
        "axes0": np.array([0], np.int64),
    }
    nodes = [
        helper.make_node("Transpose", ["x"], ["xt"], perm=[1, 0, 2]),
        helper.make_node("LSTM", ["xt", "w1", "r1", "b1"], ["y1", "", ""], name="lstm1",
                         hidden_size=hidden, direction="bidirectional"),
        helper.make_node("Transpose", ["y1"], ["y1t"], perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["y1t", "perm_shape"], ["y1r"]),
        helper.make_node("LSTM", ["y1r", "w2", "r2", "b2"], ["", "h2", ""], name="lstm2",
                         hidden_size=hidden),
        helper.make_node("Squeeze", ["h2", "axes0"], ["last"]),
        helper.make_node("Gemm", ["last", "fc", "fc_b"], ["logits"], transB=1),
        helper.make_node("Softmax", ["logits"], ["probs"], axis=-1),
    ]
    return make(nodes, {"x": x}, ["probs", "y1"], inits), {"x": x}


def test_lstm_network_matches_onnxruntime(runtime):
    model, feeds = lstm_network()
    check(model, feeds)
    session = InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    probs, y1 = session.run(None, feeds)
    expected = reference(model, feeds)
    np.testing.assert_allclose(probs, expected[0], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(y1, expected[1], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("attrs, pattern", [
    ({"activations": ["Relu", "Tanh", "Tanh"]}, r"activations \['Relu', 'Tanh', 'Tanh'\]"),
    ({"clip": 3.0}, r"clip"),
    ({"input_forget": 1}, r"input_forget"),
    ({"activation_alpha": [0.5]}, r"activation_alpha"),
])
def test_lstm_refusals_name_node_and_why(attrs, pattern):
    model, _ = lstm_model(**attrs)
    with pytest.raises(OnnxImportError, match=r"node 'the_lstm' \(LSTM\): " + pattern) as info:
        import_onnx(model)
    assert info.value.op_type == "LSTM" and info.value.node_name == "the_lstm"


def _lstm_with(extra_inputs: dict, names: list[str]):
    seq, batch, hidden = 4, 2, 3
    x = f32(seq, batch, 5)
    inits = {"w": f32(1, 4 * hidden, 5, seed=1), "r": f32(1, 4 * hidden, hidden, seed=2),
             **extra_inputs}
    node = helper.make_node("LSTM", ["x", "w", "r", *names], ["y"], name="the_lstm",
                            hidden_size=hidden)
    return make([node], {"x": x}, ["y"], inits)


@pytest.mark.parametrize("extra, names, pattern", [
    ({"lens": np.array([4, 2], np.int32)}, ["", "lens"], r"sequence_lens shorter"),
    ({"p": np.ones((1, 9), np.float32)}, ["", "", "", "", "p"], r"peepholes"),
])
def test_lstm_input_refusals(extra, names, pattern):
    with pytest.raises(OnnxImportError, match=r"node 'the_lstm' \(LSTM\): " + pattern):
        import_onnx(_lstm_with(extra, names))


def test_lstm_non_constant_weights_are_refused():
    hidden = 2
    x = f32(3, 1, 4)
    node = helper.make_node("LSTM", ["x", "w", "r"], ["y"], name="the_lstm", hidden_size=hidden)
    model = make([node], {"x": x, "w": f32(1, 8, 4), "r": f32(1, 8, 2)}, ["y"])
    with pytest.raises(OnnxImportError, match=r"'the_lstm' \(LSTM\): W must be a constant"):
        import_onnx(model)


def test_gru_and_rnn_stay_refused():
    x = f32(3, 2, 4)
    for op in ("GRU", "RNN"):
        gates = {"GRU": 3, "RNN": 1}[op]
        node = helper.make_node(op, ["x", "w", "r"], ["y"], name=f"the_{op.lower()}",
                                hidden_size=2)
        model = make([node], {"x": x}, ["y"], {"w": f32(1, 2 * gates, 4),
                                              "r": f32(1, 2 * gates, 2)})
        with pytest.raises(OnnxImportError, match=rf"'the_{op.lower()}' \({op}\): {op} has no "
                                                  r"OH_NN operation"):
            import_onnx(model)


def test_lstm_dynamic_sequence_and_batch_through_nnrt_run(cpu_runtime, tmp_path):
    """Both dynamic: Y's [seq, batch, D, H] reshape copies the two (0 in OH_NN's Reshape);
    `nnrt run` sizes dynamic outputs from the driver's answer. Inputs and outputs as .npz."""
    from tests.helpers.cli import nnrt

    model, _ = lstm_model(direction="bidirectional")
    axes = {"x": (0, 1), "h0": (None, 1), "c0": (None, 1), "y": (0, 2), "y_h": (None, 1),
            "y_c": (None, 1)}
    for v in (*model.graph.input, *model.graph.output):
        dims = v.type.tensor_type.shape.dim
        seq_axis, batch_axis = axes[v.name]
        if seq_axis is not None:
            dims[seq_axis].dim_param = "seq"
        dims[batch_axis].dim_param = "batch"
    del model.graph.value_info[:]
    onnx.save(model, tmp_path / "lstm.onnx")
    feeds = {"x": f32(3, 2, 4, seed=8), "h0": f32(2, 2, 6, seed=9), "c0": f32(2, 2, 6, seed=10)}
    np.savez(tmp_path / "in.npz", **feeds)
    proc = nnrt("run", tmp_path / "lstm.onnx", "-i", tmp_path / "in.npz", "-o",
                tmp_path / "out.npz", runtime_dir=cpu_runtime)
    assert proc.returncode == 0, proc.stderr
    expected = reference(model, feeds)
    with np.load(tmp_path / "out.npz") as got:
        for name, want in zip(("y", "y_h", "y_c"), expected):
            assert got[name].shape == want.shape
            np.testing.assert_allclose(got[name], want, rtol=1e-4, atol=1e-5)


# -- Shape of a tensor with dynamic dimensions ---------------------------------------------------


def _dynamic(model: onnx.ModelProto, dims: dict[str, dict[int, str]]) -> onnx.ModelProto:
    for v in (*model.graph.input, *model.graph.output):
        shape = v.type.tensor_type.shape
        if v.name in dims:
            for axis, name in dims[v.name].items():
                shape.dim[axis].dim_param = name
        elif v in model.graph.output:
            v.type.tensor_type.ClearField("shape")
    del model.graph.value_info[:]
    return model


def test_shape_size_and_run_time_reshape(runtime):
    """Shape (start / end), Size and a Reshape to a shape computed at run time: x [N, S, 8]
    -> [N, S, 2, 4] (two dynamic dimensions: the shape tensor itself goes to Reshape)."""
    nodes = [helper.make_node("Shape", ["x"], ["s"], end=2),
             helper.make_node("Concat", ["s", "tail"], ["t"], axis=0),
             helper.make_node("Reshape", ["x", "t"], ["y"]),
             helper.make_node("Size", ["x"], ["z"]),
             helper.make_node("Shape", ["x"], ["full"]),
             helper.make_node("Shape", ["x"], ["last"], start=-1)]
    x = f32(3, 5, 8)
    model = _dynamic(make(nodes, {"x": x}, ["y", "z", "full", "last"],
                          {"tail": np.array([2, 4], np.int64)}),
                     {"x": {0: "n", 1: "s"}, "y": {0: "n", 1: "s"}})
    for n, s in ((3, 5), (1, 2)):
        check(model, {"x": f32(n, s, 8, seed=n)})


def test_shape_of_a_channels_last_tensor(runtime):
    """Shape of a Conv's result (held NHWC inside): the dimensions in the ONNX order."""
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Shape", ["c"], ["s"]),
             helper.make_node("Shape", ["c"], ["hw"], start=1, end=3)]
    x = f32(2, 3, 6, 6)
    model = _dynamic(make(nodes, {"x": x}, ["s", "hw"], {"w": f32(4, 3, 3, 3)}),
                     {"x": {0: "n"}})
    check(model, {"x": x})
    check(model, {"x": f32(1, 3, 6, 6, seed=3)})


def test_shape_subgraph_with_a_dynamic_batch(runtime):
    model, _ = shape_subgraph()
    _dynamic(model, {"x": {0: "batch"}, "y": {0: "batch"}})
    for batch in (2, 5):
        check(model, {"x": f32(batch, 3, 4, 4, seed=batch)})


# -- QuantizeLinear / DequantizeLinear (QDQ) ------------------------------------------------------

I8 = TensorProto.INT8


def q_per_channel(w: np.ndarray, axis: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric int8 per-channel quantisation along `axis`: (int8 weight, scales)."""
    moved = np.moveaxis(w, axis, 0)
    scales = (np.abs(moved.reshape(len(moved), -1)).max(axis=1) / 127).astype(np.float32)
    shape = [1] * w.ndim
    shape[axis] = -1
    q = np.clip(np.rint(w / scales.reshape(shape)), -127, 127).astype(np.int8)
    return q, scales


class QDQ:
    """Builds a QDQ model as onnxruntime's static quantisation writes one: every activation
    QuantizeLinear -> DequantizeLinear with calibrated per-tensor parameters, weights int8
    per channel behind a DequantizeLinear, biases int32 at input scale x weight scale."""

    def __init__(self, ranges: dict[str, tuple[float, float]], dtype=np.int8):
        self.nodes: list = []
        self.inits: dict[str, np.ndarray] = {}
        self.ranges = ranges
        self.dtype = dtype
        self.scales: dict[str, float] = {}

    def qdq(self, name: str) -> str:
        """name -> Q -> DQ; the dequantised name."""
        low, high = self.ranges[name]
        low, high = min(low, 0.0), max(high, 0.0)
        if self.dtype == np.int8:
            scale = np.float32((high - low) / 255)
            zero = np.int8(np.clip(np.rint(-128 - low / scale), -128, 127))
        else:
            scale = np.float32((high - low) / 255)
            zero = np.uint8(np.clip(np.rint(-low / scale), 0, 255))
        self.scales[name] = float(scale)
        self.inits[f"{name}_s"] = np.asarray(scale, np.float32)
        self.inits[f"{name}_z"] = np.asarray(zero)
        self.nodes.append(helper.make_node("QuantizeLinear", [name, f"{name}_s", f"{name}_z"],
                                           [f"{name}_q"], name=f"{name}_quantize"))
        self.nodes.append(helper.make_node("DequantizeLinear",
                                           [f"{name}_q", f"{name}_s", f"{name}_z"],
                                           [f"{name}_dq"], name=f"{name}_dequantize"))
        return f"{name}_dq"

    def weight(self, name: str, w: np.ndarray, axis: int = 0) -> str:
        q, scales = q_per_channel(w, axis)
        self.inits[f"{name}_q"] = q
        self.inits[f"{name}_s"] = scales
        self.inits[f"{name}_z"] = np.zeros(len(scales), np.int8)
        self.nodes.append(helper.make_node("DequantizeLinear",
                                           [f"{name}_q", f"{name}_s", f"{name}_z"],
                                           [f"{name}_dq"], axis=axis))
        return f"{name}_dq"

    def bias(self, name: str, b: np.ndarray, x: str, w: str) -> str:
        scales = (np.float32(self.scales[x]) * self.inits[f"{w}_s"]).astype(np.float32)
        self.inits[f"{name}_q"] = np.rint(b / scales).astype(np.int32)
        self.inits[f"{name}_s"] = scales
        self.inits[f"{name}_z"] = np.zeros(len(scales), np.int32)
        self.nodes.append(helper.make_node("DequantizeLinear",
                                           [f"{name}_q", f"{name}_s", f"{name}_z"],
                                           [f"{name}_dq"], axis=0))
        return f"{name}_dq"


def float_cnn(x: np.ndarray):
    """The float CNN (and its weights): Conv+Relu, MaxPool, Conv, Add (a residual),
    Relu, AveragePool, Flatten, Gemm, all intermediate results as outputs (calibration)."""
    w = {"c1": f32(8, 3, 3, 3, seed=61, scale=0.4), "b1": f32(8, seed=62, scale=0.1),
         "c2": f32(8, 8, 3, 3, seed=63, scale=0.2), "b2": f32(8, seed=64, scale=0.1),
         "fc": f32(10, 8 * 2 * 2, seed=65, scale=0.3), "fb": f32(10, seed=66, scale=0.1)}
    nodes = [helper.make_node("Conv", ["x", "c1", "b1"], ["conv1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["conv1"], ["relu1"]),
             helper.make_node("MaxPool", ["relu1"], ["pool1"], kernel_shape=[2, 2],
                              strides=[2, 2]),
             helper.make_node("Conv", ["pool1", "c2", "b2"], ["conv2"], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["conv2", "pool1"], ["sum"]),
             helper.make_node("Relu", ["sum"], ["relu2"]),
             helper.make_node("AveragePool", ["relu2"], ["pool2"], kernel_shape=[2, 2],
                              strides=[2, 2]),
             helper.make_node("Flatten", ["pool2"], ["flat"]),
             helper.make_node("Gemm", ["flat", "fc", "fb"], ["logits"], transB=1)]
    names = ["relu1", "pool1", "conv2", "sum", "relu2", "pool2", "flat", "logits"]
    return make(nodes, {"x": x}, names, w), w, names


def qdq_cnn(dtype=np.int8, batch: int = 4):
    """The QDQ form of float_cnn, calibrated on its float run; and the feeds."""
    x = (rng_uniform(batch, 3, 8, 8)).astype(np.float32)
    model, w, names = float_cnn(x)
    results = reference(model, {"x": x})
    ranges = {n: (float(r.min()), float(r.max())) for n, r in zip(names, results)}
    ranges["x"] = (float(x.min()), float(x.max()))
    b = QDQ(ranges, dtype)
    xq = b.qdq("x")
    w1 = b.weight("c1", w["c1"])
    conv1 = helper.make_node("Conv", [xq, w1, b.bias("b1", w["b1"], "x", "c1")], ["conv1"],
                             pads=[1, 1, 1, 1], name="conv1")
    b.nodes.append(conv1)
    b.nodes.append(helper.make_node("Relu", ["conv1"], ["relu1"], name="relu1"))
    r1 = b.qdq("relu1")
    b.nodes.append(helper.make_node("MaxPool", [r1], ["pool1"], kernel_shape=[2, 2],
                                    strides=[2, 2], name="pool1"))
    b.ranges["pool1"] = b.ranges["relu1"]  # pooling keeps the parameters
    p1 = b.qdq("pool1")
    w2 = b.weight("c2", w["c2"])
    b.nodes.append(helper.make_node("Conv", [p1, w2, b.bias("b2", w["b2"], "pool1", "c2")],
                                    ["conv2"], pads=[1, 1, 1, 1], name="conv2"))
    c2 = b.qdq("conv2")
    b.nodes.append(helper.make_node("Add", [c2, p1], ["sum"], name="add"))
    b.nodes.append(helper.make_node("Relu", ["sum"], ["relu2"], name="relu2"))
    r2 = b.qdq("relu2")
    b.nodes.append(helper.make_node("AveragePool", [r2], ["pool2"], kernel_shape=[2, 2],
                                    strides=[2, 2], name="pool2"))
    p2 = b.qdq("pool2")
    b.nodes.append(helper.make_node("Flatten", [p2], ["flat"], name="flatten"))
    b.ranges["flat"] = b.ranges["pool2"]
    fl = b.qdq("flat")
    fc = b.weight("fc", w["fc"], axis=0)  # Gemm transB=1: [N, K], channels on axis 0
    b.nodes.append(helper.make_node("Gemm", [fl, fc, b.bias("fb", w["fb"], "flat", "fc")],
                                    ["logits"], transB=1, name="fc"))
    out = b.qdq("logits")
    b.nodes.append(helper.make_node("Identity", [out], ["y"]))
    return make(b.nodes, {"x": x}, ["y"], b.inits), {"x": x}, b.scales["logits"]


def rng_uniform(*shape: int) -> np.ndarray:
    return np.random.default_rng(60).uniform(-1, 1, shape)


def quantised_nodes(model: Model) -> list[str]:
    from nnrt.protos import hdi_types_pb2 as ht

    lowered = model.handle.lowered()
    return [n.name.split(":")[0] for n in lowered.hdi.nodes if n.quantType == ht.QUANT_TYPE_ALL]


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
def test_qdq_cnn_matches_onnxruntime(runtime, dtype):
    model, feeds, step = qdq_cnn(dtype)
    expected = reference(model, feeds)[0]
    with import_onnx(model) as imported:
        quantised = quantised_nodes(imported)
        # Conv (+ fused Relu), MaxPool, Conv, Add (+ fused Relu), AvgPool, Reshape (the
        # Flatten), FullConnection: every operation quantised; QuantDTypeCast in and out
        assert quantised == ["Conv2D", "MaxPool", "Conv2D", "Add", "AvgPool", "Reshape",
                             "FullConnection"], quantised
        lowered = imported.handle.lowered()
        assert [n.name.split(":")[0] for n in lowered.hdi.nodes].count("QuantDTypeCast") == 2
        weights = [t for t in lowered.hdi.tensors if len(t.quantParams) > 1]
        assert len(weights) == 3  # both convolutions and the FullConnection: per channel
        with imported.compile("cpu") as compiled:
            got = np.array(compiled.run(feeds["x"]))
    assert got.shape == expected.shape and got.dtype == np.float32
    assert np.max(np.abs(got - expected)) <= 2 * step + 1e-6
    np.testing.assert_array_equal(got.argmax(axis=1), expected.argmax(axis=1))
    assert len(np.unique(np.rint(got / step))) > 5  # not saturated


def test_qdq_cnn_through_a_session_and_a_saved_model(runtime, tmp_path):
    model, feeds, step = qdq_cnn(batch=2)
    expected = reference(model, feeds)[0]
    path = tmp_path / "qcnn.onnx"
    onnx.save(model, path)
    session = InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (got,) = session.run(None, feeds)
    assert np.max(np.abs(got - expected)) <= 2 * step + 1e-6
    from nnrt.common import model_file

    with Model.load(path) as loaded:
        saved = model_file.save_model(loaded, tmp_path / "qcnn.nnrt")
    with Model.load(saved) as again, again.compile("cpu") as compiled:
        again_got = np.array(compiled.run(feeds["x"]))
    np.testing.assert_array_equal(again_got, got)


def test_qdq_float_fallbacks_match_onnxruntime(runtime):
    """Where no quantised OH_NN operation fits, the float operation runs between
    QuantDTypeCasts (exactly the Q/DQ arithmetic): Exp between Q/DQ; a DequantizeLinear
    with other parameters than its tensor's (an identity copy carries them); one read by a
    quantised Relu and by a float output; a Transpose between DQ and Q (no operation);
    a per-channel activation quantisation (QuantDTypeCast's axis, through NHWC)."""
    x = rng_uniform(2, 4, 3, 3).astype(np.float32)
    inits = {"s": np.float32(0.01), "z": np.int8(3), "s2": np.float32(0.02), "z2": np.int8(-5),
             "se": np.float32(0.02), "ze": np.int8(-100),
             "sc": np.array([0.01, 0.02, 0.03, 0.04], np.float32), "zc": np.zeros(4, np.int8),
             "w": f32(4, 4, 1, 1, seed=70)}
    n = helper.make_node
    nodes = [n("QuantizeLinear", ["x", "s", "z"], ["xq"]),
             n("DequantizeLinear", ["xq", "s", "z"], ["xd"]),
             n("Exp", ["xd"], ["e"]),
             n("QuantizeLinear", ["e", "se", "ze"], ["eq"]),
             n("DequantizeLinear", ["eq", "se", "ze"], ["ed"]),
             n("DequantizeLinear", ["xq", "s2", "z2"], ["xd2"]),  # other parameters
             n("Relu", ["xd"], ["r"]),
             n("QuantizeLinear", ["r", "s", "z"], ["rq"]),
             n("DequantizeLinear", ["rq", "s", "z"], ["rd"]),
             n("Transpose", ["xd"], ["t"], perm=[0, 2, 3, 1]),
             n("QuantizeLinear", ["t", "s", "z"], ["tq"]),
             n("DequantizeLinear", ["tq", "s", "z"], ["td"]),
             n("Conv", ["x", "w"], ["c"]),
             n("QuantizeLinear", ["c", "sc", "zc"], ["cq"], axis=1),
             n("DequantizeLinear", ["cq", "sc", "zc"], ["cd"], axis=1)]
    model = make(nodes, {"x": x}, ["ed", "xd2", "rd", "xd", "td", "cd", "cq"], inits)
    expected = reference(model, {"x": x})
    got = ours(model, {"x": x})
    steps = [0.02, 0.02, 0.01, 0.01, 0.01, 0.04, 1]
    for g, e, step in zip(got, expected, steps):
        assert g.shape == e.shape and g.dtype == e.dtype
        assert np.max(np.abs(g.astype(np.float64) - e)) <= step + 1e-6
    with import_onnx(model) as imported:
        assert quantised_nodes(imported) == ["Relu"]


def test_qdq_matmul_of_two_quantised_tensors(runtime):
    a, b = rng_uniform(3, 4).astype(np.float32), rng_uniform(4, 5).astype(np.float32) * 0.5
    inits = {"s": np.float32(1 / 127), "z": np.int8(0), "so": np.float32(0.02),
             "zo": np.int8(0)}
    n = helper.make_node
    nodes = [n("QuantizeLinear", ["a", "s", "z"], ["aq"]),
             n("DequantizeLinear", ["aq", "s", "z"], ["ad"]),
             n("QuantizeLinear", ["b", "s", "z"], ["bq"]),
             n("DequantizeLinear", ["bq", "s", "z"], ["bd"]),
             n("MatMul", ["ad", "bd"], ["m"]),
             n("QuantizeLinear", ["m", "so", "zo"], ["mq"]),
             n("DequantizeLinear", ["mq", "so", "zo"], ["y"])]
    model = make(nodes, {"a": a, "b": b}, ["y"], inits)
    expected = reference(model, {"a": a, "b": b})[0]
    (got,) = ours(model, {"a": a, "b": b})
    assert np.max(np.abs(got - expected)) <= 2 * 0.02 + 1e-6
    with import_onnx(model) as imported:
        assert quantised_nodes(imported) == ["Matmul"]


def _qdq_one(q_attrs=None, scale=None, zero=None, op="QuantizeLinear", opset=17,
             x_dtype=np.float32, scale_input=False):
    scale = np.float32(0.1) if scale is None else scale
    zero = np.int8(0) if zero is None else zero
    x = np.ones((2, 3), x_dtype)
    inits = {"z": zero}
    inputs = {"x": x}
    if scale_input:
        inputs["s"] = np.asarray([scale])
    else:
        inits["s"] = scale
    node = helper.make_node(op, ["x", "s", "z"], ["y"], name="the_q", **(q_attrs or {}))
    return make([node], inputs, ["y"], inits, opset=opset)


@pytest.mark.parametrize("build, pattern", [
    (lambda: _qdq_one(scale_input=True),
     r"'the_q' \(QuantizeLinear\): scale and zero point must be constants"),
    (lambda: _qdq_one(zero=np.int16(0), opset=21),
     r"'the_q' \(QuantizeLinear\): quantised type int16: OH_NN quantises to int8"),
    (lambda: _qdq_one(q_attrs={"block_size": 1}, scale=np.full((2, 3), 0.1, np.float32),
                      zero=np.zeros((2, 3), np.int8), opset=21),
     r"'the_q' \(QuantizeLinear\): blocked quantisation"),
    (lambda: _qdq_one(op="DequantizeLinear", zero=np.int32(0), x_dtype=np.int32),
     r"'the_q' \(DequantizeLinear\): an int32 tensor computed at run time"),
    (lambda: _qdq_one(scale=np.float16(0.1), opset=19),
     r"'the_q' \(QuantizeLinear\): a scale of type float16"),
])
def test_qdq_refusals_name_node_and_why(build, pattern):
    with pytest.raises(OnnxImportError, match=pattern):
        import_onnx(build())


def test_qlinear_and_dynamic_quantisation_are_refused():
    x = np.ones((1, 1, 3, 3), np.uint8)
    node = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"],
                            ["y"], name="qconv")
    inits = {"xs": np.float32(1), "xz": np.uint8(0), "w": np.ones((1, 1, 1, 1), np.uint8),
             "ws": np.float32(1), "wz": np.uint8(0), "ys": np.float32(1), "yz": np.uint8(0)}
    with pytest.raises(OnnxImportError, match=r"'qconv' \(QLinearConv\): QLinear operators "
                                              r"are not imported \(export QDQ"):
        import_onnx(make([node], {"x": x}, ["y"], inits))
    node = helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"], name="dyn")
    with pytest.raises(OnnxImportError, match=r"'dyn' \(DynamicQuantizeLinear\): dynamic "
                                              r"quantisation"):
        import_onnx(make([node], {"x": np.ones((2, 2), np.float32)}, ["y", "s", "z"]))
