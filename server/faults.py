"""Fault injection for crash, timeout and recovery tests. Off unless an option turns it on.

* `--fault-run-delay-ms N`: every Run sleeps N ms before computing. The sleep honours the
  run's cancellation (its client's deadline), so it models a slow device that abandons
  work it was told to drop.
* `--fault-run-hang`: every Run blocks forever and ignores cancellation: a wedged device.
* `--fault-exit-on-run N` / `--fault-exit-on-prepare N`: the process kills itself with
  SIGKILL at the start of the Nth Run / Prepare* call (counted from 1, from the start of
  the process or from the SetFaults that set them): a crash, with no cleanup at all —
  sockets stay on disk, clients see end-of-file.
* `--fault-exit-on-run-probability P`: SIGKILL at the start of any Run with probability P
  (random draws seeded by `--fault-seed N`, for reproducible tests).
* `--fault-exit-on-export-cache`: SIGKILL in ExportModelCache, once the model is found.
* `--fault-device-status S`: GetDeviceStatus answers S (available, busy, offline, unknown).
* `--fault-device-busy`: Prepare* and Run answer NNRT_DEVICE_BUSY before doing anything (a
  refused call is not counted by the exit-on-Nth faults).
* `--fault-corrupt-exported-cache`: model-cache blobs serialised while it is in force get
  their last byte flipped, so PrepareModelFromModelCache refuses them later with
  NNRT_INVALID_MODEL_CACHE (blobs exported before stay as they are: a model is serialised
  once).
* `--fault-slow-start-ms N`: the driver waits N ms before it claims its sockets (applied by
  main.py; start-time only, so not part of the runtime configuration).
* `--fault-admit-delay-ms N`: every Prepare* waits N ms once the device has prepared the
  model, before its session takes it: the end of a slow compile, during which the session
  may close (start-time only, as the slow start).

The faults in force are one immutable `Faults` value that `FaultInjection.apply` replaces
atomically (the admin service's SetFaults); every hook reads one snapshot, so a call never
sees half of an old configuration and half of a new one. Applying restarts the counters of
the exit-on-Nth faults. Whether faults may be changed at runtime at all (`allowed`) is
decided once, at start: `--fault-injection` or any `--fault-*` option.
"""

from __future__ import annotations

import logging
import os
import random
import signal
import threading
import time

from nnrt.hdi.device import CancelCheck
from nnrt.common.errors import NNRT_DEVICE_BUSY, NNRT_TIME_OUT, DriverError
from nnrt.common.faults import Faults

log = logging.getLogger(__name__)

class FaultInjection:
    """The faults in force, changeable at runtime, and the hooks the servicers call."""

    def __init__(self, faults: Faults | None = None, *, allowed: bool | None = None,
                 seed: int | None = None, slow_start_ms: int = 0, admit_delay_ms: int = 0,
                 **fields) -> None:
        """`FaultInjection(run_delay_ms=500)` or `FaultInjection(Faults(...), allowed=True)`.

        `allowed` (may SetFaults change the faults?) defaults to whether any fault is set.
        """
        if faults is None:
            faults = Faults(**fields)
        elif fields:
            raise TypeError("give a Faults value or its fields, not both")
        if slow_start_ms < 0 or admit_delay_ms < 0:
            raise ValueError("slow_start_ms and admit_delay_ms must be >= 0")
        self._faults = faults
        # Whether any fault is in force, as a plain attribute: the run path's fast lane
        # (Runner.run_known) reads it once a run, where a property call costs more than it.
        self.armed = faults.any
        self.slow_start_ms = slow_start_ms
        self.admit_delay_ms = admit_delay_ms
        self.seed = seed
        self.allowed = bool(faults.any or slow_start_ms or admit_delay_ms or seed is not None) \
            if allowed is None else allowed
        self._random = random.Random(seed)
        self._runs = 0
        self._prepares = 0
        self._lock = threading.Lock()

    # -- the configuration ---------------------------------------------------------------

    @property
    def faults(self) -> Faults:
        return self._faults

    @property
    def enabled(self) -> bool:
        """Whether any fault is in force now."""
        return self._faults.any

    def describe(self) -> str:
        text = self._faults.describe()
        if self.admit_delay_ms:
            text = f"a prepared model waits {self.admit_delay_ms} ms for its session, {text}"
        if self.slow_start_ms:
            text = f"start delayed {self.slow_start_ms} ms, {text}"
        return text

    def apply(self, faults: Faults) -> None:
        """Replace the faults in force (the caller checked `allowed`); the counters restart,
        and so do the random draws when a seed was given."""
        with self._lock:
            self._faults = faults
            self.armed = faults.any
            self._runs = 0
            self._prepares = 0
            if self.seed is not None:
                self._random.seed(self.seed)

    # -- hooks -----------------------------------------------------------------------------

    def _crash(self, what: str) -> None:
        log.critical("FAULT INJECTION: killing this driver (SIGKILL) at %s", what)
        logging.shutdown()
        os.kill(os.getpid(), signal.SIGKILL)

    def device_status(self, real: int) -> int:
        override = self._faults.device_status
        return real if override is None else override

    def on_prepare(self) -> None:
        if not self._faults.any:
            return
        with self._lock:  # the snapshot and its counter together
            faults = self._faults
            if faults.device_busy:
                raise DriverError(NNRT_DEVICE_BUSY, "device busy (fault injection)")
            self._prepares += 1
            count = self._prepares
        if faults.exit_on_prepare and count == faults.exit_on_prepare:
            self._crash(f"Prepare #{count}")

    def on_admit(self) -> None:
        """Between the device's prepare and the session taking the model."""
        if self.admit_delay_ms:
            log.warning("FAULT INJECTION: a prepared model waits %d ms for its session",
                        self.admit_delay_ms)
            time.sleep(self.admit_delay_ms / 1000)

    def on_run(self, cancelled: CancelCheck) -> None:
        if not self._faults.any:
            return
        with self._lock:
            faults = self._faults
            if faults.device_busy:
                raise DriverError(NNRT_DEVICE_BUSY, "device busy (fault injection)")
            self._runs += 1
            count = self._runs
            draw = self._random.random() if faults.exit_on_run_probability else 1.0
        if faults.exit_on_run and count == faults.exit_on_run:
            self._crash(f"Run #{count}")
        if draw < faults.exit_on_run_probability:
            self._crash(f"Run #{count} (probability {faults.exit_on_run_probability:g})")
        if faults.run_hang:
            log.warning("FAULT INJECTION: Run #%d hangs", count)
            threading.Event().wait()
        if faults.run_delay_ms:
            deadline = time.monotonic() + faults.run_delay_ms / 1000
            while (left := deadline - time.monotonic()) > 0:
                if cancelled():
                    log.info("Run #%d abandoned during its injected delay", count)
                    raise DriverError(NNRT_TIME_OUT, f"run #{count} abandoned: its caller gave up")
                time.sleep(min(left, 0.002))

    def on_export_cache(self) -> None:
        if self._faults.exit_on_export_cache:
            self._crash("ExportModelCache")

    def exported_blob(self, blob: bytes) -> bytes:
        """A model-cache blob as it leaves the driver: corrupted when that fault is in force."""
        if not self._faults.corrupt_exported_cache or not blob:
            return blob
        log.warning("FAULT INJECTION: flipping the last byte of a %d-byte model cache", len(blob))
        corrupted = bytearray(blob)
        corrupted[-1] ^= 0xFF
        return bytes(corrupted)

