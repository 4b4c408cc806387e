"""The memory limits a driver and its host share: the defaults and what they are based on.

The host's shared-memory budgets (server/buffers.py) and a driver's run-memory limit
(hdi/reference/graph_checks.py) default to fractions of the same basis: physical memory, or
the cgroup's memory limit when the process runs under a lower one (v2 `memory.max`, v1
`memory.limit_in_bytes`: a container, a unit with `MemoryMax=`).
"""

from __future__ import annotations

import os
from pathlib import Path

# The framework caps tensor allocations at 1 GiB (hdi.md 3.14); so do we, per region.
MAX_REGION_BYTES = 1 << 30

MIB = 1 << 20
DRIVER_FRACTION = 0.5  # of physical memory: the default budget of one driver
SESSION_FRACTION = 0.25  # of the driver's budget: the default budget of one session


CGROUP_ROOT_ENV = "NNRT_CGROUP_ROOT"  # where cgroupfs is mounted (tests point it elsewhere)
CGROUP_ROOT = "/sys/fs/cgroup"
_CGROUP_UNLIMITED = 1 << 60  # v1 says "no limit" with a number near 2^63


def physical_memory() -> int:
    """Bytes of RAM (sysconf; 8 GiB where the system does not say)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return 8 << 30


def _read_limit(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    if not text.isdigit() or int(text) >= _CGROUP_UNLIMITED:
        return None  # "max" (v2), a v1 "unlimited", or garbage
    return int(text)


def cgroup_memory_limit(root: Path | str | None = None,
                        proc_cgroup: Path | str = "/proc/self/cgroup") -> int | None:
    """The memory limit of this process's cgroup, the lowest on its way up to the
    hierarchy's root (v2 `memory.max`, v1 `memory/memory.limit_in_bytes`); None when there
    is none. `root` (default $NNRT_CGROUP_ROOT, else /sys/fs/cgroup): where cgroupfs is.
    Inside a container the path /proc/self/cgroup names may not exist under the mount (the
    container's own cgroup is the root there): the directories that do exist are read."""
    base = Path(root if root is not None else os.environ.get(CGROUP_ROOT_ENV) or CGROUP_ROOT)
    try:
        lines = Path(proc_cgroup).read_text().splitlines()
    except OSError:
        lines = []
    candidates: list[Path] = []
    for line in lines:
        hierarchy, _, rest = line.partition(":")
        controllers, _, cgroup = rest.partition(":")
        if hierarchy == "0" and controllers == "":
            where, name = base, "memory.max"  # v2 (unified)
        elif "memory" in controllers.split(","):
            where, name = base / "memory", "memory.limit_in_bytes"  # v1
        else:
            continue
        directory = where / cgroup.strip("/")
        while True:
            candidates.append(directory / name)
            if directory == where:
                break
            directory = directory.parent
    if not lines:  # no /proc: the mount's root alone
        candidates = [base / "memory.max", base / "memory" / "memory.limit_in_bytes"]
    limits = [limit for limit in map(_read_limit, candidates) if limit is not None]
    return min(limits) if limits else None


def memory_basis() -> tuple[int, str]:
    """The memory the default budgets are a fraction of, and what it is: the cgroup's
    memory limit when the process runs under one lower than the RAM, else the RAM."""
    ram, limit = physical_memory(), cgroup_memory_limit()
    if limit is not None and limit < ram:
        return limit, "the cgroup memory limit"
    return ram, "the physical memory"


def default_driver_limit() -> int:
    return int(memory_basis()[0] * DRIVER_FRACTION)


def default_session_limit(driver_limit: int) -> int:
    return int(driver_limit * SESSION_FRACTION)
