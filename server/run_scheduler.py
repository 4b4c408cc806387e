"""Admission of runs onto the device: a budget of concurrent runs, sessions served in turn.

A device whose computation already uses every core it may (the CPU driver's onnxruntime
engine: one intra-op pool sized to the cores) gets slower, not faster, when more runs
compute at once — each brings its threads and they oversubscribe the cores (8 clients on
2 vCPUs: half the throughput of one). Such a device declares `Device.concurrent_runs`; the
host then lets that many runs compute at once and queues the rest *before* any
computation (after every check of the request, so a refused run never waits).

Fairness: waiting runs are kept per session and a freed slot goes to the next session in
round-robin order, so a session that queues many runs (an async flood) delays another
session's run by at most one run per busy session, not by its whole queue. A waiting run
whose caller gave up (deadline, disconnect) leaves the queue with NNRT_TIME_OUT without
computing. Devices without a budget (`concurrent_runs` None) skip all of this.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from .errors import NNRT_TIME_OUT, DriverError

POLL_S = 0.05  # how often a waiting run looks whether its caller gave up


class RunScheduler:
    def __init__(self, slots: int | None) -> None:
        self.slots = slots
        self._lock = threading.Lock()
        self._running = 0
        self._waiting: OrderedDict[int, deque[threading.Event]] = OrderedDict()

    @property
    def busy(self) -> bool:
        """Whether a run computes or waits now (without a budget: never said)."""
        return self.slots is not None and (self._running > 0 or bool(self._waiting))

    @property
    def queued(self) -> int:
        with self._lock:
            return sum(len(q) for q in self._waiting.values())

    @contextmanager
    def slot(self, session_id: int, cancelled: Callable[[], bool]) -> Iterator[None]:
        """Hold one of the device's run slots for the block; waits its session's turn."""
        if self.slots is None:
            yield
            return
        self._acquire(session_id, cancelled)
        try:
            yield
        finally:
            self._release()

    def _acquire(self, session_id: int, cancelled: Callable[[], bool]) -> None:
        with self._lock:
            if self._running < self.slots and not self._waiting:
                self._running += 1
                return
            turn = threading.Event()
            self._waiting.setdefault(session_id, deque()).append(turn)
        while not turn.wait(POLL_S):
            if cancelled():
                with self._lock:
                    if turn.is_set():  # the slot came just now: hand it on
                        break
                    queue = self._waiting.get(session_id)
                    if queue is not None and turn in queue:
                        queue.remove(turn)
                        if not queue:
                            del self._waiting[session_id]
                raise DriverError(NNRT_TIME_OUT, "run abandoned while waiting for the device: "
                                                 "its caller gave up")
        else:
            return  # the slot was handed over (counted by _release)
        self._release()  # given a slot after giving up: pass it on
        raise DriverError(NNRT_TIME_OUT, "run abandoned while waiting for the device: its "
                                         "caller gave up")

    def _release(self) -> None:
        with self._lock:
            if not self._waiting:
                self._running -= 1
                return
            # The slot passes to the oldest run of the next session in turn; that session
            # goes to the back of the round.
            session_id, queue = next(iter(self._waiting.items()))
            turn = queue.popleft()
            if queue:
                self._waiting.move_to_end(session_id)
            else:
                del self._waiting[session_id]
            turn.set()
