"""The cores the host's run scheduler granted the run being computed.

The host (server/run_scheduler.py) grants each run a number of cores and computes it inside
`with_cores`; a device reads `granted_cores()` during the run to size its threads (the CPU
driver runs single-threaded kernels when it got one core).
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from typing import TypeVar

T = TypeVar("T")

_granted: ContextVar[int | None] = ContextVar("nnrt_granted_cores", default=None)


def granted_cores() -> int | None:
    """The cores the current run was granted (None: no budget, or outside a run)."""
    return _granted.get()


def with_cores(cores: int, compute: Callable[[], T]) -> T:
    """Compute with `cores` granted (what `granted_cores()` answers inside)."""
    token = _granted.set(cores)
    try:
        return compute()
    finally:
        _granted.reset(token)
