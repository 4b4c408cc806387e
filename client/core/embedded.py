"""Embedded default drivers: when no driver is running, start our own as child processes.

Trying nnrt needs no daemon: `EmbeddedDrivers` starts `nnrt-driver <kind>` for each default
kind in a private runtime directory, waits (bounded) until each serves, and stops them —
SIGTERM, then SIGKILL after a bound — when the block ends or the process exits. Set
`NNRT_NO_EMBEDDED=1` to switch this off.

Decisions:

* **They die with the application.** Each driver gets `--lifeline-fd N`: the read end of a
  pipe whose only write end this process holds (close-on-exec, so programs it runs do not
  keep it). However the application ends — exit, exception, SIGKILL — the kernel closes the
  write end, the driver reads EOF and stops as at SIGTERM (server/main.py). Not
  `PR_SET_PDEATHSIG`: that fires when the *thread* that forked exits, so an application that
  first lists devices from a short-lived thread (an executor's worker, say) would lose its
  driver while still running. A child the application `fork()`s without exec inherits the
  write end and keeps the drivers alive until it exits too; it may be using them.
* **No inherited stdio.** stdin and stdout are /dev/null and stderr (WARNING and above) goes
  to `<private dir>/<kind>.log`, so a parent that captures the application's output sees EOF
  when the application ends, never waits on a driver. The log is relayed to this module's
  logger when the drivers stop (and quoted when one fails to start), then removed with the
  private directory. Each driver runs in a session of its own: a terminal's Ctrl-C is the
  application's to handle; the lifeline ends the driver when the application goes.
* **Nothing of the application's directory.** The driver starts in `/` with `python -P`
  (common/devmgr_cli.py `module_argv`): `-m` alone would put the application's working
  directory first on the driver's `sys.path`, so an `argparse.py` or `numpy.py` lying there
  would run inside the driver.
* **When they start** (`find_or_start`): only when the runtime directory shows no sign of a
  driver or a device manager — no `*.sock`, no `*.session`, no `devmgr.ctl`, no `*.pid` or
  `*.lock` file (or no directory at all). If there is a sign but no driver serves yet, and
  something there is alive (a device manager answering on `devmgr.ctl`, a driver socket
  accepting while its pair is not there yet, a pid or lock file that is held: flock'ed, or
  naming a live process), we wait up to
  `NNRT_EMBEDDED_WAIT` seconds (default 10) for a driver to appear, and then use that
  directory whatever we found: a starting or restarting driver or device manager is never
  raced by a private one. Stale sockets alone (a driver that died) mean the same directory,
  without waiting, and a warning naming them. The choice is made once per process
  (per `DeviceRegistry`), so a driver that restarts later is never replaced by an embedded
  one. A driver started by hand that has not bound its sockets yet is seen by its name lock:
  every driver holds `flock` on `<name>.lock` from the first moment of its start
  (common/runtime_dir.py), so it is a held lock file here; the device manager's control
  socket covers its drivers.
* **Leftovers.** A private directory records its application's pid (`owner`); one whose
  application is dead and whose sockets nobody serves (the drivers followed their lifeline)
  is removed when the next embedded driver starts.
"""

from __future__ import annotations

import atexit
import fcntl
import logging
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from .driver import DriverClient, DriverGone
from nnrt.common.devmgr_cli import CHILD_CWD, module_argv
from nnrt.common.runtime_dir import (
    GRPC_SUFFIX,
    LOCK_SUFFIX,
    SESSION_SUFFIX,
    driver_names,
    lock_held,
    runtime_dir,
    stale_socket,
)

# Not under `nnrt.client`, whose loggers print nothing unless the application configures
# logging: that a child process was started for the application must be said anyway.
log = logging.getLogger("nnrt.embedded")

DEFAULT_KINDS = ("cpu",)
DISABLE_ENV = "NNRT_NO_EMBEDDED"
WAIT_ENV = "NNRT_EMBEDDED_WAIT"
DEFAULT_WAIT = 10.0
START_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0
PREFIX = "nnrt-embedded-"
OWNER_FILE = "owner"
DEVMGR_CTL = "devmgr.ctl"  # common/devmgr_ctl.py's CTL_NAME (not imported: keeps this light)
_RELAYED_LINES = 50


def embedded_disabled() -> bool:
    return os.environ.get(DISABLE_ENV, "") not in ("", "0")


def _wait_bound() -> float:
    try:
        return max(0.0, float(os.environ.get(WAIT_ENV, DEFAULT_WAIT)))
    except ValueError:
        log.warning("%s=%r is not a number of seconds: using %s", WAIT_ENV,
                    os.environ.get(WAIT_ENV), DEFAULT_WAIT)
        return DEFAULT_WAIT


def _live(path: Path, kind: int) -> bool:
    """Whether something accepts connections on the Unix socket at `path`."""
    try:
        return not stale_socket(path, kind, 0.5)
    except OSError:
        return True  # a full backlog or a slow peer: someone is there


def signs_of_drivers(directory: Path) -> list[Path]:
    """The files of `directory` that show a driver or a device manager uses it."""
    try:
        entries = list(directory.iterdir())
    except OSError:
        return []
    return sorted(p for p in entries
                  if p.name == DEVMGR_CTL or p.suffix in (GRPC_SUFFIX, SESSION_SUFFIX, ".pid",
                                                          ".lock"))


def _claimed(path: Path) -> bool:
    """Whether a pid or lock file is held. A `.lock` file (a driver's name lock,
    common/runtime_dir.py): held while someone holds its flock, whatever pid it names (a
    killed driver's file is stale, and its pid may be reused). A `.pid` file: flock'ed, or
    naming a live process. Unreadable or unparsable: assume held (waiting is bounded; racing
    is not undone)."""
    if path.suffix == LOCK_SUFFIX:
        return lock_held(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return True
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(fd, fcntl.LOCK_UN)
        text = os.read(fd, 64).decode(errors="replace").split()
    except OSError:
        return True
    finally:
        os.close(fd)
    if not text or not text[0].isdigit():
        return path.suffix == ".pid"  # an empty lock file not locked: nobody holds it
    try:
        os.kill(int(text[0]), 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # alive, another user's
    return True


def _something_starting(directory: Path, signs: list[Path]) -> bool:
    """Whether a sign is alive: a device manager answering, a driver socket accepting, a pid
    or lock file (a driver or device manager between claiming its name and serving)."""
    for path in signs:
        if path.suffix in (".pid", ".lock"):
            if _claimed(path):
                return True
            continue
        kind = socket.SOCK_SEQPACKET if path.suffix == SESSION_SUFFIX else socket.SOCK_STREAM
        if _live(path, kind):
            return True
    return False


def may_embed(directory: Path, wait: float | None = None) -> bool:
    """The rules of the module docstring: True when `directory` shows no sign of a driver or
    device manager; otherwise (after a bounded wait when something there is starting) False."""
    signs = signs_of_drivers(directory)
    if not signs:
        return True
    if driver_names(directory) and any(_live(p, socket.SOCK_STREAM) for p in signs
                                       if p.suffix == GRPC_SUFFIX):
        return False
    if _something_starting(directory, signs):
        bound = _wait_bound() if wait is None else wait
        log.info("%s: a driver or device manager is starting (%s); waiting up to %.1f s",
                 directory, ", ".join(p.name for p in signs), bound)
        deadline = time.monotonic() + bound
        while time.monotonic() < deadline:
            if driver_names(directory):
                return False
            time.sleep(0.05)
        log.warning("%s: no driver serves after %.1f s (%s): using it anyway, no embedded "
                    "driver (devices appear when its drivers serve)", directory, bound,
                    ", ".join(p.name for p in signs))
        return False
    log.warning("%s: only stale files of a driver or device manager that died (%s): using "
                "it, no embedded driver; remove them to get the embedded one", directory,
                ", ".join(p.name for p in signs))
    return False


def _owner_alive(directory: Path) -> bool:
    try:
        pid = int((directory / OWNER_FILE).read_text())
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (OSError, ValueError):
        return True  # unreadable, or not ours to signal: leave it alone
    return True


def sweep_leftovers(parent: Path | None = None) -> list[Path]:
    """Remove private directories of dead applications whose drivers are gone too."""
    parent = Path(tempfile.gettempdir()) if parent is None else parent
    removed = []
    for directory in parent.glob(f"{PREFIX}*"):
        try:
            st = directory.lstat()
        except OSError:
            continue
        if not directory.is_dir() or directory.is_symlink() or st.st_uid != os.getuid():
            continue
        if not (directory / OWNER_FILE).exists() or _owner_alive(directory):
            continue
        if any(_live(p, socket.SOCK_STREAM) for p in directory.glob(f"*{GRPC_SUFFIX}")):
            continue  # a driver still stopping: next time
        shutil.rmtree(directory, ignore_errors=True)
        log.info("removed %s, left by an application that died", directory)
        removed.append(directory)
    return removed


class EmbeddedDrivers:
    """Child driver processes in a private runtime directory, tied to this process."""

    def __init__(self, kinds: Sequence[str] = DEFAULT_KINDS) -> None:
        self.kinds = tuple(kinds)
        self.directory: Path | None = None
        self._procs: list[subprocess.Popen] = []
        self._lifeline: int | None = None  # the pipe's write end; closed = "we are gone"

    def start(self) -> Path:
        sweep_leftovers()
        self.directory = Path(tempfile.mkdtemp(prefix=PREFIX))
        (self.directory / OWNER_FILE).write_text(str(os.getpid()))
        atexit.register(self.stop)
        read_end, self._lifeline = os.pipe()  # both close-on-exec; read_end passed explicitly
        try:
            for kind in self.kinds:
                with open(self.directory / f"{kind}.log", "ab") as stderr:
                    proc = subprocess.Popen(
                        [*module_argv("nnrt.server"), kind, "--runtime-dir",
                         str(self.directory), "--log-level", "WARNING",
                         "--lifeline-fd", str(read_end)],
                        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
                        pass_fds=(read_end,), start_new_session=True, cwd=CHILD_CWD,
                    )
                self._procs.append(proc)
        except OSError:
            self.stop()
            raise
        finally:
            os.close(read_end)
        deadline = time.monotonic() + START_TIMEOUT
        for kind, proc in zip(self.kinds, self._procs):
            while True:
                if proc.poll() is not None:
                    tail = self._log_tail(kind)
                    self.stop()
                    raise RuntimeError(f"embedded {kind} driver exited with {proc.returncode}"
                                       + (f":\n{tail}" if tail else ""))
                try:
                    DriverClient.connect(kind, self.directory, timeout=1.0).close()
                    break
                except DriverGone:
                    if time.monotonic() > deadline:
                        tail = self._log_tail(kind)
                        self.stop()
                        raise RuntimeError(f"embedded {kind} driver not ready in "
                                           f"{START_TIMEOUT} s" + (f":\n{tail}" if tail else ""))
                    time.sleep(0.05)
        return self.directory

    def _log_tail(self, kind: str) -> str:
        if self.directory is None:
            return ""
        try:
            lines = (self.directory / f"{kind}.log").read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(lines[-_RELAYED_LINES:])

    @property
    def pids(self) -> list[int]:
        return [proc.pid for proc in self._procs]

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
        if self._lifeline is not None:
            os.close(self._lifeline)
            self._lifeline = None
        for kind in self.kinds if self._procs else ():
            tail = self._log_tail(kind)
            if tail:
                log.warning("embedded %s driver's log:\n%s", kind, tail)
        self._procs.clear()
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None

    def __enter__(self) -> Path:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


_announced = False  # the notice below has been said in this process (by us or the caller)


def find_or_start(kinds: Sequence[str] = DEFAULT_KINDS, *,
                  announce: bool = True) -> tuple[Path, EmbeddedDrivers | None]:
    """The runtime directory to use, and the embedded drivers started for it (if any): the
    configured one unless it shows no sign of a driver or device manager (module docstring).
    RuntimeError when embedded drivers are needed but switched off or fail to start.

    The notice that embedded drivers were started is a WARNING once per process; later
    starts in the same process log at INFO. `announce=False`: the caller says it itself (the
    `nnrt` commands, in their own words), which counts as the once."""
    directory = runtime_dir()
    if not may_embed(directory):
        return directory, None
    if embedded_disabled():
        raise RuntimeError(f"no driver in {directory} and {DISABLE_ENV} is set")
    embedded = EmbeddedDrivers(kinds)
    started = embedded.start()
    # Visible by default: the application runs on drivers of its own, not the system's.
    global _announced
    if announce:
        log.log(logging.INFO if _announced else logging.WARNING,
                "no driver in %s: started the embedded default driver(s) %s in %s, stopped "
                "at exit (set %s=1 to disable)", directory, ", ".join(kinds), started,
                DISABLE_ENV)
    _announced = True
    return started, embedded
