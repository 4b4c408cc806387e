"""Run counters of one driver process, for the admin service's GetStatus.

Every Run call is counted once it reaches the servicer: in flight until it answers, then
exactly one of

* completed — it answered NNRT_SUCCESS;
* abandoned — its caller gave up (deadline passed, call cancelled, session ended) and it
  stopped early (NNRT_TIME_OUT / NNRT_CANCELLED), or it failed after its caller was gone;
* failed — any other returnCode (refused by validation, device error, no session, ...).

A run that never answers (a hung device, a crash) stays in flight.
"""

from __future__ import annotations

import threading
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

    def started(self) -> None:
        with self._lock:
            self._in_flight += 1

    def finished(self, *, succeeded: bool, abandoned: bool) -> None:
        with self._lock:
            self._in_flight -= 1
            if succeeded:
                self._completed += 1
            elif abandoned:
                self._abandoned += 1
            else:
                self._failed += 1

    def snapshot(self) -> RunCounts:
        with self._lock:
            return RunCounts(self._in_flight, self._completed, self._failed, self._abandoned)
