"""A caller's wait for its reply on the session channel (driver.py's readers and waiters)."""

from __future__ import annotations

import _thread


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
