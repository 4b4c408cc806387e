"""Saved models (common/model_file.py) and `nnrt run` / `nnrt bench`, as real processes
against a real driver: round trips, refused files, results checked against numpy computed
here, input checks, exit codes, the --json shapes, the embedded fallback."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import struct
import subprocess
import sys
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from nnrt.client import Model

from nnrt.common import model_file
from nnrt.common.hdi_model import IODesc, LoweredModel
from nnrt.client.commands.run import output_file_names
from nnrt.common.hdi_model import HdiModelBuilder
from nnrt.protos import node_attrs_pb2 as na
from tests.conftest import start_driver
from tests.helpers.cli import CLI_TIMEOUT, nnrt

SIZES = (16, 32, 10)


def mlp_weights(seed: int = 3) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    n_in, n_hidden, n_out = SIZES
    return (rng.standard_normal((n_hidden, n_in)).astype(np.float32) / 4,
            rng.standard_normal(n_hidden).astype(np.float32) / 10,
            rng.standard_normal((n_out, n_hidden)).astype(np.float32) / 6,
            rng.standard_normal(n_out).astype(np.float32) / 10)


def numpy_mlp(x: np.ndarray, w1, b1, w2, b2) -> np.ndarray:
    """The reference, in float64 numpy (not through nnrt)."""
    hidden = np.maximum(x.astype(np.float64) @ w1.T.astype(np.float64) + b1, 0)
    z = hidden @ w2.T.astype(np.float64) + b2
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def build_mlp(batch: int | None = None) -> Model:
    w1, b1, w2, b2 = mlp_weights()
    model = Model()
    x = model.input([batch, SIZES[0]], name="features")
    hidden = model.fully_connected(x, w1, b1, activation="relu")
    model.outputs(model.softmax(model.fully_connected(hidden, w2, b2)))
    return model


def build_two_io() -> Model:
    """Two inputs, two outputs: a + b*0.5 and relu(a)."""
    model = Model()
    a = model.input([2, 3], name="a")
    b = model.input([2, 3], name="b")
    model.outputs(model.add(a, model.mul(b, np.full((2, 3), 0.5, np.float32))), model.relu(a))
    return model


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> dict[str, Path]:
    """The test models, saved once."""
    directory = tmp_path_factory.mktemp("models")
    paths = {}
    for name, build in (("mlp", build_mlp), ("mlp4", lambda: build_mlp(4)),
                        ("two", build_two_io)):
        with build() as model:
            paths[name] = model_file.save_model(model.handle, directory / f"{name}.nnrt")
    return paths


def nnrt_each(argvs: list[tuple], runtime_dir: Path) -> list[subprocess.CompletedProcess]:
    """`nnrt` once per argument list, the processes side by side (each bounded)."""
    with ThreadPoolExecutor(max_workers=min(8, len(argvs))) as pool:
        return list(pool.map(lambda argv: nnrt(*argv, runtime_dir=runtime_dir), argvs))


# -- the file format --------------------------------------------------------------------------


def test_save_load_round_trip(tmp_path):
    with build_mlp() as model:
        original = model.handle.lowered()
        path = model_file.save_model(model, tmp_path / "m.nnrt")  # a Model is accepted too
    loaded = model_file.load(path)
    assert path.read_bytes()[:8] == b"NNRTMODL"
    assert loaded.hdi.model() == original.hdi.model()  # tensors, typed nodes, inputs, outputs
    assert loaded.inputs == original.inputs and loaded.outputs == original.outputs
    assert loaded.inputs[0] == IODesc("features", 11, [-1, 16], 0)
    assert sorted(loaded.hdi.constants) == sorted(original.hdi.constants)
    for index, data in original.hdi.constants.items():
        np.testing.assert_array_equal(loaded.hdi.constants[index], data)
        assert loaded.hdi.constants[index].dtype == data.dtype
    assert model_file.dumps(loaded) == path.read_bytes()  # stable: saving again is identical


def test_bad_files_are_refused(tmp_path, saved):
    blob = saved["mlp"].read_bytes()

    def refused(data: bytes, pattern: str) -> None:
        bad = tmp_path / "bad.nnrt"
        bad.write_bytes(data)
        with pytest.raises(ValueError, match=pattern) as caught:
            model_file.load(bad)
        assert str(bad) in str(caught.value)

    for position in (17, 30, len(blob) // 2, len(blob) - 1):  # header, model, constants
        flipped = bytearray(blob)
        flipped[position] ^= 0x10
        refused(bytes(flipped), "checksum mismatch")
    crc = bytearray(blob)
    crc[12] ^= 1  # the checksum itself
    refused(bytes(crc), "checksum mismatch")
    for length in (len(blob) - 1, len(blob) // 2, 20):
        refused(blob[:length], "checksum mismatch")
    refused(blob + b"\0", "checksum mismatch")
    refused(blob[:10], "truncated: only 10 bytes")
    refused(b"", "is empty")
    refused(b"NNRTGRPH" + blob[8:], "does not start with 'NNRTMODL'")
    refused(b"PK\x03\x04" + blob[4:], "does not start with")
    refused(blob[:8] + struct.pack("<I", 2) + blob[12:], "format version 2")

    def resealed(payload: bytes) -> bytes:  # a sound checksum over unsound contents
        return struct.pack("<8sII", b"NNRTMODL", 1, zlib.crc32(payload)) + payload

    payload = blob[16:]
    (header_length,) = struct.unpack_from("<I", payload)
    refused(resealed(struct.pack("<I", 1 << 30) + payload[4:]), "header length")
    refused(resealed(payload[:4] + b"x" + payload[5:]), "undecodable header")
    refused(resealed(payload + b"\0\0\0\0"), "constant window does not fit")
    model_length_at = 4 + header_length
    refused(resealed(payload[:model_length_at] + struct.pack("<Q", 1 << 40)
                     + payload[model_length_at + 8:]), "model length")
    # I/O descriptors that disagree with the graph
    lowered = model_file.load(saved["mlp"])
    for inputs, pattern in (
            ([], "the graph has 1 inputs, the header describes 0"),
            ([IODesc("features", 10, [-1, 16], 0)], "described as float16"),
            ([IODesc("features", 11, [4, 16], 0)], r"described as float32 \[4, 16\]"),
            ([IODesc("features", 99, [-1, 16], 0)], "not an OH_NN_DataType")):
        refused(model_file.dumps(LoweredModel(lowered.hdi, inputs, lowered.outputs)), pattern)


def test_save_model_refuses_unfinished_models(tmp_path):
    with Model() as model:
        model.input([2])
        with pytest.raises(ValueError, match="not finished"):
            model_file.save_model(model.handle, tmp_path / "x.nnrt")
    with pytest.raises(TypeError):
        model_file.save_model(object(), tmp_path / "x.nnrt")
    assert not list(tmp_path.iterdir())  # nothing half written


def test_output_file_names():
    descs = [IODesc(n, 11, [1], 0) for n in ("Tensor: 7", "a/b", "..", "a_b", "A_B", "ok.x")]
    assert output_file_names(descs) == ["Tensor_7.npy", "a_b.npy", "output_2.npy",
                                        "a_b_2.npy", "A_B_3.npy", "ok.x.npy"]


# -- nnrt run ---------------------------------------------------------------------------------


def test_run_matches_numpy(shared_driver, saved, tmp_path):
    x = np.random.default_rng(5).standard_normal((6, SIZES[0])).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    proc = nnrt("run", saved["mlp"], "--input", "x.npy", "--output-dir", "out",
                runtime_dir=shared_driver.runtime_dir, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "device:   nnrt-cpu_nnrt_v2_1" in proc.stdout
    assert re.search(r"prepare:\s+[\d.]+ ms\s+run: [\d.]+ ms", proc.stdout)
    (written,) = (tmp_path / "out").iterdir()
    assert re.fullmatch(r"Tensor_\d+\.npy", written.name)
    assert f"float32  [6, 10]  out/{written.name}" in proc.stdout
    got = np.load(written)
    assert got.dtype == np.float32 and got.shape == (6, 10)
    np.testing.assert_allclose(got, numpy_mlp(x, *mlp_weights()), rtol=1e-5, atol=1e-6)

    proc = nnrt("run", saved["mlp"], "-i", tmp_path / "x.npy", "--output-dir", tmp_path / "f16",
                "--float16", "--device", "cpu", "--json", runtime_dir=shared_driver.runtime_dir)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert set(report) == {"ok", "model", "device", "runtime_dir", "embedded", "float16",
                           "prepare_ms", "run_ms", "inputs", "outputs"}
    assert report["ok"] and report["float16"] and not report["embedded"]
    assert report["device"]["driver"] == "cpu" and report["device"]["name"] == "nnrt-cpu_nnrt_v2_1"
    assert report["runtime_dir"] == str(shared_driver.runtime_dir)
    assert report["inputs"] == [{"name": "features", "dtype": "float32", "shape": [6, 16],
                                 "file": str(tmp_path / "x.npy")}]
    (output,) = report["outputs"]
    assert output["dtype"] == "float32" and output["shape"] == [6, 10]
    np.testing.assert_allclose(np.load(output["file"]), numpy_mlp(x, *mlp_weights()),
                               atol=5e-3)  # computed in float16


def test_run_two_inputs_and_outputs(shared_driver, saved, tmp_path):
    rng = np.random.default_rng(9)
    a, b = (rng.standard_normal((2, 3)).astype(np.float32) for _ in range(2))
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b.astype(">f4"))  # big-endian: converted, not refused
    proc = nnrt("run", saved["two"], "-i", tmp_path / "a.npy", "-i", tmp_path / "b.npy",
                "--output-dir", tmp_path, "--json", runtime_dir=shared_driver.runtime_dir)
    assert proc.returncode == 0, proc.stderr
    first, second = json.loads(proc.stdout)["outputs"]
    np.testing.assert_allclose(np.load(first["file"]), a + b * 0.5, rtol=1e-6)
    np.testing.assert_array_equal(np.load(second["file"]), np.maximum(a, 0))


def test_run_refuses_bad_inputs(shared_driver, saved, tmp_path):
    rt = shared_driver.runtime_dir
    arrays = {"ok": np.zeros((4, 16), np.float32), "f64": np.zeros((4, 16)),
              "i32": np.zeros((4, 16), np.int32), "short": np.zeros((4, 15), np.float32),
              "rank3": np.zeros((1, 4, 16), np.float32), "empty": np.zeros((0, 16), np.float32),
              "huge": np.zeros((70000, 16), np.float32)}
    for name, array in arrays.items():
        np.save(tmp_path / f"{name}.npy", array)
    (tmp_path / "text.npy").write_text("not an array")
    (tmp_path / "junk.nnrt").write_bytes(b"NNRTMODL" + bytes(40))
    ok, mlp, mlp4 = tmp_path / "ok.npy", saved["mlp"], saved["mlp4"]
    cases = [
        ((mlp,), r"the model has 1 input \('features' float32 \[\?, 16\]\), 0 given"),
        ((mlp, "-i", ok, "-i", ok), r"the model has 1 input .*, 2 given"),
        ((mlp, "-i", tmp_path / "f64.npy"),
         r"input 0 \('features', .*f64.npy\): data type float64, the model wants float32"),
        ((mlp, "-i", tmp_path / "i32.npy"), "data type int32, the model wants float32"),
        ((mlp, "-i", tmp_path / "short.npy"),
         r"shape \[4, 15\], the model wants \[\?, 16\]: dimension 1 is 15, not 16"),
        ((mlp4, "-i", tmp_path / "rank3.npy"),
         r"shape \[1, 4, 16\], the model wants \[4, 16\] \(rank 2, not 3\)"),
        ((mlp, "-i", tmp_path / "empty.npy"), "dimension 0 is empty"),
        ((mlp, "-i", tmp_path / "huge.npy"),
         r"dimension 0 is 70000, outside the device's range \[1, 65536\]"),
        ((mlp, "-i", tmp_path / "missing.npy"), "cannot read .*missing.npy"),
        ((mlp, "-i", tmp_path / "text.npy"), "cannot read .*text.npy as a .npy array"),
        ((tmp_path / "junk.nnrt", "-i", ok), "not a valid nnrt model file: .*format version 0"),
        ((tmp_path / "nothing.nnrt", "-i", ok), "cannot read .*nothing.nnrt"),
    ]
    procs = nnrt_each([("run", *args, "--output-dir", tmp_path / "out") for args, _ in cases], rt)
    for (args, pattern), proc in zip(cases, procs):
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        assert re.search(pattern, proc.stderr), (pattern, proc.stderr)
        assert "Traceback" not in proc.stderr
    assert not (tmp_path / "out").exists()  # nothing written
    proc = nnrt("run", mlp, "-i", tmp_path / "f64.npy", "--json", runtime_dir=rt)
    assert proc.returncode == 2
    assert json.loads(proc.stdout) == {
        "ok": False, "exit_code": 2, "error": f"input 0 ('features', {tmp_path / 'f64.npy'}): "
                                              "data type float64, the model wants float32"}
    proc = nnrt("run", mlp, "-i", ok, "--timeout", "0", runtime_dir=rt)  # argparse: usage
    assert proc.returncode == 2 and "must be positive" in proc.stderr


def test_run_npz_inputs_and_outputs(shared_driver, saved, tmp_path):
    """One .npz for every input (by name, or arr_0.. by position), outputs into one .npz."""
    rt = shared_driver.runtime_dir
    rng = np.random.default_rng(11)
    a, b = (rng.standard_normal((2, 3)).astype(np.float32) for _ in range(2))
    np.savez(tmp_path / "named.npz", b=b, a=a)  # order does not matter with names
    np.savez(tmp_path / "positional.npz", a, b)  # arr_0, arr_1
    for source in ("named", "positional"):
        out = tmp_path / f"{source}_out.npz"
        proc = nnrt("run", saved["two"], "-i", tmp_path / f"{source}.npz", "--output", out,
                    "--json", runtime_dir=rt)
        assert proc.returncode == 0, proc.stderr
        report = json.loads(proc.stdout)
        keys = {"named": ["a", "b"], "positional": ["arr_0", "arr_1"]}[source]
        assert [e["file"] for e in report["inputs"]] == \
            [f"{tmp_path / f'{source}.npz'}[{k}]" for k in keys]
        first, second = report["outputs"]
        assert first["file"] == f"{out}[{first['name']}]"
        with np.load(out) as written:  # keyed by the outputs' names
            assert sorted(written.files) == sorted([first["name"], second["name"]])
            np.testing.assert_allclose(written[first["name"]], a + b * 0.5, rtol=1e-6)
            np.testing.assert_array_equal(written[second["name"]], np.maximum(a, 0))
    # the table, and --output-dir ending in .npz: the same archive
    proc = nnrt("run", saved["two"], "-i", tmp_path / "named.npz", "--output-dir",
                tmp_path / "sub" / "t.npz", runtime_dir=rt)
    assert proc.returncode == 0, proc.stderr
    assert f"{tmp_path / 'named.npz'}[a]" in proc.stdout
    assert len(np.load(tmp_path / "sub" / "t.npz").files) == 2

    np.savez(tmp_path / "wrong.npz", x=a, y=b)
    np.savez(tmp_path / "extra.npz", a=a, b=b, c=b)
    np.savez(tmp_path / "one.npz", a)
    np.save(tmp_path / "a.npy", a)
    (tmp_path / "outdir.npz").mkdir()
    cases = [
        (("-i", tmp_path / "wrong.npz"),
         (r"wrong.npz holds arrays \['x', 'y'\]: the model's inputs are 'a' float32 \[2, 3\]; "
          r"'b' float32 \[2, 3\]; name the arrays \['a', 'b'\] \(missing: \['a', 'b'\], not "
          r"inputs: \['x', 'y'\]\), or arr_0.. in that order")),
        (("-i", tmp_path / "extra.npz"), (r"extra.npz holds arrays that are not inputs of the "
                                          r"model: \['c'\] \(its inputs: \['a', 'b'\]\)")),
        (("-i", tmp_path / "one.npz"), r"one.npz holds arrays \['arr_0'\]"),
        (("-i", tmp_path / "a.npy", "-i", tmp_path / "named.npz"),
         r"named.npz is an .npz archive: give it alone"),
        (("-i", tmp_path / "named.npz", "-o", tmp_path / "outdir.npz"),
         r"outdir.npz is a directory, not a .npz file"),
    ]
    procs = nnrt_each([("run", saved["two"], *args) for args, _ in cases], rt)
    for (args, pattern), proc in zip(cases, procs):
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        assert re.search(pattern, proc.stderr), (pattern, proc.stderr)
    help_text = nnrt("run", "--help", runtime_dir=rt).stdout
    assert ".npz" in help_text and ".npy" in help_text
    assert ".npz" in nnrt("bench", "--help", runtime_dir=rt).stdout


def test_bench_npz_inputs(shared_driver, saved, tmp_path):
    np.savez(tmp_path / "x.npz", features=np.zeros((3, 16), np.float32))
    proc = nnrt("bench", saved["mlp"], "-i", tmp_path / "x.npz", "--runs", "3", "--json",
                runtime_dir=shared_driver.runtime_dir)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["inputs"] == [{"name": "features", "dtype": "float32", "shape": [3, 16],
                                 "source": f"{tmp_path / 'x.npz'}[features]"}]
    assert report["outputs"][0]["shape"] == [3, 10]


@pytest.mark.multiprocess
def test_failures_exit_1(runtime_dir, saved, tmp_path):
    """A model the device refuses; a run past its --timeout (a driver delaying every run)."""
    builder = HdiModelBuilder("mixed")
    x = builder.input("x", np.float32, [4])
    y = builder.tensor("y", np.float32, [4])
    builder.node(na.NODE_TYPE_ADD_FUSION, [x, builder.constant("w", np.ones(4, np.int32))], [y])
    builder.mark_outputs(y)
    refused = model_file.save(LoweredModel(builder, [IODesc("x", 11, [4], 0)],
                                           [IODesc("y", 11, [4], 0)]), tmp_path / "mixed.nnrt")
    np.save(tmp_path / "x4.npy", np.ones(4, np.float32))
    np.save(tmp_path / "x.npy", np.zeros((2, 16), np.float32))
    driver = start_driver(runtime_dir, "cpu", "--fault-run-delay-ms", "5000")
    try:
        proc, slow = nnrt_each([("run", refused, "-i", tmp_path / "x4.npy"),
                                ("run", saved["mlp"], "-i", tmp_path / "x.npy", "--timeout",
                                 "300ms", "--output-dir", tmp_path / "out")], runtime_dir)
    finally:
        driver.stop()
    assert proc.returncode == 1, proc.stderr
    # the driver's reason, per node, reaches the command line
    assert "device nnrt-cpu_nnrt_v2_1 refused the model: cannot run operations [0] (1 answers " \
           "for 1 nodes): node 0 (add_fusion:0): inputs of mixed dtypes ['float32', 'int32']" \
           in proc.stderr
    assert slow.returncode == 1, slow.stderr
    assert "the run did not finish within 300 ms" in slow.stderr
    assert not (tmp_path / "out").exists()


def test_no_device_exits_3(tmp_path, saved, shared_driver):
    empty = tmp_path / "rt"
    empty.mkdir()
    np.save(tmp_path / "x.npy", np.zeros((4, 16), np.float32))
    for proc in nnrt_each([(command, saved["mlp"], "-i", tmp_path / "x.npy")
                           for command in ("run", "bench")], empty):  # NNRT_NO_EMBEDDED=1
        assert proc.returncode == 3, proc.stderr
        assert f"no device: no driver in {empty} and NNRT_NO_EMBEDDED is set" in proc.stderr
        assert proc.stdout == ""
    proc = nnrt("run", saved["mlp"], "-i", tmp_path / "x.npy", "--device", "npu",
                runtime_dir=shared_driver.runtime_dir)
    assert proc.returncode == 3
    assert "no device 'npu' (devices: nnrt-cpu_nnrt_v2_1 (" in proc.stderr


@pytest.mark.multiprocess
def test_embedded_driver_when_none_runs(tmp_path, saved):
    empty = tmp_path / "rt"
    empty.mkdir()
    x = np.random.default_rng(2).standard_normal((3, 16)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    proc = nnrt("run", saved["mlp"], "-i", tmp_path / "x.npy", "--output-dir", tmp_path / "o",
                "--json", runtime_dir=empty, NNRT_NO_EMBEDDED="")
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"no driver in .*: started an embedded cpu driver in (\S+) for this run",
                     proc.stderr)
    report = json.loads(proc.stdout)
    assert report["embedded"] is True
    assert not Path(report["runtime_dir"]).exists()  # stopped and removed at the end
    np.testing.assert_allclose(np.load(report["outputs"][0]["file"]),
                               numpy_mlp(x, *mlp_weights()), rtol=1e-5, atol=1e-6)
    assert list(empty.iterdir()) == []


# -- nnrt bench -------------------------------------------------------------------------------


BENCH_KEYS = {"ok", "model", "device", "runtime_dir", "embedded", "float16", "prepare_ms",
              "inputs", "outputs", "warmup", "concurrency", "runs", "seconds", "interrupted",
              "latency_ms", "throughput_per_s"}


def sane(report: dict) -> None:
    assert set(report) == BENCH_KEYS
    lat = report["latency_ms"]
    assert set(lat) == {"p50", "p90", "p99", "min", "max", "mean"}
    assert 0 < lat["min"] <= lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["max"]
    assert lat["min"] <= lat["mean"] <= lat["max"]
    assert report["throughput_per_s"] > 0 and report["seconds"] > 0
    assert report["ok"] is True and report["interrupted"] is False


def test_bench_json(shared_driver, saved, tmp_path):
    rt = shared_driver.runtime_dir
    proc = nnrt("bench", saved["mlp"], "--runs", "20", "--json", runtime_dir=rt)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""  # not a terminal: no progress bar
    report = json.loads(proc.stdout)
    sane(report)
    assert (report["runs"], report["warmup"], report["concurrency"]) == (20, 5, 1)
    assert report["inputs"] == [{"name": "features", "dtype": "float32", "shape": [1, 16],
                                 "source": "random"}]
    assert report["outputs"][0]["shape"] == [1, 10]
    # throughput is runs over the measured time
    assert report["throughput_per_s"] == pytest.approx(20 / report["seconds"], rel=0.01)

    np.save(tmp_path / "x.npy", np.zeros((8, 16), np.float32))
    proc = nnrt("bench", saved["mlp"], "-i", tmp_path / "x.npy", "--seconds", "0.3",
                "--concurrency", "3", "--warmup", "0", "--json", runtime_dir=rt)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    sane(report)
    assert report["concurrency"] == 3 and report["warmup"] == 0 and report["runs"] >= 3
    assert 0.3 <= report["seconds"] < 5
    assert report["inputs"][0]["shape"] == [8, 16] and report["outputs"][0]["shape"] == [8, 10]

    proc = nnrt("bench", saved["mlp"], "--runs", "5", "--dynamic-dim", "3",
                runtime_dir=rt)  # the table
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"inputs:\s+'features' float32 \[3, 16\] \(random\)", proc.stdout)
    assert re.search(r"runs:\s+5 in [\d.]+ s \(\+5 warmup\), concurrency 1", proc.stdout)
    assert re.search(r"latency ms:\s+p50 [\d.]+\s+p90 [\d.]+\s+p99 [\d.]+", proc.stdout)
    assert re.search(r"throughput:\s+[\d.]+ runs/s", proc.stdout)


def test_bench_usage_errors(shared_driver, saved, tmp_path):
    rt = shared_driver.runtime_dir
    np.save(tmp_path / "bad.npy", np.zeros((2, 3), np.float32))
    cases = [(("--runs", "5", "--seconds", "1"), "not allowed with argument"),
             (("--runs", "0"), "must be positive"), (("--concurrency", "-1"), "must be positive"),
             (("--warmup", "x"), "not an integer"), (("--seconds", "0"), "must be positive"),
             (("-i", tmp_path / "bad.npy"), "dimension 1 is 3, not 16")]
    procs = nnrt_each([("bench", saved["mlp"], *args) for args, _ in cases], rt)
    for (args, pattern), proc in zip(cases, procs):
        assert proc.returncode == 2, (args, proc.stderr)
        assert pattern in proc.stderr, (args, proc.stderr)


def test_bench_progress_bar_on_a_terminal(shared_driver, saved):
    master, slave = pty.openpty()
    env = {**os.environ, "NNRT_RUNTIME_DIR": str(shared_driver.runtime_dir),
           "NNRT_NO_EMBEDDED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "nnrt.client.cli", "bench", str(saved["mlp"]),
                             "--runs", "50", "--json"], env=env, stdout=subprocess.PIPE,
                            stderr=slave, stdin=subprocess.DEVNULL)
    os.close(slave)
    shown = b""
    try:
        while True:  # drain the terminal while the command runs (bounded by the test timeout)
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(master, 4096)
                except OSError:  # EIO: the command closed its end
                    break
                if not chunk:
                    break
                shown += chunk
            elif proc.poll() is not None:
                break
        stdout, _ = proc.communicate(timeout=CLI_TIMEOUT)
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    assert proc.returncode == 0, shown
    sane(json.loads(stdout))  # the bar never reaches stdout
    text = shown.decode()
    assert re.search(r"\rbench  \[#{30}\] 50/50 runs", text), text
    assert "warmup [" in text
