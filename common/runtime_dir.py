"""Where driver sockets live: `NNRT_RUNTIME_DIR`, shared by drivers and clients — and
whether that directory may be trusted.

Default (ARCHITECTURE.md, decision 9): `/run/nnrt` when this process may use it, else
`$XDG_RUNTIME_DIR/nnrt`, else `/tmp/nnrt-$UID`. A driver named N listens on `N.sock`
(gRPC, the HDI services) and `N.session` (the session channel, common/session_channel.py).

Decisions:

* Discovery: `/run/nnrt` is chosen when it exists and this process may list and enter it
  (read + search), or when it does not exist and `/run` lets us create it. The test is the
  same for drivers and clients, so both sides of a machine agree on the directory: a member
  of group `nnrt` finds the system drivers in a 0750 `/run/nnrt` (it used to apply the
  driver's "writable" test and fall back to `/tmp`). A driver that may enter but not write
  it is told so at start (`ensure_runtime_dir`), with the fix.
* Trust (`check_runtime_dir`, the rules of OpenSSH's `secure_filename` and of tmux's socket
  directory): the directory must be a directory owned by a trusted uid — our effective uid,
  root, or the service user (`NNRT_SERVICE_USER`, a name or a uid) — and writable by no one
  else: not by others ever, and by its group only in the documented shared layout, owned by
  root (or the service user) with group `nnrt` (`NNRT_GROUP` names another), whose members
  are trusted by construction. Every directory above it is owned by a trusted uid and is not
  writable by group or others unless sticky (`/tmp`); a symbolic link on the way must be
  owned by a trusted uid. Anything else is refused with `UnsafeRuntimeDir`, whose message
  says what is wrong and how to fix it: a predictable `/tmp/nnrt-$UID` pre-created by
  another user is never used — by a driver (which refuses to start) nor by a client (which
  lists no driver there and refuses to open a session there).
* A directory that does not exist yet is judged by its nearest existing ancestor (what we
  would create it in); `ensure_runtime_dir` creates it 0755 (sockets are 0660 and carry the
  access control) and judges it again once created, so a directory someone slipped in
  between is refused too.
* The name lock (`DriverLock`): a driver claims `N.lock` before anything else of its start
  (before loading its device, long before binding `N.sock` and `N.session`): it opens the
  file (created 0644, `O_NOFOLLOW`), takes `flock(LOCK_EX | LOCK_NB)` and writes its pid in
  it; the kernel drops the lock when the process ends, however it ends. A second driver of
  that name finds it locked and stops at once (exit 3, the holder's pid named). A clean stop
  removes the file while still holding the lock; a lock taken on a file that a stopping
  driver removed meanwhile is detected (the path's inode differs) and taken again on the
  new file. Who wants to know whether a driver of that name is alive — serving or still
  starting — tries a shared `flock` on the file (client/core/embedded.py): it fails while a driver
  holds it; a file nobody holds is a stale leftover of a killed driver, like its sockets. A
  warm spare (`--standby-fd`) takes the lock only at its go.
"""

from __future__ import annotations

import errno
import fcntl
import functools
import grp
import logging
import os
import pwd
import socket
import stat
from pathlib import Path

log = logging.getLogger(__name__)

ENV = "NNRT_RUNTIME_DIR"
SERVICE_USER_ENV = "NNRT_SERVICE_USER"  # a user whose drivers and directories are trusted
GROUP_ENV = "NNRT_GROUP"  # the group of the shared system directory
DEFAULT_GROUP = "nnrt"
SYSTEM_DIR = Path("/run/nnrt")
GRPC_SUFFIX = ".sock"
SESSION_SUFFIX = ".session"
LOCK_SUFFIX = ".lock"


class UnsafeRuntimeDir(PermissionError):
    """The runtime directory cannot be trusted (or used); the message says how to fix it."""


@functools.lru_cache(maxsize=8)
def _service_uid(value: str) -> int | None:
    if not value:
        return None
    if value.isdigit():
        return int(value)
    try:
        return pwd.getpwnam(value).pw_uid
    except KeyError:
        log.warning("%s=%r names no user: ignored", SERVICE_USER_ENV, value)
        return None


@functools.lru_cache(maxsize=8)
def _group_gid(value: str) -> int | None:
    if value.isdigit():
        return int(value)
    try:
        return grp.getgrnam(value).gr_gid
    except KeyError:
        return None  # no such group on this machine: no shared layout to accept


def service_uid() -> int | None:
    """The uid of the configured service user (`NNRT_SERVICE_USER`), if any."""
    return _service_uid(os.environ.get(SERVICE_USER_ENV, "").strip())


def shared_gid() -> int | None:
    """The gid of the shared runtime directory's group (`NNRT_GROUP`, default `nnrt`)."""
    return _group_gid(os.environ.get(GROUP_ENV, "").strip() or DEFAULT_GROUP)


def trusted_uids() -> frozenset[int]:
    """Who may own the runtime directory and serve drivers to us: our effective uid, root,
    and the service user."""
    uids = {os.geteuid(), 0}
    service = service_uid()
    if service is not None:
        uids.add(service)
    return frozenset(uids)


def _who(uids: frozenset[int]) -> str:
    me = os.geteuid()
    service = service_uid()
    named = [f"us (uid {me})"] + (["root"] if me != 0 else [])
    if service is not None and service not in (me, 0):
        named.append(f"the service user (uid {service}, {SERVICE_USER_ENV})")
    elif service is None:
        named.append(f"the service user ({SERVICE_USER_ENV}, not set)")
    return ", ".join(named[:-1]) + " or " + named[-1] if len(named) > 1 else named[0]


def _fix(path: Path) -> str:
    return (f"remove or fix {path}, or point {ENV} (or --runtime-dir) at a directory you own "
            f"that only you can write (mkdir -m 0700 DIR)")


def runtime_dir_problem(path: Path) -> str | None:
    """Why `path` cannot be trusted as a runtime directory (with the fix), or None."""
    uids = trusted_uids()
    absolute = Path(os.path.abspath(path))
    # Symbolic links on the way as given: whoever owns one decides where it points.
    current = Path(absolute.anchor)
    for part in absolute.parts[1:]:
        current = current / part
        try:
            st = os.lstat(current)
        except FileNotFoundError:
            break
        except OSError as exc:
            return f"cannot inspect {current}: {exc}"
        if stat.S_ISLNK(st.st_mode) and st.st_uid not in uids:
            return (f"{current} is a symbolic link owned by uid {st.st_uid}, not by "
                    f"{_who(uids)}: {_fix(path)}")
    real = Path(os.path.realpath(absolute))
    chain = [*reversed(real.parents), real]
    gid = shared_gid()
    for i, directory in enumerate(chain):
        try:
            st = os.lstat(directory)
        except FileNotFoundError:
            return None  # the rest is ours to create, in a directory judged safe above
        except OSError as exc:
            return f"cannot inspect {directory}: {exc}"
        mode = stat.S_IMODE(st.st_mode)
        if not stat.S_ISDIR(st.st_mode):
            return f"{directory} is not a directory: {_fix(path)}"
        if st.st_uid not in uids:
            what = "" if directory == real else "the directory above it, "
            return (f"{what}{directory} is owned by uid {st.st_uid}, not by {_who(uids)}: "
                    f"another user may have planted it; {_fix(path)}")
        if directory != real:
            if mode & 0o022 and not mode & stat.S_ISVTX:
                return (f"{directory}, above the runtime directory, is writable by group or "
                        f"others (mode {mode:04o}) without the sticky bit: chmod go-w "
                        f"{directory}, or {_fix(path)}")
            continue
        if mode & 0o002:
            return (f"{directory} is writable by others (mode {mode:04o}): "
                    f"chmod o-w {directory}, or {_fix(path)}")
        if mode & 0o020:
            shared = gid is not None and st.st_gid == gid and st.st_uid in {0, service_uid()}
            if not shared:
                return (f"{directory} is writable by its group (gid "
                        f"{st.st_gid}, mode {mode:04o}); only the shared layout (owner root, "
                        f"group {os.environ.get(GROUP_ENV) or DEFAULT_GROUP}, 0770) may be: "
                        f"chmod g-w {directory}, or {_fix(path)}")
    return None


def check_runtime_dir(path: Path) -> None:
    """Raise UnsafeRuntimeDir when `path` cannot be trusted (see the module's rules)."""
    problem = runtime_dir_problem(Path(path))
    if problem is not None:
        raise UnsafeRuntimeDir(f"refusing runtime directory {path}: {problem}")


def ensure_runtime_dir(path: Path) -> Path:
    """Create `path` if needed (0755; parents as `mkdir -p`), verify it, and check that we
    may create sockets in it: what a driver or device manager does before it binds."""
    path = Path(path)
    check_runtime_dir(path)  # before creating anything under an untrusted parent
    try:
        path.mkdir(mode=0o755, parents=True, exist_ok=True)
    except OSError as exc:
        raise UnsafeRuntimeDir(f"cannot create runtime directory {path}: {exc}; point {ENV} "
                               f"(or --runtime-dir) at a directory you may write") from exc
    check_runtime_dir(path)  # again: it may have been slipped in by someone else meanwhile
    if not os.access(path, os.W_OK | os.X_OK):
        raise UnsafeRuntimeDir(
            f"cannot create sockets in runtime directory {path}: not writable by uid "
            f"{os.geteuid()} (members of its group may use the drivers there, not serve "
            f"them); run the driver as the service, or point {ENV} (or --runtime-dir) at a "
            f"directory you own")
    return path


_warned: set[tuple[str, str]] = set()


def usable_runtime_dir(path: Path) -> bool:
    """Whether a client may use the drivers in `path`; logs why not (once per reason)."""
    problem = runtime_dir_problem(Path(path))
    if problem is None:
        return True
    key = (str(path), problem)
    if key not in _warned:
        _warned.add(key)
        log.error("ignoring the drivers in %s: %s", path, problem)
    return False


def _usable(path: Path) -> bool:
    """Whether this process may use `path` (list and enter it), or create it."""
    if path.exists():
        return os.access(path, os.R_OK | os.X_OK)
    return os.access(path.parent, os.W_OK | os.X_OK)


def runtime_dir() -> Path:
    """The runtime directory in force for this process (not created, not verified)."""
    configured = os.environ.get(ENV)
    if configured:
        return Path(configured)
    if _usable(SYSTEM_DIR):
        return SYSTEM_DIR
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg and os.access(xdg, os.W_OK | os.X_OK):
        return Path(xdg) / "nnrt"
    return Path(f"/tmp/nnrt-{os.getuid()}")


def grpc_socket(directory: Path, name: str) -> Path:
    return directory / f"{name}{GRPC_SUFFIX}"


def session_socket(directory: Path, name: str) -> Path:
    return directory / f"{name}{SESSION_SUFFIX}"


# The admin token: a driver's proof for its admin service (server/admin.py) that a caller
# is root or the driver's own user. gRPC on a Unix socket does not tell a servicer who calls;
# a 0600 file of the driver's user, read by whoever asks and sent as metadata, does.
ADMIN_TOKEN_SUFFIX = ".admin-token"
ADMIN_METADATA_KEY = "nnrt-admin"


def admin_token_path(directory: Path, name: str) -> Path:
    return directory / f"{name}{ADMIN_TOKEN_SUFFIX}"


def write_admin_token(directory: Path, name: str) -> str:
    """A fresh random token in `<name>.admin-token`, mode 0600, replacing any earlier one
    (written beside it and renamed over it: never readable by others, not even briefly)."""
    token = os.urandom(32).hex()
    path = admin_token_path(directory, name)
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o600)
    try:
        os.write(fd, token.encode())
    finally:
        os.close(fd)
    os.replace(temporary, path)
    return token


def admin_metadata(directory: Path, name: str) -> tuple[tuple[str, str], ...]:
    """The metadata that makes an admin call privileged, when this process may read the
    driver's token (root, the driver's user); () otherwise."""
    try:
        fd = os.open(admin_token_path(directory, name), os.O_RDONLY | os.O_NOFOLLOW |
                     os.O_CLOEXEC)
    except OSError:
        return ()
    try:
        token = os.read(fd, 128).decode("ascii", errors="replace").strip()
    finally:
        os.close(fd)
    return ((ADMIN_METADATA_KEY, token),) if token else ()


def stale_socket(path: Path, kind: int, timeout: float) -> bool:
    """Whether the Unix socket at `path` (of socket type `kind`) is a dead process's: a
    connection is refused, or finds nothing. False when something accepts it; any other
    failure (a full backlog, the timeout) raises its OSError: the caller cannot tell."""
    probe = socket.socket(socket.AF_UNIX, kind)
    probe.settimeout(timeout)
    try:
        probe.connect(str(path))
    except (ConnectionRefusedError, FileNotFoundError):
        return True
    finally:
        probe.close()
    return False


def driver_names(directory: Path) -> list[str]:
    """Names of the drivers whose two sockets are present in `directory`, sorted; none in
    a directory that cannot be trusted (`usable_runtime_dir` logs why)."""
    if not directory.is_dir() or not usable_runtime_dir(directory):
        return []
    names = []
    for path in directory.glob(f"*{GRPC_SUFFIX}"):
        name = path.name[: -len(GRPC_SUFFIX)]
        if session_socket(directory, name).exists():
            names.append(name)
    return sorted(names)


def lock_path(directory: Path, name: str) -> Path:
    return Path(directory) / f"{name}{LOCK_SUFFIX}"


class NameLocked(RuntimeError):
    """Another live process holds the name lock of a driver (`holder`: its pid, if known)."""

    def __init__(self, message: str, holder: int | None = None) -> None:
        super().__init__(message)
        self.holder = holder


def lock_holder(path: Path) -> int | None:
    """The pid written in a lock file (None when unreadable or not a pid)."""
    try:
        text = Path(path).read_text(errors="replace").split()
    except OSError:
        return None
    return int(text[0]) if text and text[0].isdigit() else None


class DriverLock:
    """The name lock of one driver: `flock(LOCK_EX)` on `<runtime dir>/<name>.lock`, held
    until `release` or the process's end (module docstring)."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, directory: Path, name: str) -> DriverLock:
        """Take the lock (the directory created and checked first); NameLocked when a live
        process holds it, UnsafeRuntimeDir when the directory cannot be used."""
        path = lock_path(ensure_runtime_dir(directory), name)
        for _ in range(10):
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise UnsafeRuntimeDir(f"{path} is a symbolic link: remove it") from None
                raise UnsafeRuntimeDir(f"cannot create the lock file {path}: {exc}") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                holder = lock_holder(path)
                raise NameLocked(f"another driver named {name!r} is running or starting: "
                                 f"{path} is locked by pid {holder or '?'}", holder) from None
            try:
                st, now = os.fstat(fd), os.stat(path, follow_symlinks=False)
                same = (st.st_dev, st.st_ino) == (now.st_dev, now.st_ino)
            except FileNotFoundError:
                same = False
            if not same:  # removed by a driver's clean stop between our open and flock
                os.close(fd)
                continue
            try:
                os.fchmod(fd, 0o644)  # readable by the clients that test it, whatever the umask
            except OSError:
                pass
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            return cls(path, fd)
        raise NameLocked(f"{path} keeps being replaced: another driver named {name!r} is "
                         "starting and stopping")

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """Remove the file (still holding the lock, so no one took it meanwhile) and let go."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            st, now = os.fstat(fd), os.stat(self.path, follow_symlinks=False)
            if (st.st_dev, st.st_ino) == (now.st_dev, now.st_ino):
                self.path.unlink()
        except OSError:
            pass
        os.close(fd)


def lock_held(path: Path) -> bool:
    """Whether a live process holds the name lock file at `path` (a shared flock fails);
    False for a missing file or one nobody holds (a killed driver's leftover)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        return False
    except OSError:
        return True  # cannot tell: assume held (a wait is bounded, a race is not undone)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return True
    finally:
        os.close(fd)  # also drops our shared lock
    return False


def remove_stale_lock(path: Path) -> bool:
    """Remove the name lock file at `path` if nobody holds it (a killed driver's), the
    protocol's way: locked by us while it is unlinked, so a driver opening it meanwhile
    notices (its inode check) and takes a fresh one. True when removed."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        st, now = os.fstat(fd), os.stat(path, follow_symlinks=False)
        if (st.st_dev, st.st_ino) != (now.st_dev, now.st_ino):
            return False
        os.unlink(path)
        return True
    except OSError:
        return False  # held (a live driver), or gone meanwhile
    finally:
        os.close(fd)
