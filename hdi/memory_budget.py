"""Device memory as a budget: what a driver holds on its device, counted against a limit, so
that what does not fit is refused with NNRT_OUT_OF_MEMORY up front (and logged with the
sizes) instead of failing somewhere inside the device, and what is held keeps working."""

from __future__ import annotations

import logging
import threading

from nnrt.common.errors import NNRT_OUT_OF_MEMORY, DriverError

log = logging.getLogger(__name__)


class MemoryBudget:
    """Bytes of device memory held by the driver, against a limit."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self.peak = 0
        self._lock = threading.Lock()

    def reserve(self, nbytes: int, what: str) -> None:
        with self._lock:
            if self.used + nbytes > self.limit:
                message = (f"{what}: {nbytes} bytes of device memory needed, "
                           f"{self.limit - self.used} of {self.limit} free")
                log.warning("NNRT_OUT_OF_MEMORY: %s", message)
                raise DriverError(NNRT_OUT_OF_MEMORY, message)
            self.used += nbytes
            self.peak = max(self.peak, self.used)

    def release(self, nbytes: int) -> None:
        with self._lock:
            self.used -= nbytes
