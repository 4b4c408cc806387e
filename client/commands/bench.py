"""`nnrt bench`: latency and throughput of a saved model (common/model_file.py) or an ONNX
model (.onnx, imported as `nnrt run` does) on a device.

    $ nnrt bench mlp.nnrt --runs 1000 --concurrency 2
    model:       mlp.nnrt (3 nodes)
    device:      nnrt-cpu_nnrt_v2_1 (ID 4536084387933173364, driver cpu)
    inputs:      'x' float32 [4, 16] (random)
    prepare:     11.8 ms
    runs:        1000 in 0.52 s (+10 warmup), concurrency 2
    latency ms:  p50 0.98  p90 1.21  p99 1.87  min 0.66  max 3.02  mean 1.02
    throughput:  1923.1 runs/s

The model is prepared once; each of `--concurrency` threads has its own input and output
buffers in the driver's session and runs back to back (one run in flight per thread). The
`--warmup` runs come first and are not measured; then `--runs` N (default 100) or as many as
fit in `--seconds` S. Latency is one Run round trip as the client sees it; throughput is the
measured runs over the measured wall time.

Inputs: `--input` .npy files, one per input, or one .npz archive (by input name, or arr_0,
arr_1, ... in order; checked as by `nnrt run`), or random ones matching the model:
floats uniform in [0, 1), integers 0, booleans random; a dynamic dimension takes
`--dynamic-dim` (default 1). On a terminal, a progress bar goes to stderr (none otherwise, nor with TERM=dumb).

Profiles (`--profile`): after the measured runs, `--profile-runs` more (default
20, not counted in the latencies) ask the driver to time each step
(RunRequest.profile, nnrt's addition to the HDI): per node on the numpy engine and the GPU
(OpenCL profiling events beside the host's time), per onnxruntime segment on the CPU
driver's onnxruntime engine, per node on the accelerator with its cost model's simulated
time next to the host's computation. Every step is listed with its mean time and share of
the driver's compute; then where a run's time goes: the round trip as the client sees
it, the driver's part (request received to reply built), its computation. `--trace
FILE.json` writes those runs as a Chrome trace (the trace-event JSON onnxruntime's profiler
writes; open it in Perfetto or chrome://tracing): one lane per process — the client's runs
with their transport (request to the driver, reply back), the driver's Run, compute and
steps — on the host's one monotonic clock. `--report FILE` writes every measured latency
(JSON, in completion order). `--input-shape NAME=DIMS` fixes an ONNX input's dimensions as
`nnrt convert` does.

Device choice (several too: `--device gpu,cpu`, `--device auto`, with the plan said and
failover on unless `--no-failover`), the embedded driver and exit codes are those of
`nnrt run`. Ctrl-C while
measuring reports what was measured, then exits 130 (`"interrupted": true` in --json).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from nnrt.common import model_file
from nnrt.common.hdi_model import LoweredModel
from nnrt.client.commands.common import (DURATION_HELP, EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_OK,
                                         EXIT_USAGE, duration, non_negative_int, print_json,
                                         redraws, say)
from nnrt.client.commands.convert import parse_input_shapes
from nnrt.client.commands.run import (CommandError, Prepared, RunSlot, _positive_int,
                                      add_model_arguments, check_inputs, describe_io, finish,
                                      load_inputs, load_model, open_device, timeout_ms)

DEFAULT_RUNS = 100
DEFAULT_WARMUP = 5
DEFAULT_PROFILE_RUNS = 20
BAR_WIDTH = 30
BAR_INTERVAL = 0.1  # s between progress bar updates
JOIN_SLICE = 0.1  # s the main thread waits on the workers at a time


def add_parser(sub) -> None:
    parser = sub.add_parser(
        "bench", help="latency percentiles and throughput of a model (.nnrt or .onnx)",
        description="Compile a model — a saved model (.nnrt) or an ONNX model (.onnx) — on a "
                    "device and run it repeatedly: latency percentiles and throughput.")
    add_model_arguments(parser, inputs_required=False)
    amount = parser.add_mutually_exclusive_group()
    amount.add_argument("--runs", "-n", type=_positive_int,
                        help=f"measured runs (default {DEFAULT_RUNS})")
    amount.add_argument("--seconds", "-s", type=duration, metavar="DURATION",
                        help=f"measure for this long instead of a number of runs "
                             f"({DURATION_HELP})")
    parser.add_argument("--warmup", type=non_negative_int, default=DEFAULT_WARMUP, metavar="N",
                        help=f"runs before measuring (default {DEFAULT_WARMUP})")
    parser.add_argument("--concurrency", "-c", type=_positive_int, default=1, metavar="K",
                        help="runs in flight at once (default 1)")
    parser.add_argument("--dynamic-dim", type=_positive_int, default=1, metavar="N",
                        help="size of a dynamic dimension of random inputs (default 1)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    parser.add_argument("--input-shape", action="append", default=[], metavar="NAME=DIMS",
                        help="fix an ONNX input's dimensions, e.g. x=1,3,224,224 ('?' for a "
                             "dynamic one); repeatable, as nnrt convert has it")
    parser.add_argument("--profile", action="store_true",
                        help="time every node (or onnxruntime segment) in the driver and "
                             "list them, with where a run's time goes")
    parser.add_argument("--profile-runs", type=_positive_int, default=DEFAULT_PROFILE_RUNS,
                        metavar="N", help=f"profiled runs after the measured ones, for "
                                          f"--profile and --trace (default "
                                          f"{DEFAULT_PROFILE_RUNS})")
    parser.add_argument("--trace", type=Path, metavar="FILE.json",
                        help="write the profiled runs as a Chrome trace (opens in Perfetto)")
    parser.add_argument("--report", type=Path, metavar="FILE",
                        help="write every measured latency (JSON, in completion order)")
    parser.set_defaults(func=run)


def random_inputs(lowered: LoweredModel, dynamic_dim: int, seed: int) -> list[np.ndarray]:
    """Inputs matching the model: floats in [0, 1), integers 0, booleans random."""
    rng = np.random.default_rng(seed)
    arrays = []
    for desc in lowered.inputs:
        dtype = model_file.dtype_of(desc)
        shape = [dynamic_dim if d < 0 else d for d in desc.shape]
        if dtype.kind == "f":
            arrays.append(rng.random(shape).astype(dtype))
        elif dtype.kind == "b":
            arrays.append(rng.random(shape) < 0.5)
        else:
            arrays.append(np.zeros(shape, dtype))
    return arrays


# -- measuring --------------------------------------------------------------------------------


@dataclass
class Phase:
    """Runs by `len(slots)` threads: `count` runs, or as many as fit in `seconds`."""

    slots: Sequence[RunSlot]
    timeout_ms: int
    count: int | None = None
    seconds: float | None = None
    latencies: list[float] = field(default_factory=list)  # s, in completion order
    error: CommandError | None = None
    elapsed: float = 0.0
    _stop: threading.Event = field(default_factory=threading.Event)
    _tickets: itertools.count = field(default_factory=itertools.count)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _started: float = 0.0

    def _worker(self, slot: RunSlot) -> None:
        try:
            while not self._stop.is_set():
                if self.count is not None:
                    if next(self._tickets) >= self.count:
                        break
                elif time.perf_counter() - self._started >= self.seconds:
                    break
                began = time.perf_counter()
                slot.run(self.timeout_ms)
                latency = time.perf_counter() - began
                with self._lock:
                    self.latencies.append(latency)
        except CommandError as exc:
            with self._lock:
                if self.error is None:
                    self.error = exc
            self._stop.set()
        except Exception as exc:  # noqa: BLE001 - reported like any failed run
            with self._lock:
                if self.error is None:
                    self.error = CommandError(EXIT_FAILURE, f"run failed: {exc}")
            self._stop.set()

    def done(self) -> int:
        return len(self.latencies)

    def fraction(self) -> float:
        if self.count is not None:
            return min(1.0, self.done() / self.count) if self.count else 1.0
        return min(1.0, (time.perf_counter() - self._started) / self.seconds)

    def measure(self, bar: ProgressBar | None, label: str, keep: bool = True) -> None:
        """Run the phase to its end (KeyboardInterrupt: stop the workers, then re-raise)."""
        threads = [threading.Thread(target=self._worker, args=(slot,), daemon=True,
                                    name=f"nnrt-bench-{i}") for i, slot in enumerate(self.slots)]
        self._started = time.perf_counter()
        for thread in threads:
            thread.start()
        try:
            for thread in threads:
                while thread.is_alive():
                    thread.join(JOIN_SLICE)
                    if bar is not None:
                        bar.show(label, self)
        except KeyboardInterrupt:
            self._stop.set()
            for thread in threads:  # a run in flight ends at its deadline at the latest
                thread.join(self.timeout_ms / 1000 + 1)
            raise
        finally:
            self.elapsed = time.perf_counter() - self._started
            if bar is not None:
                bar.show(label, self, final=True, keep=keep)


class ProgressBar:
    """`bench [#########.........]  45/100 runs  0.4 s` on stderr, redrawn in place."""

    def __init__(self, stream=sys.stderr) -> None:
        self.stream = stream
        self._last = 0.0

    @staticmethod
    def wanted(stream=sys.stderr) -> bool:
        return redraws(stream)

    def show(self, label: str, phase: Phase, final: bool = False, keep: bool = True) -> None:
        """Redraw (at most every BAR_INTERVAL); the final drawing stays (`keep`) or goes."""
        now = time.monotonic()
        if not final and now - self._last < BAR_INTERVAL:
            return
        self._last = now
        fraction = phase.fraction()
        filled = int(round(fraction * BAR_WIDTH))
        total = f"/{phase.count}" if phase.count is not None else ""
        elapsed = time.perf_counter() - phase._started
        limit = f"/{phase.seconds:g}" if phase.seconds is not None else ""
        line = (f"{label:<7}[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] "
                f"{phase.done()}{total} runs  {elapsed:.1f}{limit} s")
        self.stream.write(f"\r{line}\x1b[K")
        if final:
            self.stream.write("\n" if keep else "\r\x1b[K")
        self.stream.flush()


def summary(latencies: Sequence[float], elapsed: float) -> dict:
    ms = np.asarray(latencies, dtype=np.float64) * 1000
    p50, p90, p99 = np.percentile(ms, [50, 90, 99])
    return {"latency_ms": {"p50": round(float(p50), 4), "p90": round(float(p90), 4),
                           "p99": round(float(p99), 4), "min": round(float(ms.min()), 4),
                           "max": round(float(ms.max()), 4), "mean": round(float(ms.mean()), 4)},
            "throughput_per_s": round(len(ms) / elapsed, 3) if elapsed > 0 else None}


# -- profiles and traces ---------------------------------------------------------------------


@dataclass
class ProfiledRun:
    """One profiled run: the client's time.monotonic() around it and the driver's RunProfile
    (hdi.proto), on the same clock."""

    began: float
    ended: float
    driver: object  # hdi_pb2.RunProfile
    thread: int


def profiled_runs(slot: RunSlot, count: int, timeout: int) -> list[ProfiledRun]:
    """`count` runs one after the other, each timed step by step by the driver."""
    runs = []
    thread = threading.get_native_id()
    for _ in range(count):
        profiles: list = []
        began = time.monotonic()
        slot.run(timeout, profiles)
        ended = time.monotonic()
        if not profiles:
            raise CommandError(EXIT_USAGE, "--profile / --trace time a model on one device: "
                                           "this one runs over several (choose one with "
                                           "--device)")
        runs.append(ProfiledRun(began, ended, profiles[0], thread))
    return runs


def profile_table(runs: Sequence[ProfiledRun]) -> dict:
    """Every step with its mean times over the runs, in execution order; where a run's time
    goes (ms)."""
    steps: dict[tuple, dict] = {}
    for run in runs:
        for span in run.driver.spans:
            key = (span.name, tuple(span.nodes))
            entry = steps.setdefault(key, {"name": span.name, "op": span.op,
                                           "nodes": list(span.nodes), "times": [],
                                           "simulated": [], "host": [], "device": []})
            entry["times"].append(span.seconds)
            entry["simulated"].append(span.simulatedSeconds)
            entry["host"].append(span.hostSeconds)
            entry["device"].append(span.deviceSeconds)
    compute = [r.driver.computeEndSeconds - r.driver.computeStartSeconds for r in runs]
    total = sum(float(np.mean(e["times"])) for e in steps.values()) or 1.0

    def ms(values: Sequence[float]) -> float:
        return round(float(np.mean(values)) * 1000, 4)

    nodes = []
    for entry in steps.values():
        row = {"name": entry["name"], "op": entry["op"], "nodes": entry["nodes"],
               "runs": len(entry["times"]), "mean_ms": ms(entry["times"]),
               "share": round(float(np.mean(entry["times"])) / total, 4)}
        for kind in ("simulated", "host", "device"):
            if any(entry[kind]):
                row[f"{kind}_ms"] = ms(entry[kind])
        nodes.append(row)
    return {"runs": len(runs), "nodes": nodes,
            "round_trip_ms": ms([r.ended - r.began for r in runs]),
            "driver_ms": ms([r.driver.repliedSeconds - r.driver.receivedSeconds for r in runs]),
            "compute_ms": ms(compute)}


def print_profile(profile: dict) -> None:
    nodes = profile["nodes"]
    extra = [k for k in ("simulated_ms", "host_ms", "device_ms") if any(k in n for n in nodes)]
    heads = {"simulated_ms": "sim ms", "host_ms": "host ms", "device_ms": "device ms"}
    width = min(48, max([len(n["name"]) for n in nodes] + [4]))
    print(f"profile:     {profile['runs']} runs, each step's mean (ms) and share of compute")
    print(f"  {'step':<{width}}  {'op':<16}{'ms':>10}{'share':>8}"
          + "".join(f"{heads[k]:>11}" for k in extra))
    for n in nodes:
        name = n["name"] if len(n["name"]) <= width else n["name"][:width - 1] + "…"
        print(f"  {name:<{width}}  {n['op'][:15]:<16}{n['mean_ms']:>10.3f}"
              f"{n['share'] * 100:>7.1f}%"
              + "".join(f"{n[k]:>11.3f}" if k in n else f"{'':>11}" for k in extra))
    print(f"  round trip {profile['round_trip_ms']:.3f} ms = driver {profile['driver_ms']:.3f}"
          f" (compute {profile['compute_ms']:.3f}) + client and transport "
          f"{profile['round_trip_ms'] - profile['driver_ms']:.3f}")


def trace_events(runs: Sequence[ProfiledRun], driver_name: str) -> list[dict]:
    """The runs in the trace-event format (complete events, "ph": "X", ts and dur in µs from
    the first run's start; "M" events name each process's lane), as onnxruntime's profiler
    writes it."""
    base = runs[0].began if runs else 0.0
    client_pid = os.getpid()

    def us(t: float) -> float:
        return round((t - base) * 1e6, 3)

    def span(name: str, cat: str, pid: int, tid: int, start: float, end: float,
             args: dict | None = None) -> dict:
        return {"name": name, "cat": cat, "ph": "X", "pid": pid, "tid": tid, "ts": us(start),
                "dur": round(max(0.0, end - start) * 1e6, 3), "args": args or {}}

    events: list[dict] = [{"name": "process_name", "ph": "M", "pid": client_pid, "tid": 0,
                           "ts": 0, "args": {"name": f"nnrt bench (client, pid {client_pid})"}}]
    named: set[int] = set()
    for k, run in enumerate(runs):
        d = run.driver
        if d.pid not in named:
            named.add(d.pid)
            events.append({"name": "process_name", "ph": "M", "pid": d.pid, "tid": 0, "ts": 0,
                           "args": {"name": f"{driver_name} (driver, pid {d.pid})"}})
        events.append(span(f"run {k}", "Client", client_pid, run.thread, run.began, run.ended))
        events.append(span("request: client to driver", "Transport", client_pid, run.thread,
                           run.began, d.receivedSeconds))
        events.append(span("reply: driver to client", "Transport", client_pid, run.thread,
                           d.repliedSeconds, run.ended))
        events.append(span(f"Run {k}", "Driver", d.pid, 1, d.receivedSeconds, d.repliedSeconds))
        events.append(span("compute", "Driver", d.pid, 1, d.computeStartSeconds,
                           d.computeEndSeconds))
        for step in d.spans:
            args = {"op": step.op, "nodes": list(step.nodes)}
            for key, value in (("simulated_ms", step.simulatedSeconds),
                               ("host_ms", step.hostSeconds), ("device_ms", step.deviceSeconds)):
                if value:
                    args[key] = round(value * 1000, 6)
            events.append(span(step.name, "Node", d.pid, 1, step.startSeconds,
                               step.startSeconds + step.seconds, args))
    return events


def write_file(path: Path, data: object) -> None:
    try:
        path.write_text(json.dumps(data, indent=1) + "\n")
    except OSError as exc:
        raise CommandError(EXIT_FAILURE, f"cannot write {path}: {exc.strerror or exc}") \
            from None


# -- the command ------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    try:
        return _bench(args)
    except CommandError as exc:
        return finish(exc, args.json)
    except KeyboardInterrupt:
        return finish(CommandError(EXIT_INTERRUPTED, "interrupted"), args.json)


def _bench(args: argparse.Namespace) -> int:
    try:
        shapes_given = parse_input_shapes(args.input_shape)
    except ValueError as exc:
        raise CommandError(EXIT_USAGE, str(exc)) from None
    lowered = load_model(args.model, shapes_given)
    if args.inputs:
        arrays, sources = load_inputs(args.inputs, lowered)
        arrays = check_inputs(lowered, arrays, sources)
    else:
        arrays = random_inputs(lowered, args.dynamic_dim, args.seed)
        sources = ["random"] * len(arrays)
    count = args.runs if args.runs is not None or args.seconds is not None else DEFAULT_RUNS
    bar = ProgressBar() if ProgressBar.wanted() else None
    interrupted = False
    with open_device(args) as target:
        prepared = Prepared(target, lowered, float16=args.float16, failover=args.failover)
        slots: list[RunSlot] = []
        try:
            prepared.check_dim_ranges(arrays)
            first = RunSlot(prepared, arrays)
            slots.append(first)
            shapes = first.run(timeout_ms(args))  # sizes the outputs (dynamic shapes)
            sizes = first.output_sizes
            slots += [RunSlot(prepared, arrays, sizes) for _ in range(args.concurrency - 1)]
            if args.warmup:
                warmup = Phase(slots, timeout_ms(args), count=args.warmup)
                warmup.measure(bar, "warmup", keep=False)
                if warmup.error is not None:
                    raise warmup.error
            phase = Phase(slots, timeout_ms(args), count=count if args.seconds is None else None,
                          seconds=args.seconds)
            try:
                phase.measure(bar, "bench")
            except KeyboardInterrupt:  # report what was measured (an embedded driver got
                interrupted = True     # the terminal's SIGINT too: runs after it failed)
            if phase.error is not None and not interrupted:
                raise phase.error
            profiled: list[ProfiledRun] = []
            if (args.profile or args.trace) and not interrupted:
                try:
                    profiled = profiled_runs(first, args.profile_runs, timeout_ms(args))
                except KeyboardInterrupt:
                    interrupted = True
            plan = prepared.plan()
            plan_lines = prepared.plan_lines(13, args.explain)
        finally:
            for slot in slots:
                slot.close()
            prepared.close()
    if not phase.latencies:
        raise CommandError(EXIT_INTERRUPTED if interrupted else EXIT_USAGE,
                           "interrupted before any measured run" if interrupted
                           else "no run fitted in the time given")
    result = summary(phase.latencies, phase.elapsed)
    profile = profile_table(profiled) if profiled else None
    if args.trace is not None and profiled:
        write_file(args.trace, trace_events(profiled, target.text()))
    if args.report is not None:
        write_file(args.report, {"model": str(args.model), "device": target.text(),
                                 "concurrency": args.concurrency,
                                 "runs": len(phase.latencies),
                                 "seconds": round(phase.elapsed, 6),
                                 "latencies_ms": [round(t * 1000, 6) for t in phase.latencies]})
    inputs = [{"name": d.name, "dtype": str(a.dtype), "shape": list(a.shape), "source": s}
              for d, a, s in zip(lowered.inputs, arrays, sources)]
    outputs = [{"name": d.name, "dtype": str(model_file.dtype_of(d)), "shape": list(s)}
               for d, s in zip(lowered.outputs, shapes)]
    if args.json:
        entry = target.add_json({"ok": not interrupted, "model": str(args.model)})
        if plan is not None:
            entry["plan"] = plan
            if args.explain:
                entry["explain"] = "\n".join(plan_lines)
        print_json({**entry, "runtime_dir": str(target.directory), "embedded": target.embedded,
                    "float16": args.float16, "prepare_ms": round(prepared.prepare_ms, 3),
                    "inputs": inputs, "outputs": outputs, "warmup": args.warmup,
                    "concurrency": args.concurrency, "runs": len(phase.latencies),
                    "seconds": round(phase.elapsed, 6), "interrupted": interrupted, **result,
                    **({"profile": profile} if profile is not None and args.profile else {}),
                    **({"trace": str(args.trace)} if args.trace and profiled else {}),
                    **({"report": str(args.report)} if args.report else {})})
    else:
        lat = result["latency_ms"]
        nodes = len(lowered.hdi.nodes)
        print(f"model:       {args.model} ({nodes} node{'s' if nodes != 1 else ''})")
        print(f"{'devices:' if target.devices else 'device:':<13}{target.text()}"
              + ("  [embedded driver]" if target.embedded else ""))
        for line in plan_lines:
            print(line)
        for i, (entry, desc) in enumerate(zip(inputs, lowered.inputs)):
            shown = describe_io(desc).replace(model_file.shape_text(desc.shape),
                                              model_file.shape_text(entry["shape"]))
            print(f"{'inputs:' if i == 0 else '':<13}{shown} ({entry['source']})")
        print(f"prepare:     {prepared.prepare_ms:.1f} ms"
              + ("   (float16)" if args.float16 else ""))
        print(f"runs:        {len(phase.latencies)} in {phase.elapsed:.2f} s "
              f"(+{args.warmup} warmup), concurrency {args.concurrency}"
              + ("  [interrupted]" if interrupted else ""))
        print(f"latency ms:  p50 {lat['p50']:.3f}  p90 {lat['p90']:.3f}  p99 {lat['p99']:.3f}  "
              f"min {lat['min']:.3f}  max {lat['max']:.3f}  mean {lat['mean']:.3f}")
        print(f"throughput:  {result['throughput_per_s']:.1f} runs/s")
        if profile is not None and args.profile:
            print_profile(profile)
        if args.trace is not None and profiled:
            print(f"trace:       {args.trace} ({len(profiled)} runs; open in Perfetto)")
        if args.report is not None:
            print(f"report:      {args.report} ({len(phase.latencies)} latencies)")
    if interrupted:  # what was measured is reported; the exit code says it is partial
        say("interrupted")
        return EXIT_INTERRUPTED
    return EXIT_OK
