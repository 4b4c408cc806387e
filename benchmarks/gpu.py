"""The GPU driver against the CPU driver on the zoo models, measured side by side in one run:
the CPU, the GPU in float32 and the GPU in float16 mode (tensors stored as half, computed in
float32); and a GPU model prepared from its graph (programs built) against one prepared from
its cache (program binaries loaded), each by a freshly started GPU driver whose OpenCL
driver's own compiler cache is off.

Both drivers run as processes of their own in a private runtime directory, started here;
the client is the Pythonic API (`nnrt.client.api`, on the C API). For each model and batch
the outputs are compared first (allclose; float16 mode within 2e-2 of the output's scale),
then rounds alternate between the three, and the median latency of every call is printed
with the ratios CPU / GPU and GPU float32 / GPU float16. Then the int8 models of
tests/drivers/cpu/ort/int8_models.py (an MLP, a ResNet-style and a MobileNet-style CNN,
QUANT_TYPE_ALL with per-channel weights) at benchmark sizes, the CPU's numpy engine against
the GPU's integer kernels, planned in this process (no IPC in either figure), with the largest
difference between their outputs in quantisation steps: each node is within one step (the
tests hold every kernel to that, and to an exact int64 reference), but a deep model's
one-step differences propagate, so the numpy engine's float32 sums drift a few steps from
the GPU's exact ones at these sizes. Last, a 64 MiB input and output copied to and from the
device against served in place (CL_MEM_USE_HOST_PTR over the shared-memory windows), where
the device's memory is the host's (PoCL's CPU device, an integrated GPU).

    python benchmarks/gpu.py                          # --cl-device gpu: the first OpenCL GPU
    python benchmarks/gpu.py --cl-device any --batches 1 --calls 5   # PoCL: figures mean nothing
    python benchmarks/gpu.py --models resnet,encoder --batches 1,32
    python benchmarks/gpu.py --int8-only --cl-device any   # the int8 table alone
    python benchmarks/gpu.py --zero-copy-only --cl-device any   # copy vs zero-copy alone

On PoCL (an OpenCL CPU device) the speed figures say nothing about a GPU; run it on a
machine with one.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from nnrt.client import zoo
from nnrt.client.api import Compiled
from nnrt.client.core.driver import DriverClient, DriverGone
from nnrt.common.runtime_dir import ENV as RUNTIME_ENV
from tests.drivers.cpu.ort import int8_models

# Sizes of the benchmark models (the zoo's defaults are test sizes).
SIZES = {
    "mlp": {"width": 1024},
    "resnet": {"size": 64},
    "mobilenet": {"size": 96},
    "encoder": {"seq": 64, "d": 256},
    "lstm": {"seq": 32, "n_in": 128, "hidden": 256},
}


# The OpenCL drivers' own on-disk compiler caches (NVIDIA's ComputeCache, PoCL's kernel
# cache), off for the prepare measurement: "from the graph" then means compiled.
NO_VENDOR_CACHE = {"CUDA_CACHE_DISABLE": "1", "POCL_KERNEL_CACHE": "0"}


class Driver:
    def __init__(self, directory: Path, kind: str, *args: str,
                 env: dict[str, str] | None = None) -> None:
        self.directory, self.kind, self.args = directory, kind, args
        self.env = None if env is None else {**os.environ, **env}
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "nnrt.server", self.kind, "--runtime-dir",
             str(self.directory), "--log-level", "WARNING", *self.args],
            stdin=subprocess.DEVNULL, env=self.env)
        deadline = time.monotonic() + 60
        while True:
            if self.proc.poll() is not None:
                sys.exit(f"the {self.kind} driver exited with {self.proc.returncode}")
            try:
                DriverClient.connect(self.kind, self.directory, timeout=1.0).close()
                return
            except DriverGone:
                if time.monotonic() > deadline:
                    sys.exit(f"the {self.kind} driver did not start within 60 s")
                time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(30)


def outputs(result) -> list[np.ndarray]:
    return list(result) if isinstance(result, (list, tuple)) else [result]


def latency(executor, x: np.ndarray, calls: int) -> list[float]:
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        executor.run(x)
        times.append(time.perf_counter() - start)
    return times


def compare(model_name: str, batch: int, rounds: int, calls: int
            ) -> tuple[float, float, float]:
    """Median latencies (s): CPU, GPU float32, GPU float16 mode."""
    model, x = zoo.build(model_name, batch=batch, **SIZES[model_name])
    compiled = {"cpu": model.compile("cpu"), "gpu": model.compile("gpu"),
                "gpu16": model.compile("gpu", float16=True)}
    executors = {device: c.executor() for device, c in compiled.items()}
    try:
        cpu, gpu, gpu16 = (outputs(executors[d].run(x)) for d in ("cpu", "gpu", "gpu16"))
        for a, b, h in zip(cpu, gpu, gpu16):
            np.testing.assert_allclose(b, a, rtol=1e-3, atol=1e-3)
            np.testing.assert_allclose(h, a, rtol=2e-2, atol=2e-2 * float(np.abs(a).max()))
        times: dict[str, list[float]] = {device: [] for device in executors}
        for r in range(rounds):
            order = list(executors) if r % 2 == 0 else list(executors)[::-1]
            for device in order:
                times[device] += latency(executors[device], x, calls)
        return tuple(statistics.median(times[d]) for d in ("cpu", "gpu", "gpu16"))
    finally:
        for device in executors:
            executors[device].close()
            compiled[device].close()


def prepare_times(model_name: str, gpu: Driver) -> tuple[float, float]:
    """(from the graph, from the cache) by a freshly started GPU driver each time."""
    model, _ = zoo.build(model_name, batch=1, **SIZES[model_name])
    gpu.stop()
    gpu.start()
    start = time.perf_counter()
    compiled = model.compile("gpu")
    from_graph = time.perf_counter() - start
    cache = compiled.export_cache()
    compiled.close()
    gpu.stop()
    gpu.start()
    start = time.perf_counter()
    Compiled.from_cache(cache, "gpu").close()
    return from_graph, time.perf_counter() - start


# The int8 models (tests/drivers/cpu/ort/int8_models.py) at benchmark sizes, per batch.
INT8_MODELS = {
    "mlp": lambda batch: int8_models.mlp(batch=batch, width=512),
    "resnet": lambda batch: int8_models.resnet(batch=batch, size=32, c=64),
    "mobilenet": lambda batch: int8_models.mobilenet(batch=batch, size=48, c=64),
}


def int8_latencies(name: str, batch: int, cl_device: str, calls: int
                   ) -> tuple[float, float, int]:
    """Median latencies (s) of one int8 model, the CPU's numpy engine and the GPU's kernels,
    and the largest difference of their outputs in steps."""
    from nnrt.hdi.reference.plan import ExecutionPlan
    from nnrt.drivers.gpu.opencl import ClRuntime, choose_device
    from nnrt.drivers.gpu.plan import GpuPlan

    model = INT8_MODELS[name](batch)
    runtime = ClRuntime(choose_device(cl_device))
    cpu = ExecutionPlan(model.graph)
    gpu = GpuPlan(model.graph, runtime, f"int8 {name}")
    never = lambda: False  # noqa: E731
    try:
        want, got = cpu.run(model.inputs, never), gpu.run(model.inputs, never)
        times = {"cpu": [], "gpu": []}
        for _ in range(calls):
            for device, plan in (("cpu", cpu), ("gpu", gpu)):
                start = time.perf_counter()
                plan.run(model.inputs, never)
                times[device].append(time.perf_counter() - start)
        return (statistics.median(times["cpu"]), statistics.median(times["gpu"]),
                int8_models.steps_apart(got, want))
    finally:
        gpu.close()
        runtime.close()


def print_int8(args: argparse.Namespace, batches: list[int]) -> None:
    print(f"\n{'int8 model':<10} {'batch':>5} {'cpu ms':>9} {'gpu int8 ms':>12} {'cpu/gpu':>8}"
          f" {'steps':>6}   (in-process plans: the numpy engine, the GPU's integer kernels)")
    for name in INT8_MODELS:
        for batch in batches:
            cpu_s, gpu_s, steps = int8_latencies(name, batch, args.cl_device, args.calls)
            print(f"{name:<10} {batch:>5} {cpu_s * 1e3:>9.2f} {gpu_s * 1e3:>12.2f} "
                  f"{cpu_s / gpu_s:>7.2f}x {steps:>6}", flush=True)


ZERO_COPY_MIB = 64  # the input (and output) of the zero-copy table's model


def zero_copy_latencies(cl_device: str, calls: int) -> tuple[float, float, bool]:
    """Median latencies (s) of a ReLU over one 64 MiB float32 input into a 64 MiB output,
    its windows in shared-memory regions as the host maps them: copied (as on a discrete
    GPU) and served in place (CL_MEM_USE_HOST_PTR, where the device's memory is the host's);
    and whether the in-place runs copied nothing."""
    import threading

    from nnrt.common.hdi_model import HdiModelBuilder
    from nnrt.drivers.gpu.opencl import ClRuntime, choose_device
    from nnrt.drivers.gpu.plan import GpuPlan
    from nnrt.protos import hdi_types_pb2 as ht
    from nnrt.protos import node_attrs_pb2 as na
    from nnrt.server.buffers import SharedRegion
    from tests.drivers.gpu.util import graph_of

    n = ZERO_COPY_MIB << 18  # float32 elements
    b = HdiModelBuilder("relu")
    x = b.input("x", np.float32, [n])
    y = b.tensor("y", np.float32, [n])
    b.node(na.NODE_TYPE_ACTIVATION, [x], [y],
           na.Activation(activationType=ht.ACTIVATION_TYPE_RELU))
    b.mark_outputs(y)
    graph = graph_of(b)
    found = choose_device(cl_device)
    runtimes = {"copy": ClRuntime(found, zero_copy=False), "zero-copy": ClRuntime(found)}
    plans = {k: GpuPlan(graph, rt, f"relu ({k})") for k, rt in runtimes.items()}
    regions = [SharedRegion.allocate(n * 4) for _ in range(2)]
    never = lambda: False  # noqa: E731
    try:
        inp = regions[0].readonly_array(0, np.dtype(np.float32), n)
        out = regions[1].array(0, np.dtype(np.float32), n)
        values = np.random.default_rng(0).standard_normal(n, np.float32)
        regions[0].array(0, np.dtype(np.float32), n)[:] = values
        times = {k: [] for k in plans}
        for _ in range(calls + 1):  # the first of each: wrapping and warm-up
            for k, plan in plans.items():
                start = time.perf_counter()
                plan.run([inp], never, [out])
                times[k].append(time.perf_counter() - start)
        assert np.array_equal(out, np.maximum(inp, 0))
        in_place = runtimes["zero-copy"].windows.status()["copied_bytes"] == "0"
        del inp, out
        return (statistics.median(times["copy"][1:]), statistics.median(times["zero-copy"][1:]),
                in_place)
    finally:
        lock = threading.Lock()
        for region in regions:
            region.release(lock)
        for k in plans:
            plans[k].close()
            runtimes[k].close()


def print_zero_copy(args: argparse.Namespace) -> None:
    copy_s, zero_s, in_place = zero_copy_latencies(args.cl_device, args.calls)
    print(f"\n{'zero-copy':<22} {'copy ms':>9} {'in place ms':>12} {'copy/in place':>14}"
          f"   (in-process plans; in place only where the device's memory is the host's)")
    print(f"{f'relu {ZERO_COPY_MIB} MiB in, out':<22} {copy_s * 1e3:>9.2f} {zero_s * 1e3:>12.2f} "
          f"{copy_s / zero_s:>13.2f}x{'' if in_place else '   (copied: not host-unified)'}",
          flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cl-device", default="gpu", help="the GPU driver's --cl-device")
    parser.add_argument("--models", default=",".join(zoo.FAMILIES))
    parser.add_argument("--batches", default="1,32")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--int8-only", action="store_true", help="only the int8 table")
    parser.add_argument("--zero-copy-only", action="store_true",
                        help="only the zero-copy table (copy vs in place)")
    args = parser.parse_args()
    names = args.models.split(",")
    batches = [int(b) for b in args.batches.split(",")]
    if args.int8_only:
        print_int8(args, batches)
        return 0
    if args.zero_copy_only:
        print_zero_copy(args)
        return 0
    # The client logs each driver restart of the prepare measurement: expected here.
    logging.basicConfig(level=logging.ERROR)
    directory = Path(tempfile.mkdtemp(prefix="nnrt-bench-gpu-"))
    os.environ[RUNTIME_ENV] = str(directory)
    os.environ["NNRT_NO_EMBEDDED"] = "1"
    cpu = Driver(directory, "cpu")
    gpu = Driver(directory, "gpu", "--cl-device", args.cl_device)
    cpu.start()
    gpu.start()
    try:
        from nnrt.client.api import list_devices
        for device in list_devices():
            print(f"device: {device.name} ({device.type.name})")
        print(f"\n{'model':<10} {'batch':>5} {'cpu ms':>9} {'gpu ms':>9} {'gpu f16 ms':>11} "
              f"{'cpu/gpu':>8} {'f32/f16':>8}")
        for name in names:
            for batch in batches:
                cpu_s, gpu_s, half_s = compare(name, batch, args.rounds, args.calls)
                print(f"{name:<10} {batch:>5} {cpu_s * 1e3:>9.2f} {gpu_s * 1e3:>9.2f} "
                      f"{half_s * 1e3:>11.2f} {cpu_s / gpu_s:>7.2f}x {gpu_s / half_s:>7.2f}x",
                      flush=True)
        print(f"\n{'model':<10} {'prepare: graph ms':>18} {'cache ms':>9} {'graph/cache':>12}"
              f"   (a fresh GPU driver each, the OpenCL driver's own compiler cache off)")
        gpu.stop()
        gpu = Driver(directory, "gpu", "--cl-device", args.cl_device, env=NO_VENDOR_CACHE)
        for name in names:
            graph_s, cache_s = prepare_times(name, gpu)
            print(f"{name:<10} {graph_s * 1e3:>18.1f} {cache_s * 1e3:>9.1f} "
                  f"{graph_s / cache_s:>11.1f}x", flush=True)
        print_int8(args, batches)
        print_zero_copy(args)
    finally:
        gpu.stop()
        cpu.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
