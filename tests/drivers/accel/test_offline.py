"""Offline models of the NPU simulator (`.npubin`, drivers/accel/offline.py): the format round
trip and every bad binary, the compiler (`python -m nnrt.drivers.accel.compile`, `nnrt
compile`), I/O descriptors in PrepareModelReply, and PrepareOfflineModel end to end through
the C API and the Pythonic API.

The end-to-end tests on the accel driver skip until `nnrt.drivers.accel.device` exists; the
descriptor and Pythonic-API tests also run against the test feature driver (a CPU device
with an offline format of its own, tests/client/capi/util_compilation.py).
"""

from __future__ import annotations

import struct
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest
from nnrt.client import api, capi
from nnrt.common import model_file
from nnrt.common.hdi_model import IODesc, LoweredModel
from nnrt.common.hdi_model import HdiModelBuilder
from nnrt.drivers.accel import offline
from nnrt.drivers.accel.compile import model_graph
from nnrt.drivers.accel.spec import DEFAULT_SPEC_TEXT, load_spec, parse_spec
from nnrt.hdi.reference.float16 import to_float16
from nnrt.hdi.reference.plan import ExecutionPlan
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi import graph_cache
from nnrt.common.errors import NNRT_INVALID_MODEL, NNRT_UNSUPPORTED_OP, DriverError
from nnrt.hdi.graph import Graph
from nnrt.hdi.sealed_blob import seal

from tests.client.capi.util_capi import use_runtime
from tests.client.capi.util_compilation import offline_model_bytes, start_feature_driver
from tests.conftest import start_driver

REPO = Path(__file__).resolve().parents[3]
ALL = ht.QUANT_TYPE_ALL
OH_F32, OH_I8 = capi.OH_NN_FLOAT32, capi.OH_NN_INT8
RNG = np.random.default_rng(11)
W1 = RNG.uniform(-1, 1, (8, 4)).astype(np.float32)
W2 = RNG.uniform(-1, 1, (3, 8)).astype(np.float32)
X = RNG.uniform(-1, 1, (2, 4)).astype(np.float32)


def NEVER() -> bool:  # a run nobody cancels
    return False


# -- models ------------------------------------------------------------------------------------


def mlp(batch: int | None = 2) -> api.Model:
    """A finished float32 MLP 4 -> 8 (ReLU) -> 3 (softmax)."""
    m = api.Model()
    x = m.input([batch, 4])
    h = m.fully_connected(x, m.constant(W1), activation="relu")
    m.outputs(m.softmax(m.fully_connected(h, m.constant(W2))))
    return m


def mlp_reference(x: np.ndarray) -> np.ndarray:
    logits = np.maximum(x @ W1.T, 0) @ W2.T
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def int8_fc() -> LoweredModel:
    """y = FC(x) in int8: per-channel int8 weights, int32 bias, per-tensor activations."""
    w = RNG.integers(-127, 128, (5, 6), dtype=np.int8)
    scales = RNG.uniform(0.005, 0.02, 5)
    b = HdiModelBuilder("qfc")
    x = b.tensor("x", np.int8, [2, 6], quant=[(8, 3, 0.05)])
    b.inputs.append(x)
    y = b.tensor("y", np.int8, [2, 5], quant=[(8, -2, 0.1)])
    wi = b.tensor("w", np.int8, w.shape, data=w, quant=[(8, 0, float(s)) for s in scales])
    bias = b.constant("b", RNG.integers(-500, 500, 5, dtype=np.int32))
    b.node(na.NODE_TYPE_FULL_CONNECTION, [x, wi, bias], [y], na.FullConnection(hasBias=True),
           quant_type=ALL)
    b.mark_outputs(y)
    return LoweredModel(b, [IODesc("x", OH_I8, [2, 6], 0)], [IODesc("y", OH_I8, [2, 5], 0)])


@pytest.fixture(scope="module")
def spec():
    return load_spec(None)


@pytest.fixture(scope="module")
def other_spec():
    text = DEFAULT_SPEC_TEXT.replace('name = "npu-sim-default"', 'name = "npu-sim-other"')
    assert text != DEFAULT_SPEC_TEXT
    return parse_spec(text, "other.toml")


@pytest.fixture(scope="module")
def f32_graph() -> Graph:
    return model_graph(mlp().handle.lowered())


@pytest.fixture(scope="module")
def npubin(f32_graph, spec) -> bytes:
    return offline.compile_offline(f32_graph, spec, True)


# -- the format --------------------------------------------------------------------------------


def test_float16_round_trip(f32_graph, spec, npubin) -> None:
    loaded = offline.load_offline(npubin, spec)
    assert loaded.enable_float16 and loaded.spec_identity == spec.identity
    program = loaded.graph
    assert [t.dtype for t in program.inputs + program.outputs] == [np.float16] * 2
    # the client still exchanges float32, with the model's own names and shapes
    assert [(t.name, t.dtype, t.shape) for t in loaded.inputs + loaded.outputs] == \
        [(t.name, t.dtype, t.shape) for t in f32_graph.inputs + f32_graph.outputs]
    assert [t.index for t in loaded.inputs] == [t.index for t in program.inputs]
    half = to_float16(f32_graph)
    assert program.execution_order == half.execution_order
    for a, b in zip(program.tensors, half.tensors):
        assert (a.name, a.data_type, a.shape) == (b.name, b.data_type, b.shape)
        if b.is_constant:
            assert a.constant.dtype == np.float16 and np.array_equal(a.constant, b.constant)
    assert loaded.costs is not None and len(loaded.costs) == len(program.nodes)
    assert all(c.precision == "fp16" for c in loaded.costs)
    # the program runs as is and computes the model in half precision
    (y,) = ExecutionPlan(program).run([X.astype(np.float16)], NEVER)
    np.testing.assert_allclose(y.astype(np.float32), mlp_reference(X), atol=2e-3)


def test_header_describes_the_binary(spec, npubin) -> None:
    header = offline.describe(npubin)
    assert header["spec"] == spec.identity and header["float16"] is True
    assert header["inputs"][0]["data_type"] == ht.DATA_TYPE_FLOAT32
    assert header["weights_bytes"] == (W1.size + W2.size) * 2  # float16 weights
    assert npubin.startswith(offline.MAGIC)


def test_int8_round_trip_is_bit_exact(spec) -> None:
    graph = model_graph(int8_fc())
    loaded = offline.load_offline(offline.compile_offline(graph, spec, False), spec)
    assert not loaded.enable_float16
    for a, b in zip(loaded.graph.tensors, graph.tensors):
        assert a.dtype == b.dtype and a.quant_params == b.quant_params
        if b.is_constant:
            assert np.array_equal(a.constant, b.constant)
    assert loaded.inputs[0].quant_params == graph.inputs[0].quant_params
    assert loaded.costs[0].precision == "int8"
    x = RNG.integers(-128, 128, (2, 6), dtype=np.int8)
    (got,) = ExecutionPlan(loaded.graph).run([x], NEVER)
    (want,) = ExecutionPlan(graph).run([x], NEVER)  # the CPU driver's int8
    assert got.dtype == np.int8 and np.array_equal(got, want)


def test_dynamic_model_has_no_recorded_costs(spec) -> None:
    graph = model_graph(mlp(batch=None).handle.lowered())
    loaded = offline.load_offline(offline.compile_offline(graph, spec, True), spec)
    assert loaded.costs is None and loaded.inputs[0].shape == (-1, 4)


def test_float32_needs_float16(f32_graph, spec) -> None:
    with pytest.raises(DriverError) as info:
        offline.compile_offline(f32_graph, spec, False)
    assert info.value.code == NNRT_UNSUPPORTED_OP and "float32" in info.value.message


# -- every bad binary ---------------------------------------------------------------------------


def refusal(blob: bytes, spec) -> str:
    with pytest.raises(DriverError) as info:
        offline.load_offline(blob, spec)
    assert info.value.code == NNRT_INVALID_MODEL
    assert info.value.message.startswith("offline model refused: ")
    return info.value.message


def payload_start(blob: bytes) -> int:
    (length,) = struct.unpack_from("<I", blob, 12)
    return 16 + length + 4


def test_another_spec_names_both(npubin, spec, other_spec) -> None:
    why = refusal(npubin, other_spec)
    assert f"compiled for spec {spec.identity!r}" in why and other_spec.identity in why


def test_another_format_version(npubin, spec) -> None:
    blob = bytearray(npubin)
    struct.pack_into("<I", blob, 8, offline.FORMAT_VERSION + 1)
    assert f"format version {offline.FORMAT_VERSION + 1}" in refusal(bytes(blob), spec)


@pytest.mark.parametrize("data, why", [
    (b"", "not an NPU simulator binary"),
    (b"\x7fELF\x02\x01\x01" + bytes(40), "not an NPU simulator binary"),
    (b"NNRTGRPH" + bytes(40), "not an NPU simulator binary"),  # a model cache
    (b"NNRTMODL" + bytes(40), "saved model (.nnrt)"),
])
def test_not_an_npubin(data, why, spec) -> None:
    assert why in refusal(data, spec)


def test_a_saved_model_is_named(tmp_path, spec) -> None:
    path = model_file.save_model(mlp().handle, tmp_path / "m.nnrt")
    assert "nnrt compile" in refusal(path.read_bytes(), spec)


@pytest.mark.parametrize("cut", [3, 12, 20, 40, -1, -100, "half"])
def test_truncated(npubin, spec, cut) -> None:
    end = len(npubin) // 2 if cut == "half" else cut
    assert "truncated" in refusal(npubin[:end], spec)


@pytest.mark.parametrize("extra", [b"\0", b"trailing garbage" * 10])
def test_trailing_bytes(npubin, spec, extra) -> None:
    assert f"{len(extra)} trailing bytes" in refusal(npubin + extra, spec)


@pytest.mark.parametrize("where", ["header", "program", "weights", "last"])
def test_corrupt(npubin, spec, where) -> None:
    start = payload_start(npubin)
    at = {"header": start + 10, "program": start + (len(npubin) - start) // 2,
          "weights": len(npubin) - 20, "last": len(npubin) - 1}[where]
    blob = bytearray(npubin)
    blob[at] ^= 0x10
    assert "checksum mismatch (corrupt)" in refusal(bytes(blob), spec)


# Binaries whose checksum is right but whose contents are not sound (a buggy writer).


def resealed(spec, header: dict | bytes, program: bytes, tail: bytes = b"") -> bytes:
    import json

    head = header if isinstance(header, bytes) else json.dumps(header).encode()
    payload = struct.pack("<I", len(head)) + head + struct.pack("<Q", len(program)) + program
    return seal(offline.MAGIC, offline.FORMAT_VERSION, spec.identity, payload + tail)


def parts(npubin: bytes, spec) -> tuple[dict, bytes]:
    header = offline.describe(npubin)
    payload = npubin[payload_start(npubin):]
    (head,) = struct.unpack_from("<I", payload)
    return header, payload[4 + head + 8:]


def test_sound_reseal_loads(npubin, spec) -> None:
    assert offline.load_offline(resealed(spec, *parts(npubin, spec)), spec).enable_float16


def test_unsound_contents(npubin, f32_graph, spec) -> None:
    header, program = parts(npubin, spec)
    assert "undecodable header" in refusal(resealed(spec, b"{not json", program), spec)
    assert "undecodable header" in refusal(resealed(spec, b"[1, 2]", program), spec)
    assert "trailing bytes after the program" in \
        refusal(resealed(spec, header, program, b"xx"), spec)
    assert "undecodable program" in refusal(resealed(spec, header, program[:-3]), spec)
    foreign = graph_cache.encode(to_float16(f32_graph), "another identity")
    assert "undecodable program" in refusal(resealed(spec, header, foreign), spec)
    assert "schedule does not cover" in \
        refusal(resealed(spec, {**header, "execution_order": [0]}, program), spec)
    assert "schedule runs node 1" in \
        refusal(resealed(spec, {**header, "execution_order": [1, 0, 2][:len(
            header["execution_order"])]}, program), spec)
    bad_io = [{**header["inputs"][0], "shape": [9, 9]}]
    assert "does not match" in refusal(resealed(spec, {**header, "inputs": bad_io}, program), spec)
    wrong_type = [{**header["outputs"][0], "data_type": ht.DATA_TYPE_INT8}]
    assert "is int8" in refusal(resealed(spec, {**header, "outputs": wrong_type}, program), spec)
    assert "'float16' is not a boolean" in \
        refusal(resealed(spec, {**header, "float16": "yes"}, program), spec)
    assert "costs" in refusal(resealed(spec, {**header, "costs": [{}]}, program), spec)
    # a float32 program (written without the float16 rewrite): not what this NPU runs
    f32 = graph_cache.encode(f32_graph, spec.identity, keyed=False)
    assert "does not run the program" in \
        refusal(resealed(spec, {**header, "float16": False}, f32), spec)


# -- the compiler ------------------------------------------------------------------------------


def compiler(*args: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nnrt.drivers.accel.compile", *map(str, args)],
                          capture_output=True, text=True, cwd=REPO, timeout=60, check=False)


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> Path:
    return model_file.save_model(mlp().handle, tmp_path_factory.mktemp("models") / "mlp.nnrt")


@pytest.mark.multiprocess
def test_compile_tool_float16(saved, tmp_path, spec) -> None:
    out = tmp_path / "mlp.npubin"
    done = compiler(saved, "-o", out, "--float16")
    assert done.returncode == 0, done.stderr
    assert f"wrote {out}: {out.stat().st_size} bytes" in done.stdout
    assert f"{len(loaded_graph_nodes(out, spec))} nodes" in done.stdout
    assert spec.identity in done.stdout and "estimate:" in done.stdout
    loaded = offline.load_offline(out.read_bytes(), spec)
    assert loaded.enable_float16 and loaded.inputs[0].dtype == np.float32


def loaded_graph_nodes(path: Path, spec) -> tuple:
    return offline.load_offline(path.read_bytes(), spec).graph.nodes


@pytest.mark.multiprocess
def test_compile_tool_refuses_float32_without_float16(saved, tmp_path) -> None:
    out = tmp_path / "mlp.npubin"
    done = compiler(saved, "-o", out)
    assert done.returncode == 1
    assert "float32" in done.stderr and "--float16" in done.stderr
    assert not out.exists() and list(tmp_path.iterdir()) == []


@pytest.mark.multiprocess
def test_compile_tool_default_output_and_int8(tmp_path, spec) -> None:
    path = model_file.save(int8_fc(), tmp_path / "qfc.nnrt")
    done = compiler(path)
    assert done.returncode == 0, done.stderr
    assert offline.load_offline((tmp_path / "qfc.npubin").read_bytes(), spec).graph.name == "qfc"


@pytest.mark.multiprocess
def test_compile_tool_spec(saved, tmp_path, spec, other_spec) -> None:
    toml = tmp_path / "other.toml"
    toml.write_text(DEFAULT_SPEC_TEXT.replace('name = "npu-sim-default"',
                                              'name = "npu-sim-other"'))
    out = tmp_path / "other.npubin"
    done = compiler(saved, "-o", out, "--spec", toml, "--float16")
    assert done.returncode == 0, done.stderr
    assert other_spec.identity in done.stdout
    assert offline.load_offline(out.read_bytes(), other_spec).spec_identity == other_spec.identity
    assert "compiled for spec" in refusal(out.read_bytes(), spec)


@pytest.mark.multiprocess
@pytest.mark.parametrize("case", ["no-args", "missing-model", "garbage-model", "bad-spec",
                                  "missing-spec"])
def test_compile_tool_bad_usage_exits_2(case, saved, tmp_path) -> None:
    garbage = tmp_path / "garbage.nnrt"
    garbage.write_bytes(b"not a model")
    bad_spec = tmp_path / "bad.toml"
    bad_spec.write_text("name = 3\n")
    args = {"no-args": [], "missing-model": [tmp_path / "none.nnrt"],
            "garbage-model": [garbage], "bad-spec": [saved, "--spec", bad_spec, "--float16"],
            "missing-spec": [saved, "--spec", tmp_path / "none.toml", "--float16"]}[case]
    done = compiler(*args, "-o", tmp_path / "x.npubin") if args else compiler()
    assert done.returncode == 2, done
    assert done.stderr.strip()
    assert not (tmp_path / "x.npubin").exists()


@pytest.mark.multiprocess
def test_compile_tool_unwritable_output_exits_1(saved, tmp_path) -> None:
    done = compiler(saved, "-o", tmp_path / "no" / "dir" / "x.npubin", "--float16")
    assert done.returncode == 1 and "cannot write" in done.stderr


# -- `nnrt compile` ------------------------------------------------------------------------------


@pytest.mark.multiprocess
def test_nnrt_compile(saved, tmp_path, capfd, spec) -> None:
    from nnrt.client import cli

    out = tmp_path / "cli.npubin"
    assert cli.main(["compile", str(saved), "--device", "accel", "-o", str(out),
                     "--float16"]) == 0
    assert f"wrote {out}" in capfd.readouterr().out
    assert offline.load_offline(out.read_bytes(), spec).enable_float16
    assert cli.main(["compile", str(saved), "--device", "accel", "-o", str(out)]) == 1
    assert "float32" in capfd.readouterr().err
    assert cli.main(["compile", str(saved), "--device", "cpu", "-o", str(out)]) == 2
    assert "no offline format for device kind cpu" in capfd.readouterr().err
    assert cli.main(["compile", str(tmp_path / "none.nnrt"), "--device", "accel"]) == 2
    with pytest.raises(SystemExit) as info:
        cli.main(["compile", str(saved)])  # --device is required
    assert info.value.code == 2


@pytest.mark.multiprocess
def test_nnrt_compile_as_a_command(saved, tmp_path) -> None:
    out = tmp_path / "cmd.npubin"
    done = subprocess.run([sys.executable, "-m", "nnrt.client.cli", "compile", str(saved),
                           "--device", "accel", "-o", str(out), "--float16"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert out.exists()


@pytest.mark.multiprocess
def test_nnrt_compile_runs_no_module_planted_in_the_working_directory(saved, tmp_path,
                                                                       monkeypatch) -> None:
    """The compiler runs as `python -P -m`: the caller's directory is not on sys.path."""
    from nnrt.client import cli

    marker = tmp_path / "planted-ran"
    (tmp_path / "argparse.py").write_text(f"open({str(marker)!r}, 'w').close()\n"
                                          "raise SystemExit(9)\n")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["compile", str(saved), "--device", "accel", "-o", "planted.npubin",
                     "--float16"]) == 0
    assert (tmp_path / "planted.npubin").exists() and not marker.exists()


# -- I/O descriptors in PrepareModelReply ------------------------------------------------------


def test_prepare_model_reply_describes_inputs_and_outputs(client) -> None:
    lowered = int8_fc()
    with lowered.hdi.packed(client) as model:
        reply = client.prepare_model(model)
    assert reply.returnCode == 0
    assert [(t.name, t.dataType, list(t.dims), t.format) for t in reply.inputs] == \
        [("x", ht.DATA_TYPE_INT8, [2, 6], ht.FORMAT_NONE)]
    assert [(t.name, t.dataType, list(t.dims)) for t in reply.outputs] == \
        [("y", ht.DATA_TYPE_INT8, [2, 5])]
    (q,) = reply.inputs[0].quantParams
    assert (q.numBits, q.zeroPoint) == (8, 3) and q.scale == pytest.approx(0.05)
    assert not reply.inputs[0].HasField("data")
    assert client.release_prepared_model(reply.preparedModelId).returnCode == 0


# -- the feature (CPU) driver's offline format now gets descriptors ------------------------------


@pytest.fixture(scope="module")
def feature(tmp_path_factory):
    driver = start_feature_driver(tmp_path_factory.mktemp("feature") / "rt", "feature")
    yield driver
    driver.stop()


def test_offline_model_on_the_feature_driver_has_descriptors(feature, monkeypatch) -> None:
    data = offline_model_bytes()
    with use_runtime(monkeypatch, feature.runtime_dir):
        c = capi.OH_NNCompilation_ConstructWithOfflineModelBuffer(data, len(data))
        assert capi.OH_NNCompilation_Build(c) == capi.OH_NN_SUCCESS
        assert c.built.inputs == [IODesc("x", OH_F32, [4], capi.OH_NN_FORMAT_NONE),
                                  IODesc("y", OH_F32, [4], capi.OH_NN_FORMAT_NONE)]
        assert c.built.outputs == [IODesc("z", OH_F32, [4], capi.OH_NN_FORMAT_NONE)]
        ex = capi.OH_NNExecutor_Construct(c)
        assert capi.OH_NNExecutor_GetInputCount(ex) == (capi.OH_NN_SUCCESS, 2)
        capi.OH_NNExecutor_Destroy(ex)
        capi.OH_NNCompilation_Destroy(c)
        x, y = np.arange(4, dtype=np.float32), np.full(4, 0.5, np.float32)
        with api.Compiled.from_offline(data, device="feature") as compiled:
            np.testing.assert_array_equal(compiled.executor().run(x, y), x + y)


def test_from_offline_file_on_the_feature_driver(feature, monkeypatch, tmp_path) -> None:
    path = tmp_path / "add.om"
    path.write_bytes(offline_model_bytes())
    x = np.ones(4, np.float32)
    with use_runtime(monkeypatch, feature.runtime_dir):
        with api.Compiled.from_offline(path, device="feature") as compiled:
            np.testing.assert_array_equal(compiled.run(x, x), 2 * x)
        with api.Compiled.from_offline(str(path)) as compiled:
            assert [io.name for io in compiled.executor().inputs] == ["x", "y"]
        with pytest.raises(api.NNRtError) as info:
            api.Compiled.from_offline(tmp_path / "none.om")
        assert info.value.code == capi.OH_NN_INVALID_PATH


# -- PrepareOfflineModel on the accel driver ------------------------------------------------------


@pytest.fixture(scope="module")
def accel(tmp_path_factory):
    pytest.importorskip("nnrt.drivers.accel.device")
    driver = start_driver(tmp_path_factory.mktemp("accel") / "rt", "accel")
    yield driver
    driver.stop()


def accel_device() -> api.DeviceInfo:
    """The accel driver's device, among the devices of the runtime directory in use."""
    (device,) = [d for d in api.list_devices() if d.type == capi.OH_NN_ACCELERATOR]
    return device


def test_offline_model_through_the_c_api(accel, npubin, monkeypatch, tmp_path) -> None:
    pytest.importorskip("nnrt.drivers.accel.device")
    path = tmp_path / "mlp.npubin"
    path.write_bytes(npubin)
    with use_runtime(monkeypatch, accel.runtime_dir):
        device = accel_device()
        for c in (capi.OH_NNCompilation_ConstructWithOfflineModelBuffer(npubin, len(npubin)),
                  capi.OH_NNCompilation_ConstructWithOfflineModelFile(str(path))):
            assert capi.OH_NNCompilation_SetDevice(c, device.id) == capi.OH_NN_SUCCESS
            assert capi.OH_NNCompilation_Build(c) == capi.OH_NN_SUCCESS
            built = c.built
            assert built.source == "offline"
            # compiled in relaxed precision: the client still exchanges float32
            assert [(d.name, d.data_type, d.shape) for d in built.inputs] == \
                [("Tensor: 0", OH_F32, [2, 4])]
            assert [(d.data_type, d.shape) for d in built.outputs] == [(OH_F32, [2, 3])]
            capi.OH_NNCompilation_Destroy(c)
    assert "offline model" in accel.log()


def test_offline_model_through_the_pythonic_api(accel, npubin, monkeypatch, tmp_path) -> None:
    pytest.importorskip("nnrt.drivers.accel.device")
    path = tmp_path / "mlp.npubin"
    path.write_bytes(npubin)
    with use_runtime(monkeypatch, accel.runtime_dir):
        for source, device in ((npubin, accel_device()), (path, "accelerator")):
            with api.Compiled.from_offline(source, device=device) as compiled:
                y = compiled.executor().run(X)
                assert y.dtype == np.float32 and y.shape == (2, 3)
                np.testing.assert_allclose(y, mlp_reference(X), atol=2e-3)


def test_int8_offline_model_is_bit_exact_with_the_cpu_driver(accel, spec, monkeypatch) -> None:
    pytest.importorskip("nnrt.drivers.accel.device")
    graph = model_graph(int8_fc())
    blob = offline.compile_offline(graph, spec, False)
    x = RNG.integers(-128, 128, (2, 6), dtype=np.int8)
    (want,) = ExecutionPlan(graph).run([x], NEVER)
    with use_runtime(monkeypatch, accel.runtime_dir), \
            api.Compiled.from_offline(blob, device=accel_device()) as compiled:
        got = compiled.run(x)
    assert got.dtype == np.int8 and np.array_equal(got, want)


@pytest.mark.parametrize("case, why", [
    ("corrupt", "checksum mismatch"), ("truncated", "truncated"),
    ("other-spec", "compiled for spec"), ("saved-model", "saved model"),
    ("trailing", "trailing bytes"), ("version", "format version"),
])
def test_bad_binaries_on_the_accel_driver(accel, npubin, f32_graph, other_spec, monkeypatch,
                                          tmp_path, case, why) -> None:
    pytest.importorskip("nnrt.drivers.accel.device")
    blob = bytearray(npubin)
    if case == "corrupt":
        blob[-30] ^= 1
    elif case == "truncated":
        blob = blob[:-7]
    elif case == "other-spec":
        blob = bytearray(offline.compile_offline(f32_graph, other_spec, True))
    elif case == "saved-model":
        blob = bytearray(model_file.save_model(mlp().handle, tmp_path / "m.nnrt").read_bytes())
    elif case == "trailing":
        blob += b"\0\0"
    else:
        struct.pack_into("<I", blob, 8, 99)
    with use_runtime(monkeypatch, accel.runtime_dir):
        c = capi.OH_NNCompilation_ConstructWithOfflineModelBuffer(bytes(blob), len(blob))
        assert capi.OH_NNCompilation_SetDevice(c, accel_device().id) == capi.OH_NN_SUCCESS
        assert capi.OH_NNCompilation_Build(c) == capi.OH_NN_FAILED
        capi.OH_NNCompilation_Destroy(c)
    log = accel.log()
    assert "NNRT_INVALID_MODEL: offline model refused" in log and why in log


def test_the_driver_runs_the_program_as_compiled(accel, npubin, spec, monkeypatch) -> None:
    pytest.importorskip("nnrt.drivers.accel.device")
    program = offline.load_offline(npubin, spec).graph
    (want,) = ExecutionPlan(program).run([X.astype(np.float16)], NEVER)
    with use_runtime(monkeypatch, accel.runtime_dir), \
            api.Compiled.from_offline(npubin, device=accel_device()) as compiled:
        np.testing.assert_array_equal(compiled.run(X), want.astype(np.float32))


def test_the_envelope_checksums_the_payload(npubin) -> None:
    start = payload_start(npubin)
    assert struct.unpack_from("<I", npubin, start - 4)[0] == zlib.crc32(npubin[start:])
