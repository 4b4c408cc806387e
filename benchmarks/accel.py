"""The NPU simulator shared by several client processes: how long each priority waits.

Starts an accel driver (its default spec, or --spec), then client processes
(benchmarks/_accel_load.py: a chain of float16 FullConnection nodes run back to back):
`--low` processes with LOW priority from the start, and `--high` processes with HIGH
priority joining half a second later. Prints, per priority, the client-side latency and the
driver's wait distribution (from a run's arrival to its first node, plus waits between
nodes; admin status `sim_wait_*`, and the most nodes of other runs one run waited for),
beside one node's simulated time: a HIGH run should wait at most for the node in progress
(no node of another run overtakes it).

    python benchmarks/accel.py [--low 2] [--high 1] [--seconds 4] [--nodes 4]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc
from google.protobuf import empty_pb2

from nnrt.client.core.driver import DriverClient, DriverGone
from nnrt.drivers.accel.cost import graph_costs
from nnrt.drivers.accel.spec import load_spec
from nnrt.protos import admin_pb2_grpc
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.hdi.model_validation import build_graph

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _accel_load import chain  # noqa: E402


def node_seconds(nodes: int, width: int, batch: int, spec_path: Path | None) -> float:
    """One node of the load's chain, simulated, at PERFORMANCE_NONE (MEDIUM)."""
    builder = chain(nodes, width, batch)
    order = sorted(builder.constants)
    blob = b"".join(builder.constants[i].tobytes() for i in order)
    model = builder.model(ht.SharedBuffer(bufferId=1, bufferSize=len(blob)))
    view = memoryview(blob)
    graph = build_graph(model, lambda b: view[b.offset:b.offset + b.dataSize].toreadonly())
    spec = load_spec(spec_path)
    shapes = {t.index: t.shape for t in graph.tensors}
    costs = graph_costs(graph, shapes, spec)
    return sum(c.seconds(spec, ht.PERFORMANCE_NONE) for c in costs) / len(costs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spec", type=Path, default=None)
    parser.add_argument("--low", type=int, default=2)
    parser.add_argument("--high", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--width", type=int, default=512)
    parser.add_argument("--batch", type=int, default=16)
    args = parser.parse_args()
    directory = Path(tempfile.mkdtemp(prefix="nnrt-bench-accel-"))
    driver = subprocess.Popen(
        [sys.executable, "-m", "nnrt.server", "accel", "--runtime-dir", str(directory),
         "--log-level", "WARNING", *(["--spec", str(args.spec)] if args.spec else [])],
        stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                DriverClient.connect("accel", directory, timeout=1.0).close()
                break
            except DriverGone:
                if driver.poll() is not None or time.monotonic() > deadline:
                    sys.exit("the accel driver did not start")
                time.sleep(0.05)
        start_at = time.time() + 1.5
        common = [sys.executable, str(HERE / "_accel_load.py"), str(directory),
                  "--nodes", str(args.nodes), "--width", str(args.width),
                  "--batch", str(args.batch)]
        procs = [subprocess.Popen([*common, "--priority", "low", "--seconds", str(args.seconds),
                                   "--start-at", str(start_at)], stdout=subprocess.PIPE,
                                  text=True) for _ in range(args.low)]
        procs += [subprocess.Popen([*common, "--priority", "high",
                                    "--seconds", str(args.seconds - 1.0),
                                    "--start-at", str(start_at + 0.5)], stdout=subprocess.PIPE,
                                   text=True) for _ in range(args.high)]
        results = [json.loads(p.communicate(timeout=args.seconds + 60)[0]) for p in procs]
        with grpc.insecure_channel(f"unix:{directory / 'accel.sock'}") as channel:
            details = dict(admin_pb2_grpc.NnrtAdminStub(channel).GetStatus(
                empty_pb2.Empty(), timeout=5).details)
    finally:
        driver.terminate()
        driver.wait(30)
    node = node_seconds(args.nodes, args.width, args.batch, args.spec)
    print(f"{args.low} LOW + {args.high} HIGH client processes, {args.nodes}-node chains; "
          f"one node: {node * 1e3:.3f} ms simulated, a run {node * args.nodes * 1e3:.3f} ms")
    print(f"{'priority':<9} {'runs':>6} {'latency p50 ms':>15} {'p99':>8} "
          f"{'wait mean ms':>13} {'p50':>7} {'p99':>7} {'max':>7} {'max nodes':>9}")
    for name in ("high", "low"):
        latencies = [t for r in results if r.get("priority") == name for t in r["latencies"]]
        if not latencies:
            continue
        ordered = sorted(latencies)
        p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
        print(f"{name:<9} {len(latencies):>6} {statistics.median(latencies) * 1e3:>15.3f} "
              f"{p99 * 1e3:>8.3f} {float(details[f'sim_wait_{name}_mean_ms']):>13.3f} "
              f"{float(details[f'sim_wait_{name}_p50_ms']):>7.3f} "
              f"{float(details[f'sim_wait_{name}_p99_ms']):>7.3f} "
              f"{float(details[f'sim_wait_{name}_max_ms']):>7.3f} "
              f"{details[f'sim_wait_{name}_max_nodes']:>9}")
    print(f"device: utilisation {details['sim_utilisation']}, energy per run "
          f"{details['sim_energy_per_run_joules']} J, late nodes {details['sim_late_nodes']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
