"""The NPU's one execution queue, shared by every session of the driver.

A run takes the device node by node. At each node boundary the device goes to the waiting
run of the highest priority (HIGH before MEDIUM before LOW; PRIORITY_NONE counts as
MEDIUM), first come first served within one priority — by the run's arrival, so a run in
progress keeps the device against later runs of its own priority. A HIGH run therefore
waits at most for the node in progress.

While it holds the device a node is computed (on the host, by the reference kernels) and the
device stays held until the node's simulated duration has passed since it started: the run's
latency follows the cost model, not the host, as long as the host computes faster than the
simulated chip (a node whose computation took longer is counted as `late`).

The queue keeps the simulated device's accounts: busy time, energy per performance mode,
runs and their energy, and each priority's wait (from a run's arrival to its first node,
plus any wait between its nodes) in time and in the nodes of other runs that took the device
meanwhile — the count says whether the priorities hold whatever the host's speed (a HIGH run
overtaken by no node of another run waited for the node in progress alone).
"""

from __future__ import annotations

import bisect
import itertools
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from nnrt.protos import hdi_types_pb2 as ht

from .spec import AccelSpec

# Lower ranks take the device first.
_RANK = {ht.PRIORITY_HIGH: 0, ht.PRIORITY_MEDIUM: 1, ht.PRIORITY_NONE: 1, ht.PRIORITY_LOW: 2}
PRIORITY_NAMES = {0: "high", 1: "medium", 2: "low"}
MODE_NAMES = {ht.PERFORMANCE_NONE: "none", ht.PERFORMANCE_LOW: "low",
              ht.PERFORMANCE_MEDIUM: "medium", ht.PERFORMANCE_HIGH: "high",
              ht.PERFORMANCE_EXTREME: "extreme"}
WAITS_KEPT = 4096  # per priority, for the percentiles in the status


@dataclass
class Waits:
    count: int = 0
    total: float = 0.0
    worst: float = 0.0
    most_overtaken: int = 0  # the most nodes of other runs one run waited for
    recent: list[float] = field(default_factory=list)

    def add(self, seconds: float, overtaken: int) -> None:
        self.count += 1
        self.total += seconds
        self.worst = max(self.worst, seconds)
        self.most_overtaken = max(self.most_overtaken, overtaken)
        self.recent.append(seconds)
        if len(self.recent) > WAITS_KEPT:
            del self.recent[: len(self.recent) - WAITS_KEPT]

    def percentile(self, q: float) -> float:
        if not self.recent:
            return 0.0
        ordered = sorted(self.recent)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class Run:
    """One run's place in the queue: its key, its simulated node durations, its accounts."""

    def __init__(self, queue: DeviceQueue, rank: int, seq: int, mode: int,
                 durations: Sequence[float], grants: int) -> None:
        self.queue = queue
        self.key = (rank, seq)
        self.mode = mode
        self.durations = durations
        self.arrived = time.monotonic()
        self.grants_seen = grants  # nodes the device had started when the run last let it go
        self.waited = 0.0
        self.overtaken = 0  # nodes of other runs started while this one waited
        self.busy = 0.0
        self.energy = 0.0
        self.debt = 0.0  # seconds the host ran late on earlier nodes of this run

    @contextmanager
    def node(self, position: int) -> Iterator[None]:
        """Hold the device for node `position` of the run: its computation inside, then
        the rest of its simulated duration."""
        queue = self.queue
        asked = time.monotonic()
        self.overtaken += queue.acquire(self.key, self.grants_seen)
        started = time.monotonic()
        self.waited += started - (self.arrived if position == 0 else asked)
        try:
            yield
        finally:
            # The node ends its simulated duration after it started, less what earlier nodes
            # of the run overran (the host computing slower than the chip, or a sleep waking
            # late): the debt is made up by the next nodes, so the run's latency follows the
            # cost model.
            duration = self.durations[position]
            left = started + duration - self.debt - time.monotonic()
            if left > 0:
                time.sleep(left)
            elif time.monotonic() - started > duration:
                queue.late_nodes += 1
            held = time.monotonic() - started
            self.debt = max(0.0, self.debt + held - duration)
            self.busy += held
            self.energy += held * queue.spec.power(self.mode)
            self.grants_seen = queue.release(held, self.mode)


class DeviceQueue:
    def __init__(self, spec: AccelSpec) -> None:
        self.spec = spec
        self.created = time.monotonic()
        self._cond = threading.Condition()
        self._queued: list[tuple[int, int]] = []  # keys of the admitted runs, in order
        self._held = False
        self._grants = 0  # nodes started on the device
        self._seq = itertools.count()
        self.in_flight = 0  # runs admitted and not finished
        self.busy_seconds = 0.0
        self.energy_by_mode: dict[int, float] = {}
        self.busy_by_mode: dict[int, float] = {}
        self.runs = 0
        self.run_energy = 0.0
        self.late_nodes = 0
        self.waits = {rank: Waits() for rank in PRIORITY_NAMES}

    @property
    def busy(self) -> bool:
        """Beyond the configured queue depth: GetDeviceStatus says BUSY."""
        return self.in_flight > self.spec.busy_queue_depth

    def admit(self, priority: int, mode: int, durations: Sequence[float]) -> Run:
        """Queue a run: it keeps its place (its key) until it finishes, so between two of
        its nodes no run of lower priority or later arrival takes the device — as a device
        whose queue holds the run's next node already."""
        with self._cond:
            self.in_flight += 1
            run = Run(self, _RANK.get(priority, 1), next(self._seq), mode, durations,
                      self._grants)
            bisect.insort(self._queued, run.key)
            return run

    def finish(self, run: Run) -> None:
        with self._cond:
            self.in_flight -= 1
            self._queued.remove(run.key)
            if run.busy:  # it reached the device (an abandoned run may not have)
                self.runs += 1
                self.run_energy += run.energy
                self.waits[run.key[0]].add(run.waited, run.overtaken)
            self._cond.notify_all()

    def acquire(self, key: tuple[int, int], since: int) -> int:
        """Wait until the device is free and `key` is the first queued run. The nodes of
        other runs started since the device had started `since` nodes."""
        with self._cond:
            while self._held or self._queued[0] != key:
                self._cond.wait()
            self._held = True
            overtaken = self._grants - since
            self._grants += 1
            return overtaken

    def release(self, held: float, mode: int) -> int:
        """The device let go after a node held `held` seconds; the nodes started so far."""
        with self._cond:
            self._held = False
            self.busy_seconds += held
            self.busy_by_mode[mode] = self.busy_by_mode.get(mode, 0.0) + held
            self.energy_by_mode[mode] = (self.energy_by_mode.get(mode, 0.0)
                                         + held * self.spec.power(mode))
            self._cond.notify_all()
            return self._grants

    def status(self) -> dict[str, str]:
        """The simulated device's accounts, for the admin status (`nnrt devices --json`)."""
        with self._cond:
            uptime = max(time.monotonic() - self.created, 1e-9)
            idle = max(uptime - self.busy_seconds, 0.0)
            out = {
                "sim_runs_in_flight": str(self.in_flight),
                "sim_runs_completed": str(self.runs),
                "sim_busy_seconds": f"{self.busy_seconds:.6f}",
                "sim_utilisation": f"{self.busy_seconds / uptime:.4f}",
                "sim_energy_joules": f"{sum(self.energy_by_mode.values()) + idle * self.spec.idle_power_watts:.6f}",
                "sim_energy_per_run_joules": f"{self.run_energy / self.runs:.6e}" if self.runs
                else "0",
                "sim_late_nodes": str(self.late_nodes),
            }
            for mode, name in MODE_NAMES.items():
                if mode in self.busy_by_mode:
                    out[f"sim_busy_seconds_mode_{name}"] = f"{self.busy_by_mode[mode]:.6f}"
                    out[f"sim_energy_joules_mode_{name}"] = f"{self.energy_by_mode[mode]:.6f}"
            for rank, name in PRIORITY_NAMES.items():
                w = self.waits[rank]
                if w.count:
                    out[f"sim_wait_{name}_runs"] = str(w.count)
                    out[f"sim_wait_{name}_mean_ms"] = f"{w.total / w.count * 1e3:.3f}"
                    out[f"sim_wait_{name}_p50_ms"] = f"{w.percentile(0.5) * 1e3:.3f}"
                    out[f"sim_wait_{name}_p99_ms"] = f"{w.percentile(0.99) * 1e3:.3f}"
                    out[f"sim_wait_{name}_max_ms"] = f"{w.worst * 1e3:.3f}"
                    out[f"sim_wait_{name}_max_nodes"] = str(w.most_overtaken)
            return out
