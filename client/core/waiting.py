"""How a caller waits for its reply on the session channel (driver.py's readers and
waiters): its `Waiter`, and how long a quick Run polls before it sleeps (`spin_seconds`)."""

from __future__ import annotations

import _thread
import logging
import os

from nnrt.common.cpus import usable_cores

log = logging.getLogger(__name__)

# A Run of a model whose last reply said the driver answers it at once (REPLY_POLL) polls for
# its reply up to NNRT_CLIENT_SPIN_US before sleeping (`DriverClient.run`), while a CPU is
# spare (common/cpus.py: no runnable task waits for one) and never on a single CPU. A caller
# asleep in recv() has to be woken on its CPU by the reply: on a VM that wake-up is the
# largest part of a tiny round trip (benchmarks/run_cost.py: 61-67 µs of CPU with both sides
# asleep, 41-43 with both polling, wall 77-84 against 21-22 µs). Without a spare CPU a poller
# would hold a CPU the driver waits for (1.2 ms tiny runs were measured so): then it sleeps.
SPIN_ENV = "NNRT_CLIENT_SPIN_US"
DEFAULT_SPIN_US = 200


def spin_seconds() -> float:
    """The client's polling window from NNRT_CLIENT_SPIN_US (µs, 0 to 10 000)."""
    if usable_cores() < 2:
        return 0.0
    text = os.environ.get(SPIN_ENV, "").strip()
    try:
        value = int(text) if text else DEFAULT_SPIN_US
    except ValueError:
        value = -1
    if not 0 <= value <= 10_000:
        log.warning("%s=%r is not a number of µs from 0 to 10000: %d used", SPIN_ENV, text,
                    DEFAULT_SPIN_US)
        value = DEFAULT_SPIN_US
    return value / 1e6


class Waiter:
    """One request's wait for its reply: a lock held from the start and released to wake
    the waiting caller — by the reader with the reply (`deliver`), at the session's death,
    or to make it the reader (`wake` without a reply: the caller looks again). Far cheaper
    than a threading.Event per request."""

    __slots__ = ("_lock", "reply", "fds", "answered", "flags")

    def __init__(self) -> None:
        self._lock = _thread.allocate_lock()
        self._lock.acquire()
        self.reply = None
        self.fds: list[int] = []
        self.answered = False
        self.flags = 0  # a Run reply's (channel.REPLY_POLL)

    def deliver(self, reply, fds: list[int], flags: int = 0) -> None:
        self.reply, self.fds, self.flags, self.answered = reply, fds, flags, True
        self.wake()

    def wake(self) -> None:
        try:
            self._lock.release()
        except RuntimeError:  # already woken, not yet waited for: it looks again anyway
            pass

    def sleep(self, timeout: float | None) -> None:
        """Until woken, or `timeout` seconds (None: no limit)."""
        if timeout is None:
            self._lock.acquire()
        elif timeout > 0:
            self._lock.acquire(True, timeout)
