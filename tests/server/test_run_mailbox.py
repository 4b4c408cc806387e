"""The Run mailbox on the driver's side (server/channel_mailbox.py, channel_server.py): a
polled Run's request taken from shared memory and its reply posted there, the doorbell that
sends it to the socket instead, and the refusals — every one answered, its fds closed, the
session going on."""

from __future__ import annotations

import os
import threading
import time

import pytest

from nnrt.common import session_channel as channel
from nnrt.common.errors import (NNRT_INVALID_BUFFER, NNRT_INVALID_PARAMETER,
                                NNRT_OPERATION_FORBIDDEN, NNRT_SUCCESS)
from nnrt.common.run_mailbox import DOORBELL, DOORBELL_PACKET, SLOT_BYTES, RunMailbox
from nnrt.protos import hdi_pb2 as pb
from nnrt.server import channel_connection, channel_server, sessions
from nnrt.server.channel_mailbox import ConnectionMailbox, Doorbell
from tests.server.test_run_lean_forms import _Cpu

_REPLY = pb.RunReply(returnCode=NNRT_SUCCESS).SerializeToString()


def _run_packet(seq: int, payload: bytes = b"\x08\x01") -> bytes:
    return channel.RUN + channel.RUN_REQUEST.pack(seq, 0, 5) + payload


def _doorbell(seq: int) -> bytes:
    return DOORBELL + DOORBELL_PACKET.pack(seq)


def _until(condition, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.0005)
    return True


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


# -- the state of one connection's mailbox -------------------------------------------------


@pytest.fixture
def pair():
    """(the client's end, the driver's ConnectionMailbox) of one mailbox."""
    client, fd = RunMailbox.create()
    try:
        box = ConnectionMailbox(RunMailbox.adopt(fd))
    finally:
        os.close(fd)
    yield client, box
    box.close()
    client.close()


def test_a_reply_goes_to_the_mailbox_unless_its_client_rang(pair):
    client, box = pair
    assert box.ring(5) is Doorbell.UNKNOWN  # nothing of that seq came through it
    client.put_request(5, _run_packet(5))
    assert box.ring(5) is Doorbell.WAITING  # posted, never taken: the driver takes it now
    box.mailbox.take_request()
    assert not box.post_reply(5, b"R5")  # its client sleeps on the socket: the reply too
    client.put_request(6, _run_packet(6))
    box.mailbox.take_request()
    assert box.ring(6) is Doorbell.PENDING
    assert not box.post_reply(6, b"R6")
    client.put_request(7, _run_packet(7))
    box.mailbox.take_request()
    assert box.post_reply(7, b"R7") and client.reply(7) == b"R7"
    assert box.ring(7) is Doorbell.POSTED  # the driver's echo: "look in the mailbox"
    assert box.ring(6) is Doorbell.POSTED  # (an earlier one: its reply was taken already)


def test_only_the_run_taken_from_it_is_answered_there(pair):
    client, box = pair
    assert not box.post_reply(3, b"R3")  # a run that came on the socket
    client.put_request(4, _run_packet(4))
    box.mailbox.take_request()
    assert not box.post_reply(4, b"R" * (SLOT_BYTES + 1))  # too big: the socket
    assert box.post_reply(4, b"R" * SLOT_BYTES)


def test_a_closed_mailbox_sends_everything_to_the_socket(pair):
    client, box = pair
    client.put_request(4, _run_packet(4))
    box.mailbox.take_request()
    box.close()
    assert box.closed and not box.post_reply(4, b"R4") and box.ring(4) is Doorbell.UNKNOWN
    box.close()  # twice: nothing more


# -- the channel --------------------------------------------------------------------------


class _Runner:
    """The channel's Runner for these tests: every Run succeeds; payload b"\\x08\\x01" is a
    quick one (answered on the channel's thread), b"\\x08\\x02" a slow one (a worker, held
    until `release` is set)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.release.set()
        self.slow_started = threading.Event()

    def estimate(self, session, payload: bytes) -> float | None:
        return 1e-5 if payload == b"\x08\x01" else None

    def queue(self, session, payload: bytes, job) -> bool:
        return False

    def run_known(self, session, payload, deadline, within_s, answer) -> bool:
        return False

    def run_packet(self, session, payload, deadline, cancelled=None) -> bytes:
        if payload != b"\x08\x01":
            self.slow_started.set()
            self.release.wait(10)
        return _REPLY


class _Served:
    def __init__(self, tmp_path, monkeypatch, spare: bool = True, spin_s: float = 0.05):
        monkeypatch.setattr(channel_server, "spare_cpu", lambda: _Cpu(spare))
        self.registry = sessions.SessionRegistry()
        self.runner = _Runner()
        self.server = channel_server.SessionChannelServer(
            tmp_path / "m.session", self.registry, self.runner, workers=2,
            policy=channel_connection.ChannelPolicy(spin_s=spin_s))
        self.server.start()
        import socket
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock.settimeout(5)
        self.sock.connect(str(tmp_path / "m.session"))
        hello, _ = channel.receive_message(self.sock)
        self.session, = [s for s in self.registry.sessions() if s.id == hello["sessionId"]]
        self.box: RunMailbox | None = None

    def request(self, message: dict, fds=()) -> dict:
        channel.send_message(self.sock, message, fds)
        reply, got = channel.receive_message(self.sock)
        channel.close_fds(got)
        return reply

    def open_mailbox(self) -> RunMailbox:
        box, fd = RunMailbox.create()
        try:
            assert self.request({"op": "mailbox", "seq": 1}, [fd]) == \
                {"seq": 1, "returnCode": NNRT_SUCCESS}
        finally:
            os.close(fd)
        self.box = box
        return box

    def run_on_socket(self, seq: int) -> bytes:
        """A quick Run on the socket, after a pause: the session alone (SOLO_S), the
        channel's thread polls after it."""
        time.sleep(0.01)
        self.sock.send(_run_packet(seq))
        data = self.sock.recv(4096)
        assert data[:9] == channel.RUN + seq.to_bytes(8, "little")
        return data

    def prime(self) -> None:
        """Two quick Runs on the socket: after the second (the first has no gap to go by)
        the channel's thread polls, and the mailbox says so."""
        self.run_on_socket(100)
        self.sock.send(_run_packet(101))
        assert self.sock.recv(4096)[:9] == channel.RUN + (101).to_bytes(8, "little")

    def close(self) -> None:
        self.sock.close()
        self.server.stop(grace=1)
        if self.box is not None:
            self.box.close()


@pytest.fixture
def served(tmp_path, monkeypatch):
    served = _Served(tmp_path, monkeypatch)
    yield served
    served.close()


def test_a_polled_run_comes_and_goes_through_the_mailbox(served):
    box = served.open_mailbox()
    assert served.session.run_mailbox and served.session.mailbox_runs == 0
    served.prime()
    for seq in range(3, 8):
        assert _until(box.driver_polls)
        box.put_request(seq, _run_packet(seq))
        assert _until(lambda: box.replied(seq))
        reply = box.reply(seq)
        assert reply[:9] == channel.RUN + seq.to_bytes(8, "little")
        assert reply[1 + channel.RUN_REPLY.size:] == _REPLY
    assert served.session.mailbox_runs == 5
    served.sock.settimeout(0.05)
    with pytest.raises(TimeoutError):
        served.sock.recv(4096)  # nothing of them on the socket


def test_a_request_posted_to_a_driver_not_polling_is_served_at_its_doorbell(tmp_path,
                                                                             monkeypatch):
    served = _Served(tmp_path, monkeypatch, spare=False)  # the channel never polls
    try:
        box = served.open_mailbox()
        served.prime()
        assert not box.driver_polls()
        box.put_request(3, _run_packet(3))  # as a client whose look at the window was stale
        time.sleep(0.02)
        assert served.session.mailbox_runs == 0  # nobody looked
        served.sock.send(_doorbell(3))
        data = served.sock.recv(4096)  # answered on the socket: its client sleeps there
        assert data[:9] == channel.RUN + (3).to_bytes(8, "little")
        assert not box.replied(3) and served.session.mailbox_runs == 1
    finally:
        served.close()


def test_a_doorbell_after_the_reply_is_echoed(served):
    box = served.open_mailbox()
    served.prime()
    assert _until(box.driver_polls)
    box.put_request(3, _run_packet(3))
    assert _until(lambda: box.replied(3))
    served.sock.send(_doorbell(3))  # it stopped polling as the reply came
    assert served.sock.recv(4096) == _doorbell(3)


def test_a_slow_run_from_the_mailbox_answers_on_the_socket_once_its_client_rang(served):
    box = served.open_mailbox()
    served.prime()
    served.runner.release.clear()
    assert _until(box.driver_polls)
    box.put_request(3, _run_packet(3, b"\x08\x02"))  # goes to a worker
    assert served.runner.slow_started.wait(5)
    served.sock.send(_doorbell(3))
    assert _until(lambda: not served.server._pending and served.session.mailbox_runs == 1)
    time.sleep(0.02)  # the doorbell read, the run still computing
    served.runner.release.set()
    data = served.sock.recv(4096)
    assert data[:9] == channel.RUN + (3).to_bytes(8, "little") and not box.replied(3)


def test_a_client_posting_run_after_run_keeps_no_other_session_waiting(served, tmp_path):
    """A process (not a thread: it must not wait for this one's GIL) posts Run after Run in
    the mailbox as long as the driver polls it; another session's connection and Run are
    served meanwhile, and end the polling (the session is no longer alone)."""
    import socket

    box = served.open_mailbox()
    steps = []  # what the channel's thread did, in order: a look at the sockets, a take
    server = served.server
    real_select, real_take = server._selector.select, server._take_from_mailbox
    server._selector.select = lambda timeout=None: steps.append("select") or \
        real_select(timeout)
    server._take_from_mailbox = lambda connection: steps.append("take") or \
        real_take(connection)
    served.prime()
    assert _until(box.driver_polls)
    r, w = os.pipe()
    child = os.fork()
    if child == 0:  # the flooder: the mailbox alone, then out
        try:
            seq, count = 1000, 0
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and box.driver_polls():
                seq += 1
                box.put_request(seq, _run_packet(seq))
                until = time.monotonic() + 0.2
                while not box.replied(seq) and time.monotonic() < until:
                    pass
                count += 1
                if count == 50:
                    os.write(w, b"f")  # flooding
            os.write(w, b"e")
        finally:
            os._exit(0)
    os.close(w)
    other = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        readable = _until(lambda: bool(__import__("select").select([r], [], [], 0)[0]), 5)
        assert readable and os.read(r, 1) == b"f"  # 50 Runs through the mailbox so far
        other.settimeout(3)
        other.connect(str(tmp_path / "m.session"))  # accepted and greeted meanwhile
        channel.receive_message(other)
        other.send(_run_packet(7))
        assert other.recv(4096)[:9] == channel.RUN + (7).to_bytes(8, "little")
    finally:
        other.close()
        os.waitpid(child, 0)
        os.close(r)
    taken = [i for i, step in enumerate(steps) if step == "take"]
    assert len(taken) >= 50
    assert all(steps[i - 1] == "select" for i in taken)  # never two takes without a look


@pytest.mark.parametrize("garbage", ["length", "not a run", "another seq"])
def test_a_malformed_mailbox_request_is_refused_and_the_session_goes_on(served, garbage,
                                                                         caplog):
    box = served.open_mailbox()
    served.prime()
    assert _until(box.driver_polls)
    if garbage == "length":
        box.put_request(3, _run_packet(3))
        box._words[1] = SLOT_BYTES + 1
    elif garbage == "not a run":
        box.put_request(3, b'{"op": "fetch"}')
    else:
        box.put_request(3, _run_packet(4))
    if garbage == "length":  # its seq cannot be trusted: answered as a short packet is
        assert channel.parse_message(served.sock.recv(4096)) == \
            {"seq": None, "returnCode": NNRT_INVALID_PARAMETER}
    else:  # answered for the mailbox's seq, where its client looks
        assert _until(lambda: box.replied(3))
        reply = pb.RunReply.FromString(box.reply(3)[1 + channel.RUN_REPLY.size:])
        assert reply.returnCode == NNRT_INVALID_PARAMETER
    assert "mailbox request" in caplog.text
    served.run_on_socket(5)  # and the session goes on


@pytest.mark.parametrize("packet", [DOORBELL, DOORBELL + b"\x00" * 9, _doorbell(3)])
def test_a_doorbell_without_a_mailbox_or_of_a_wrong_size_is_refused(served, packet, caplog):
    if packet != _doorbell(3):
        served.open_mailbox()
    served.sock.send(packet)
    assert channel.parse_message(served.sock.recv(4096)) == \
        {"seq": None, "returnCode": NNRT_INVALID_PARAMETER}
    assert "doorbell of" in caplog.text
    served.run_on_socket(4)


def test_a_doorbell_for_a_run_that_never_was_is_answered_invalid(served, caplog):
    served.open_mailbox()
    served.sock.send(_doorbell(42))
    data = served.sock.recv(4096)
    assert data[:9] == channel.RUN + (42).to_bytes(8, "little")
    assert pb.RunReply.FromString(data[1 + channel.RUN_REPLY.size:]).returnCode == \
        NNRT_INVALID_PARAMETER
    assert "not in its mailbox" in caplog.text


def test_the_mailbox_op_refuses_what_it_cannot_map_and_keeps_no_fd(served):
    before = _open_fds()
    r, w = os.pipe()
    assert served.request({"op": "mailbox", "seq": 2}, [r]) == \
        {"seq": 2, "returnCode": NNRT_INVALID_BUFFER}
    assert served.request({"op": "mailbox", "seq": 3}) == \
        {"seq": 3, "returnCode": NNRT_INVALID_PARAMETER}
    box, fd = RunMailbox.create()
    assert served.request({"op": "mailbox", "seq": 4}, [fd, r]) == \
        {"seq": 4, "returnCode": NNRT_INVALID_PARAMETER}
    assert not served.session.run_mailbox
    os.close(r), os.close(w), os.close(fd)
    box.close()
    assert _until(lambda: _open_fds() == before)  # the driver's copies all closed
    served.open_mailbox()
    box, fd = RunMailbox.create()
    assert served.request({"op": "mailbox", "seq": 6}, [fd]) == \
        {"seq": 6, "returnCode": NNRT_INVALID_PARAMETER}  # one a session
    os.close(fd)
    box.close()
    # the two ends of the one mapped: each mapping holds a duplicate of its fd (mmap's own)
    assert _until(lambda: _open_fds() == before + 2)


def test_a_driver_that_never_polls_declines_the_mailbox(tmp_path, monkeypatch):
    served = _Served(tmp_path, monkeypatch, spin_s=0.0)  # --spin-us 0
    try:
        box, fd = RunMailbox.create()
        assert served.request({"op": "mailbox", "seq": 2}, [fd]) == \
            {"seq": 2, "returnCode": NNRT_OPERATION_FORBIDDEN}
        os.close(fd)
        box.close()
    finally:
        served.close()


def test_the_session_end_unmaps_the_mailbox(served):
    def mapped() -> int:
        with open("/proc/self/maps") as maps:
            return sum("nnrt-run-mailbox" in line for line in maps)

    served.open_mailbox()
    assert mapped() == 2  # the test's end and the driver's (one process here)
    connection, = [key.data for key in served.server._selector.get_map().values()
                   if isinstance(key.data, channel_connection.Connection)]
    served.sock.close()
    assert _until(lambda: connection.mailbox.closed)
    assert mapped() == 1


# -- a real client and driver --------------------------------------------------------------


def _polling_client(monkeypatch, mailbox: str) -> None:
    """A client that polls (two CPUs, one spare: as the count says on a quiet machine)."""
    from nnrt.client.core import driver as core_driver
    from nnrt.client.core import run_mailbox as client_mailbox
    from nnrt.client.core import waiting

    monkeypatch.setattr(waiting, "usable_cores", lambda: 2)
    monkeypatch.setattr(core_driver, "spare_cpu", lambda: _Cpu(True))
    monkeypatch.setenv(client_mailbox.MAILBOX_ENV, mailbox)


def _runs_checked(client, model_id, x, y, runs: int) -> None:
    import numpy as np

    from tests.helpers.hdi_models import io

    ins, outs = [io(x, 4).SerializeToString()], [io(y, 4).SerializeToString()]
    for i in range(runs):
        x.array(np.float32, [4])[:] = i
        assert client.run(model_id, ins, outs, timeout=10).returnCode == NNRT_SUCCESS
        np.testing.assert_array_equal(y.array(np.float32, [4]), [i, i + 1, i + 2, i + 3])


def _run_until(seen, client, model_id, x, y, seconds: float = 10.0) -> None:
    """Runs (each checked) until `seen()`: the driver takes a Run from the mailbox only while
    its own count finds a CPU spare, which a busy machine may not for a while; skipped when
    it never did in `seconds`."""
    deadline = time.monotonic() + seconds
    while not seen():
        if time.monotonic() > deadline:
            pytest.skip(f"no CPU was spare for the driver in {seconds:g} s of runs")
        _runs_checked(client, model_id, x, y, 100)


@pytest.mark.multiprocess
@pytest.mark.parametrize("mailbox", ["1", "0"])
def test_a_sessions_mailbox_and_its_runs_show_in_the_drivers_status(runtime_dir, monkeypatch,
                                                                    mailbox):
    from tests.conftest import start_driver
    from tests.helpers.admin import status
    from tests.helpers.hdi_models import prepared_add

    _polling_client(monkeypatch, mailbox)
    driver = start_driver(runtime_dir, "cpu", "--spin-us", "5000")
    try:
        with driver.client() as client:
            model_id, x, y = prepared_add(client)

            def mine():
                found, = [s for s in status(driver).sessions if s.sessionId == client.session_id]
                return found

            _runs_checked(client, model_id, x, y, 100)
            if mailbox == "1":
                _run_until(lambda: mine().mailboxRuns > 0, client, model_id, x, y)
                assert mine().runMailbox
            else:
                _runs_checked(client, model_id, x, y, 200)
                assert not mine().runMailbox and mine().mailboxRuns == 0
            x.close(), y.close()
    finally:
        assert driver.stop() == 0


@pytest.mark.multiprocess
def test_a_client_that_stops_polling_at_once_still_gets_every_answer(runtime_dir,
                                                                     monkeypatch):
    """A window already over: the client rings the doorbell as soon as it posted, and its
    reply comes on the socket, or the driver's word that it is in the mailbox — each answer
    once, and right."""
    from nnrt.client.core import run_mailbox as client_mailbox
    from tests.conftest import start_driver
    from tests.helpers.hdi_models import prepared_add

    _polling_client(monkeypatch, "1")
    rang = []
    real = client_mailbox.ClientMailbox.post_and_poll

    def post_and_poll(self, sock, seq, packet, until, dead):
        reply = real(self, sock, seq, packet, 0.0, dead)
        rang.append(reply is None)
        return reply

    monkeypatch.setattr(client_mailbox.ClientMailbox, "post_and_poll", post_and_poll)
    driver = start_driver(runtime_dir, "cpu", "--spin-us", "5000")
    try:
        with driver.client() as client:
            model_id, x, y = prepared_add(client)
            _run_until(lambda: sum(rang) > 5, client, model_id, x, y)
            assert client._orphans == 0 and not client._waiters  # nothing answered twice
            x.close(), y.close()
    finally:
        assert driver.stop() == 0


@pytest.mark.multiprocess
def test_a_driver_killed_while_its_client_runs_through_the_mailbox_fails_it_at_once(
        runtime_dir, monkeypatch):
    """Runs back to back through the mailbox, the driver SIGKILLed meanwhile: the run in
    flight fails with DriverGone within the polling window and a doorbell (no wait for its
    timeout), every later one at once, and the client's mapping goes at its close."""
    import signal

    from nnrt.client.core.errors import DriverGone
    from tests.conftest import start_driver
    from tests.helpers.hdi_models import prepared_add

    _polling_client(monkeypatch, "1")
    driver = start_driver(runtime_dir, "cpu", "--spin-us", "5000")
    client = driver.client()
    model_id, x, y = prepared_add(client)
    mailbox_runs = []
    from nnrt.client.core import run_mailbox as client_mailbox
    real = client_mailbox.ClientMailbox.post_and_poll
    monkeypatch.setattr(client_mailbox.ClientMailbox, "post_and_poll",
                        lambda self, *a: mailbox_runs.append(1) or real(self, *a))
    _run_until(lambda: len(mailbox_runs) > 10, client, model_id, x, y)
    failure = {}

    def running() -> None:
        from tests.helpers.hdi_models import io

        ins, outs = [io(x, 4).SerializeToString()], [io(y, 4).SerializeToString()]
        try:
            while True:
                client.run(model_id, ins, outs, timeout=30)
                failure["last_ok"] = time.monotonic()
        except DriverGone as exc:
            failure["error"], failure["at"] = exc, time.monotonic()

    worker = threading.Thread(target=running)
    worker.start()
    time.sleep(0.2)
    killed = time.monotonic()
    driver.proc.send_signal(signal.SIGKILL)
    driver.proc.wait(10)
    worker.join(10)
    assert not worker.is_alive() and "error" in failure
    assert failure["at"] - killed < 5  # not the run's 30 s timeout
    with pytest.raises(DriverGone):
        client.run(model_id, [], [], timeout=1)
    x.close(), y.close()
    client.close()
    with open("/proc/self/maps") as maps:
        assert not any("nnrt-run-mailbox" in line for line in maps)


@pytest.mark.multiprocess
def test_a_client_closed_while_another_thread_runs_through_the_mailbox_raises_driver_gone(
        runtime_dir, monkeypatch):
    """The mailbox is unmapped at close only under the reader's lock, and looked at under it:
    a Run that was deciding on the mailbox as another thread closed the client ends with
    DriverGone, never with an error of the released mapping (the close, meanwhile, leaves
    the mapping to the collector after a bounded wait for the reader)."""
    from nnrt.client.core import run_mailbox as client_mailbox
    from nnrt.client.core.errors import DriverGone
    from tests.conftest import start_driver
    from tests.helpers.hdi_models import io, prepared_add

    _polling_client(monkeypatch, "1")
    mailbox_runs, deciding, closed = [], threading.Event(), threading.Event()
    real_post, real_takes = (client_mailbox.ClientMailbox.post_and_poll,
                             client_mailbox.ClientMailbox.takes)
    monkeypatch.setattr(client_mailbox.ClientMailbox, "post_and_poll",
                        lambda self, *a: mailbox_runs.append(1) or real_post(self, *a))
    driver = start_driver(runtime_dir, "cpu", "--spin-us", "5000")
    try:
        client = driver.client()
        model_id, x, y = prepared_add(client)
        _run_until(lambda: len(mailbox_runs) > 10, client, model_id, x, y)

        def takes(self, packet):  # the next Run stops here until the close is done
            deciding.set()
            closed.wait(5)
            return real_takes(self, packet)

        monkeypatch.setattr(client_mailbox.ClientMailbox, "takes", takes)
        ended = []

        def running() -> None:  # back to back, so that they poll (a think time within 200 µs)
            ins, outs = [io(x, 4).SerializeToString()], [io(y, 4).SerializeToString()]
            try:
                for _ in range(100_000):
                    client.run(model_id, ins, outs, timeout=10)
                ended.append("answered")
            except DriverGone:
                ended.append("gone")
            except BaseException as exc:  # noqa: BLE001  (what the test is about)
                ended.append(exc)

        worker = threading.Thread(target=running)
        worker.start()
        if deciding.wait(5):  # (not when the driver's count found no CPU spare just then)
            client.close()
            closed.set()
            worker.join(10)
            assert not worker.is_alive() and ended == ["gone"]
        else:
            closed.set()
            worker.join(10)
            client.close()
        x.close(), y.close()
    finally:
        assert driver.stop() == 0
