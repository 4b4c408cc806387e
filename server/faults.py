"""Fault injection for crash, timeout and recovery tests. Off unless an option turns it on.

* `--fault-run-delay-ms N`: every Run sleeps N ms before computing. The sleep honours the
  run's cancellation (its client's deadline), so it models a slow device that abandons
  work it was told to drop.
* `--fault-run-hang`: every Run blocks forever and ignores cancellation: a wedged device.
* `--fault-exit-on-run N` / `--fault-exit-on-prepare N`: the process kills itself with
  SIGKILL at the start of the Nth Run / Prepare* call (counted from 1 over the process):
  a crash, with no cleanup at all — sockets stay on disk, clients see end-of-file.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from dataclasses import dataclass, field

from nnrt.server.device import CancelCheck
from nnrt.server.errors import NNRT_TIME_OUT, DriverError

log = logging.getLogger(__name__)


@dataclass
class FaultInjection:
    run_delay_ms: int = 0
    run_hang: bool = False
    exit_on_run: int = 0
    exit_on_prepare: int = 0
    _runs: int = field(default=0, init=False)
    _prepares: int = field(default=0, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    @property
    def enabled(self) -> bool:
        return bool(self.run_delay_ms or self.run_hang or self.exit_on_run or self.exit_on_prepare)

    def describe(self) -> str:
        parts = []
        if self.run_delay_ms:
            parts.append(f"Run delayed {self.run_delay_ms} ms")
        if self.run_hang:
            parts.append("Run hangs forever")
        if self.exit_on_run:
            parts.append(f"SIGKILL on Run #{self.exit_on_run}")
        if self.exit_on_prepare:
            parts.append(f"SIGKILL on Prepare #{self.exit_on_prepare}")
        return ", ".join(parts)

    def _crash(self, what: str) -> None:
        log.critical("FAULT INJECTION: killing this driver (SIGKILL) at %s", what)
        logging.shutdown()
        os.kill(os.getpid(), signal.SIGKILL)

    def on_prepare(self) -> None:
        if not self.exit_on_prepare:
            return
        with self._lock:
            self._prepares += 1
            count = self._prepares
        if count == self.exit_on_prepare:
            self._crash(f"Prepare #{count}")

    def on_run(self, cancelled: CancelCheck) -> None:
        if not self.enabled:
            return
        with self._lock:
            self._runs += 1
            count = self._runs
        if self.exit_on_run and count == self.exit_on_run:
            self._crash(f"Run #{count}")
        if self.run_hang:
            log.warning("FAULT INJECTION: Run #%d hangs", count)
            threading.Event().wait()
        if self.run_delay_ms:
            deadline = time.monotonic() + self.run_delay_ms / 1000
            while (left := deadline - time.monotonic()) > 0:
                if cancelled():
                    log.info("Run #%d abandoned during its injected delay", count)
                    raise DriverError(NNRT_TIME_OUT, f"run #{count} abandoned: its caller gave up")
                time.sleep(min(left, 0.002))
