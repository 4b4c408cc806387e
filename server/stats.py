"""Run counters of one driver process, for the admin service's GetStatus.

Every Run call is counted once it reaches the Runner: in flight until it answers, then
exactly one of

* completed — it answered NNRT_SUCCESS;
* abandoned — its caller gave up (deadline passed, call cancelled, session ended) and it
  stopped early (NNRT_TIME_OUT / NNRT_CANCELLED), or it failed after its caller was gone;
* failed — any other returnCode (refused by validation, device error, no session, ...).

A run that never answers (a hung device, a crash) stays in flight.

Progress, for the operator (server/host.py logs runs that stop moving; health does not
depend on it: a long run is its caller's business, not the driver's): the execution path
moves when a run crosses an operator boundary (`progress()`, called from its cancellation
check) or completes. Runs refused before they reach the device do not count: a flood of
bad requests must not hide a wedged device. `stalled_for()` is how long runs have been in
flight without any progress — measured from the later of the last progress and the moment
the driver last went from idle to busy, so a run that just started on an idle driver is not
stalled. One clock for every run, not one per run: a run queued behind others (the
accelerator's device queue, a GPU plan's lock) waits without progress of its own while the
path as a whole moves.

Latency, for the device manager's Prometheus metrics (devmgr/metrics.py): completed runs
only (a refusal answered in microseconds would drag the distribution down and says nothing
about the device), from the moment the Runner took the run to its answer, counted into
fixed buckets (`LATENCY_BUCKETS`, Prometheus' `le` bounds) — a few integers per driver,
whatever its uptime, so GetStatus can carry the whole histogram. The start time is kept
per thread: a Run is served from `started()` to `finished()` on one thread (the Runner's
`_run`, server/runner.py), so no token has to pass between them.
"""

from __future__ import annotations

import bisect
import threading
import time
from dataclasses import dataclass, field

from nnrt.common.errors import code_name

# Upper bounds (seconds) of the run latency buckets; one more bucket counts the rest (+Inf).
LATENCY_BUCKETS: tuple[float, ...] = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                      0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


MAX_MODEL_LABELS = 32  # distinct model names counted apart; later ones under OTHER_MODEL
OTHER_MODEL = "other"


@dataclass(frozen=True)
class RunCounts:
    in_flight: int = 0
    completed: int = 0
    failed: int = 0
    abandoned: int = 0
    # Completed runs per latency bucket (len(LATENCY_BUCKETS) + 1, the last one +Inf; not
    # cumulative) and the sum of their latencies in seconds.
    latency_counts: tuple[int, ...] = field(default=(0,) * (len(LATENCY_BUCKETS) + 1))
    latency_sum: float = 0.0
    failed_by_code: dict[str, int] = field(default_factory=dict)  # code name -> failed runs
    # model name -> [completed, failed, abandoned]
    by_model: dict[str, tuple[int, int, int]] = field(default_factory=dict)


class RunStats:
    """Thread-safe counters; `started()` then one `finished(...)` per Run."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._in_flight = 0
        self._completed = 0
        self._failed = 0
        self._abandoned = 0
        self._last_progress = time.monotonic()
        self._busy_since = self._last_progress
        self._latency_counts = [0] * (len(LATENCY_BUCKETS) + 1)
        self._latency_sum = 0.0
        self._failed_by_code: dict[str, int] = {}
        self._by_model: dict[str, list[int]] = {}
        self._started_at = threading.local()  # this thread's run: when it started

    def started(self) -> None:
        self._started_at.value = self.begin()

    def begin(self) -> float:
        """`started()` for a caller that keeps the start itself (the one-frame Run,
        server/runner.py): the time to hand to `end`. No per-thread slot written."""
        now = time.monotonic()
        with self._lock:
            if self._in_flight == 0:
                self._busy_since = now
            self._in_flight += 1
        return now

    def progress(self) -> None:
        """A run crossed an operator boundary: the execution path is moving."""
        self._last_progress = time.monotonic()  # one float store: no lock needed

    def stalled_for(self, now: float | None = None) -> float:
        """Seconds runs have been in flight with no progress at all; 0 when idle."""
        now = time.monotonic() if now is None else now
        with self._lock:
            if self._in_flight == 0:
                return 0.0
            return max(0.0, now - max(self._last_progress, self._busy_since))

    def finished(self, *, succeeded: bool, abandoned: bool, code: int | None = None,
                 model: str | None = None) -> None:
        """`code`: the run's return code (a failed run is counted under its name); `model`:
        the prepared model's name (None: refused before one was found)."""
        started_at = getattr(self._started_at, "value", None)
        self._started_at.value = None
        self.end(started_at, succeeded, abandoned, code, model)

    def end(self, started_at: float | None, succeeded: bool, abandoned: bool,
            code: int | None = None, model: str | None = None) -> None:
        """`finished(...)` of a run counted in by `begin()` (`started_at`: what it returned)."""
        with self._lock:
            self.end_held(started_at, succeeded, abandoned, code, model)

    @property
    def lock(self) -> threading.Lock:
        """The counters' lock, for a run answered before it is counted (the one-frame Run,
        server/runner.py): held from before its answer until `end_held`, so that whoever
        saw the answer and then reads the counters finds the run counted."""
        return self._lock

    def end_held(self, started_at: float | None, succeeded: bool, abandoned: bool,
                 code: int | None = None, model: str | None = None) -> None:
        """`end` by a caller that holds `lock`."""
        self._in_flight -= 1
        if succeeded:
            self._last_progress = time.monotonic()
            self._completed += 1
            if started_at is not None:
                latency = self._last_progress - started_at
                self._latency_counts[bisect.bisect_left(LATENCY_BUCKETS, latency)] += 1
                self._latency_sum += latency
        elif abandoned:
            self._abandoned += 1
        else:
            self._failed += 1
            if code is not None:
                name = code_name(code)
                self._failed_by_code[name] = self._failed_by_code.get(name, 0) + 1
        if model is not None:
            if model not in self._by_model and len(self._by_model) >= MAX_MODEL_LABELS:
                model = OTHER_MODEL
            counts = self._by_model.setdefault(model, [0, 0, 0])
            counts[0 if succeeded else 2 if abandoned else 1] += 1

    def snapshot(self) -> RunCounts:
        with self._lock:
            return RunCounts(self._in_flight, self._completed, self._failed, self._abandoned,
                             tuple(self._latency_counts), self._latency_sum,
                             dict(self._failed_by_code),
                             {m: tuple(c) for m, c in self._by_model.items()})
