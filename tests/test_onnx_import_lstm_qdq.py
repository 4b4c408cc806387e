"""ONNX import (client/onnx_import.py), the later parts: LSTM onto the OH_NN LSTM operation
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
from onnx import TensorProto, helper, numpy_helper

from tests.capi.util_capi import use_runtime
from tests.conftest import start_driver
from tests.test_onnx_import import _shape_subgraph, check, f32, make, ours, reference

F = TensorProto.FLOAT


@pytest.fixture(scope="module")
def cpu_runtime(tmp_path_factory):
    runtime = tmp_path_factory.mktemp("onnx") / "rt"
    driver = start_driver(runtime, "cpu")
    yield runtime
    driver.stop()


@pytest.fixture
def runtime(cpu_runtime, monkeypatch):
    with use_runtime(monkeypatch, cpu_runtime):
        yield cpu_runtime


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
    from tests.test_cli_run_bench import nnrt

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
    model, _ = _shape_subgraph()
    _dynamic(model, {"x": {0: "batch"}, "y": {0: "batch"}})
    for batch in (2, 5):
        check(model, {"x": f32(batch, 3, 4, 4, seed=batch)})
