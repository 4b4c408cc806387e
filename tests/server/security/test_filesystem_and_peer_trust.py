"""Trust in the filesystem and in who serves (issue 14, item 4), attacked as another user.

Tests run as root; "another user" is uid/gid 65534 (nobody/nogroup): directories and files
are chown'ed to it, and drivers or clients run as it (subprocess `user=` / `group=`). Those
processes cannot enter pytest's private tmp_path, so the cross-user tests work in a 0755
directory of their own under /tmp.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from google.protobuf import empty_pb2
from grpc_health.v1 import health_pb2

from nnrt.client.core import model_cache as mc
from nnrt.common.hdi_model import IODesc
from nnrt.client.core.driver import DriverClient, UntrustedDriver
from nnrt.protos import admin_pb2_grpc
from nnrt.common import runtime_dir as rd
from nnrt.devmgr.probes import health_status
from tests.conftest import RunningDriver, start_driver

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                                reason="needs root and setpriv(1) to act as another user")

OTHER = 65534  # nobody / nogroup
START_TIMEOUT = 20.0


@pytest.fixture
def base() -> Iterator[Path]:
    """A root-owned 0755 directory under /tmp that uid 65534 may enter."""
    path = Path(tempfile.mkdtemp(prefix="nnrt-trust-", dir="/tmp"))
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch) -> None:
    for name in (rd.SERVICE_USER_ENV, rd.GROUP_ENV):
        monkeypatch.delenv(name, raising=False)


def as_user(user: int | None, group: int | None) -> list[str]:
    """A setpriv(1) prefix: run as `user` / `group` with no supplementary groups. (Popen's
    user= cannot exec this venv's interpreter here: it links into root's 0700 home.)"""
    if user is None and group is None:
        return []
    return ["setpriv", *(["--reuid", str(user)] if user is not None else []),
            *(["--regid", str(group)] if group is not None else []), "--clear-groups"]


def spawn_driver(runtime_dir: Path, *, user: int | None = None, group: int | None = None,
                 env: dict[str, str] | None = None, name: str = "cpu") -> RunningDriver:
    """`nnrt-driver cpu` as `user`/`group` (no supplementary groups), not waited for."""
    log_path = runtime_dir.parent / f"{name}-{time.monotonic_ns()}.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [*as_user(user, group), sys.executable, "-m", "nnrt.server", "cpu", "--name",
             name, "--runtime-dir", str(runtime_dir)], stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, env={**os.environ, **(env or {})})
    return RunningDriver(proc, runtime_dir, name, log_path)


def serving(driver: RunningDriver) -> RunningDriver:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        assert driver.proc.poll() is None, \
            f"driver exited {driver.proc.returncode}:\n{driver.log()}"
        if driver.session_path.exists() and health_status(driver.grpc_path) == \
                health_pb2.HealthCheckResponse.SERVING:
            return driver
        time.sleep(0.05)
    driver.proc.kill()
    driver.proc.wait(5)
    raise AssertionError(f"driver not serving within {START_TIMEOUT} s:\n{driver.log()}")


def sessions_of(driver: RunningDriver) -> int:
    with grpc.insecure_channel(f"unix:{driver.grpc_path}") as channel:
        return len(admin_pb2_grpc.NnrtAdminStub(channel).GetStatus(
            empty_pb2.Empty(), timeout=5).sessions)


# -- the runtime directory's rules --------------------------------------------------------------


def test_runtime_dir_rules(tmp_path: Path, monkeypatch) -> None:
    """Owner us/root (or the service user), writable by no one else; the shared layout
    root:<group> 0770 only for the configured group; symlinks and parents judged too."""
    def problem(path: Path) -> str | None:
        return rd.runtime_dir_problem(path)

    good = tmp_path / "good"
    good.mkdir(mode=0o755)
    assert problem(good) is None
    assert problem(tmp_path / "absent" / "deeper") is None  # we would create it

    planted = tmp_path / "planted"
    planted.mkdir(mode=0o755)
    os.chown(planted, OTHER, OTHER)
    assert "owned by uid 65534" in problem(planted)
    assert rd.ENV in problem(planted)  # the message says how to fix it
    monkeypatch.setenv(rd.SERVICE_USER_ENV, "nobody")  # ... unless it is the service user's
    assert problem(planted) is None
    monkeypatch.delenv(rd.SERVICE_USER_ENV)

    world = tmp_path / "world"
    world.mkdir()
    os.chmod(world, 0o1777)  # sticky does not help the directory itself
    assert "writable by others" in problem(world)
    assert "chmod o-w" in problem(world)

    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o770)
    os.chown(shared, 0, OTHER)
    assert "writable by its group" in problem(shared)
    monkeypatch.setenv(rd.GROUP_ENV, "nogroup")  # the documented shared layout
    assert problem(shared) is None
    os.chown(shared, OTHER, OTHER)  # ... owned by root, not by a member
    assert "owned by uid 65534" in problem(shared)

    link = tmp_path / "link"
    link.symlink_to(good)
    assert problem(link) is None
    os.lchown(link, OTHER, OTHER)  # a link someone else planted decides where we go
    assert "symbolic link owned by uid 65534" in problem(link)

    loose = tmp_path / "loose"
    loose.mkdir()
    os.chmod(loose, 0o777)  # a parent others may write: they can swap the directory
    (loose / "rt").mkdir(mode=0o755)
    assert "above the runtime directory" in problem(loose / "rt")

    afile = tmp_path / "afile"
    afile.write_text("")
    assert "not a directory" in problem(afile)
    with pytest.raises(rd.UnsafeRuntimeDir, match="refusing runtime directory"):
        rd.check_runtime_dir(planted)
    assert rd.driver_names(planted) == []


@pytest.mark.multiprocess
def test_driver_refuses_a_directory_another_user_planted(base: Path) -> None:
    """The /tmp/nnrt-$UID attack, driver side: exit 1 with the reason and the fix, nothing
    created there."""
    planted = base / "nnrt-0"
    planted.mkdir(mode=0o755)
    os.chown(planted, OTHER, OTHER)
    victim = spawn_driver(planted)
    assert victim.proc.wait(START_TIMEOUT) == 1
    log = victim.log()
    assert "owned by uid 65534" in log and rd.ENV in log, log
    assert list(planted.iterdir()) == []


@pytest.mark.multiprocess
def test_client_never_talks_to_a_driver_in_a_planted_directory(base: Path) -> None:
    """The whole attack: another user pre-creates the runtime directory and serves a driver
    there. The victim's driver refuses to start (not exit 3), the victim's client lists no
    driver there and refuses to open a session: the attacker's driver never sees one."""
    planted = base / "nnrt-0"
    planted.mkdir(mode=0o755)
    os.chown(planted, OTHER, OTHER)
    attacker = serving(spawn_driver(planted, user=OTHER, group=OTHER))
    try:
        victim = spawn_driver(planted)
        assert victim.proc.wait(START_TIMEOUT) == 1, victim.log()
        assert "owned by uid 65534" in victim.log()
        assert rd.driver_names(planted) == []
        with pytest.raises(UntrustedDriver, match="owned by uid 65534"):
            DriverClient.connect("cpu", planted, timeout=2.0)
        assert sessions_of(attacker) == 0
    finally:
        assert attacker.stop() == 0


@pytest.mark.multiprocess
def test_client_checks_who_serves_by_peer_credentials(base: Path, monkeypatch) -> None:
    """In the shared layout (root:nogroup 0770) a group member may serve a driver; the
    client refuses it by SO_PEERCRED before sending anything, unless it is the configured
    service user: then the session works."""
    shared = base / "shared"
    shared.mkdir()
    os.chown(shared, 0, OTHER)
    os.chmod(shared, 0o770)
    monkeypatch.setenv(rd.GROUP_ENV, "nogroup")
    other = serving(spawn_driver(shared, user=OTHER, group=OTHER,
                                 env={rd.GROUP_ENV: "nogroup"}))
    try:
        with pytest.raises(UntrustedDriver, match=r"served by uid 65534 \(pid \d+\)"):
            DriverClient.connect("cpu", shared, timeout=2.0)
        assert other.proc.poll() is None  # a refused client is nothing to the driver
        monkeypatch.setenv(rd.SERVICE_USER_ENV, str(OTHER))
        with DriverClient.connect("cpu", shared, timeout=5.0) as client:
            assert client.get_device_name().name
    finally:
        assert other.stop() == 0


_DISCOVER = """
import sys
from pathlib import Path
import nnrt.common.runtime_dir as rd
rd.SYSTEM_DIR = Path(sys.argv[1])
print("DIR", rd.runtime_dir())
if rd.runtime_dir() == rd.SYSTEM_DIR:
    from nnrt.client.core.driver import DriverClient
    with DriverClient.connect("cpu", timeout=5.0) as client:
        print("DEVICE", client.get_device_name().name)
    try:
        rd.ensure_runtime_dir(rd.runtime_dir())
    except rd.UnsafeRuntimeDir as exc:
        print("SERVE", exc)
"""


@pytest.mark.multiprocess
def test_group_members_discover_the_shared_system_directory(base: Path) -> None:
    """A 0750 root:nnrt /run/nnrt (here root:nogroup, NNRT_GROUP=nogroup): a member finds
    it and uses its drivers; a member may not serve there and is told why; a non-member
    falls back to /tmp/nnrt-$UID."""
    system = base / "run-nnrt"
    system.mkdir()
    os.chown(system, 0, OTHER)
    os.chmod(system, 0o750)
    env = {k: v for k, v in os.environ.items() if k not in (rd.ENV, "XDG_RUNTIME_DIR")}
    env[rd.GROUP_ENV] = "nogroup"
    driver = serving(spawn_driver(system, group=OTHER, env=env))  # root, group nogroup
    try:
        assert stat.S_IMODE(os.lstat(driver.session_path).st_mode) == 0o660
        assert os.lstat(driver.session_path).st_gid == OTHER
        member = subprocess.run(
            [*as_user(OTHER, OTHER), sys.executable, "-c", _DISCOVER, str(system)], env=env,
            capture_output=True, text=True, timeout=60, check=False)
        assert member.returncode == 0, member.stderr
        assert f"DIR {system}\n" in member.stdout
        assert "DEVICE " in member.stdout
        assert "SERVE " in member.stdout and "not writable by uid 65534" in member.stdout
        stranger = subprocess.run(
            [*as_user(OTHER, OTHER - 1), sys.executable, "-c", _DISCOVER, str(system)],
            env=env, capture_output=True, text=True, timeout=60)
        assert stranger.returncode == 0, stranger.stderr
        assert stranger.stdout == f"DIR /tmp/nnrt-{OTHER}\n"
    finally:
        assert driver.stop() == 0


# -- sockets ------------------------------------------------------------------------------------


@pytest.mark.multiprocess
def test_symlink_planted_at_the_socket_path_is_replaced_not_followed(runtime_dir: Path,
                                                                      tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("secret")
    victim.chmod(0o600)
    (runtime_dir / "cpu.sock").symlink_to(victim)
    (runtime_dir / "cpu.session").symlink_to(victim)
    driver = start_driver(runtime_dir)
    try:
        for path in (driver.grpc_path, driver.session_path):
            st = os.lstat(path)
            assert stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o660
        with driver.client() as client:
            assert client.get_device_name().name
    finally:
        assert driver.stop() == 0
    assert stat.S_IMODE(victim.stat().st_mode) == 0o600 and victim.read_text() == "secret"


def test_socket_swapped_for_a_symlink_during_start_is_refused(runtime_dir: Path, tmp_path: Path,
                                                            monkeypatch) -> None:
    """The race the old chmod lost: between bind and chmod someone puts a symlink at the
    socket path. Now nothing chmods a path, and the host refuses to serve a replaced path."""
    from nnrt.drivers.cpu.device import CpuDevice
    from nnrt.server import host as host_module

    victim = tmp_path / "victim"
    victim.write_text("secret")
    victim.chmod(0o600)
    real_channel = host_module.SessionChannelServer

    def channel_then_swap(path, *args, **kwargs):
        channel = real_channel(path, *args, **kwargs)  # both sockets are bound by now
        grpc_path = rd.grpc_socket(runtime_dir, "cpu")
        os.unlink(grpc_path)
        os.symlink(victim, grpc_path)
        return channel

    monkeypatch.setattr(host_module, "SessionChannelServer", channel_then_swap)
    threads = {t.name for t in threading.enumerate()}
    device = CpuDevice()
    host = host_module.DriverHost(device, runtime_dir, "cpu")
    try:
        with pytest.raises(rd.UnsafeRuntimeDir, match="was replaced while the driver bound it"):
            host.start()
    finally:
        device.close()
    assert stat.S_IMODE(victim.stat().st_mode) == 0o600 and victim.read_text() == "secret"
    assert list(runtime_dir.iterdir()) == []  # the link and our socket are gone, not the file
    assert "session-channel" not in {t.name for t in threading.enumerate()} - threads


# -- the model cache -----------------------------------------------------------------------------


def _contents() -> mc.CacheContents:
    return mc.CacheContents([b"blob-one", b"blob-two"], [IODesc("x", 11, [1, 4], 1)],
                            [IODesc("y", 11, [1, 4], 1)])


def test_cache_write_follows_no_planted_symlink(tmp_path: Path, monkeypatch) -> None:
    """Symlinks planted at the old predictable temp names, at the final names and at the
    next random temp name: nothing outside the cache directory is written; cache files are
    0600 regular files; no temporary file is left."""
    cache_dir = tmp_path / "cache"
    cache_dir.mkdir()
    victim = tmp_path / "victim"
    victim.write_text("precious")
    names = [f"{i}{mc.SUFFIX}" for i in range(4)] + [mc.INDEX_NAME]
    for name in names:
        (cache_dir / f"{name}.tmp{os.getpid()}").symlink_to(victim)  # the old temp name
    (cache_dir / names[0]).symlink_to(victim)  # the final name
    draws = iter(["planted"] + [f"{i:016x}" for i in range(100)])
    monkeypatch.setattr(mc.secrets, "token_hex", lambda n: next(draws))
    (cache_dir / f".{names[0]}.planted.tmp").symlink_to(victim)  # the first temp name drawn

    cache = mc.CacheDir(cache_dir)
    index = cache.write(_contents(), 1, 7, "d" * 64)
    assert victim.read_text() == "precious"
    for name in names:
        st = os.lstat(cache_dir / name)
        assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600, name
    assert cache.load(cache.read_index()).blobs == [b"blob-one", b"blob-two"]
    assert index.file_number == 4
    left = {p.name for p in cache_dir.iterdir()} - set(names)
    assert all(p.endswith((f".tmp{os.getpid()}", ".planted.tmp")) for p in left)


def test_cache_read_follows_no_symlink_and_no_fifo(tmp_path: Path) -> None:
    cache = mc.CacheDir(tmp_path)
    cache.write(_contents(), 1, 7, "d" * 64)
    index = cache.read_index()
    data = (tmp_path / f"0{mc.SUFFIX}").read_bytes()
    elsewhere = tmp_path.parent / f"elsewhere-{time.monotonic_ns()}"
    elsewhere.write_bytes(data)
    os.unlink(tmp_path / f"0{mc.SUFFIX}")
    (tmp_path / f"0{mc.SUFFIX}").symlink_to(elsewhere)
    with pytest.raises(mc.CacheInvalid):
        cache.load(index)
    os.unlink(tmp_path / f"0{mc.SUFFIX}")
    os.mkfifo(tmp_path / f"0{mc.SUFFIX}")  # would block a plain open forever
    with pytest.raises(mc.CacheInvalid, match="not a regular file"):
        cache.load(index)
    elsewhere.unlink()
