"""The session channel never dies and never waits on a client (issue 14, items 1 and 2, and
the uid/gid restriction of the "Trust" bullet).

Each attack runs against a real driver process, from raw sockets or a client process of its
own, while a well-behaved client (`Steady`) runs the add model in a loop and checks every
result; afterwards the driver is alive, serves a new session, and holds no fd or mapping it
did not hold before."""

from __future__ import annotations

import json
import os
import resource
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from nnrt.client.core.driver import DriverGone
from nnrt.protos import hdi_pb2 as pb
from nnrt.common import session_channel as channel
from nnrt.common.errors import (
    HDF_ERR_NOPERM,
    NNRT_DEVICE_BUSY,
    NNRT_INVALID_PARAMETER,
    NNRT_SUCCESS,
)
from nnrt.server.channel_connection import ChannelPolicy

from tests.conftest import memfd_mappings, open_fds, start_driver, wait_until
from tests.helpers.channel_load import FLOODER, ROOT, Steady, rss_mb
from tests.helpers.hdi_models import add_model, io
from tests.helpers.raw_session import raw_session


def _back_to(pid: int, fds_before: set[str], maps_before: list[str]) -> bool:
    """No fd the process did not have before, and exactly the memfd mappings it had."""
    return open_fds(pid) <= fds_before and memfd_mappings(pid) == maps_before


def _fetch(seq: int) -> bytes:
    return channel.encode_message({"op": "fetch", "seq": seq, "bufferId": 999})


@contextmanager
def _soft_fd_limit(soft: int):
    """Lower this process's soft fd limit (so that a child starts with it), then restore."""
    old = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, old[1]))
    try:
        yield old[1]
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, old)


def _limits(pid: int) -> tuple[int, int]:
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            soft, hard = line.split()[3:5]
            return int(soft), int(hard)
    raise AssertionError("no fd limit")


# -- item 1: the fd limit ------------------------------------------------------------------


@pytest.mark.multiprocess
def test_the_driver_raises_its_soft_fd_limit_to_the_hard_one(runtime_dir):
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard <= 256:
        pytest.skip(f"the hard fd limit is only {hard}")
    with _soft_fd_limit(256):
        driver = start_driver(runtime_dir)
    try:
        soft, driver_hard = _limits(driver.pid)
        assert driver_hard == hard or hard == resource.RLIM_INFINITY
        assert soft == driver_hard, (soft, driver_hard)
        assert f"fd limit: {soft}" in driver.log()
    finally:
        assert driver.stop() == 0


def test_accept_at_the_fd_limit_backs_off_and_the_channel_recovers(driver):
    with Steady(driver) as steady:
        time.sleep(0.2)
        fds_before, maps_before = open_fds(driver.pid), memfd_mappings(driver.pid)
        # A few fds of headroom, then connections until accept() hits EMFILE; the rest wait
        # in the listen queue (64 deep).
        limit = len(os.listdir(f"/proc/{driver.pid}/fd")) + 6
        resource.prlimit(driver.pid, resource.RLIMIT_NOFILE, (limit, limit))
        attackers = []
        try:
            for _ in range(40):
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
                sock.settimeout(2)
                sock.connect(str(driver.session_path))
                attackers.append(sock)
            assert wait_until(lambda: "accept() failed" in driver.log(), 5), driver.log()[-3000:]
            runs = steady.runs
            time.sleep(1.5)  # several backoff rounds: open sessions keep being served
            assert steady.runs > runs + 10
            steady.check()
            assert driver.log().count("accept() failed") == 1  # once per episode
        finally:
            for sock in attackers:
                sock.close()
        assert wait_until(lambda: "accepting again after" in driver.log(), 5)
        with driver.client() as late:  # a new session opens and runs
            model = add_model().prepare(late)
            _, x = late.allocate_buffer(16)
            _, y = late.allocate_buffer(16)
            x.array(np.float32, [4])[:] = 5
            assert late.run(model, [io(x, 4)], [io(y, 4)], timeout=10).returnCode == 0
            np.testing.assert_array_equal(y.array(np.float32, [4]), 5 + np.arange(4))
            x.close(), y.close()
        assert wait_until(lambda: _back_to(driver.pid, fds_before, maps_before), 5), (
            open_fds(driver.pid) - fds_before)
        steady.check(min_runs=50)
    assert driver.proc.poll() is None


# -- item 2: slow readers, floods, short packets --------------------------------------------


def test_sessions_that_never_read_are_dropped_and_stall_nobody(driver):
    with Steady(driver) as steady:
        time.sleep(0.2)
        fds_before, maps_before = open_fds(driver.pid), memfd_mappings(driver.pid)
        attackers = [raw_session(driver, timeout=0.5) for _ in range(3)]
        dropped = [False] * 3
        deadline = time.monotonic() + 20
        seq = 0
        try:
            # Requests whose replies are never read, until the driver drops each attacker.
            while not all(dropped) and time.monotonic() < deadline:
                for k, sock in enumerate(attackers):
                    if dropped[k]:
                        continue
                    seq += 1
                    try:
                        sock.send(_fetch(seq))
                    except (BrokenPipeError, ConnectionResetError):
                        dropped[k] = True
                    except TimeoutError:
                        pass  # the driver reads at its pace
        finally:
            for sock in attackers:
                sock.close()
        assert all(dropped), f"not dropped after {seq} requests"
        assert driver.log().count("dropped: it does not read its replies") == 3
        steady.check(min_runs=20)
        assert steady.longest < 2.0, f"a well-behaved run waited {steady.longest:.2f} s"
        assert wait_until(lambda: _back_to(driver.pid, fds_before, maps_before), 5), (
            open_fds(driver.pid) - fds_before)
        # The dropped sessions' resources are freed as at a disconnect.
        assert driver.log().count("ended: freed") >= 3


def test_a_run_flood_from_one_client_is_capped_and_others_run(driver):
    with Steady(driver) as steady:
        time.sleep(0.2)
        rss_before = rss_mb(driver.pid)
        fds_before, maps_before = open_fds(driver.pid), memfd_mappings(driver.pid)
        flooder = subprocess.Popen(
            [sys.executable, "-c", FLOODER, str(driver.runtime_dir), driver.name, "20000"],
            cwd=ROOT, stdout=subprocess.PIPE, text=True)
        rss_peak = rss_before
        try:
            while flooder.poll() is None:
                rss_peak = max(rss_peak, rss_mb(driver.pid))
                time.sleep(0.05)
            out = flooder.stdout.read()
        finally:
            flooder.kill()
            flooder.wait(10)
        result = json.loads(out)
        codes = {int(k): v for k, v in result["codes"].items()}
        assert result["sent"] == 20000 and result["unanswered"] == 0 and result["alive"], result
        assert set(codes) <= {NNRT_SUCCESS, NNRT_DEVICE_BUSY}, codes
        assert codes.get(NNRT_DEVICE_BUSY, 0) > 0 and codes.get(NNRT_SUCCESS, 0) >= 64, codes
        assert rss_peak - rss_before < 40, (rss_before, rss_peak)
        steady.check(min_runs=20)
        assert "Runs in flight (--max-runs-per-session): more are answered" in driver.log()
        assert wait_until(lambda: _back_to(driver.pid, fds_before, maps_before), 5), (
            open_fds(driver.pid) - fds_before)


@pytest.mark.multiprocess
def test_runs_beyond_the_session_cap_are_answered_busy_at_once(runtime_dir):
    driver = start_driver(runtime_dir, "cpu", "--max-runs-per-session", "2",
                          "--fault-run-delay-ms", "400")
    try:
        with driver.client() as client:
            model = add_model().prepare(client)
            pairs = [(client.allocate_buffer(16)[1], client.allocate_buffer(16)[1])
                     for _ in range(5)]
            replies: dict[int, tuple[int, float]] = {}

            def run(k: int) -> None:
                x, y = pairs[k]
                started = time.monotonic()
                reply = client.run(model, [io(x, 4)], [io(y, 4)], timeout=10)
                replies[k] = (reply.returnCode, time.monotonic() - started)

            threads = [threading.Thread(target=run, args=(k,)) for k in range(5)]
            for t in threads:
                t.start()
                time.sleep(0.02)  # two are in flight (400 ms each) when the rest come
            for t in threads:
                t.join(10)
            codes = sorted(code for code, _ in replies.values())
            assert codes == [NNRT_SUCCESS] * 2 + [NNRT_DEVICE_BUSY] * 3, codes
            busy = [took for code, took in replies.values() if code == NNRT_DEVICE_BUSY]
            assert max(busy) < 0.3, busy  # answered at once, not queued
            # Once the session is under its cap again, its Runs are served.
            x, y = pairs[0]
            assert client.run(model, [io(x, 4)], [io(y, 4)], timeout=10).returnCode == 0
            for x, y in pairs:
                x.close(), y.close()
        assert "accepting Runs again (3 answered NNRT_DEVICE_BUSY)" in driver.log()
    finally:
        assert driver.stop() == 0


def test_every_packet_is_answered_or_the_session_closed(driver):
    fds_before, maps_before = open_fds(driver.pid), memfd_mappings(driver.pid)
    sock = raw_session(driver, timeout=3)
    invalid = {"seq": None, "returnCode": NNRT_INVALID_PARAMETER}
    for packet in (channel.RUN,  # no header at all
                   channel.RUN + b"\x01",  # a truncated header
                   channel.RUN + b"\x00" * (channel.RUN_REQUEST.size - 1),
                   b"{not json", b"[1, 2]",
                   b"x" * (channel.MAX_PACKET + 1)):  # more than a packet: truncated
        sock.send(packet)
        reply, fds = channel.receive_message(sock)
        assert (reply, fds) == (invalid, []), packet[:20]
    # A well-formed header with a payload that is no RunRequest: answered with its seq.
    header = channel.RUN_REQUEST.pack(77, 0, channel.NO_THINK_TIME)
    sock.send(channel.RUN + header + b"\xff\xff\xff")
    data, fds = channel.receive_packet(sock)
    assert data[:1] == channel.RUN and channel.RUN_REPLY.unpack_from(data, 1) == (77, 0)
    assert pb.RunReply.FromString(data[1 + channel.RUN_REPLY.size:]).returnCode == \
        NNRT_INVALID_PARAMETER
    # A short Run with an fd attached: answered, the fd closed by the driver.
    r, w = os.pipe()
    sock.sendmsg([channel.RUN + b"\x02"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                                           np.array([r], np.int32).tobytes())])
    os.close(r)
    assert channel.receive_message(sock) == (invalid, [])
    assert wait_until(lambda: _pipe_orphaned(w), 2)  # the driver's copy of r is closed
    os.close(w)
    # An empty packet reads as end of file: the session is closed, not left unanswered.
    sock.send(b"")
    assert sock.recv(100) == b""
    sock.close()
    assert wait_until(lambda: _back_to(driver.pid, fds_before, maps_before), 5)
    assert "shorter than its header" in driver.log()
    with driver.client() as client:
        assert client.get_device_name().returnCode == NNRT_SUCCESS


def _pipe_orphaned(write_fd: int) -> bool:
    """Whether every read end of the pipe is closed (a write gets EPIPE)."""
    try:
        os.write(write_fd, b"")
        os.set_blocking(write_fd, False)
        os.write(write_fd, b"x")
    except BrokenPipeError:
        return True
    except BlockingIOError:
        return False
    return False


# -- trust: who may open a session -----------------------------------------------------------


@pytest.mark.multiprocess
def test_allow_uid_and_gid_restrict_who_opens_a_session(runtime_dir):
    other_uid = os.getuid() + 1
    refusing = start_driver(runtime_dir, "cpu", "--allow-uid", str(other_uid), name="strict")
    try:
        fds_before = open_fds(refusing.pid)
        for _ in range(3):
            with pytest.raises(DriverGone, match="may not use this driver"):
                refusing.client()
        assert wait_until(lambda: open_fds(refusing.pid) <= fds_before, 5)
        # A raw connection gets the refusal (HDF_ERR_NOPERM) and end of file, no session.
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        sock.settimeout(3)
        sock.connect(str(refusing.session_path))
        reply, _ = channel.receive_message(sock)
        assert reply["returnCode"] == HDF_ERR_NOPERM and "session" not in reply
        assert sock.recv(100) == b""
        sock.close()
        assert f"refused pid {os.getpid()}: uid {os.getuid()} gid {os.getgid()}" in refusing.log()
        assert "opened by pid" not in refusing.log()
    finally:
        assert refusing.stop() == 0
    allowing = start_driver(runtime_dir, "cpu", "--allow-uid", str(other_uid),
                            "--allow-gid", str(os.getgid()), name="group")
    try:
        with allowing.client() as client:
            assert client.get_device_name().returnCode == NNRT_SUCCESS
    finally:
        assert allowing.stop() == 0


def test_channel_policy_allows():
    assert ChannelPolicy().allows(1234, {5})  # unrestricted
    policy = ChannelPolicy(allow_uids=frozenset({1000}), allow_gids=frozenset({50}))
    assert policy.allows(1000, {7}) and policy.allows(7, {7, 50})
    assert not policy.allows(0, {0})  # root is not implied


@pytest.mark.multiprocess
@pytest.mark.parametrize("options", [["--max-runs-per-session", "0"], ["--allow-uid", "-1"],
                                     ["--spin-us", "-1"], ["--spin-us", "10001"]])
def test_bad_channel_options_are_usage_errors(runtime_dir, options):
    done = subprocess.run([sys.executable, "-m", "nnrt.server", "cpu", "--runtime-dir",
                           str(runtime_dir), *options], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 2 and options[0] in done.stderr


def test_the_units_grant_a_high_fd_limit():
    for name in ("nnrt-driver@.service", "nnrt-devmgr.service"):
        lines = (ROOT / "deploy" / name).read_text().splitlines()
        assert "LimitNOFILE=65536" in lines, name
