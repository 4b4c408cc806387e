"""`nnrt bench --profile / --trace / --report / --input-shape` against real drivers of every
kind: each step of a run timed in the driver (RunRequest.profile, RunReply.profile), every
node listed with a time; the Chrome trace checked against the trace-event format; the raw
latencies; the input shapes of an ONNX model fixed as `nnrt convert` does."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from nnrt.common import model_file
from nnrt.common.errors import NNRT_SUCCESS
from nnrt.protos import hdi_types_pb2 as ht
from tests.conftest import start_driver
from tests.helpers.cli import nnrt
from tests.helpers.hdi_models import mlp as hdi_mlp
from tests.cli.test_run_and_bench import build_mlp

PROFILE_RUNS = 4


def opencl_available() -> bool:
    try:
        import pyopencl as cl

        return any(p.get_devices() for p in cl.get_platforms())
    except Exception:  # noqa: BLE001 - no ICD, no platform: no GPU driver to test
        return False


@pytest.fixture(scope="module")
def drivers(tmp_path_factory):
    """One runtime directory: the CPU driver on each engine, the accelerator simulator, and
    the GPU driver on any OpenCL device (PoCL here) when there is one."""
    runtime = tmp_path_factory.mktemp("profile") / "rt"
    running = [start_driver(runtime, "cpu", "--engine", "numpy", name="cpunumpy"),
               start_driver(runtime, "cpu", "--engine", "ort", name="cpuort"),
               start_driver(runtime, "accel", name="npu")]
    if opencl_available():
        running.append(start_driver(runtime, "gpu", "--cl-device", "any", name="gpu"))
    yield runtime
    for driver in running:
        driver.stop()


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    directory = tmp_path_factory.mktemp("models")
    with build_mlp(4) as model:
        mlp = model_file.save_model(model.handle, directory / "mlp4.nnrt")
    rng = np.random.default_rng(0)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])],
        "dyn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 8])],
        [numpy_helper.from_array(rng.standard_normal((16, 8)).astype(np.float32), "w")])
    onnx_path = directory / "dyn.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), onnx_path)
    return {"mlp": mlp, "onnx": onnx_path}


def bench_json(runtime: Path, *args) -> dict:
    result = nnrt("bench", *args, "--json", runtime_dir=runtime)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


NODES = {0, 1, 2}  # the MLP: FullConnection, FullConnection, Softmax


@pytest.mark.parametrize("driver, extra", [("cpunumpy", ()), ("gpu", ()),
                                           ("npu", ("--float16",))])
def test_every_node_timed(drivers, models, driver, extra):
    if driver == "gpu" and not opencl_available():
        pytest.skip("no OpenCL device")
    out = bench_json(drivers, models["mlp"], "--device", driver, "-n", "5", "--profile",
                     "--profile-runs", str(PROFILE_RUNS), *extra)
    profile = out["profile"]
    assert profile["runs"] == PROFILE_RUNS
    rows = profile["nodes"]
    # one row per node, each timed in every profiled run
    assert sorted(n for row in rows for n in row["nodes"]) == sorted(NODES)
    assert all(len(row["nodes"]) == 1 and row["op"] and row["runs"] == PROFILE_RUNS
               and row["mean_ms"] > 0 for row in rows)
    assert sum(row["share"] for row in rows) == pytest.approx(1.0, abs=0.01)
    assert 0 < profile["compute_ms"] <= profile["driver_ms"] <= profile["round_trip_ms"]
    if driver == "npu":  # the cost model's time next to the host's; the node holds both
        for row in rows:
            assert row["simulated_ms"] > 0 and row["host_ms"] > 0
            assert row["mean_ms"] >= min(row["simulated_ms"], row["host_ms"])
    if driver == "gpu":  # OpenCL profiling events
        assert all(row["device_ms"] > 0 for row in rows)
        assert all(row["device_ms"] <= row["mean_ms"] * 1.5 + 0.05 for row in rows)


def test_ort_engine_times_segments(drivers, models):
    out = bench_json(drivers, models["mlp"], "--device", "cpuort", "-n", "5", "--profile",
                     "--profile-runs", str(PROFILE_RUNS))
    rows = out["profile"]["nodes"]
    assert sorted(n for row in rows for n in row["nodes"]) == sorted(NODES)
    segments = [row for row in rows if len(row["nodes"]) > 1]
    assert segments and all("onnxruntime segment" in row["name"] and row["mean_ms"] > 0
                            for row in segments)


def test_profile_table_as_text(drivers, models):
    result = nnrt("bench", models["mlp"], "--device", "cpunumpy", "-n", "5", "--profile",
                  "--profile-runs", "2", runtime_dir=drivers)
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert "profile:     2 runs" in text
    for name in ("FullConnection:0", "FullConnection:1", "Softmax:2"):
        assert name in text
    assert "round trip" in text and "compute" in text
    npu = nnrt("bench", models["mlp"], "--device", "npu", "--float16", "-n", "2", "--profile",
               "--profile-runs", "2", runtime_dir=drivers)
    assert npu.returncode == 0, npu.stderr
    assert "sim ms" in npu.stdout and "host ms" in npu.stdout


def _within(inner: dict, outer: dict, slack_us: float = 1.0) -> bool:
    return outer["ts"] - slack_us <= inner["ts"] and \
        inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"] + slack_us


@pytest.mark.parametrize("driver, extra", [("cpunumpy", ()), ("cpuort", ()), ("gpu", ()),
                                           ("npu", ("--float16",))])
def test_trace_is_trace_event_format(drivers, models, tmp_path, driver, extra):
    if driver == "gpu" and not opencl_available():
        pytest.skip("no OpenCL device")
    trace = tmp_path / "bench.json"
    out = bench_json(drivers, models["mlp"], "--device", driver, "-n", "3", "--trace", trace,
                     "--profile-runs", str(PROFILE_RUNS), *extra)
    assert out["trace"] == str(trace) and "profile" not in out  # --trace alone: no table
    events = json.loads(trace.read_text())
    assert isinstance(events, list)
    for event in events:
        assert {"name", "ph", "ts", "pid", "tid"} <= event.keys()
        assert isinstance(event["name"], str) and event["ph"] in ("X", "M")
        assert isinstance(event["pid"], int) and isinstance(event["tid"], int)
        if event["ph"] == "X":
            assert isinstance(event["ts"], (int, float)) and event["ts"] >= 0
            assert isinstance(event["dur"], (int, float)) and event["dur"] >= 0
    spans = [e for e in events if e["ph"] == "X"]
    names = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M"}
    assert len({e["pid"] for e in spans}) == 2 == len(names)  # one lane per process
    client_pid = next(pid for pid, name in names.items() if "client" in name)
    driver_pid = next(pid for pid, name in names.items() if "driver" in name)
    assert client_pid != driver_pid
    runs = [e for e in spans if e["cat"] == "Client"]
    driver_runs = [e for e in spans if e["cat"] == "Driver" and e["name"].startswith("Run ")]
    computes = [e for e in spans if e["name"] == "compute"]
    assert len(runs) == len(driver_runs) == len(computes) == PROFILE_RUNS
    assert all(e["pid"] == client_pid for e in runs)
    assert all(e["pid"] == driver_pid for e in driver_runs + computes)
    transports = [e for e in spans if e["cat"] == "Transport"]
    assert len(transports) == 2 * PROFILE_RUNS
    nodes = [e for e in spans if e["cat"] == "Node"]
    per_run = len(nodes) // PROFILE_RUNS
    assert len(nodes) == PROFILE_RUNS * per_run and per_run >= 1
    assert sorted(n for e in nodes[:per_run] for n in e["args"]["nodes"]) == sorted(NODES)
    for k, (run, served, compute) in enumerate(zip(runs, driver_runs, computes)):
        assert run["name"] == f"run {k}" and served["name"] == f"Run {k}"
        assert _within(served, run) and _within(compute, served)
        mine = [n for n in nodes if _within(n, compute)]
        assert len(mine) == per_run
        assert sum(1 for t in transports if _within(t, run)) == 2
    if driver == "npu":
        assert all(n["args"]["simulated_ms"] > 0 for n in nodes)
    if driver == "gpu":
        assert all(n["args"]["device_ms"] > 0 for n in nodes)


def test_report_keeps_raw_latencies(drivers, models, tmp_path):
    report = tmp_path / "latencies.json"
    out = bench_json(drivers, models["mlp"], "--device", "cpunumpy", "-n", "25",
                     "--report", report)
    kept = json.loads(report.read_text())
    assert kept["runs"] == out["runs"] == len(kept["latencies_ms"]) == 25
    assert all(t > 0 for t in kept["latencies_ms"])
    assert min(kept["latencies_ms"]) == pytest.approx(out["latency_ms"]["min"], abs=1e-3)
    assert max(kept["latencies_ms"]) == pytest.approx(out["latency_ms"]["max"], abs=1e-3)
    assert "profile" not in out and "trace" not in out


def test_report_unwritable(drivers, models, tmp_path):
    result = nnrt("bench", models["mlp"], "--device", "cpunumpy", "-n", "2", "--report",
                  tmp_path / "missing" / "r.json", runtime_dir=drivers)
    assert result.returncode == 1 and "cannot write" in result.stderr


def test_input_shape(drivers, models):
    out = bench_json(drivers, models["onnx"], "--device", "cpunumpy", "-n", "3",
                     "--input-shape", "x=3,16")
    assert out["inputs"][0]["shape"] == [3, 16] and out["outputs"][0]["shape"] == [3, 8]
    default = bench_json(drivers, models["onnx"], "--device", "cpunumpy", "-n", "3")
    assert default["inputs"][0]["shape"] == [1, 16]  # the dynamic dimension's default
    for bad, why in ((["--input-shape", "x=3,a"], "dimensions are integers"),
                     (["--input-shape", "3,16"], "is not NAME=D0,D1"),
                     (["--input-shape", "nope=3,16"], "nope")):
        result = nnrt("bench", models["onnx"], "--device", "cpunumpy", "-n", "1", *bad,
                      runtime_dir=drivers)
        assert result.returncode == 2 and why in result.stderr, result.stderr
    saved = nnrt("bench", models["mlp"], "--device", "cpunumpy", "-n", "1", "--input-shape",
                 "features=4,16", runtime_dir=drivers)
    assert saved.returncode == 2 and "applies to an ONNX model" in saved.stderr


def test_profile_over_both_transports(drivers):
    """RunRequest.profile over the session channel and over gRPC; a run that does not ask
    gets no profile (and keeps its fast path); a failed profiled run carries none."""
    from nnrt.client.core.driver import DriverClient

    builder, _ = hdi_mlp(2, (8, 6, 4))
    with DriverClient.connect("cpunumpy", drivers, timeout=5.0) as session:
        model_id = builder.prepare(session)
        _, x = session.allocate_buffer(2 * 8 * 4)
        _, y = session.allocate_buffer(2 * 4 * 4)
        form = builder.tensors[builder.inputs[0]].format
        ins = [ht.IOTensor(dataType=ht.DATA_TYPE_FLOAT32, dimensions=[2, 8], format=form,
                           data=x.descriptor())]
        outs = [ht.IOTensor(dataType=ht.DATA_TYPE_FLOAT32, dimensions=[2, 4], format=form,
                            data=y.descriptor())]
        try:
            for _ in range(2):  # the second one comes byte for byte again: kept, bound
                plain = session.run(model_id, ins, outs, 5.0)
                assert plain.returnCode == NNRT_SUCCESS and not plain.HasField("profile")
            for run in (session.run, session.run_grpc, session.run):
                reply = run(model_id, ins, outs, 5.0, profile=True)
                assert reply.returnCode == NNRT_SUCCESS, reply.reason
                profile = reply.profile
                assert profile.pid != os.getpid() and len(profile.spans) == len(NODES)
                assert [list(s.nodes) for s in profile.spans] == [[0], [1], [2]]
                assert profile.receivedSeconds <= profile.computeStartSeconds <= \
                    profile.computeEndSeconds <= profile.repliedSeconds
                assert all(s.seconds > 0 for s in profile.spans)
            wrong = [ht.IOTensor(dataType=ht.DATA_TYPE_FLOAT32, dimensions=[3, 8],
                                 format=form, data=x.descriptor())]
            refused = session.run(model_id, wrong, outs, 5.0, profile=True)
            assert refused.returnCode != NNRT_SUCCESS and not refused.HasField("profile")
        finally:
            x.close(), y.close()
