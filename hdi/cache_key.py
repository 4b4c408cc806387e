"""The driver's cache key: what authenticates every blob the driver makes and later takes back
from a client (model caches: hdi/sealed_blob.py `seal_keyed`).

A client holds its model caches and hands them back at PrepareModelFromModelCache: without
proof that the driver wrote them, a crafted blob would be parsed, loaded by onnxruntime or
OpenCL, and trusted as the driver's own work. So each one carries an HMAC-SHA256 under a
random 32-byte key that only the driver can read:

* The key lives in the driver's state directory as `cache.key` (mode 0600, owned by the
  driver's user): `--state-dir`, else `$NNRT_STATE_DIR`, else systemd's `$STATE_DIRECTORY`
  (`StateDirectory=nnrt`: /var/lib/nnrt, kept across reboots), else the runtime directory
  (kept while the machine runs: caches made before a reboot are refused, and rebuilt).
* It is created on first use, atomically (two drivers starting together agree on one).
* A key file that is not a regular file of 32 bytes with one link, owned by this user and
  readable by nobody else, may have been read or planted: it is replaced by a new key
  (caches made with the old one are refused from then on), with a warning.
* Where no key file can be kept (the directory is unsafe or not writable), the driver uses
  a key of its own process and says so: its caches are then refused once it exits.
* A process that is not a driver (a tool, a unit test) that never `configure`s uses a key of
  its own process.
"""

from __future__ import annotations

import logging
import os
import secrets
import stat
import threading
from pathlib import Path

log = logging.getLogger(__name__)

KEY_FILE = "cache.key"
KEY_BYTES = 32
STATE_ENV = "NNRT_STATE_DIR"
SYSTEMD_STATE_ENV = "STATE_DIRECTORY"  # set by systemd for StateDirectory=


def state_dir(option: Path | None, runtime_dir: Path) -> Path:
    """Where the driver keeps its key: the option, the environment, or its runtime dir."""
    if option is not None:
        return Path(option)
    if os.environ.get(STATE_ENV):
        return Path(os.environ[STATE_ENV])
    systemd = os.environ.get(SYSTEMD_STATE_ENV, "").split(":")[0]
    return Path(systemd) if systemd else Path(runtime_dir)


class UnusableKey(Exception):
    """The key file can be neither read nor created (the reason says why)."""


def _directory_problem(directory: Path) -> str | None:
    """Why a key kept in `directory` would not be the driver's alone, or None."""
    try:
        st = os.stat(directory)
    except OSError as exc:
        return f"cannot use {directory}: {exc.strerror}"
    if not stat.S_ISDIR(st.st_mode):
        return f"{directory} is not a directory"
    if st.st_uid not in (os.geteuid(), 0):
        return f"{directory} is owned by uid {st.st_uid}, not by this user or root"
    if st.st_mode & stat.S_IWOTH and not st.st_mode & stat.S_ISVTX:
        return f"{directory} is writable by others (mode {stat.S_IMODE(st.st_mode):04o})"
    if not os.access(directory, os.W_OK | os.X_OK):
        return f"{directory} is not writable by uid {os.geteuid()}"
    return None


def _file_problem(st: os.stat_result) -> str | None:
    """Why an opened key file cannot be trusted as only the driver's, or None."""
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    if st.st_uid != os.geteuid():
        return f"owned by uid {st.st_uid}, not {os.geteuid()}"
    if stat.S_IMODE(st.st_mode) & 0o077:
        return f"readable or writable by others (mode {stat.S_IMODE(st.st_mode):04o})"
    if st.st_nlink != 1:
        return f"{st.st_nlink} links to it"
    if st.st_size != KEY_BYTES:
        return f"{st.st_size} bytes, not {KEY_BYTES}"
    return None


def _read(path: Path) -> tuple[bytes | None, str | None]:
    """(key, None), (None, why it is unfit) or (None, None) when there is none."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None, None
    except OSError as exc:  # ELOOP: a symbolic link; EACCES: another user's
        return None, exc.strerror
    try:
        problem = _file_problem(os.fstat(fd))  # of the file opened, not of a name
        if problem:
            return None, problem
        key = os.read(fd, KEY_BYTES + 1)
    finally:
        os.close(fd)
    return (key, None) if len(key) == KEY_BYTES else (None, "short read")


def _write_new(path: Path, replace: bool) -> bytes | None:
    """A fresh key written to `path` whole (a temporary file linked or renamed into place);
    None when another process created one first (read it)."""
    key = secrets.token_bytes(KEY_BYTES)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o600)
    try:
        try:
            os.fchmod(fd, 0o600)  # whatever the umask
            os.write(fd, key)
            os.fsync(fd)
        finally:
            os.close(fd)
        if replace:
            os.replace(temporary, path)
        else:
            try:
                os.link(temporary, path)
            except FileExistsError:
                return None
    finally:
        try:
            os.unlink(temporary)
        except FileNotFoundError:
            pass  # renamed into place
    return key


def load_or_create(directory: Path) -> tuple[bytes, bool]:
    """The key kept in `directory` (created if there is none, replaced if it is unfit) and
    whether it was created now; UnusableKey when it can be neither read nor written."""
    problem = _directory_problem(directory)
    if problem:
        raise UnusableKey(problem)
    path = directory / KEY_FILE
    for _ in range(3):  # a concurrent creator or replacer: read what it wrote
        key, unfit = _read(path)
        if key is not None:
            return key, False
        if unfit:
            log.warning("model-cache key %s is unfit (%s): it may have been read or planted; "
                        "replaced by a new key (caches made with the old one are refused)",
                        path, unfit)
        try:
            key = _write_new(path, replace=unfit is not None)
        except OSError as exc:
            raise UnusableKey(f"cannot write {path}: {exc.strerror}") from None
        if key is not None:
            return key, True
    raise UnusableKey(f"{path} keeps changing under this driver")


class _DriverKey:
    def __init__(self) -> None:
        self._directory: Path | None = None
        self._key: bytes | None = None
        self._lock = threading.Lock()

    def configure(self, directory: Path) -> None:
        with self._lock:
            self._directory, self._key = Path(directory), None

    def get(self) -> bytes:
        with self._lock:
            if self._key is None:
                self._key = self._load()
            return self._key

    def _load(self) -> bytes:
        if self._directory is None:  # not a driver: a tool or a test in one process
            log.debug("model caches authenticated with a key of this process")
            return secrets.token_bytes(KEY_BYTES)
        try:
            key, created = load_or_create(self._directory)
        except UnusableKey as exc:
            log.warning("no model-cache key can be kept in the state directory (%s): caches "
                        "are authenticated with a key of this process alone and refused once "
                        "it exits; point --state-dir or %s at a directory this user owns",
                        exc, STATE_ENV)
            return secrets.token_bytes(KEY_BYTES)
        log.info("model caches authenticated with the key in %s (%s)",
                 self._directory / KEY_FILE, "created now" if created else "kept")
        return key


_driver_key = _DriverKey()


def configure(directory: Path) -> None:
    """Keep the key in `directory` (the driver's state directory; read at first use)."""
    _driver_key.configure(directory)


def key() -> bytes:
    """The driver's key (loaded or created at the first call)."""
    return _driver_key.get()
