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
are cores, each on one thread (`granted_cores()` of hdi/cores.py, read by the device inside the run).

Fairness: waiting runs are kept per session and a freed slot goes to the next session in
round-robin order, so a session that queues many runs (an async flood) delays another
session's run by at most one run per busy session, not by its whole queue. A waiting run
whose caller gave up (deadline, disconnect) leaves the queue with NNRT_TIME_OUT without
computing. Devices without a budget (`concurrent_runs` None) skip all of this.

Who computes: a run admitted at once computes on its caller's thread (no hand-off on the
path of a lone client). Queued runs are computed by the scheduler's own threads, one a
slot, each going straight from one queued run to the next: handing a freed slot to the
waiting run's thread instead cost a wake-up of that thread on CPUs busy with the other
runs and the clients (~0.3 ms a run on 2 vCPUs: 8 clients' slots idle 40 % of the time).
The caller's thread waits for the result and answers as before — or, for a run handed
over whole (`submit`: the session channel's known requests, checked already), there is no
caller's thread: the scheduler's thread computes and answers it, and no worker wakes.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar

from nnrt.common.errors import NNRT_OPERATION_FORBIDDEN, NNRT_TIME_OUT, DriverError
from nnrt.hdi.cores import with_cores

POLL_S = 0.05  # how often a waiting run looks whether its caller gave up
ACTIVE_S = 1.0  # a session that ran this recently counts as active

T = TypeVar("T")

log = logging.getLogger(__name__)

# The cores a run handed over whole holds while the scheduler's thread runs it (`submit`).
_held: ContextVar[int | None] = ContextVar("nnrt_held_cores", default=None)


def _abandoned() -> DriverError:
    return DriverError(NNRT_TIME_OUT, "run abandoned while waiting for the device: its "
                                      "caller gave up")


@dataclass(frozen=True)
class QueueStats:
    """The scheduler's state for operators (admin GetStatus, metrics): is the device
    saturated, and how long do runs wait for cores."""

    cores: int  # the budget: cores runs may compute on at once
    cores_in_use: int  # granted to runs computing now
    queued: int  # runs waiting for cores now
    waited: int  # runs whose turn came after waiting for cores, since the start
    wait_seconds: float  # those waits, summed
    gave_up: int  # queued runs that never computed: their callers gave up first


class RunScheduler:
    def __init__(self, slots: int | None) -> None:
        self.slots = slots
        self._lock = threading.Lock()
        self._work = threading.Condition(self._lock)  # a run queued, a slot freed, closed
        self._running = 0
        self._waiting: OrderedDict[int, deque[_Turn]] = OrderedDict()
        self._last_run: dict[int, float] = {}  # session id -> when it last asked for cores
        self._computers: list[threading.Thread] = []
        self._closed = False
        self._waited = 0
        self._wait_s = 0.0
        self._gave_up = 0

    @property
    def busy(self) -> bool:
        """Whether a run computes or waits now (without a budget: never said)."""
        return self.slots is not None and (self._running > 0 or bool(self._waiting))

    @property
    def queued(self) -> int:
        with self._lock:
            return self._queued_now()

    def stats(self) -> QueueStats | None:
        """The queue's figures now (None without a budget: nothing is ever queued)."""
        if self.slots is None:
            return None
        with self._lock:
            return QueueStats(self.slots, self._running, self._queued_now(), self._waited,
                              self._wait_s, self._gave_up)

    def run(self, session_id: int, cancelled: Callable[[], bool],
            compute: Callable[[], T]) -> T:
        """`compute()` on cores of the device (see the module docstring), in its session's
        turn: its result, or its exception. NNRT_TIME_OUT when `cancelled()` before it
        started; NNRT_OPERATION_FORBIDDEN once the scheduler is closed."""
        if self.slots is None:
            return compute()
        held = _held.get()
        if held is not None:  # a run handed over whole computes: its turn came already
            if cancelled():
                self._count_gave_up()
                raise _abandoned()
            return with_cores(held, compute)
        with self._lock:
            if self._closed:
                raise DriverError(NNRT_OPERATION_FORBIDDEN, "the driver is stopping")
            alone = self._alone(session_id)
            if self._running < self.slots and not self._waiting:
                cores = self.slots if self._running == 0 and alone else 1
                self._running += cores
                turn = None
            else:
                turn = self._queue(session_id, _Turn(compute, cancelled))
        if turn is None:
            try:
                return with_cores(cores, compute)
            finally:
                self._release(cores)
        return self._result(session_id, turn)

    def submit(self, session_id: int, run: Callable[[], None]) -> bool:
        """Queue a whole run — one that computes through `run` and answers its caller — when
        the device is busy. In its session's turn the scheduler's thread calls `run()`
        holding the cores it was given, and the computation inside starts at once (or
        raises NNRT_TIME_OUT if its caller gave up meanwhile). False, nothing queued, with a
        slot free (the caller's own thread had better compute at once) or once closed."""
        if self.slots is None:
            return False
        with self._lock:
            if self._closed:
                return False
            self._alone(session_id)  # its activity counts, as for `run`
            if self._running < self.slots and not self._waiting:
                return False
            self._queue(session_id, _Turn(run, None))
            return True

    def close(self, timeout: float = 5.0) -> None:
        """Stop the scheduler's threads (each after the run it computes); runs still queued
        fail with NNRT_OPERATION_FORBIDDEN (a whole run answers its caller so)."""
        with self._lock:
            self._closed = True
            left = [turn for queue in self._waiting.values() for turn in queue]
            self._waiting.clear()
            self._work.notify_all()
        for turn in left:
            if turn.cancelled is None:
                _answer(turn)  # refused within: the scheduler is closed
            turn.finish(error=DriverError(NNRT_OPERATION_FORBIDDEN, "the driver is stopping"))
        deadline = time.monotonic() + timeout
        for thread in self._computers:
            thread.join(max(0.0, deadline - time.monotonic()))

    def _alone(self, session_id: int) -> bool:
        """Whether `session_id` is the only session that ran within ACTIVE_S (the lock held)."""
        now = time.monotonic()
        self._last_run[session_id] = now
        if len(self._last_run) > 1:
            stale = [s for s, t in self._last_run.items() if now - t > ACTIVE_S]
            for s in stale:
                del self._last_run[s]
        return len(self._last_run) == 1

    def _result(self, session_id: int, turn: _Turn) -> Any:
        """Wait for a queued run; it leaves the queue if its caller gives up first (once it
        computes, it sees `cancelled()` between its operators)."""
        cancelled = turn.cancelled
        while not turn.done.wait(POLL_S):
            if cancelled():
                with self._lock:
                    queue = self._waiting.get(session_id)
                    gave_up = queue is not None and turn in queue
                    if gave_up:
                        queue.remove(turn)
                        if not queue:
                            del self._waiting[session_id]
                        self._gave_up += 1
                if gave_up:
                    raise _abandoned()
        if turn.error is not None:
            error, turn.error = turn.error, None
            raise error
        return turn.result

    def _queue(self, session_id: int, turn: _Turn) -> _Turn:
        """(The lock held.)"""
        self._waiting.setdefault(session_id, deque()).append(turn)
        while len(self._computers) < self.slots:
            self._start_computer()
        self._work.notify()
        return turn

    def _start_computer(self) -> None:
        thread = threading.Thread(target=self._compute_queued, daemon=True,
                                  name=f"nnrt-compute-{len(self._computers)}")
        self._computers.append(thread)
        thread.start()

    def _compute_queued(self) -> None:
        """A scheduler thread: computes queued runs one at a time, from one straight to the
        next while runs wait and a slot is free."""
        while True:
            with self._lock:
                while not self._closed and not (self._waiting and self._running < self.slots):
                    self._work.wait()
                if self._closed:
                    return
                turn = self._next_turn()
                if self._waiting and self._running < self.slots:
                    self._work.notify()  # another slot is free for another thread
            if turn.cancelled is None:  # a whole run: it answers its caller itself
                self._run_whole(turn)
                continue
            result, error = None, None
            try:
                if turn.cancelled():
                    self._count_gave_up()
                    raise _abandoned()
                result = with_cores(turn.cores, turn.compute)
            except BaseException as exc:  # noqa: BLE001  (raised on the caller's thread)
                error = exc
            self._release(turn.cores)
            turn.finish(result, error)
            del turn, result, error  # keep nothing of a run here while waiting for the next

    def _run_whole(self, turn: _Turn) -> None:
        token = _held.set(turn.cores)
        try:
            _answer(turn)
        finally:
            _held.reset(token)
            self._release(turn.cores)
            turn.finish()

    def _next_turn(self) -> _Turn:
        """Take the oldest run of the next session in turn, that session to the back of the
        round (the lock held, a run waiting, a slot free): one core, or all of them to a lone
        waiter when nothing else computes."""
        session_id, queue = next(iter(self._waiting.items()))
        turn = queue.popleft()
        self._waited += 1
        self._wait_s += time.monotonic() - turn.queued_at
        if queue:
            self._waiting.move_to_end(session_id)
        else:
            del self._waiting[session_id]
        turn.cores = self.slots if self._running == 0 and not self._waiting and \
            len(self._last_run) == 1 else 1
        self._running += turn.cores
        return turn

    def _queued_now(self) -> int:
        """(The lock held.)"""
        return sum(len(q) for q in self._waiting.values())

    def _count_gave_up(self) -> None:
        with self._lock:
            self._gave_up += 1

    def _release(self, cores: int) -> None:
        with self._lock:
            self._running -= cores
            if self._waiting:
                self._work.notify(self.slots - self._running)  # a thread for each free slot


def _answer(whole: _Turn) -> None:
    """Run a whole run, which answers its caller itself (the session channel's never raise)."""
    try:
        whole.compute()
    except BaseException:  # noqa: BLE001  (a bug: this thread must go on)
        log.exception("a queued run failed unexpectedly")


class _Turn:
    """A queued run: its computation, then its result or error once `done`; or a run handed
    over whole (`cancelled` None: nobody waits for it)."""

    __slots__ = ("compute", "cancelled", "cores", "queued_at", "result", "error", "done")

    def __init__(self, compute: Callable[[], Any],
                 cancelled: Callable[[], bool] | None) -> None:
        self.compute = compute
        self.cancelled = cancelled
        self.cores = 1
        self.queued_at = time.monotonic()
        self.result: Any = None
        self.error: BaseException | None = None
        self.done = threading.Event()

    def finish(self, result: Any = None, error: BaseException | None = None) -> None:
        self.compute = None  # the computation's closure holds the run's tensors
        self.result, self.error = result, error
        self.done.set()
