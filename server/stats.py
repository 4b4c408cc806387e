"""Run counters of one driver process, for the admin service's GetStatus.

Every Run call is counted once it reaches the servicer: in flight until it answers, then
exactly one of

* completed — it answered NNRT_SUCCESS;
* abandoned — its caller gave up (deadline passed, call cancelled, session ended) and it
  stopped early (NNRT_TIME_OUT / NNRT_CANCELLED), or it failed after its caller was gone;
* failed — any other returnCode (refused by validation, device error, no session, ...).

A run that never answers (a hung device, a crash) stays in flight.

Progress, for the host's health watchdog (server/host.py): the execution path moves when a
run crosses an operator boundary (`progress()`, called from its cancellation check) or
completes. Runs refused before they reach the device do not count: a flood of bad requests
must not hide a wedged device. `stalled_for()` is how long runs have been in flight without
any progress — measured from the later of the last progress and the moment the driver last
went from idle to busy, so a run that just started on an idle driver is not stalled. One
clock for every run, not one per run: a run queued behind others (the accelerator's device
queue, a GPU plan's lock) waits without progress of its own while the path as a whole moves.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class RunCounts:
    in_flight: int = 0
    completed: int = 0
    failed: int = 0
    abandoned: int = 0


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

    def started(self) -> None:
        with self._lock:
            if self._in_flight == 0:
                self._busy_since = time.monotonic()
            self._in_flight += 1

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

    def finished(self, *, succeeded: bool, abandoned: bool) -> None:
        with self._lock:
            self._in_flight -= 1
            if succeeded:
                self._last_progress = time.monotonic()
                self._completed += 1
            elif abandoned:
                self._abandoned += 1
            else:
                self._failed += 1

    def snapshot(self) -> RunCounts:
        with self._lock:
            return RunCounts(self._in_flight, self._completed, self._failed, self._abandoned)
