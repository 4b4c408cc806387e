"""The session channel under a crafted packet, and each user's share of a driver (issue 25,
items 2.2 and 2.6).

2.2: a packet's fds are closed whatever its parsing or answering does, the session goes on
being served, and fetch replies a client never reads hold a bounded number of fds. Each
attack runs against a real driver process from raw sockets; afterwards the driver holds no
fd or memfd mapping it did not hold before and serves as before.

2.6: the shared-memory budget and the number of sessions are counted per peer uid. "Another
user" is uid/gid 65534 (nobody/nogroup), a client process run through setpriv(1); its driver
lives in a setgid root:nogroup 0750 runtime directory (the shared layout of /run/nnrt with
group nnrt), so its sockets are the group's."""

from __future__ import annotations

import array
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from google.protobuf import empty_pb2

from nnrt.client.core.driver import DriverGone
from nnrt.common import session_channel as channel
from nnrt.common.errors import (
    HDF_ERR_NOPERM,
    NNRT_INVALID_PARAMETER,
    NNRT_OUT_OF_MEMORY,
    NNRT_SUCCESS,
)
from nnrt.protos import admin_pb2_grpc
from nnrt.server.channel_connection import MAX_QUEUED_FDS, ChannelPolicy, Connection
from nnrt.server.channel_messages import send_reply
from nnrt.server.sessions import SessionRegistry
from tests.conftest import memfd_mappings, open_fds, start_driver, wait_until
from tests.helpers.channel_load import ROOT
from tests.helpers.raw_session import raw_session

MIB = 1 << 20
TIMEOUT = 10.0
OTHER = 65534  # nobody / nogroup
ATTACKS = 200
NESTED = b"[" * 60000  # json.loads: RecursionError (issue 25, item 2.2)

needs_other_user = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="needs root and setpriv(1) to run a client as another user")


def _send_with_fds(sock: socket.socket, data: bytes, fds: list[int]) -> None:
    sock.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds).tobytes())])


def _memfd(name: str, size: int) -> int:
    fd = os.memfd_create(name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, size)
    return fd


def _fds_on(pid: int, name: str) -> int:
    """How many of the process's fds are on memfds called `name`."""
    return sum(1 for fd in open_fds(pid) if f"memfd:{name}" in fd)


def _import(sock: socket.socket, fd: int, seq: int) -> int:
    """The buffer id of `fd` imported over a raw session."""
    _send_with_fds(sock, channel.encode_message({"op": "import", "seq": seq}), [fd])
    reply, fds = channel.receive_message(sock)
    assert (reply["seq"], reply["returnCode"], fds) == (seq, NNRT_SUCCESS, []), reply
    return reply["bufferId"]


def _used_bytes(driver) -> int:
    with grpc.insecure_channel(f"unix:{driver.grpc_path}") as admin:
        return admin_pb2_grpc.NnrtAdminStub(admin).GetStatus(
            empty_pb2.Empty(), timeout=5).sharedMemoryUsedBytes


# -- 2.2: every fd a packet carried is closed, whatever the parser does ---------------------


# Packets no parser may choke on, each sent with 16 fds: answered NNRT_INVALID_PARAMETER.
UNPARSABLE = {
    "nested arrays": NESTED,
    "nested objects": b'{"a":' * 12000,
    "one container too many": b"[" * (channel.MAX_JSON_CONTAINERS + 1)
    + b"]" * (channel.MAX_JSON_CONTAINERS + 1),
    "a seq nested near the recursion limit": b'{"op":"fetch","bufferId":1,"seq":'
    + b"[" * 990 + b"]" * 990 + b"}",
    "an integer of 5000 digits": b'{"op":"fetch","bufferId":1,"seq":' + b"9" * 5000 + b"}",
    "not UTF-8": b'{"op":"\xff\xfe"}',
}


def test_a_nested_packet_with_16_fds_is_answered_and_closes_them_200_times(driver):
    """The attack of the issue, `[` * 60000 with 16 memfds, 200 times on one session: each
    answered NNRT_INVALID_PARAMETER, none of the 3200 fds kept; the session goes on (an
    import and a fetch work on it) and every other unparsable kind is answered alike."""
    pid = driver.pid
    fds_before, maps_before = open_fds(pid), memfd_mappings(pid)
    sock = raw_session(driver)
    attack = [_memfd("trust-attack", MIB) for _ in range(16)]
    try:
        for attempt in range(ATTACKS):
            _send_with_fds(sock, NESTED, attack)
            assert channel.receive_message(sock) == (
                {"seq": None, "returnCode": NNRT_INVALID_PARAMETER}, []), attempt
        most = _fds_on(pid, "trust-attack")
        for what, packet in UNPARSABLE.items():
            _send_with_fds(sock, packet, attack)
            assert channel.receive_message(sock) == (
                {"seq": None, "returnCode": NNRT_INVALID_PARAMETER}, []), what
        # Closed as each packet was answered: never more than one packet's worth held.
        assert most == 0 and _fds_on(pid, "trust-attack") == 0
        # The same session still serves: an import and a fetch of it.
        buffer_id = _import(sock, attack[0], 1)
        sock.send(channel.encode_message({"op": "fetch", "seq": 2, "bufferId": buffer_id}))
        reply, fds = channel.receive_message(sock)
        assert (reply, len(fds)) == ({"seq": 2, "returnCode": NNRT_SUCCESS}, 1)
        assert os.fstat(fds[0]).st_size == MIB
        channel.close_fds(fds)
    finally:
        sock.close()
        channel.close_fds(attack)
    assert wait_until(lambda: open_fds(pid) <= fds_before and memfd_mappings(pid) == maps_before,
                      TIMEOUT), open_fds(pid) - fds_before
    assert driver.log().count("malformed session-channel message") >= ATTACKS
    assert "unexpected error on the session channel" not in driver.log()
    with driver.client() as client:
        assert client.allocate_buffer(MIB)[0] == NNRT_SUCCESS
    print(f"{ATTACKS} x [*60000 + 16 fds: driver fds {len(fds_before)} -> "
          f"{len(open_fds(pid))}, memfd mappings {len(maps_before)} -> "
          f"{len(memfd_mappings(pid))}")


def test_fetch_replies_a_client_never_reads_hold_a_bounded_number_of_fds(driver):
    """Each fetch reply carries a duplicate of the buffer's fd; a client that fetches and
    never reads would have them queue up in the driver (4096 a session before the packet
    limit): the driver drops it once MAX_QUEUED_FDS wait, and closes them all."""
    pid = driver.pid
    fds_before = open_fds(pid)
    sock = raw_session(driver, timeout=0.5)
    fd = _memfd("trust-fetch", 4096)
    buffer_id = _import(sock, fd, 1)
    os.close(fd)
    most, sampling = 0, True

    def sample() -> None:
        nonlocal most
        while sampling:
            most = max(most, _fds_on(pid, "trust-fetch"))
            time.sleep(0.005)

    sampler = threading.Thread(target=sample)
    sampler.start()
    seq, dropped = 1, False
    deadline = time.monotonic() + 20
    try:
        while not dropped and time.monotonic() < deadline:
            seq += 1
            try:
                sock.send(channel.encode_message({"op": "fetch", "seq": seq,
                                                  "bufferId": buffer_id}))
            except (BrokenPipeError, ConnectionResetError):
                dropped = True
            except TimeoutError:
                pass  # the driver reads at its pace
    finally:
        sampling = False
        sampler.join(5)
        sock.close()
    assert dropped, f"not dropped after {seq} fetches"
    found = re.search(r"dropped: it does not read its replies \(\d+ packets, \d+ bytes, "
                      r"(\d+) fds waiting", driver.log())
    assert found and int(found.group(1)) <= MAX_QUEUED_FDS, driver.log()[-2000:]
    # The region's own fd and at most MAX_QUEUED_FDS duplicates (the sampler may miss the
    # peak, never exceed it).
    assert most <= 1 + MAX_QUEUED_FDS, most
    assert wait_until(lambda: open_fds(pid) <= fds_before, TIMEOUT), open_fds(pid) - fds_before
    print(f"{seq} unread fetches: dropped with {found.group(1)} fds waiting; driver fds on the "
          f"buffer at most {most}, then {_fds_on(pid, 'trust-fetch')}")


def _open_fd(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def test_a_reply_that_cannot_be_sent_or_encoded_closes_its_fd(monkeypatch):
    """The duplicate made for a fetch reply is closed when the reply cannot be encoded (the
    client is told NNRT_INVALID_PARAMETER) or its send fails with anything, not only an
    OSError."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    registry = SessionRegistry()
    session = registry.open(None)
    connection = Connection(ours, session, ChannelPolicy(), lambda c: None)
    try:
        duplicate = os.dup(theirs.fileno())
        send_reply(connection, {"seq": {1, 2}, "returnCode": 0}, [duplicate])
        assert not _open_fd(duplicate)
        theirs.settimeout(2)
        assert channel.receive_message(theirs) == (
            {"seq": None, "returnCode": NNRT_INVALID_PARAMETER}, [])

        def failing_send(sock, data, fds=()):
            raise MemoryError("no memory for the ancillary data")

        monkeypatch.setattr(channel, "send_packet", failing_send)
        duplicate = os.dup(theirs.fileno())
        with pytest.raises(MemoryError):
            connection.send(b'{"seq":1,"returnCode":0}', [duplicate])
        assert not _open_fd(duplicate)
    finally:
        connection.end()
        registry.close(session)
        theirs.close()


def test_parse_message_closes_the_fds_of_anything_it_refuses():
    for what, packet in UNPARSABLE.items():
        r, w = os.pipe()
        with pytest.raises(ValueError):
            channel.parse_message(packet, [r])
        assert not _open_fd(r), what
        os.close(w)
    assert channel.parse_message(b'{"op":"fetch","seq":1,"bufferId":2}') == {
        "op": "fetch", "seq": 1, "bufferId": 2}


# -- 2.6: per-uid shares -------------------------------------------------------------------


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A runtime directory like a system's /run/nnrt with group nnrt: root:nogroup, 2750
    (setgid: the driver's sockets get the group), under a 0755 directory in /tmp."""
    base = Path(tempfile.mkdtemp(prefix="nnrt-trust-sessions-", dir="/tmp"))
    os.chmod(base, 0o755)
    runtime = base / "rt"
    runtime.mkdir()
    os.chown(runtime, 0, OTHER)
    os.chmod(runtime, 0o2750)
    yield runtime
    shutil.rmtree(base, ignore_errors=True)


# Run as uid 65534: opens a session, allocates the sizes given (held until it exits), and
# says which session it got and each allocation's return code; or the error that refused it.
OTHER_UID_CLIENT = textwrap.dedent("""
    import json, os, sys
    from pathlib import Path
    from nnrt.client.core.driver import DriverClient, DriverGone

    directory, name, sizes = Path(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3])
    try:
        client = DriverClient.connect(name, directory, timeout=20)
    except DriverGone as exc:
        print(json.dumps({"uid": os.getuid(), "refused": str(exc)}), flush=True)
        sys.exit(0)
    with client:
        codes = [client.allocate_buffer(size)[0] for size in sizes]
        print(json.dumps({"uid": os.getuid(), "session": client.session_id, "codes": codes}),
              flush=True)
""")


def _as_other_uid(driver, sizes: list[int]) -> dict:
    done = subprocess.run(
        ["setpriv", "--reuid", str(OTHER), "--regid", str(OTHER), "--clear-groups",
         sys.executable, "-c", OTHER_UID_CLIENT, str(driver.runtime_dir), driver.name,
         json.dumps(sizes)], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["uid"] == OTHER
    return result


@needs_other_user
@pytest.mark.multiprocess
def test_one_uid_holds_at_most_half_the_driver_budget_and_another_uid_finds_room(shared_dir):
    """The issue's case with the defaults: an 8 MiB driver budget, so 2 MiB a session and
    4 MiB a uid. Four sessions of one process each ask for their 2 MiB: the third and fourth
    are refused (the uid's share, named in the log), so another uid's allocations succeed;
    imports are charged alike; when a session ends its share comes back."""
    driver = start_driver(shared_dir, "cpu", "--max-driver-memory-mb", "8")
    clients = []
    try:
        assert os.lstat(driver.session_path).st_gid == OTHER
        assert "per uid at most 64 sessions (--max-sessions-per-uid) and 4194304 bytes " \
               "(4.0 MiB) of shared memory (--max-uid-memory-mb: default, half the " \
               "driver's budget)" in driver.log()
        clients = [driver.client() for _ in range(4)]
        codes = [client.allocate_buffer(2 * MIB)[0] for client in clients]
        assert codes == [NNRT_SUCCESS, NNRT_SUCCESS, NNRT_OUT_OF_MEMORY, NNRT_OUT_OF_MEMORY]
        assert wait_until(lambda: "exceeds uid 0's share of the driver's shared-memory budget: "
                          "its 4 session(s) hold 4194304 bytes (4.0 MiB) of 4194304 bytes "
                          "(4.0 MiB) (--max-uid-memory-mb)" in driver.log(), TIMEOUT), \
            driver.log()[-2000:]
        fd = _memfd("trust-share", MIB)
        try:
            assert clients[2].import_fd(fd)[0] == NNRT_OUT_OF_MEMORY  # the other door
        finally:
            os.close(fd)
        # Another user finds room: its 1 + 1 MiB (its session's 2 MiB) both granted.
        other = _as_other_uid(driver, [MIB, MIB])
        assert other["codes"] == [NNRT_SUCCESS, NNRT_SUCCESS], other
        assert _used_bytes(driver) == 4 * MIB  # the other uid's session has ended
        # A session of the first uid ends: its 2 MiB are the uid's again.
        clients[0].close()
        assert wait_until(lambda: _used_bytes(driver) == 2 * MIB, TIMEOUT)
        assert clients[2].allocate_buffer(2 * MIB)[0] == NNRT_SUCCESS
        for client in clients:
            client.close()
        assert wait_until(lambda: _used_bytes(driver) == 0, TIMEOUT)
        assert driver.proc.poll() is None
    finally:
        for client in clients:
            client.close()
        assert driver.stop() == 0


def _refusal(driver) -> dict:
    """What a raw connection gets when refused: the reply, then end of file."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    sock.settimeout(5)
    try:
        sock.connect(str(driver.session_path))
        reply, fds = channel.receive_message(sock)
        assert fds == []
        assert sock.recv(100) == b""
        return reply
    finally:
        sock.close()


@needs_other_user
@pytest.mark.multiprocess
def test_sessions_beyond_the_per_uid_cap_are_refused_and_another_uid_connects(shared_dir):
    """--max-sessions-per-uid 3: the fourth session of one uid (root: not exempt) is refused
    HDF_ERR_NOPERM with the reason and no session, logged at most once in 10 s; another uid
    still opens one; when a session ends its slot is free again, and after all end the uid
    opens its three again. Refused connections leave no fd behind."""
    driver = start_driver(shared_dir, "cpu", "--max-sessions-per-uid", "3")
    clients = []
    try:
        pid = driver.pid
        clients = [driver.client() for _ in range(3)]
        assert "(uid 0, its session 3 of at most 3)" in driver.log()
        fds_at_cap = open_fds(pid)
        reason = "uid 0 has 3 sessions open, the most one uid may have (--max-sessions-per-uid)"
        reply = _refusal(driver)
        assert reply["returnCode"] == HDF_ERR_NOPERM and "session" not in reply, reply
        assert reason in reply["reason"]
        with pytest.raises(DriverGone, match=re.escape("--max-sessions-per-uid")):
            driver.client()
        for _ in range(20):
            _refusal(driver)
        assert wait_until(lambda: open_fds(pid) <= fds_at_cap, TIMEOUT), \
            open_fds(pid) - fds_at_cap
        # One WARNING line for the episode (the rest counted in the next one).
        assert driver.log().count(f"WARNING nnrt.server.channel_server: session channel: refused "
                                  f"pid {os.getpid()}: {reason}") == 1
        other = _as_other_uid(driver, [MIB])
        assert "refused" not in other and other["codes"] == [NNRT_SUCCESS], other
        # A slot comes back when a session ends.
        clients.pop().close()

        def reopened() -> bool:
            try:
                clients.append(driver.client())
            except DriverGone:
                return False
            return True

        assert wait_until(reopened, TIMEOUT, interval=0.05)
        assert _refusal(driver)["returnCode"] == HDF_ERR_NOPERM
        for client in clients:
            client.close()
        clients = []
        assert wait_until(reopened, TIMEOUT, interval=0.05)
        clients += [driver.client(), driver.client()]
        assert _refusal(driver)["returnCode"] == HDF_ERR_NOPERM
        assert driver.proc.poll() is None
    finally:
        for client in clients:
            client.close()
        assert driver.stop() == 0


@pytest.mark.multiprocess
@pytest.mark.parametrize("options", [["--max-sessions-per-uid", "0"],
                                     ["--max-uid-memory-mb", "0"]])
def test_bad_per_uid_options_are_usage_errors(runtime_dir, options):
    done = subprocess.run([sys.executable, "-m", "nnrt.server", "cpu", "--runtime-dir",
                           str(runtime_dir), *options], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 2 and options[0] in done.stderr


@pytest.mark.multiprocess
def test_the_per_uid_limits_are_options_and_in_the_start_log(runtime_dir):
    driver = start_driver(runtime_dir, "cpu", "--max-sessions-per-uid", "5",
                          "--max-uid-memory-mb", "3")
    try:
        assert "per uid at most 5 sessions (--max-sessions-per-uid) and 3145728 bytes " \
               "(3.0 MiB) of shared memory (--max-uid-memory-mb)" in driver.log()
        with driver.client() as client:
            assert client.allocate_buffer(2 * MIB)[0] == NNRT_SUCCESS
            assert client.allocate_buffer(2 * MIB)[0] == NNRT_OUT_OF_MEMORY
    finally:
        assert driver.stop() == 0
