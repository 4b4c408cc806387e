"""`nnrt run` / `nnrt bench` over several devices (`--device gpu,cpu`, `--device auto`), as
real processes against real drivers (GPU on PoCL, CPU): the same results as on one device,
the plan said (and explained), no byte copied between steps, bad lists refused with their
exit codes, a driver killed mid-bench failed over (and the error with --no-failover)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from nnrt.client import Model
from nnrt.common import model_file
from tests.conftest import start_driver
from tests.helpers.cli import nnrt

pytestmark = pytest.mark.multiprocess

RNG = np.random.default_rng(2611)
F32 = 11  # OH_NN_FLOAT32


@pytest.fixture(scope="module")
def runtime(tmp_path_factory) -> Path:
    runtime = tmp_path_factory.mktemp("hetero-cli") / "rt"
    running = [start_driver(runtime, "gpu", "--cl-device", "any"), start_driver(runtime, "cpu")]
    yield runtime
    for driver in running:
        driver.stop()


@pytest.fixture(scope="module")
def cast_mlp(tmp_path_factory) -> Path:
    """fc+relu → L2Normalize (no GPU kernel) → fc → softmax, dynamic batch: split over gpu,
    cpu."""
    m = Model()
    x = m.input([None, 8], name="x")
    h = m.fully_connected(x, RNG.standard_normal((16, 8)).astype(np.float32), activation="relu")
    h = m.op("L2_NORMALIZE", h)
    m.outputs(m.softmax(m.fully_connected(h, RNG.standard_normal((4, 16)).astype(np.float32))))
    with m:
        return model_file.save_model(m.handle, tmp_path_factory.mktemp("m") / "cast.nnrt")


def run_json(*args, runtime_dir: Path) -> dict:
    done = nnrt(*args, "--json", runtime_dir=runtime_dir)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_run_over_gpu_and_cpu_gives_the_cpu_result(runtime, cast_mlp, tmp_path):
    x = RNG.standard_normal((3, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    split = run_json("run", cast_mlp, "-i", tmp_path / "x.npy", "-o", tmp_path / "split.npz",
                     "--device", "gpu,cpu", runtime_dir=runtime)
    alone = run_json("run", cast_mlp, "-i", tmp_path / "x.npy", "-o", tmp_path / "cpu.npz",
                     "--device", "cpu", runtime_dir=runtime)
    assert "devices" not in alone and "plan" not in alone
    assert [d["driver"] for d in split["devices"]] == ["gpu", "cpu"]
    assert split["device"]["driver"] == "gpu"
    plan = split["plan"]
    assert [s["driver"] for s in plan["steps"]] == ["gpu", "cpu", "gpu"]
    assert [s["nodes"] for s in plan["steps"]] == [1, 1, 2]
    # two [3, 16] float32 boundaries per pass (the first pass, its output sized for a batch
    # of 1, is made again with the driver's shape)
    assert plan["copied_bytes"] == 0 and plan["boundary_bytes"] in (384, 768)
    assert plan["boundary_tensors"] == 2 and plan["failovers"] == 0
    assert split["outputs"][0]["shape"] == [3, 4]
    with np.load(tmp_path / "split.npz") as got, np.load(tmp_path / "cpu.npz") as want:
        np.testing.assert_allclose(got[split["outputs"][0]["name"]],
                                   want[alone["outputs"][0]["name"]], rtol=1e-4, atol=1e-6)


def test_run_auto_explains_the_plan(runtime, cast_mlp, tmp_path):
    np.save(tmp_path / "x.npy", RNG.standard_normal((2, 8)).astype(np.float32))
    done = nnrt("run", cast_mlp, "-i", tmp_path / "x.npy", "-o", tmp_path, "--device", "auto",
                "--explain", runtime_dir=runtime)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.splitlines()[1].startswith("devices:  ") and "driver gpu), nnrt-cpu" in out
    assert "plan over " in out and "3 step(s), 2 boundary tensor(s)" in out
    assert "step 1 on nnrt-cpu" in out and "not on " in out  # the Cast, and why
    assert "boundary tensor" in out and "x dynamic" in out  # a dynamic batch's bytes
    brief = nnrt("run", cast_mlp, "-i", tmp_path / "x.npy", "-o", tmp_path, "--device",
                 "gpu,cpu", runtime_dir=runtime)
    assert brief.returncode == 0, brief.stderr
    assert "plan:     3 steps: gpu (1 node), cpu (1 node), gpu (2 nodes)" in brief.stdout
    assert "0 bytes copied between steps" in brief.stdout and "not on" not in brief.stdout


def test_bench_over_gpu_and_cpu(runtime, cast_mlp):
    result = run_json("bench", cast_mlp, "--device", "gpu,cpu", "--runs", "20", "--warmup",
                      "2", "--concurrency", "2", "--dynamic-dim", "5", "--explain",
                      runtime_dir=runtime)
    assert result["ok"] and result["runs"] == 20
    assert result["outputs"][0]["shape"] == [5, 4]
    assert len(result["plan"]["steps"]) == 3 and result["plan"]["copied_bytes"] == 0
    assert result["plan"]["boundary_bytes"] > 0 and "plan over" in result["explain"]
    text = nnrt("bench", cast_mlp, "--device", "gpu,cpu", "--runs", "5", runtime_dir=runtime)
    assert text.returncode == 0, text.stderr
    assert "driver gpu), nnrt-cpu" in text.stdout and "plan:        3 steps" in text.stdout


@pytest.mark.parametrize("device, code, said", [
    ("gpu,nosuch", 3, "no device 'nosuch'"),
    ("cpu,cpu", 2, "named twice"),
    ("gpu,", 2, "an empty device name"),
])
def test_bad_device_lists_are_refused(runtime, cast_mlp, device, code, said):
    done = nnrt("bench", cast_mlp, "--device", device, "--runs", "1", runtime_dir=runtime)
    assert done.returncode == code, done.stderr
    assert said in done.stderr


def test_a_driver_killed_mid_bench_fails_over(tmp_path, cast_mlp):
    """A CPU driver that SIGKILLs itself at its 8th Run, preferred to a healthy one: every
    measured run succeeds and one failed over; with --no-failover the bench fails (exit 1)."""
    runtime = tmp_path / "rt"
    healthy = start_driver(runtime, "cpu")
    try:
        flaky = start_driver(runtime, "cpu", "--fault-exit-on-run", "8", name="flaky")
        try:
            result = run_json("bench", cast_mlp, "--device", "flaky,cpu", "--runs", "30",
                              "--warmup", "0", runtime_dir=runtime)
            assert flaky.proc.wait(10) is not None  # it died, at its 8th Run
            assert result["ok"] and result["runs"] == 30
            assert result["plan"]["failovers"] == 1
            assert [s["device"] for s in result["plan"]["steps"]] == \
                [result["devices"][1]["name"]]  # the plan left: the healthy CPU alone
        finally:
            flaky.stop()
        flaky = start_driver(runtime, "cpu", "--fault-exit-on-run", "8", name="flaky")
        try:
            done = nnrt("bench", cast_mlp, "--device", "flaky,cpu", "--runs", "30",
                        "--warmup", "0", "--no-failover", runtime_dir=runtime)
            assert done.returncode == 1, done.stdout + done.stderr
            assert "flaky" in done.stderr or "nnrt-cpu" in done.stderr
        finally:
            flaky.stop()
    finally:
        healthy.stop()


def test_status_shows_what_each_driver_holds_of_a_model_over_several_devices(
        runtime, cast_mlp, capsys, monkeypatch):
    """`nnrt status`: PREPARED per driver, and this process said once with its prepared
    models on each driver (the plan's partitions: two on the GPU, one on the CPU)."""
    from nnrt.client import cli
    from tests.client.capi.util_executor import use_runtime

    with use_runtime(monkeypatch, runtime), Model.load(cast_mlp) as model, \
            model.compile(["gpu", "cpu"], failover=False) as compiled:
        assert [s.device.driver for s in compiled.hetero.preferred.steps] == \
            ["gpu", "cpu", "gpu"]
        capsys.readouterr()
        assert cli.main(["status", "--runtime-dir", str(runtime), "--json"]) == 0
        status = json.loads(capsys.readouterr().out)
        ours = [c for c in status["clients"] if c["pid"] == os.getpid()]
        assert ours == [{"pid": os.getpid(), "prepared_models": {"gpu": 2, "cpu": 1}}]
        # each driver names the partitions it holds (sub-models "<model>:<step>")
        names = {d["name"]: sorted(n for s in d["sessions"] if s["peer_pid"] == os.getpid()
                                   for n in s["prepared_model_names"])
                 for d in status["drivers"] if d["name"] in ("gpu", "cpu")}
        assert len(names["gpu"]) == 2 and len(names["cpu"]) == 1, names
        assert {n.rsplit(":", 1)[1] for n in names["gpu"]} == {"0", "2"}, names
        assert {n.rsplit(":", 1)[1] for n in names["cpu"]} == {"1"}, names
        assert len({n.rsplit(":", 1)[0] for n in names["gpu"] + names["cpu"]}) == 1, names
        assert cli.main(["status", "--runtime-dir", str(runtime), "--wide"]) == 0
        out = capsys.readouterr().out
        header, *rows = out.splitlines()[3:6]
        column = header.index("PREPARED")
        held = {row.split()[0]: int(row[column:].split()[0]) for row in rows}
        assert held["gpu"] >= 2 and held["cpu"] >= 1
        assert f"  pid {os.getpid()}: prepared models on cpu (1), gpu (2): partitions of a " \
               "model over several devices" in out
