"""The Run path's lean forms (issue 32): what a client keeps from one Run to the next (the
request's bytes, a success reply decoded), that it sleeps for its reply by default, and
the driver's side of it (pipelined packets found by a poll, a known request looked up once
per packet and never kept past its model, runs counted while the channel stops)."""

from __future__ import annotations

import os
import select
import socket
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from nnrt.client.core import driver as core_driver
from nnrt.client.core import run_mailbox as client_mailbox
from nnrt.client.core import waiting
from nnrt.common.errors import NNRT_INVALID_MODEL, NNRT_SUCCESS
from nnrt.protos import hdi_pb2 as pb
from nnrt.server import channel_connection, channel_server, sessions
from tests.conftest import start_driver
from tests.server.test_run_fast_path import ChannelRunner
from tests.helpers.hdi_models import io, prepared_add

pytestmark = pytest.mark.multiprocess


def _polled(client):
    """A prepared quick model, run until the driver says REPLY_POLL: (model id, buffers x and
    y, the run's serialized inputs and outputs)."""
    model_id, x, y = prepared_add(client)
    ins, outs = [io(x, 4).SerializeToString()], [io(y, 4).SerializeToString()]
    deadline = time.monotonic() + 10
    while model_id not in client._polled_models and time.monotonic() < deadline:
        client.run(model_id, ins, outs, timeout=10)
    assert model_id in client._polled_models
    return model_id, x, y, ins, outs


def test_the_same_tensors_make_their_run_request_once(runtime_dir, monkeypatch):
    """Serialized tensors run again are sent as the bytes made the first time; other
    tensors get their own; IOTensor messages (unhashable) are serialized each time; the
    kept requests are bounded."""
    made = []
    real = core_driver.run_request_bytes
    monkeypatch.setattr(core_driver, "run_request_bytes",
                        lambda *a: made.append(1) or real(*a))
    monkeypatch.setattr(core_driver, "_MAX_KEPT_REQUESTS", 2)
    driver = start_driver(runtime_dir, "cpu")
    try:
        with driver.client() as client:
            model_id, x, y = prepared_add(client)
            ins, outs = [io(x, 4).SerializeToString()], [io(y, 4).SerializeToString()]
            for _ in range(5):
                assert client.run(model_id, ins, outs, timeout=10).returnCode == NNRT_SUCCESS
            assert len(made) == 1
            np.testing.assert_array_equal(y.array(np.float32, [4]), [1, 3, 5, 7])
            for _ in range(2):
                assert client.run(model_id, [io(x, 4)], [io(y, 4)], timeout=10).returnCode \
                    == NNRT_SUCCESS
            assert len(made) == 3
            for name in ("a", "b", "c"):  # three more requests: at most two kept
                tensor = io(x, 4)
                tensor.name = name
                assert client.run(model_id, [tensor.SerializeToString()], outs,
                                  timeout=10).returnCode == NNRT_SUCCESS
                assert len(client._requests) <= 2
            x.close(), y.close()
    finally:
        assert driver.stop() == 0


def test_a_success_reply_seen_before_is_not_decoded_again(runtime_dir, monkeypatch):
    """The same answer again (a model of static shapes) is the message decoded the first
    time; a failure is decoded every time and never kept."""
    decoded = []

    class CountingRunReply:
        @staticmethod
        def FromString(data: bytes) -> pb.RunReply:
            decoded.append(data)
            return pb.RunReply.FromString(data)

    class Pb:
        def __getattr__(self, name):
            return getattr(pb, name)

    counting = Pb()
    counting.RunReply = CountingRunReply
    monkeypatch.setattr(core_driver, "pb", counting)
    driver = start_driver(runtime_dir, "cpu")
    try:
        with driver.client() as client:
            model_id, x, y = prepared_add(client)
            ins, outs = [io(x, 4).SerializeToString()], [io(y, 4).SerializeToString()]
            replies = [client.run(model_id, ins, outs, timeout=10) for _ in range(4)]
            assert all(r.returnCode == NNRT_SUCCESS for r in replies)
            assert [list(d.values) for d in replies[-1].outputDims] == [[4]]
            assert len(decoded) == 1 and all(r is replies[0] for r in replies)
            for _ in range(2):  # an unknown model: refused, decoded each time, not kept
                assert client.run(model_id + 100, ins, outs, timeout=10).returnCode == \
                    NNRT_INVALID_MODEL
            assert len(decoded) == 3
            assert all(not r.returnCode for r in client._replies.values())
            x.close(), y.close()
    finally:
        assert driver.stop() == 0


class _Cpu:
    """A stand-in for common/cpus.SpareCpu whose answer the test sets."""

    def __init__(self, spare: bool) -> None:
        self.spare = spare

    def now(self) -> bool:
        return self.spare


def _count_polls(monkeypatch) -> list:
    """What the client's polls for a reply append to: a non-blocking read of the socket, or
    a Run posted in the mailbox and polled there."""
    polls = []
    real_read = core_driver.DriverClient._read_one
    real_post = client_mailbox.ClientMailbox.post_and_poll

    def read_one(self, block):
        if not block:
            polls.append("socket")
        return real_read(self, block)

    monkeypatch.setattr(core_driver.DriverClient, "_read_one", read_one)
    monkeypatch.setattr(client_mailbox.ClientMailbox, "post_and_poll",
                        lambda self, *a: polls.append("mailbox") or real_post(self, *a))
    return polls


@pytest.mark.parametrize("mailbox", ["0", "1"])
def test_a_quick_run_polls_for_its_reply_only_on_a_spare_cpu(runtime_dir, monkeypatch, mailbox):
    """REPLY_POLL marks a quick model; by default (NNRT_CLIENT_SPIN_US unset: 200 µs) its
    caller polls for the reply while a CPU is spare (nobody waits for one) and its runs
    come back to back — on the socket, or in the Run mailbox where there is one — and
    sleeps in recv() — no non-blocking reads at all — while no CPU is spare, after a pause
    longer than the window, or with a window of 0."""
    monkeypatch.delenv(core_driver.SPIN_ENV, raising=False)
    monkeypatch.setenv(client_mailbox.MAILBOX_ENV, mailbox)
    monkeypatch.setattr(waiting, "usable_cores", lambda: 2)
    cpu = _Cpu(spare=False)
    monkeypatch.setattr(core_driver, "spare_cpu", lambda: cpu)
    polls = _count_polls(monkeypatch)
    driver = start_driver(runtime_dir, "cpu")
    try:
        with driver.client() as client:
            assert client._spin == pytest.approx(core_driver.DEFAULT_SPIN_US / 1e6)
            model_id, x, y, ins, outs = _polled(client)
            for _ in range(50):  # the machine busy: asleep in recv()
                client.run(model_id, ins, outs, timeout=10)
            assert not polls
            cpu.spare = True
            for _ in range(50):
                client.run(model_id, ins, outs, timeout=10)
            assert polls
            if mailbox == "0":  # (with "1": there too, whenever the driver's count let it poll)
                assert "mailbox" not in polls
            polls.clear()
            for _ in range(5):  # after a pause the driver sleeps too: no poll through its wake
                time.sleep(0.01)
                client.run(model_id, ins, outs, timeout=10)
            assert not polls
            client._spin = 0.0  # as NNRT_CLIENT_SPIN_US=0 sets it: never
            for _ in range(50):
                client.run(model_id, ins, outs, timeout=10)
            assert not polls
            x.close(), y.close()
    finally:
        assert driver.stop() == 0


def test_more_pending_is_a_poll_of_the_connection():
    """A packet waiting, a hang-up: pending (the worker path meets either); nothing: not."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        poller = select.poll()
        poller.register(ours, select.POLLIN)
        assert not channel_server._more_pending(poller)
        theirs.send(b"R" + bytes(16))
        assert channel_server._more_pending(poller)
        ours.recv(64)
        assert not channel_server._more_pending(poller)
        theirs.close()
        assert channel_server._more_pending(poller)
    finally:
        ours.close()
        theirs.close()


def test_a_known_request_is_looked_up_once_per_packet_and_never_outlives_its_model():
    """The estimate's lookup serves the run of the same packet (not another packet of the
    same bytes), and releasing the model or closing the session forgets it: a packet of
    those bytes then finds no model (NNRT_INVALID_MODEL), the model is not kept alive."""
    from tests.server.test_run_fast_path import _request, _session_with_model

    registry, session, runner, entry, model_id = _session_with_model()
    payload = _request(session, model_id)
    assert pb.RunReply.FromString(runner.run_packet(session, payload, None)).returnCode == \
        NNRT_SUCCESS
    packet = payload[:1] + payload[1:]  # a fresh packet of known bytes, as the channel gives
    assert runner.estimate(session, packet) is not None
    assert session.known_run is not None and session.known_run[0] is packet
    lookups = []
    real_get = dict.get

    class Counting(dict):
        def get(self, key, default=None):
            lookups.append(key)
            return real_get(self, key, default)

    entry.checked_requests = Counting(entry.checked_requests)
    assert pb.RunReply.FromString(runner.run_packet(session, packet, None)).returnCode == \
        NNRT_SUCCESS
    assert lookups == []  # found through the estimate's lookup
    other = payload[:1] + payload[1:]
    assert pb.RunReply.FromString(runner.run_packet(session, other, None)).returnCode == \
        NNRT_SUCCESS
    assert len(lookups) == 1  # another packet: looked up itself
    session.release_prepared(model_id)
    assert session.known_run is None
    reply = pb.RunReply.FromString(runner.run_packet(session, other, None))
    assert reply.returnCode == NNRT_INVALID_MODEL
    registry.close(session)
    assert session.known_run is None


def test_stop_waits_for_the_runs_in_flight(tmp_path):
    """Runs are counted under a plain lock now; `stop` still waits (bounded) for a run in
    flight to finish before it ends the sessions."""
    registry = sessions.SessionRegistry()
    finished = threading.Event()
    release = threading.Event()

    def slow_run(session, payload, deadline, cancelled):
        release.wait(5)
        finished.set()
        return pb.RunReply().SerializeToString()

    server = channel_server.SessionChannelServer(tmp_path / "s.session", registry,
                                           ChannelRunner(slow_run), workers=2)
    server.start()
    client = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        client.connect(str(tmp_path / "s.session"))
        client.recv(4096)  # the greeting
        client.send(b"R" + channel_server.channel.RUN_REQUEST.pack(1, 0, 0) + b"\x08\x01")
        deadline = time.monotonic() + 5
        while server._runs == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert server._runs == 1
        threading.Timer(0.3, release.set).start()
        started = time.monotonic()
        server.stop(grace=5)
        assert finished.is_set()
        assert 0.2 < time.monotonic() - started < 4
        assert server._runs == 0
    finally:
        release.set()
        client.close()


def _quick_channel(tmp_path, policy: channel_connection.ChannelPolicy):
    """An in-process session channel whose every Run is quick and known (answered on the
    channel's own thread), and a connected client socket past the greeting."""
    registry = sessions.SessionRegistry()
    server = channel_server.SessionChannelServer(
        tmp_path / "q.session", registry,
        ChannelRunner(lambda *a: pb.RunReply().SerializeToString(), 1e-5),
        workers=2, policy=policy)
    server.start()
    client = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    client.settimeout(5)
    client.connect(str(tmp_path / "q.session"))
    client.recv(4096)  # the greeting
    return server, client


@pytest.mark.parametrize("spin_s, spare, polls", [(None, True, True), (None, False, False),
                                                   (0.0, True, False), (150e-6, True, True)])
def test_the_driver_polls_for_the_next_run_only_on_a_spare_cpu(tmp_path, monkeypatch, spin_s,
                                                               spare, polls):
    """By default (--spin-us 200) the channel's thread polls for a lone client's next Run
    after a quick one while a CPU is spare; it sleeps while none is, or with --spin-us 0."""
    calls = []
    real = channel_server.SessionChannelServer._spin
    monkeypatch.setattr(channel_server.SessionChannelServer, "_spin",
                        lambda self: calls.append(1) or real(self))
    monkeypatch.setattr(channel_server, "spare_cpu", lambda: _Cpu(spare))
    policy = channel_connection.ChannelPolicy() if spin_s is None else channel_connection.ChannelPolicy(
        spin_s=spin_s)
    server, client = _quick_channel(tmp_path, policy)
    try:
        for seq in range(1, 200):
            client.send(b"R" + channel_server.channel.RUN_REQUEST.pack(seq, 0, 5) + b"\x08\x01")
            assert client.recv(4096)[:9] == b"R" + seq.to_bytes(8, "little")
        assert bool(calls) == polls
    finally:
        client.close()
        server.stop(grace=1)


def test_a_polling_driver_still_sleeps_once_the_client_stops(runtime_dir, monkeypatch):
    """Wider windows than the defaults: both sides poll while runs come back to back (a CPU
    spare), and the driver takes no CPU once the client stops."""
    from tests.client.test_session_reader import _cpu_seconds

    monkeypatch.setenv(core_driver.SPIN_ENV, "500")
    driver = start_driver(runtime_dir, "cpu", "--spin-us", "300")
    try:
        with driver.client() as client:
            model_id, x, y = prepared_add(client)
            for _ in range(300):
                assert client.run(model_id, [io(x, 4)], [io(y, 4)], timeout=10).returnCode \
                    == NNRT_SUCCESS
            time.sleep(0.1)
            before = _cpu_seconds(driver.pid)
            time.sleep(1.0)
            assert _cpu_seconds(driver.pid) - before < 0.1  # asleep, not polling
            x.close(), y.close()
    finally:
        assert driver.stop() == 0


def test_on_a_machine_with_no_cpu_spare_nobody_polls(runtime_dir, monkeypatch):
    """The real count, real processes: with a busy loop on every CPU of the machine, the
    client never polls for a reply (no non-blocking read) and the driver's channel never
    polls for the next Run — its CPU a run stays that of a sleeper — though both windows
    are set and the runs come back to back."""
    from tests.client.test_session_reader import _cpu_seconds

    monkeypatch.setenv(core_driver.SPIN_ENV, "2000")
    monkeypatch.setattr(waiting, "usable_cores", lambda: 2)
    polls = _count_polls(monkeypatch)
    driver = start_driver(runtime_dir, "cpu", "--spin-us", "2000")
    hogs = []
    try:
        with driver.client() as client:
            model_id, x, y, ins, outs = _polled(client)
            hogs += [subprocess.Popen([sys.executable, "-c", "import time\nend = "
                                       "time.monotonic() + 20\nwhile time.monotonic() < end: "
                                       "pass"]) for _ in range(os.cpu_count() or 1)]
            time.sleep(0.3)  # the hogs are running: the count says so
            polls.clear()
            before = _cpu_seconds(driver.pid)
            for _ in range(200):
                assert client.run(model_id, ins, outs, timeout=10).returnCode == NNRT_SUCCESS
            driver_cpu = _cpu_seconds(driver.pid) - before
            assert not polls  # every read of the client's blocked
            # a driver polling 2 ms after each of 200 runs would burn ~0.4 s; asleep ~0.01
            assert driver_cpu < 0.2, f"the driver used {driver_cpu:.2f} s of CPU in 200 runs"
            x.close(), y.close()
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait(5)
        assert driver.stop() == 0
