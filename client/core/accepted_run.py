"""What every accepted asynchronous run shares, on one device (execution.AsyncRun) or over the
steps of several (hetero.HeteroAsyncRun): the caller's tensors and callbacks, one deadline, a
ticket that cancels it, and completion exactly once — whoever `claim`s first (the run's own
worker, the deadline thread, the driver's death) `deliver`s, and the executor is let go."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from .driver import RunTicket
from .errors import OH_NN_SUCCESS, NNRtError, OH_NN_ReturnCode
from .prepared_model import PreparedModel

log = logging.getLogger(__name__)


def notify(callback: Callable | None, name: str, *args: Any) -> None:
    """Call an application's callback (`name` for the log); what it raises is logged, never
    passed on: the run's bookkeeping goes on."""
    if callback is None:
        return
    try:
        callback(*args)
    except Exception:
        log.exception("%s callback raised", name)


class AcceptedRun:
    """An accepted asynchronous run. `error` is why it failed (the exception a synchronous
    run would raise); `cancel()` has the driver abandon it — it still completes once."""

    __slots__ = ("executor", "inputs", "outputs", "count", "deadline", "timeout_ms",
                 "user_data", "on_done", "on_died", "_lock", "done", "error", "ticket",
                 "__weakref__")

    def __init__(self, executor: PreparedModel, inputs: list, outputs: list, timeout_ms: int,
                 user_data: Any, on_done: Callable | None, on_died: Callable | None) -> None:
        self.executor = executor
        self.inputs = inputs
        self.outputs = outputs  # the very handles passed in (identity holds)
        self.count = len(outputs)
        self.timeout_ms = timeout_ms
        self.deadline = time.monotonic() + timeout_ms / 1000
        self.user_data = user_data
        self.on_done = on_done
        self.on_died = on_died
        self._lock = threading.Lock()
        self.done = False
        self.error: NNRtError | None = None
        self.ticket = RunTicket()

    @property
    def label(self) -> str:
        """What the run's messages name (its device, or its devices)."""
        return self.executor.device.name

    def cancel(self) -> None:
        """Have the driver abandon the run (from any thread). It still completes once, when
        the driver has answered — with RunCancelled (OH_NN_FAILED) unless it finished first —
        so that its tensors are not reused while the driver may write them."""
        self.ticket.cancel()

    def claim(self) -> bool:
        """True for the one caller that decides the outcome."""
        with self._lock:
            if self.done:
                return False
            self.done = True
        self.claimed()
        return True

    def time_left(self) -> float | None:
        """Seconds left before the deadline for a run still undecided; None when it is
        decided, or late (the deadline thread completes it)."""
        if self.done:
            return None
        remaining = self.deadline - time.monotonic()
        return remaining if remaining > 0 else None

    def claimed(self) -> None:
        """What a run does once its outcome is decided (nothing here)."""

    def deliver(self, code: int, died: bool = False, error: NNRtError | None = None) -> None:
        """Call the callbacks (once, after a successful claim) and let the executor go."""
        if code != OH_NN_SUCCESS:
            self.error = error or NNRtError(code, f"{self.label}: the run failed")
        try:
            if died:
                notify(self.on_died, "NN_OnServiceDied", self.user_data)
            notify(self.on_done, "NN_OnRunDone", self.user_data, OH_NN_ReturnCode(code),
                   self.outputs, self.count)
        finally:
            self.executor.leave()
