"""Soak: many runs from several client processes against one CPU driver; the driver's RSS
and fds must stay flat and no run may be lost (issue 14's soak target).

    python benchmarks/soak.py                       # 100 000 runs from 4 client processes
    python benchmarks/soak.py --runs 20000 --clients 2

What it does:

* starts `nnrt-driver cpu` in a private runtime directory;
* starts `--clients` worker processes (this script with `--worker`), each with its own
  session: the add model prepared once, two shared buffers, then `--runs / --clients` Runs
  over the session channel, one at a time, every result checked against numpy (the input
  changes each run, so a stale output would be caught);
* samples, every `--interval` s, the driver's RSS (`/proc/<pid>/status` VmRSS), its open
  fds (`/proc/<pid>/fd`) and its completed-run counter (the admin `GetStatus`), and prints
  one line per sample.

Verdict (exit 0 only when all hold):

* **flat**: after warm-up (the first `--warmup` fraction of the runs, default 10 %: imports,
  arenas and allocator pools settle), max/min of RSS and of the fd count over the samples
  taken while every client's session is open are within `--tolerance` (5 %);
* **no run lost**: every worker ran all its runs with correct results (no failure, no
  wrong output, no exception), and the driver counted exactly that many completed runs;
* **back to baseline**: once the clients have gone, the driver holds the fds it held before
  they came (RSS is reported, not judged: freed memory need not go back to the system).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc
import numpy as np
from google.protobuf import empty_pb2

log = logging.getLogger("soak")

ROOT = Path(__file__).resolve().parent.parent
N = 4  # elements of the add model's input


def _add_model():
    from nnrt.common.hdi_model import HdiModelBuilder
    from nnrt.protos import node_attrs_pb2 as na

    builder = HdiModelBuilder("add")
    x = builder.input("x", np.float32, [N])
    w = builder.constant("w", np.arange(N, dtype=np.float32))
    y = builder.tensor("y", np.float32, [N])
    builder.node(na.NODE_TYPE_ADD_FUSION, [x, w], [y])
    builder.mark_outputs(y)
    return builder


def worker(directory: Path, name: str, runs: int, index: int) -> dict:
    """One client process: `runs` checked Runs; a JSON-able summary."""
    from nnrt.client.core.driver import DriverClient
    from nnrt.protos import hdi_types_pb2 as ht

    summary = {"index": index, "runs": 0, "ok": 0, "failed": 0, "wrong": 0, "errors": []}
    with DriverClient.connect(name, directory, timeout=10) as client:
        model = _add_model().prepare(client)
        _, x = client.allocate_buffer(4 * N)
        _, y = client.allocate_buffer(4 * N)

        def io(memory) -> ht.IOTensor:
            return ht.IOTensor(dataType=ht.DATA_TYPE_FLOAT32, dimensions=[N],
                               format=ht.FORMAT_NONE, data=memory.descriptor())

        inputs, outputs = [io(x)], [io(y)]
        xs, ys = x.array(np.float32, [N]), y.array(np.float32, [N])
        expected_base = np.arange(N, dtype=np.float32)
        for k in range(runs):
            value = float((k * 7 + index) % 4096)
            xs[:] = value
            ys[:] = -1.0
            summary["runs"] += 1
            try:
                reply = client.run(model, inputs, outputs, timeout=30)
            except Exception as exc:  # noqa: BLE001 - counted, the soak goes on
                summary["failed"] += 1
                if len(summary["errors"]) < 5:
                    summary["errors"].append(f"run {k}: {exc!r}")
                continue
            if reply.returnCode != 0:
                summary["failed"] += 1
                if len(summary["errors"]) < 5:
                    summary["errors"].append(f"run {k}: returnCode {reply.returnCode}")
            elif not np.array_equal(ys, value + expected_base):
                summary["wrong"] += 1
                if len(summary["errors"]) < 5:
                    summary["errors"].append(f"run {k}: wrong output {ys.tolist()}")
            else:
                summary["ok"] += 1
        del xs, ys
        x.close(), y.close()
    return summary


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def _fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _status(stub) -> tuple[int, int]:
    """(completed runs, open sessions) from the driver's admin GetStatus."""
    status = stub.GetStatus(empty_pb2.Empty(), timeout=5)
    return status.runsCompleted, len(status.sessions)


def _spread(values: list[int]) -> float:
    """(max - min) / min, as a fraction."""
    return (max(values) - min(values)) / max(min(values), 1)


def soak(runs: int, clients: int, interval: float, warmup: float, tolerance: float) -> bool:
    from nnrt.protos import admin_pb2_grpc
    from nnrt.devmgr.probes import health_status
    from nnrt.common.runtime_dir import grpc_socket

    per_client = [runs // clients + (1 if k < runs % clients else 0) for k in range(clients)]
    with tempfile.TemporaryDirectory(prefix="nnrt-soak-") as tmp:
        directory = Path(tmp) / "rt"
        directory.mkdir(mode=0o700)
        name = "soak"
        driver = subprocess.Popen(
            [sys.executable, "-m", "nnrt.server", "cpu", "--name", name, "--runtime-dir",
             str(directory), "--log-level", "WARNING"], stdin=subprocess.DEVNULL)
        workers: list[subprocess.Popen] = []
        try:
            deadline = time.monotonic() + 30
            while health_status(grpc_socket(directory, name)) != 1:  # SERVING
                if driver.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the driver did not start")
                time.sleep(0.05)
            channel = grpc.insecure_channel(f"unix:{grpc_socket(directory, name)}")
            stub = admin_pb2_grpc.NnrtAdminStub(channel)
            base_done, _ = _status(stub)  # first: our own admin connection is in the baseline
            time.sleep(0.5)
            base_rss, base_fds = _rss_kib(driver.pid), _fds(driver.pid)
            print(f"driver pid {driver.pid}: before the clients RSS {base_rss / 1024:.1f} MiB, "
                  f"{base_fds} fds; {runs} runs from {clients} client processes", flush=True)
            started = time.monotonic()
            for k, count in enumerate(per_client):
                workers.append(subprocess.Popen(
                    [sys.executable, __file__, "--worker", str(directory), name, str(count),
                     str(k)], stdout=subprocess.PIPE, text=True, cwd=ROOT))
            print(f"{'t s':>7} {'runs':>8} {'runs/s':>8} {'RSS MiB':>8} {'fds':>5} {'sessions':>8}",
                  flush=True)
            samples: list[tuple[float, int, int, int]] = []  # (t, done, rss KiB, fds)
            last_t, last_done = 0.0, 0
            while any(w.poll() is None for w in workers):
                time.sleep(interval)
                t = time.monotonic() - started
                done, sessions = _status(stub)
                done -= base_done
                rss, fds = _rss_kib(driver.pid), _fds(driver.pid)
                if sessions == clients:  # judged only while every client's session is open
                    samples.append((t, done, rss, fds))
                rate = (done - last_done) / max(t - last_t, 1e-9)
                last_t, last_done = t, done
                print(f"{t:7.1f} {done:8d} {rate:8.0f} {rss / 1024:8.1f} {fds:5d} {sessions:8d}",
                      flush=True)
            elapsed = time.monotonic() - started
            results = [json.loads(w.stdout.read()) for w in workers]
            for w in workers:
                w.wait(10)
            done = _status(stub)[0] - base_done
            time.sleep(1.0)  # the sessions' ends are handled on the driver's channel thread
            end_rss, end_fds = _rss_kib(driver.pid), _fds(driver.pid)
            channel.close()
        finally:
            for w in workers:
                if w.poll() is None:
                    w.kill()
                    w.wait(10)
            driver.terminate()
            driver.wait(20)

    settled = [s for s in samples if s[1] >= warmup * runs]
    ok = sum(r["ok"] for r in results)
    lost = runs - ok
    print(f"\n{runs} runs in {elapsed:.1f} s ({runs / elapsed:.0f} runs/s) from {clients} "
          f"client processes: {ok} correct, {sum(r['failed'] for r in results)} failed, "
          f"{sum(r['wrong'] for r in results)} wrong; the driver counted {done} completed")
    for r in results:
        for error in r["errors"]:
            print(f"  client {r['index']}: {error}")
    verdicts = []
    if len(settled) >= 2:
        rss = [s[2] for s in settled]
        fds = [s[3] for s in settled]
        rss_ok, fds_ok = _spread(rss) <= tolerance, _spread(fds) <= tolerance
        print(f"after warm-up ({warmup:.0%} of the runs, {len(settled)} samples): RSS "
              f"{min(rss) / 1024:.1f}-{max(rss) / 1024:.1f} MiB ({_spread(rss):.1%}), fds "
              f"{min(fds)}-{max(fds)} ({_spread(fds):.1%}); limit {tolerance:.0%}")
        verdicts += [("RSS flat", rss_ok), ("fds flat", fds_ok)]
    else:
        print("too few samples after warm-up to judge flatness (more runs or a shorter "
              "--interval)")
        verdicts.append(("enough samples", False))
    verdicts.append(("no run lost", lost == 0 and done == runs))
    verdicts.append(("fds back to baseline", end_fds <= base_fds))
    print(f"after the clients left: RSS {end_rss / 1024:.1f} MiB (before {base_rss / 1024:.1f}),"
          f" {end_fds} fds (before {base_fds})")
    print("verdict: " + ", ".join(f"{what}: {'yes' if good else 'NO'}" for what, good in verdicts))
    return all(good for _, good in verdicts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--interval", type=float, default=0.5, help="s between samples")
    parser.add_argument("--warmup", type=float, default=0.1,
                        help="fraction of the runs before flatness is judged")
    parser.add_argument("--tolerance", type=float, default=0.05)
    parser.add_argument("--worker", nargs=4, metavar=("DIR", "NAME", "RUNS", "INDEX"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if args.worker:
        directory, name, count, index = args.worker
        print(json.dumps(worker(Path(directory), name, int(count), int(index))), flush=True)
        return 0
    if args.runs < args.clients or args.clients < 1:
        parser.error("--runs must be at least --clients, and --clients at least 1")
    return 0 if soak(args.runs, args.clients, args.interval, args.warmup, args.tolerance) else 1


if __name__ == "__main__":
    sys.exit(main())
