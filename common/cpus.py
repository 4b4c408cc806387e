"""The CPUs this process may run on (its affinity mask, as taskset or a cgroup's cpuset
leave it), which sizes thread pools and decides whether polling instead of sleeping can
pay: with one CPU a poller only keeps its peer from running."""

from __future__ import annotations

import os


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1
