"""When onnxruntime's pool threads spin on after a run (`--ort-spin auto|on|off`).

A run given every core computes on a session with a pool of `--threads` threads. Spinning
on after the run (onnxruntime's own default) has the next run find them awake; sleeping at
its end has every run wake them on another CPU first, which on a VM is slow whenever the
machine idled (benchmarks/models.py's default rounds, ten calls after a pause: an MLP 3.0
ms against 0.50 spinning, ResNet 4.7 against 1.5) and costs a small graph more than the
second thread gains, so that it computes on one. Spinning costs a CPU for the ~35 ms the
pool spins after each run, which is no loss where that CPU is spare and a core taken from
another process where it is not (issue 32: "spinning only where it costs no other process
a core").

* auto (the default): the pool spins on after a run, and a run takes the pool only while
  the CPUs it needs are free — the machine's runnable tasks other than this run's thread
  and a pool still spinning from the last run, plus the run's threads, fit the CPUs
  (`common/cpus.py`, the kernel's count); otherwise it computes on its single-threaded
  session, and the pool, last used before the machine got busy, spins out its ~35 ms once
  and sleeps.
* on: the pool spins on after every run given every core (a driver that owns the machine).
* off: the pool spins within a run and sleeps at its end (the cores left to others, at the
  latency above).
"""

from __future__ import annotations

import os
import time

from nnrt.common.cpus import spare_cpu

MODES = ("auto", "on", "off")
ENV = "NNRT_ORT_SPIN"
POOL_SPIN_S = 0.05  # how long a pool spins on after a run (~30-40 ms measured) and then some
_ENV_WORDS = {"": None, "auto": "auto", "on": "on", "1": "on", "off": "off", "0": "off"}

_mode = "off"  # what sessions made outside a driver get (a driver configures its own)
# pools that may still spin from their last run: id(session) -> (perf_counter time, threads
# spinning); a model of several onnxruntime segments has a pool per segment
_spinning: dict[int, tuple[float, int]] = {}


def mode_from_env(text: str | None) -> str | None:
    """$NNRT_ORT_SPIN as a mode (None: unset); ValueError for anything but auto, on, off,
    1 or 0."""
    word = (text or "").strip().lower()
    if word not in _ENV_WORDS:
        raise ValueError(f"${ENV}={text!r} is not one of auto, on, off (or 1, 0)")
    return _ENV_WORDS[word]


def configure(mode: str) -> None:
    """The mode of the sessions made from now on."""
    global _mode
    if mode not in MODES:
        raise ValueError(f"onnxruntime pool spinning {mode!r} is not one of {', '.join(MODES)}")
    _mode = mode


def mode() -> str:
    return _mode


def spins_on() -> bool:
    """Whether pools spin on after a run (session.force_spinning_stop off)."""
    return _mode != "off"


def may_go_wide(threads: int) -> bool:
    """Whether a run allowed every core may take a pool of `threads` now: always, unless
    `auto` and the CPUs it needs are not free."""
    if _mode != "auto":
        return True
    probe = spare_cpu()
    ours = 1 + pools_spinning()  # this run's thread, and our pools that spin on
    # Read now, not up to 1 ms ago (the client that sent this run was running then, and is
    # asleep waiting for it now); and once more after yielding the CPU when that says no:
    # the thread that handed this run over is often still on its way to sleep at the first
    # look (measured: 2 runnable, then 1), a task that needs a CPU is still there.
    for look in range(2):
        runnable = probe.runnable(fresh=True)
        if runnable is None:  # no count, or one CPU of our own: nobody spins
            return False
        if max(0, runnable - ours) + threads <= probe.cpus:
            return True
        if look == 0:
            os.sched_yield()
    return False


def pools_spinning() -> int:
    """How many pool threads of ours may spin now (after their last run)."""
    now = time.perf_counter()
    for key in [key for key, (until, _) in list(_spinning.items()) if until <= now]:
        _spinning.pop(key, None)
    return sum(threads for _, threads in list(_spinning.values()))


def went_wide(pool: object, threads: int) -> None:
    """A run took `pool` (a session with `threads` intra-op threads, the caller's among
    them): its other threads spin on for a while after the run (kept only where it is
    asked: in auto, whose every look also forgets the pools that have spun out)."""
    if _mode == "auto":
        _spinning[id(pool)] = (time.perf_counter() + POOL_SPIN_S, threads - 1)
