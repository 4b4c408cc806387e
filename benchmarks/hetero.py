"""Heterogeneous execution and failover (client/core/hetero.py), ratios in one run against
real driver processes — a GPU driver (`--cl-device any`: PoCL where no GPU exists) and a CPU
driver in a private runtime directory:

* **MiniLM over [gpu, cpu]**: benchmarks/models.py's MiniLM-L6-sized encoder with an exact
  identity added at its input that the GPU has no kernel for (`x + 0 * Hardmax(x)`: the
  ArgMax Hardmax imports as has none), as a real export carries a node or two the GPU lacks:
  the plan is CPU (those nodes) then GPU (the rest); against the same model on [cpu] alone, and against the
  GPU-only plan of the model without them (which the GPU supports whole).
* **A boundary's cost**: a chain of element-wise nodes on [1, 256] with an L2Normalize (no
  GPU kernel) at k points over [gpu, cpu] (2k boundaries) against the same chain on one
  device ([cpu], one step); the cost per boundary against one tiny Run (a one-node model on
  the CPU driver).
* **Failover**: a loop of `--runs` runs on [gpu, cpu] (preferred: the GPU runs the model
  whole; its fallback plan on the CPU is prepared in the background after the Build), the
  GPU driver SIGKILLed at run `--kill-at`, started again 50 runs later: failed and wrong runs,
  SIGKILL → first good result, and the time from the driver's being ready again to runs being
  back on the preferred plan.

    python benchmarks/hetero.py [--calls 20] [--runs 300] [--kill-at 100]
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("NNRT_NO_EMBEDDED", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nnrt.client import Model  # noqa: E402
from tests.conftest import start_driver  # noqa: E402

GPU = ("gpu", "--cl-device", "any")


def median_ms(fn, calls: int) -> float:
    fn()  # warm (sizes the boundaries)
    samples = []
    for _ in range(calls):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples) * 1000


def minilm_with_cast(path: Path) -> tuple[Path, Path, np.ndarray]:
    """(the MiniLM with nodes the GPU lacks at its input, the MiniLM as it is, its input)."""
    import onnx
    from onnx import helper, numpy_helper

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from models import minilm_case

    case = minilm_case()
    plain = path / "minilm.onnx"
    plain.write_bytes(case.onnx_bytes)
    proto = onnx.load_from_string(case.onnx_bytes)
    for node in proto.graph.node:
        node.input[:] = ["x_cast" if name == "x" else name for name in node.input]
    # x + 0 * Hardmax(x): exact for finite x, and not folded away by the import
    proto.graph.node.insert(0, helper.make_node("Add", ["x", "x_zero"], ["x_cast"]))
    proto.graph.node.insert(0, helper.make_node("Mul", ["x_hard", "zero"], ["x_zero"]))
    proto.graph.node.insert(0, helper.make_node("Hardmax", ["x"], ["x_hard"], axis=-1))
    proto.graph.initializer.append(numpy_helper.from_array(np.float32(0), "zero"))
    cast = path / "minilm_cast.onnx"
    onnx.save(proto, cast)
    return cast, plain, case.x


def chain(width: int, nodes: int, casts: int) -> Model:
    """`nodes` Add/Mul nodes with an L2Normalize (no GPU kernel: CPU only) after every
    nodes // (casts + 1) of them."""
    m = Model()
    h = m.input([1, width])
    every = nodes // (casts + 1)
    for k in range(nodes):
        h = m.add(h, np.float32(0.5)) if k % 2 == 0 else m.mul(h, np.float32(0.99))
        if casts and (k + 1) % every == 0 and (k + 1) // every <= casts:
            h = m.op("L2_NORMALIZE", h)
    m.outputs(h)
    return m


def measure_minilm(calls: int, tmp: Path) -> None:
    cast, plain, x = minilm_with_cast(tmp)
    with Model.load(cast) as model, Model.load(plain) as gpu_model:
        split = model.compile(["gpu", "cpu"])
        cpu = model.compile(["cpu"])
        gpu = gpu_model.compile(["gpu", "cpu"])
        try:
            steps = [(s.device.hdi_device_type, len(s.step.nodes))
                     for s in split.hetero.current.steps]
            print(f"MiniLM ({sum(n for _, n in steps)} nodes) over [gpu, cpu]: steps "
                  f"{['gpu' if k == 2 else 'cpu' for k, _ in steps]} with "
                  f"{[n for _, n in steps]} nodes")
            want = cpu.run(x)
            np.testing.assert_allclose(split.run(x), want, rtol=1e-3, atol=1e-4)
            t_split = median_ms(lambda: split.run(x), calls)
            t_cpu = median_ms(lambda: cpu.run(x), calls)
            t_gpu = median_ms(lambda: gpu.run(x), calls)
            print(f"  [gpu, cpu] {t_split:8.2f} ms   [cpu] {t_cpu:8.2f} ms   GPU-only plan "
                  f"(without them) {t_gpu:8.2f} ms")
            print(f"  ratios: split / cpu = {t_split / t_cpu:.2f}, split / gpu-only = "
                  f"{t_split / t_gpu:.2f}")
        finally:
            for c in (split, cpu, gpu):
                c.close()


def measure_boundaries(calls: int, casts: int) -> None:
    x = np.random.default_rng(0).standard_normal((1, 256)).astype(np.float32)
    with chain(256, 24, casts) as model, chain(256, 24, 0) as plain, Model() as tiny:
        tiny.outputs(tiny.relu(tiny.input([1, 4])))
        split = model.compile(["gpu", "cpu"])
        one = model.compile(["cpu"])
        gpu_one = plain.compile(["gpu", "cpu"])
        small = tiny.compile("cpu")
        small_gpu = tiny.compile("gpu")
        try:
            boundaries = len(split.hetero.current.plan.boundaries)
            np.testing.assert_allclose(split.run(x), one.run(x), rtol=1e-5)
            ex = split.executor()
            t_split = median_ms(lambda: ex.run(x), calls * 10)
            t_one = median_ms(lambda: one.run(x), calls * 10)
            t_gpu = median_ms(lambda: gpu_one.run(x), calls * 10)
            ones = np.ones((1, 4), np.float32)
            t_tiny = median_ms(lambda: small.run(ones), calls * 10)
            t_tiny_gpu = median_ms(lambda: small_gpu.run(ones), calls * 10)
            t_tiny_mean = (t_tiny + t_tiny_gpu) / 2  # a boundary adds a GPU or a CPU step
            steps = len(split.hetero.current.steps)
            per = (t_split - t_one) / boundaries
            per_gpu = (t_split - t_gpu) / boundaries
            print(f"chain of 24 nodes + {casts} L2Normalize: {steps} steps, {boundaries} boundaries "
                  f"over [gpu, cpu]: {t_split:.3f} ms; unsplit on [cpu] {t_one:.3f} ms; the "
                  f"chain without them on the GPU alone {t_gpu:.3f} ms")
            print(f"  per boundary: {per:.3f} ms against [cpu], {per_gpu:.3f} ms against the GPU "
                  f"alone; one tiny Run {t_tiny:.3f} ms on the CPU, "
                  f"{t_tiny_gpu:.3f} ms on the GPU: {per / t_tiny_mean:.2f} / "
                  f"{per_gpu / t_tiny_mean:.2f} tiny runs (their mean) per boundary; bytes copied between steps {ex.stats.copied_bytes}, "
                  f"through shared memory {ex.stats.boundary_bytes}")
            ex.close()
        finally:
            for c in (split, one, gpu_one, small, small_gpu):
                c.close()


def measure_failover(runtime: Path, drivers: dict, runs: int, kill_at: int) -> None:
    rng = np.random.default_rng(1)
    w1 = rng.standard_normal((64, 32)).astype(np.float32)
    w2 = rng.standard_normal((10, 64)).astype(np.float32)
    with Model() as m:
        x = m.input([None, 32])
        m.outputs(m.softmax(m.fully_connected(m.fully_connected(x, w1, activation="relu"), w2)))
        xs = rng.standard_normal((4, 32)).astype(np.float32)
        h = np.maximum(xs @ w1.T, 0) @ w2.T
        e = np.exp(h - h.max(axis=1, keepdims=True))
        want = e / e.sum(axis=1, keepdims=True)
        with m.compile(["gpu", "cpu"]) as compiled, compiled.executor() as ex:
            hetero = compiled.hetero
            deadline = time.monotonic() + 30
            while len(hetero._plans) < 2 and time.monotonic() < deadline:
                time.sleep(0.01)  # the fallback plan, prepared in the background
            failed = wrong = 0
            kill_to_good = ready_to_back = None
            ready = None
            for i in range(runs):
                if i == kill_at:
                    drivers["gpu"].stop(signal.SIGKILL)
                    killed = time.perf_counter()
                if i == kill_at + 50:
                    drivers["gpu"] = start_driver(runtime, *GPU)
                    ready = time.perf_counter()
                try:
                    got = ex.run(xs, timeout=10)
                except Exception:
                    failed += 1
                    continue
                if not np.allclose(got, want, rtol=1e-4, atol=1e-6):
                    wrong += 1
                if i == kill_at:
                    kill_to_good = time.perf_counter() - killed
                if ready is not None and ready_to_back is None and \
                        hetero.current is hetero.preferred:
                    ready_to_back = time.perf_counter() - ready
                if ready is not None and ready_to_back is None:
                    time.sleep(0.005)
            print(f"failover: {runs} runs, SIGKILL of the GPU driver at run {kill_at}: "
                  f"{failed} failed, {wrong} wrong, {ex.stats.failovers} failover(s)")
            print(f"  SIGKILL -> first good result on the CPU: {kill_to_good * 1000:.1f} ms; "
                  f"GPU driver ready again -> back on the preferred plan: "
                  + (f"{ready_to_back * 1000:.0f} ms" if ready_to_back is not None
                     else "not within the loop"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--kill-at", type=int, default=100)
    parser.add_argument("--casts", type=int, default=3)
    parser.add_argument("--skip-minilm", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    with tempfile.TemporaryDirectory() as tmp:
        runtime = Path(tmp) / "rt"
        drivers = {"gpu": start_driver(runtime, *GPU), "cpu": start_driver(runtime, "cpu")}
        os.environ["NNRT_RUNTIME_DIR"] = str(runtime)
        try:
            measure_boundaries(args.calls, args.casts)
            if not args.skip_minilm:
                measure_minilm(args.calls, Path(tmp))
            measure_failover(runtime, drivers, args.runs, args.kill_at)
        finally:
            for driver in drivers.values():
                if driver.proc.poll() is None:
                    driver.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
