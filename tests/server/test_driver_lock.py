"""The drivers' name lock (`<runtime dir>/<name>.lock`, common/runtime_dir.py): taken before
anything else of a driver's start, so a driver still loading is visible to the embedded
driver's start rules (client/core/embedded.py) and a second driver of that name stops at once;
removed at a clean stop; a killed driver's file is stale, not held. Real processes, bounded
waits."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from nnrt.client.core.embedded import may_embed, signs_of_drivers
from nnrt.common.runtime_dir import (
    DriverLock,
    NameLocked,
    grpc_socket,
    lock_held,
    lock_holder,
    lock_path,
    remove_stale_lock,
    session_socket,
)

from tests.conftest import start_driver, wait_until, wait_while_progressing


def test_the_lock_protocol_in_one_process(runtime_dir):
    lock = DriverLock.acquire(runtime_dir, "cpu")
    path = lock_path(runtime_dir, "cpu")
    assert lock.held and lock_held(path) and lock_holder(path) == os.getpid()
    assert oct(os.stat(path).st_mode & 0o777) == oct(0o644)
    with pytest.raises(NameLocked) as taken:  # flock is per open file: taken here too
        DriverLock.acquire(runtime_dir, "cpu")
    assert taken.value.holder == os.getpid()
    assert f"is locked by pid {os.getpid()}" in str(taken.value)
    assert not remove_stale_lock(path)  # held: never removed by a cleanup
    other = DriverLock.acquire(runtime_dir, "cpu1")  # another name, another lock
    lock.release()
    assert not path.exists() and not lock_held(path)
    lock.release()  # idempotent
    again = DriverLock.acquire(runtime_dir, "cpu")
    again.release(), other.release()
    assert sorted(os.listdir(runtime_dir)) == []


def test_a_lock_file_removed_between_open_and_flock_is_taken_again(runtime_dir, monkeypatch):
    """A stopping driver unlinks its file while a starting one has it open: the starter sees
    another inode at the path and takes the lock on the file that is there."""
    path = lock_path(runtime_dir, "cpu")
    import fcntl

    real_flock = fcntl.flock
    calls = []

    def flock(fd, op):
        if not calls:  # the first attempt: the file goes away under us
            path.unlink()
        calls.append(op)
        return real_flock(fd, op)

    monkeypatch.setattr(fcntl, "flock", flock)
    lock = DriverLock.acquire(runtime_dir, "cpu")
    assert len(calls) == 2 and path.exists() and lock_holder(path) == os.getpid()
    monkeypatch.undo()
    assert lock_held(path)
    lock.release()


@pytest.mark.multiprocess
def test_a_driver_still_loading_holds_its_lock_and_is_not_raced(runtime_dir):
    """A hand-started driver before its sockets: the lock is the sign the embedded rules
    wait for; a second driver of the name exits 3 at once naming the holder."""
    log = runtime_dir.parent / "slow.log"
    with open(log, "wb") as out:
        slow = subprocess.Popen(
            [sys.executable, "-m", "nnrt.server", "cpu", "--runtime-dir", str(runtime_dir),
             "--fault-slow-start-ms", "6000"],
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
    try:
        path = lock_path(runtime_dir, "cpu")
        assert wait_until(lambda: lock_held(path), 20), log.read_text()
        assert lock_holder(path) == slow.pid
        assert not grpc_socket(runtime_dir, "cpu").exists()  # no socket yet: only the lock
        assert signs_of_drivers(runtime_dir) == [path]
        started = time.monotonic()
        assert may_embed(runtime_dir, wait=0.3) is False  # waited for it, no embedded driver
        assert time.monotonic() - started >= 0.3
        second = subprocess.run(
            [sys.executable, "-m", "nnrt.server", "cpu", "--runtime-dir", str(runtime_dir)],
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30, check=False)
        assert second.returncode == 3, second.stderr
        assert f"another driver named 'cpu' is running or starting: {path} is locked by " \
               f"pid {slow.pid}" in second.stderr
        assert slow.poll() is None and lock_holder(path) == slow.pid  # the first one untouched
        slow.send_signal(signal.SIGTERM)  # stopped before serving: its lock file goes too
        assert slow.wait(20) == 0
        assert not path.exists() and os.listdir(runtime_dir) == []
    finally:
        if slow.poll() is None:
            slow.kill()
            slow.wait(5)


@pytest.mark.multiprocess
def test_a_clean_stop_removes_the_lock_a_kill_leaves_a_stale_one(runtime_dir):
    driver = start_driver(runtime_dir)
    path = lock_path(runtime_dir, "cpu")
    assert lock_held(path) and lock_holder(path) == driver.pid
    assert driver.stop() == 0
    assert not path.exists()

    driver = start_driver(runtime_dir)
    driver.stop(signal.SIGKILL)
    assert path.exists() and not lock_held(path)  # the kernel dropped the lock
    assert session_socket(runtime_dir, "cpu").exists()
    started = time.monotonic()  # stale files only: no wait, no embedded driver
    assert may_embed(runtime_dir, wait=10) is False
    assert time.monotonic() - started < 5
    # the next driver takes the stale file over
    driver = start_driver(runtime_dir)
    assert lock_holder(path) == driver.pid
    assert driver.stop() == 0
    # a stale lock file is removable, the cleanup's way
    path.write_text("12345\n")
    assert remove_stale_lock(path) and not path.exists()


@pytest.mark.multiprocess
def test_a_stop_is_waited_for_while_the_process_progresses():
    """The tests' stop wait (conftest.wait_while_progressing): a process still computing past
    the first bound is waited for; one sitting idle is reported stuck, within a bound."""
    busy = subprocess.Popen([sys.executable, "-c",
                             "import time\nt = time.monotonic()\nwhile time.monotonic() - t < 3: pass"])
    assert wait_while_progressing(busy, timeout=0.5, cap=30, quiet_s=2) == 0
    idle = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        started = time.monotonic()
        with pytest.raises(subprocess.TimeoutExpired):
            wait_while_progressing(idle, timeout=0.5, cap=30, quiet_s=2)
        assert time.monotonic() - started < 15
    finally:
        idle.kill()
        idle.wait(5)
