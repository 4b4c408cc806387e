"""The CPUs this process may run on (its affinity mask, as taskset or a cgroup's cpuset
leave it), which sizes thread pools and decides whether polling instead of sleeping can
pay: with one CPU a poller only keeps its peer from running; and whether a CPU is spare
right now (`SpareCpu`), the condition under which client and driver may poll at all."""

from __future__ import annotations

import logging
import os
import time

log = logging.getLogger(__name__)

LOADAVG = "/proc/loadavg"
SPARE_CPU_REFRESH_S = 0.001  # how stale `SpareCpu.now()` may be


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def runnable_tasks(loadavg: bytes) -> int:
    """The kernel's count of runnable tasks, the caller included, from /proc/loadavg's
    text ("0.46 1.00 1.16 2/79 6780": 2); ValueError for anything else."""
    fields = loadavg.split()
    if len(fields) < 4 or b"/" not in fields[3]:
        raise ValueError(f"not /proc/loadavg's format: {loadavg[:80]!r}")
    return int(fields[3].split(b"/", 1)[0])


class SpareCpu:
    """Whether polling now would cost no other task a CPU: the machine's runnable tasks (the
    poller and its peer among them) are no more than its CPUs, so nobody waits for one —
    the rule Go's scheduler spins by. The kernel's count is read at most every
    `refresh_s` (1.0-1.5 µs a read), so a poll decided in a loop of runs costs ~nothing.

    The count is machine-wide: a process confined to some CPUs of a large machine may see
    a spare CPU outside its set; it still never polls with fewer than two CPUs of its own.
    Where /proc/loadavg cannot be read (not Linux), no CPU is ever spare: nobody polls."""

    def __init__(self, path: str = LOADAVG, refresh_s: float = SPARE_CPU_REFRESH_S,
                 cpus: int | None = None) -> None:
        self._refresh_s = refresh_s
        self.cpus = cpus or os.cpu_count() or 1  # the machine's: the count is machine-wide
        self._checked_at = -1.0
        self._runnable: int | None = None
        self._fd = -1
        if usable_cores() < 2:
            return
        try:
            self._fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            runnable_tasks(os.pread(self._fd, 256, 0))
        except (OSError, ValueError) as exc:
            log.info("no spare-CPU count (%s): client and driver never poll", exc)
            self.close()

    def now(self) -> bool:
        """Whether a CPU is spare: no runnable task waits for one (as of `refresh_s` ago)."""
        runnable = self.runnable()
        return runnable is not None and runnable <= self.cpus

    def runnable(self, fresh: bool = False) -> int | None:
        """The machine's runnable tasks, the caller included (as of `refresh_s` ago, or now
        when `fresh`); None where it is unknown or this process has one CPU of its own
        (nobody polls then)."""
        if self._fd < 0:
            return None
        at = time.perf_counter()
        if fresh or at - self._checked_at >= self._refresh_s:
            self._checked_at = at
            try:  # the affinity again too: taskset may have narrowed it since
                self._runnable = runnable_tasks(os.pread(self._fd, 256, 0)) \
                    if usable_cores() > 1 else None
            except (OSError, ValueError):
                self._runnable = None
        return self._runnable

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


_shared: SpareCpu | None = None


def spare_cpu() -> SpareCpu:
    """The process's one `SpareCpu` (one fd, one reading shared by every poller)."""
    global _shared
    if _shared is None:
        _shared = SpareCpu()
    return _shared
