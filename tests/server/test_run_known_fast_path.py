"""The common Run in one frame (`Runner.run_known`, server/runner.py, asked by the session
channel's thread, server/channel_server.py): taken for a request seen, checked and bound
before, of a quick model, the device idle, no fault, no other session, nothing in flight;
left — for the ordinary path, which answers as before — whenever any of these is not so,
and a released buffer is refused with its code on either path."""

from __future__ import annotations

import socket
import threading
import time

import numpy as np
import pytest

from nnrt.common import session_channel as channel
from nnrt.common.errors import (NNRT_INVALID_BUFFER, NNRT_INVALID_MODEL, NNRT_SUCCESS,
                                NNRT_TIME_OUT)
from nnrt.common.faults import Faults
from nnrt.drivers.cpu.device import CpuDevice
from nnrt.hdi.device import PrepareConfig
from nnrt.protos import hdi_pb2 as pb
from nnrt.protos import node_attrs_pb2 as na
from nnrt.server import execution
from nnrt.server.buffers import SharedRegion
from nnrt.server.channel_connection import Connection
from nnrt.server.channel_server import QUICK_RUN_S, SOLO_RUN_S, SessionChannelServer
from nnrt.server.faults import FaultInjection
from nnrt.server.run_scheduler import RunScheduler
from nnrt.server.runner import Runner
from nnrt.server.sessions import PreparedEntry, Session, SessionRegistry
from tests.hdi.reference.util import GraphBuilder
from tests.helpers.run_requests import four_float_request


def _add_one(session: Session) -> tuple[PreparedEntry, bytes, SharedRegion, SharedRegion, int]:
    """y = x + 1 on 4 float32 values (the ort engine: it binds its windows) prepared in
    `session` with two 16-byte buffers: (entry, the Run request's bytes, x, y, x's id)."""
    g = GraphBuilder()
    x = g.tensor((4,))
    y = g.node(na.NODE_TYPE_ADD_FUSION, na.AddFusion(),
               [x, g.tensor((4,), np.ones(4, np.float32))], (4,))
    model = CpuDevice(engine="ort").prepare(g.graph([x], [y]), PrepareConfig())
    mins, maxs = model.input_dim_ranges()
    entry = PreparedEntry(model, mins, maxs, model.static_output_shapes(), name="add_one")
    model_id = session.add_prepared(entry)
    payload, regions = four_float_request(session, model_id)
    return entry, payload, regions[0][1], regions[1][1], regions[0][0]


@pytest.fixture
def runner_session():
    registry = SessionRegistry()
    session = registry.open(None)
    runner = Runner(registry, FaultInjection(allowed=True), scheduler=RunScheduler(2))
    yield runner, session
    runner.scheduler.close()
    registry.close(session)


def _primed(runner: Runner, session: Session):
    """The request run once the ordinary way: seen, checked, bound, its reply kept."""
    entry, payload, x, y, x_id = _add_one(session)
    reply = pb.RunReply.FromString(runner.run_packet(session, payload, None))
    assert reply.returnCode == NNRT_SUCCESS
    assert entry.checked_requests[payload].bound is not None and entry.success_reply
    _quick(session)
    return entry, payload, x, y, x_id


def _quick(session: Session) -> None:
    """Its models' runs expected quick, whatever a loaded machine made of the last ones."""
    for entry in session.prepared_entries().values():
        entry.recent_run_s = QUICK_RUN_S / 10


def _one_frame(runner, session, payload, deadline):
    """`Runner.run_known`'s answer: (reply bytes, expected seconds), or None when it left the
    run to the ordinary path."""
    answers = []
    if not runner.run_known(session, payload, deadline, SOLO_RUN_S,
                            lambda reply, expected: answers.append((reply, expected))):
        assert not answers
        return None
    (answer,) = answers
    return answer


def test_the_common_run_is_computed_and_counted_in_one_frame(runner_session, monkeypatch):
    runner, session = runner_session
    entry, payload, x, y, _ = _primed(runner, session)
    monkeypatch.setattr(execution, "execute", lambda *a, **k: pytest.fail("not in one frame"))
    monkeypatch.setattr(runner.faults, "on_run", lambda *a: pytest.fail("no fault is armed"))
    before = runner.stats.snapshot()
    x.array(0, np.float32, 4)[:] = [1, 2, 3, 4]
    for _ in range(3):  # known_run's bytes compare equal: no lookup of the table either
        _quick(session)
        reply, expected = _one_frame(runner, session, bytes(payload), None)
        assert reply is entry.success_reply and expected < SOLO_RUN_S
    np.testing.assert_array_equal(y.array(0, np.float32, 4), [2, 3, 4, 5])
    after = runner.stats.snapshot()
    assert (after.completed - before.completed, after.in_flight) == (3, 0)
    assert after.by_model["add_one"][0] == before.by_model["add_one"][0] + 3


def test_the_answer_goes_before_the_buffers_return_and_the_count(runner_session):
    # Whoever polls for the reply gets it first; the bookkeeping follows on the same thread,
    # and a reader of the counters who saw the answer waits for the run to be counted.
    runner, session = runner_session
    _, payload, x, _, x_id = _primed(runner, session)
    closed, seen, read = [], [], []
    x.on_close = lambda: closed.append(1)
    before = runner.stats.snapshot().completed
    reader = threading.Thread(target=lambda: read.append(runner.stats.snapshot()))

    def answer(reply, expected):
        session.buffers.remove(x_id)  # the client releases its input at once: still borrowed
        seen.append(len(closed))
        reader.start()
        reader.join(0.2)
        seen.append(read[:])  # the counters wait for this run's count

    assert runner.run_known(session, payload, None, SOLO_RUN_S, answer)
    reader.join(5)
    assert seen == [0, []] and closed == [1]  # unmapped by the run's give-back
    assert (read[0].in_flight, read[0].completed) == (0, before + 1)


def test_a_request_not_seen_before_is_left_to_the_ordinary_path(runner_session):
    runner, session = runner_session
    entry, payload, _, _, _ = _add_one(session)
    assert _one_frame(runner, session, payload, None) is None
    assert _one_frame(runner, session, b"\x08\x7f", None) is None  # no such model
    assert runner.stats.snapshot().completed == 0  # nothing done, nothing counted


def test_an_armed_fault_leaves_the_fast_path_until_it_is_cleared(runner_session):
    runner, session = runner_session
    _, payload, _, _, _ = _primed(runner, session)
    runner.faults.apply(Faults(run_delay_ms=1))
    assert _one_frame(runner, session, payload, None) is None
    runner.faults.apply(Faults())
    assert _one_frame(runner, session, payload, None) is not None


def test_a_busy_device_a_slow_model_or_a_passed_deadline_leave_it(runner_session):
    runner, session = runner_session
    entry, payload, _, _, _ = _primed(runner, session)
    inside, release = threading.Event(), threading.Event()
    holder = threading.Thread(target=runner.scheduler.run,
                              args=(99, lambda: False, lambda: (inside.set(), release.wait(10))))
    holder.start()
    try:
        assert inside.wait(5)
        assert _one_frame(runner, session, payload, None) is None  # busy
    finally:
        release.set()
        holder.join(10)
    entry.recent_run_s = SOLO_RUN_S * 2
    assert _one_frame(runner, session, payload, None) is None  # slow
    entry.recent_run_s = QUICK_RUN_S / 10
    past = time.monotonic() - 0.001
    assert _one_frame(runner, session, payload, past) is None
    reply = pb.RunReply.FromString(runner.run_packet(session, payload, past))
    assert reply.returnCode == NNRT_TIME_OUT  # the ordinary path's answer


def test_a_released_buffer_is_refused_with_its_code_in_one_frame(runner_session):
    runner, session = runner_session
    _, payload, _, _, x_id = _primed(runner, session)
    session.buffers.remove(x_id)
    reply, _ = _one_frame(runner, session, payload, None)
    refused = pb.RunReply.FromString(reply)
    assert refused.returnCode == NNRT_INVALID_BUFFER
    assert f"unknown buffer id {x_id}" in refused.reason
    counts = runner.stats.snapshot()
    assert counts.failed_by_code == {"NNRT_INVALID_BUFFER": 1} and counts.in_flight == 0


def test_a_released_model_or_a_closed_session_leave_it(runner_session):
    runner, session = runner_session
    _, payload, _, _, _ = _primed(runner, session)
    session.release_prepared(1)
    assert _one_frame(runner, session, payload, None) is None
    reply = pb.RunReply.FromString(runner.run_packet(session, payload, None))
    assert reply.returnCode == NNRT_INVALID_MODEL
    registry = SessionRegistry()
    other = registry.open(None)
    _, payload, _, _, _ = _primed(runner, other)
    other.closed = True  # as Session.close marks it, before its tables go
    assert _one_frame(runner, other, payload, None) is None
    other.closed = False
    registry.close(other)


# -- the session channel's choice ---------------------------------------------------------


class _Channel:
    """A SessionChannelServer with a real Runner, raw clients on it, and which way each Run
    went: `fast` (run_known answered), `ordinary` (run_packet)."""

    def __init__(self, tmp_path) -> None:
        self.registry = SessionRegistry()
        self.runner = Runner(self.registry, FaultInjection(allowed=True),
                             scheduler=RunScheduler(2))
        self.fast, self.ordinary = [], []
        real_known, real_packet = self.runner.run_known, self.runner.run_packet

        def run_known(*args):
            *rest, answer = args

            def counted(*reply):  # counted as it answers: the client may look at once
                self.fast.append(1)
                answer(*reply)
            return real_known(*rest, counted)

        def run_packet(*args):
            self.ordinary.append(1)
            return real_packet(*args)

        self.runner.run_known, self.runner.run_packet = run_known, run_packet
        self.path = tmp_path / "s.session"
        self.server = SessionChannelServer(self.path, self.registry, self.runner, workers=2)
        self.server.start()
        self.sockets: list[socket.socket] = []

    def connect(self) -> tuple[socket.socket, Session]:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        sock.settimeout(5)
        sock.connect(str(self.path))
        hello, fds = channel.receive_message(sock)
        channel.close_fds(fds)
        self.sockets.append(sock)
        session, = [s for s in self.registry.sessions() if s.id == hello["sessionId"]]
        return sock, session

    def connection(self, session: Session) -> Connection:
        found, = [key.data for key in self.server._selector.get_map().values()
                  if isinstance(key.data, Connection) and key.data.session is session]
        return found

    @staticmethod
    def run(sock: socket.socket, seq: int, payload: bytes) -> tuple[int, int, pb.RunReply]:
        sock.send(channel.RUN + channel.RUN_REQUEST.pack(seq, 0, channel.NO_THINK_TIME)
                  + payload)
        data, fds = channel.receive_packet(sock)
        assert not fds and data[:1] == channel.RUN
        seq, flags = channel.RUN_REPLY.unpack_from(data, 1)
        return seq, flags, pb.RunReply.FromString(data[1 + channel.RUN_REPLY.size:])

    def ways(self) -> tuple[int, int]:
        way = (len(self.fast), len(self.ordinary))
        self.fast.clear()
        self.ordinary.clear()
        return way

    def close(self) -> None:
        for sock in self.sockets:
            sock.close()
        self.server.stop()
        self.runner.scheduler.close()


@pytest.fixture
def served(tmp_path):
    served = _Channel(tmp_path)
    yield served
    served.close()


def _solo(session: Session) -> None:
    """No other session active (a pause longer than SOLO_S), `session`'s runs quick."""
    time.sleep(0.01)
    _quick(session)


def test_the_channel_serves_the_common_run_in_one_frame(served):
    sock, session = served.connect()
    _, payload, x, y, _ = _add_one(session)
    assert served.run(sock, 1, payload)[2].returnCode == NNRT_SUCCESS  # seen, checked, bound
    assert served.ways() == (0, 1)
    x.array(0, np.float32, 4)[:] = [5, 6, 7, 8]
    _solo(session)
    for seq in range(2, 6):
        _quick(session)
        got_seq, flags, reply = served.run(sock, seq, payload)
        assert (got_seq, reply.returnCode) == (seq, NNRT_SUCCESS)
        assert [list(d.values) for d in reply.outputDims] == [[4]]
        assert flags == channel.REPLY_POLL  # a quick run of a session alone, as before
    assert served.ways() == (4, 0)
    np.testing.assert_array_equal(y.array(0, np.float32, 4), [6, 7, 8, 9])
    assert served.connection(session).runs == 0  # nothing left in flight
    assert served.runner.stats.snapshot().completed == 5


def test_another_session_active_leaves_the_fast_path(served):
    sock, session = served.connect()
    other, other_session = served.connect()
    _, payload, _, _, _ = _add_one(session)
    _, other_payload, _, _, _ = _add_one(other_session)
    served.run(sock, 1, payload)
    _solo(session)
    assert served.run(sock, 2, payload)[2].returnCode == NNRT_SUCCESS
    assert served.ways() == (1, 1)
    served.run(other, 1, other_payload)  # the other session's packet: it is active
    _quick(session)
    assert served.run(sock, 3, payload)[2].returnCode == NNRT_SUCCESS
    assert served.ways() == (0, 2)


def test_an_armed_cancel_leaves_the_fast_path(served):
    sock, session = served.connect()
    _, payload, _, _, _ = _add_one(session)
    served.run(sock, 1, payload)
    _solo(session)
    connection = served.connection(session)
    assert connection.begin_run(9) == "ok" and connection.cancel(9)  # Run 9: in flight,
    try:                                                             # its cancel armed
        assert served.run(sock, 2, payload)[2].returnCode == NNRT_SUCCESS
        assert served.ways() == (0, 2)
    finally:
        connection.end_run(9)
    _solo(session)
    served.run(sock, 3, payload)
    assert served.ways() == (1, 0)


def test_an_armed_fault_leaves_the_fast_path(served):
    sock, session = served.connect()
    _, payload, _, _, _ = _add_one(session)
    served.run(sock, 1, payload)
    served.runner.faults.apply(Faults(run_delay_ms=1))
    _solo(session)
    assert served.run(sock, 2, payload)[2].returnCode == NNRT_SUCCESS  # delayed, as asked
    assert served.ways() == (0, 2)
    served.runner.faults.apply(Faults())
    _solo(session)
    served.run(sock, 3, payload)
    assert served.ways() == (1, 0)


def test_a_released_buffer_is_answered_with_its_code(served):
    sock, session = served.connect()
    _, payload, _, _, x_id = _add_one(session)
    served.run(sock, 1, payload)
    served.ways()
    session.buffers.remove(x_id)
    _solo(session)
    reply = served.run(sock, 2, payload)[2]
    assert reply.returnCode == NNRT_INVALID_BUFFER
    assert f"unknown buffer id {x_id}" in reply.reason
    assert served.ways() == (1, 0)  # refused in one frame, with the ordinary path's code
    assert served.connection(session).runs == 0
