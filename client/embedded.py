"""Embedded default drivers: when no driver is running, start our own as child processes.

Trying nnrt needs no daemon: `EmbeddedDrivers` starts `nnrt-driver <kind>` for each default
kind in a private runtime directory, waits (bounded) until each serves, and stops them —
SIGTERM, then SIGKILL after a bound — when the block ends or the process exits. Set
`NNRT_NO_EMBEDDED=1` to switch this off.
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from nnrt.client.hdi import DriverClient, DriverGone
from nnrt.server.runtime_dir import driver_names, runtime_dir

log = logging.getLogger(__name__)

DEFAULT_KINDS = ("cpu",)
DISABLE_ENV = "NNRT_NO_EMBEDDED"
START_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0


def embedded_disabled() -> bool:
    return os.environ.get(DISABLE_ENV, "") not in ("", "0")


class EmbeddedDrivers:
    """Child driver processes in a private runtime directory."""

    def __init__(self, kinds: Sequence[str] = DEFAULT_KINDS) -> None:
        self.kinds = tuple(kinds)
        self.directory: Path | None = None
        self._procs: list[subprocess.Popen] = []

    def start(self) -> Path:
        self.directory = Path(tempfile.mkdtemp(prefix="nnrt-embedded-"))
        atexit.register(self.stop)
        for kind in self.kinds:
            proc = subprocess.Popen(
                [sys.executable, "-m", "nnrt.server", kind, "--runtime-dir", str(self.directory),
                 "--log-level", "WARNING"],
                stdin=subprocess.DEVNULL,
            )
            self._procs.append(proc)
        deadline = time.monotonic() + START_TIMEOUT
        for kind, proc in zip(self.kinds, self._procs):
            while True:
                if proc.poll() is not None:
                    self.stop()
                    raise RuntimeError(f"embedded {kind} driver exited with {proc.returncode}")
                try:
                    DriverClient.connect(kind, self.directory, timeout=1.0).close()
                    break
                except DriverGone:
                    if time.monotonic() > deadline:
                        self.stop()
                        raise RuntimeError(f"embedded {kind} driver not ready in {START_TIMEOUT} s")
                    time.sleep(0.05)
        return self.directory

    def stop(self) -> None:
        for proc in self._procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self._procs:
            try:
                proc.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        self._procs.clear()
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None

    def __enter__(self) -> Path:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def find_or_start(kinds: Sequence[str] = DEFAULT_KINDS) -> tuple[Path, EmbeddedDrivers | None]:
    """The runtime directory to use, and the embedded drivers started for it (if any)."""
    directory = runtime_dir()
    if driver_names(directory):
        return directory, None
    if embedded_disabled():
        raise RuntimeError(f"no driver in {directory} and {DISABLE_ENV} is set")
    embedded = EmbeddedDrivers(kinds)
    started = embedded.start()
    # Visible by default: the application runs on drivers of its own, not the system's.
    log.warning("no driver in %s: started the embedded default driver(s) %s in %s, stopped at "
                "exit (set %s=1 to disable)", directory, ", ".join(kinds), started, DISABLE_ENV)
    return started, embedded
