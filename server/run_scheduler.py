"""Admission of runs onto the device: a budget of cores, sessions served in turn.

A device whose computation already uses every core it may (the CPU driver's onnxruntime
engine: one intra-op pool sized to the cores) gets slower, not faster, when more runs
compute at once — each brings its threads and they oversubscribe the cores (8 clients on
2 vCPUs: half the throughput of one). Such a device declares `Device.concurrent_runs`; the
host then lets that many runs compute at once and queues the rest *before* any
computation (after every check of the request, so a refused run never waits).

Cores chosen from the load: the budget is `slots` cores. A run of the only active session
(no other session ran in the last ACTIVE_S seconds) that finds the device idle is granted
every core (its computation may use them all: the one client is waiting, nobody else
needs the CPU); any other run one core, so that under load — or with several client
processes, which need the CPU between their runs — as many runs compute at once as there
are cores, each on one thread (`granted_cores()`, read by the device inside the run).

Fairness: waiting runs are kept per session and a freed slot goes to the next session in
round-robin order, so a session that queues many runs (an async flood) delays another
session's run by at most one run per busy session, not by its whole queue. A waiting run
whose caller gave up (deadline, disconnect) leaves the queue with NNRT_TIME_OUT without
computing. Devices without a budget (`concurrent_runs` None) skip all of this.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from ..common.errors import NNRT_TIME_OUT, DriverError

POLL_S = 0.05  # how often a waiting run looks whether its caller gave up
ACTIVE_S = 1.0  # a session that ran this recently counts as active

_granted: ContextVar[int | None] = ContextVar("nnrt_granted_cores", default=None)


def granted_cores() -> int | None:
    """The cores the current run was granted (None: no budget, or outside a run)."""
    return _granted.get()


class RunScheduler:
    def __init__(self, slots: int | None) -> None:
        self.slots = slots
        self._lock = threading.Lock()
        self._running = 0
        self._waiting: OrderedDict[int, deque[_Turn]] = OrderedDict()
        self._last_run: dict[int, float] = {}  # session id -> when it last asked for cores

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
        """Hold cores of the device for the block (see the module docstring); waits its
        session's turn."""
        if self.slots is None:
            yield
            return
        cores = self._acquire(session_id, cancelled)
        token = _granted.set(cores)
        try:
            yield
        finally:
            _granted.reset(token)
            self._release(cores)

    def _alone(self, session_id: int) -> bool:
        """Whether `session_id` is the only session that ran within ACTIVE_S (the lock held)."""
        now = time.monotonic()
        self._last_run[session_id] = now
        if len(self._last_run) > 1:
            stale = [s for s, t in self._last_run.items() if now - t > ACTIVE_S]
            for s in stale:
                del self._last_run[s]
        return len(self._last_run) == 1

    def _acquire(self, session_id: int, cancelled: Callable[[], bool]) -> int:
        with self._lock:
            alone = self._alone(session_id)
            if self._running < self.slots and not self._waiting:
                cores = self.slots if self._running == 0 and alone else 1
                self._running += cores
                return cores
            turn = _Turn()
            self._waiting.setdefault(session_id, deque()).append(turn)
        while not turn.event.wait(POLL_S):
            if cancelled():
                with self._lock:
                    if turn.event.is_set():  # the cores came just now: hand them on
                        break
                    queue = self._waiting.get(session_id)
                    if queue is not None and turn in queue:
                        queue.remove(turn)
                        if not queue:
                            del self._waiting[session_id]
                raise DriverError(NNRT_TIME_OUT, "run abandoned while waiting for the device: "
                                                 "its caller gave up")
        else:
            return turn.cores  # handed over (counted by _release)
        self._release(turn.cores)  # given cores after giving up: pass them on
        raise DriverError(NNRT_TIME_OUT, "run abandoned while waiting for the device: its "
                                         "caller gave up")

    def _release(self, cores: int) -> None:
        with self._lock:
            self._running -= cores
            # Freed cores pass to the oldest run of the next session in turn, that session
            # to the back of the round: one core each, or all of them to a lone waiter when
            # nothing else computes.
            while self._waiting and self._running < self.slots:
                session_id, queue = next(iter(self._waiting.items()))
                turn = queue.popleft()
                if queue:
                    self._waiting.move_to_end(session_id)
                else:
                    del self._waiting[session_id]
                turn.cores = self.slots if self._running == 0 and not self._waiting and \
                    len(self._last_run) == 1 else 1
                self._running += turn.cores
                turn.event.set()


class _Turn:
    """A waiting run: set once it is granted `cores`."""

    __slots__ = ("event", "cores")

    def __init__(self) -> None:
        self.event = threading.Event()
        self.cores = 1
