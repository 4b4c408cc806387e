"""`nnrt.client.InferenceSession` (client/session.py): onnxruntime's API shape over nnrt
devices, compared with onnxruntime itself; providers; and the CLI on ONNX files:
`nnrt convert` then `nnrt run` / `nnrt bench` on .onnx and .nnrt."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from nnrt.client import InferenceSession, NodeArg, SessionOptions
from onnx import TensorProto, helper, numpy_helper

from tests.client.capi.util_capi import use_runtime
from tests.conftest import start_driver

F = TensorProto.FLOAT
CLI_TIMEOUT = 120


def two_output_model(batch: int | str = 2) -> onnx.ModelProto:
    """x [batch, 3, 6, 6] -> Conv+Relu -> (GlobalAveragePool->Flatten->Gemm = logits,
    ReduceMax over channels = peak); a second input scales the logits."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.standard_normal((5, 4)).astype(np.float32), "fw"),
             numpy_helper.from_array(rng.standard_normal(5).astype(np.float32), "fb")]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("GlobalAveragePool", ["r"], ["g"]),
             helper.make_node("Flatten", ["g"], ["f"]),
             helper.make_node("Gemm", ["f", "fw", "fb"], ["l"], transB=1),
             helper.make_node("Mul", ["l", "scale"], ["logits"]),
             helper.make_node("ReduceMax", ["r"], ["peak"], axes=[1], keepdims=0)]
    graph = helper.make_graph(
        nodes, "two", [helper.make_tensor_value_info("x", F, [batch, 3, 6, 6]),
                       helper.make_tensor_value_info("scale", F, [1])],
        [helper.make_tensor_value_info("logits", F, [batch, 5]),
         helper.make_tensor_value_info("peak", F, [batch, 6, 6])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


@pytest.fixture(scope="module")
def drivers(tmp_path_factory):
    runtime = tmp_path_factory.mktemp("session") / "rt"
    cpu = start_driver(runtime, "cpu")
    yield runtime
    cpu.stop()


@pytest.fixture
def runtime(drivers, monkeypatch):
    with use_runtime(monkeypatch, drivers):
        yield drivers


@pytest.fixture(scope="module")
def model_path(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("models") / "two.onnx"
    onnx.save(two_output_model(), path)
    return path


def feeds() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    return {"x": rng.standard_normal((2, 3, 6, 6)).astype(np.float32),
            "scale": np.array([0.5], np.float32)}


def test_api_shape_matches_onnxruntime(runtime, model_path):
    reference = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
    with InferenceSession(str(model_path), providers=["CPUExecutionProvider"]) as session:
        for ours, theirs in ((session.get_inputs(), reference.get_inputs()),
                             (session.get_outputs(), reference.get_outputs())):
            assert [(a.name, a.shape, a.type) for a in ours] == \
                [(a.name, a.shape, a.type) for a in theirs]
            assert all(isinstance(a, NodeArg) for a in ours)
        assert session.get_providers() == ["CPUExecutionProvider"]
        expected = reference.run(None, feeds())
        got = session.run(None, feeds())
        assert isinstance(got, list) and len(got) == 2
        for g, e in zip(got, expected):
            assert g.shape == e.shape and g.dtype == e.dtype
            np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)
        # a subset, in the order asked for
        (peak,) = session.run(["peak"], feeds())
        np.testing.assert_allclose(peak, expected[1], rtol=1e-4, atol=1e-5)
        peak, logits = session.run(["peak", "logits"], feeds())
        np.testing.assert_allclose(logits, expected[0], rtol=1e-4, atol=1e-5)
        with pytest.raises(ValueError, match="no output named"):
            session.run(["nope"], feeds())
        with pytest.raises(ValueError, match=r"missing \['scale'\]"):
            session.run(None, {"x": feeds()["x"]})


def test_providers_and_options(runtime, model_path):
    expected = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"]).run(
        None, feeds())
    from nnrt.client import list_devices

    name = list_devices()[0].name  # the CPU driver's device, by its full name
    options = SessionOptions(intra_op_num_threads=2)  # accepted, the driver schedules
    for providers in ([("NnrtExecutionProvider", {"device": "cpu"})],
                      [("NnrtExecutionProvider", {"device": name})],
                      ["CUDAExecutionProvider", "CPUExecutionProvider"], None):
        with InferenceSession(model_path, options, providers=providers) as session:
            for g, e in zip(session.run(None, feeds()), expected):
                np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)
    # relaxed precision (float16), the options given onnxruntime's other way: close, not equal
    with InferenceSession(model_path.read_bytes(), SessionOptions(enable_float16=True),
                          providers=["NnrtExecutionProvider"],
                          provider_options=[{"device": "cpu"}]) as session:
        for g, e in zip(session.run(None, feeds()), expected):
            np.testing.assert_allclose(g, e, rtol=2e-2, atol=2e-2)
    # a performance mode or priority the CPU device does not have: its refusal, not a
    # silent default
    with pytest.raises(Exception, match="performance modes"):
        InferenceSession(model_path, SessionOptions(performance_mode="extreme"))
    with pytest.raises(Exception, match="no priorities"):
        InferenceSession(model_path, SessionOptions(priority="high"))
    with pytest.raises(ValueError, match="priority 'extreme'"):
        InferenceSession(model_path, SessionOptions(priority="extreme"))
    with pytest.raises(ValueError, match="none of the providers"):
        InferenceSession(model_path, providers=["CUDAExecutionProvider"])
    with pytest.raises(Exception, match="no device 'tpu'"):
        InferenceSession(model_path, providers=[("NnrtExecutionProvider", {"device": "tpu"})])


def test_dynamic_batch_and_saved_model(runtime, tmp_path):
    model = two_output_model("batch")
    path = tmp_path / "dyn.onnx"
    onnx.save(model, path)
    reference = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    with InferenceSession(path) as session:
        assert session.get_inputs()[0].shape == ["batch", 3, 6, 6]
        for batch in (1, 3):
            x = np.random.default_rng(batch).standard_normal((batch, 3, 6, 6)).astype(np.float32)
            feed = {"x": x, "scale": np.array([2.0], np.float32)}
            for g, e in zip(session.run(None, feed), reference.run(None, feed)):
                np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)
    # the same model saved as .nnrt (Model.load) serves a session too
    from nnrt.client import Model
    from nnrt.common import model_file

    with Model.load(path) as loaded:
        saved = model_file.save_model(loaded, tmp_path / "dyn.nnrt")
    with InferenceSession(saved) as session:
        assert [a.name for a in session.get_outputs()] == ["logits", "peak"]
        assert session.get_inputs()[0].shape == [None, 3, 6, 6]
        feed = {"x": feeds()["x"], "scale": feeds()["scale"]}
        for g, e in zip(session.run(None, feed), reference.run(None, feed)):
            np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)


# -- the CLI -----------------------------------------------------------------------------------


def nnrt(*args, runtime_dir: Path, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "NNRT_RUNTIME_DIR": str(runtime_dir), "NNRT_NO_EMBEDDED": "1"}
    return subprocess.run([sys.executable, "-m", "nnrt.client.cli", *map(str, args)],
                          env=env, cwd=cwd, capture_output=True, text=True, timeout=CLI_TIMEOUT,
                          check=False)


def test_convert_then_run_and_bench(drivers, model_path, tmp_path):
    out = tmp_path / "two.nnrt"
    done = nnrt("convert", model_path, "-o", out, runtime_dir=drivers)
    assert done.returncode == 0, done.stderr
    assert f"wrote {out}" in done.stdout and "logits" in done.stdout
    assert out.read_bytes()[:8] == b"NNRTMODL"
    x, scale = tmp_path / "x.npy", tmp_path / "scale.npy"
    np.save(x, feeds()["x"])
    np.save(scale, feeds()["scale"])
    expected = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"]).run(
        None, feeds())
    for model in (model_path, out):  # the .onnx directly, and the converted file
        results = tmp_path / model.suffix[1:]
        done = nnrt("run", model, "--input", x, "--input", scale, "--output-dir", results,
                    "--json", runtime_dir=drivers)
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        assert [o["name"] for o in report["outputs"]] == ["logits", "peak"]
        for name, e in zip(("logits", "peak"), expected):
            np.testing.assert_allclose(np.load(results / f"{name}.npy"), e, rtol=1e-4,
                                       atol=1e-5)
    done = nnrt("bench", model_path, "--runs", "3", "--warmup", "1", "--json",
                runtime_dir=drivers)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["runs"] == 3


def test_cli_errors_name_the_formats(drivers, tmp_path):
    bogus = tmp_path / "notes.txt"
    bogus.write_text("hello")
    done = nnrt("run", bogus, runtime_dir=drivers)
    assert done.returncode == 2
    assert ".nnrt" in done.stderr and ".onnx" in done.stderr
    help_text = nnrt("run", "--help", runtime_dir=drivers).stdout
    assert ".onnx" in help_text and ".nnrt" in help_text
    # an operator the importer refuses: exit 2, the node and operator named
    node = helper.make_node("Einsum", ["a", "b"], ["y"], name="mix", equation="i,i->i")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("a", F, [2]),
                                            helper.make_tensor_value_info("b", F, [2])],
                              [helper.make_tensor_value_info("y", F, [2])])
    bad = tmp_path / "einsum.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), bad)
    for command in ("convert", "run"):
        done = nnrt(command, bad, runtime_dir=drivers)
        assert done.returncode == 2, done.stderr
        assert "'mix' (Einsum)" in done.stderr and "not supported" in done.stderr
