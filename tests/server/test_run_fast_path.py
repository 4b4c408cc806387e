"""The host's run fast path, in process: checked requests kept per prepared model, the
serialized success reply, and which runs the session channel may serve on its own thread
(`Runner.estimate`, server/runner.py)."""

from __future__ import annotations

import socket
import threading
import time

import numpy as np
import pytest

from nnrt.drivers.cpu.device import CpuDevice
from nnrt.protos import hdi_pb2 as pb
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from nnrt.server import execution
from nnrt.server.buffers import SharedRegion
from nnrt.hdi.device import PrepareConfig
from nnrt.common.errors import (NNRT_FAILED, NNRT_INVALID_BUFFER, NNRT_INVALID_MODEL,
                                NNRT_INVALID_SHAPE, NNRT_OPERATION_FORBIDDEN, NNRT_SUCCESS,
                                NNRT_TIME_OUT)
from nnrt.server.faults import FaultInjection
from nnrt.hdi.graph import DYNAMIC
from nnrt.server.run_scheduler import RunScheduler
from nnrt.server.runner import Runner
from nnrt.server.channel_server import QUICK_RUN_S, SOLO_RUN_S, SessionChannelServer
from nnrt.server.sessions import PreparedEntry, SessionRegistry
from nnrt.common import session_channel as channel
from tests.conftest import wait_until
from tests.hdi.reference.util import GraphBuilder
from tests.helpers.run_requests import four_float_request


class ChannelRunner:
    """What the session channel asks of its Runner, answered by the test: `run_packet`
    serves every Run, `estimate` is fixed, nothing is queued."""

    def __init__(self, run_packet, estimate: float | None = None) -> None:
        self.run_packet = run_packet
        self._estimate = estimate

    def estimate(self, session, payload: bytes) -> float | None:
        return self._estimate

    def queue(self, session, payload: bytes, job) -> bool:
        return False

    def run_known(self, session, payload: bytes, deadline, within_s, answer):
        return False  # never the one-frame lane: every run takes the path under test


def _session_with_model(batch: int = 2, faults: FaultInjection | None = None):
    g = GraphBuilder()
    x = g.tensor((batch, 3))
    y = g.node(na.NODE_TYPE_ADD_FUSION, na.AddFusion(),
               [x, g.tensor((3,), np.arange(3, dtype=np.float32))], (batch, 3))
    model = CpuDevice(engine="numpy").prepare(g.graph([x], [y]), PrepareConfig())
    mins, maxs = model.input_dim_ranges()
    entry = PreparedEntry(model, mins, maxs, model.static_output_shapes())
    registry = SessionRegistry()
    session = registry.open(None)
    model_id = session.add_prepared(entry)
    runner = Runner(registry, faults or FaultInjection(),
                                     scheduler=RunScheduler(1))
    return registry, session, runner, entry, model_id


def _request(session, model_id: int, dims=(2, 3)) -> bytes:
    ios = []
    for _ in range(2):
        region = SharedRegion.allocate(64)
        buffer_id = session.buffers.add(region)
        ios.append(ht.IOTensor(dataType=ht.DATA_TYPE_FLOAT32, dimensions=list(dims),
                               format=ht.FORMAT_NHWC,
                               data=ht.SharedBuffer(bufferId=buffer_id, bufferSize=64,
                                                    dataSize=4 * int(np.prod(dims)))))
    return pb.RunRequest(preparedModelId=model_id, inputs=ios[:1],
                         outputs=ios[1:]).SerializeToString()


def test_an_identical_request_is_checked_once_and_answered_with_the_kept_reply(monkeypatch):
    registry, session, runner, entry, model_id = _session_with_model()
    payload = _request(session, model_id)
    checks = []
    real = execution.check_request
    monkeypatch.setattr(execution, "check_request",
                        lambda *a: checks.append(1) or real(*a))
    first = runner.run_packet(session, payload, None)
    second = runner.run_packet(session, payload, None)
    assert first == second and pb.RunReply.FromString(first).returnCode == NNRT_SUCCESS
    assert [list(d.values) for d in pb.RunReply.FromString(first).outputDims] == [[2, 3]]
    assert len(checks) == 1 and entry.success_reply == first
    registry.close(session)


def test_a_bad_request_is_refused_every_time_never_kept():
    registry, session, runner, entry, model_id = _session_with_model()
    payload = _request(session, model_id, dims=(5, 3))  # the model is [2, 3]
    for _ in range(2):
        reply = pb.RunReply.FromString(runner.run_packet(session, payload, None))
        assert reply.returnCode == NNRT_INVALID_SHAPE
    assert not entry.checked_requests
    registry.close(session)


def test_which_runs_the_channel_may_serve_on_its_own_thread():
    registry, session, runner, entry, model_id = _session_with_model()
    payload = _request(session, model_id)
    assert runner.estimate(session, payload) is None  # never seen: a worker
    runner.run_packet(session, payload, None)
    estimate = runner.estimate(session, payload)
    assert estimate == entry.recent_run_s and estimate < QUICK_RUN_S * 50  # a numpy Add
    entry.recent_run_s = 0.5
    assert runner.estimate(session, payload) == 0.5  # the channel chooses by it
    # the device is busy: a worker waits
    assert runner.scheduler.run(99, lambda: False,
                                  lambda: runner.estimate(session, payload)) is None
    assert runner.estimate(session, b"\x08\x7f") is None  # an unknown model
    assert runner.estimate(session, b"garbage") is None
    registry.close(session)
    _, session2, slow, entry2, model_id2 = _session_with_model(
        faults=FaultInjection(run_delay_ms=1))
    entry2.recent_run_s = QUICK_RUN_S / 2
    assert slow.estimate(session2, _request(session2, model_id2)) is None  # faults


def test_a_model_with_dynamic_shapes_is_never_served_on_the_channel_thread():
    registry, session, runner, entry, model_id = _session_with_model(batch=DYNAMIC)
    entry.recent_run_s = QUICK_RUN_S / 2
    assert runner.estimate(session, _request(session, model_id)) is None
    registry.close(session)


def test_an_unexpected_failure_is_answered_with_a_reason_pointing_at_the_log(monkeypatch):
    registry, session, runner, entry, model_id = _session_with_model()
    payload = _request(session, model_id)

    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(execution, "execute", broken)
    reply = pb.RunReply.FromString(runner.run_packet(session, payload, None))
    assert reply.returnCode == NNRT_FAILED
    assert reply.reason == ("Run failed unexpectedly in the driver (RuntimeError); its log has "
                            "the details")
    registry.close(session)


def _ort_session_with_add_one():
    """y = x + 1 on 4 float32 values, the ort engine (a single session: writes into its
    outputs), in a session with two 16-byte buffers; (registry, session, runner, entry,
    payload, x region, y region)."""
    g = GraphBuilder()
    x = g.tensor((4,))
    y = g.node(na.NODE_TYPE_ADD_FUSION, na.AddFusion(),
               [x, g.tensor((4,), np.ones(4, np.float32))], (4,))
    model = CpuDevice(engine="ort").prepare(g.graph([x], [y]), PrepareConfig())
    assert model.writes_into_outputs
    mins, maxs = model.input_dim_ranges()
    entry = PreparedEntry(model, mins, maxs, model.static_output_shapes())
    registry = SessionRegistry()
    session = registry.open(None)
    model_id = session.add_prepared(entry)
    runner = Runner(registry, FaultInjection(), scheduler=RunScheduler(2))
    payload, regions = four_float_request(session, model_id)
    return registry, session, runner, entry, payload, regions[0], regions[1]


def test_a_kept_request_is_bound_once_and_reads_the_inputs_of_each_run(monkeypatch):
    registry, session, runner, entry, payload, (_, xr), (_, yr) = _ort_session_with_add_one()
    binds = []
    real = entry.model.bind
    monkeypatch.setattr(entry.model, "bind", lambda *a: binds.append(1) or real(*a))
    decoded = []
    real_from = pb.RunRequest.FromString
    monkeypatch.setattr(pb.RunRequest, "FromString",
                        lambda data: decoded.append(1) or real_from(data))
    for k in range(5):
        xr.array(0, np.float32, 4)[:] = np.arange(4) * (k + 1)
        reply = pb.RunReply.FromString(runner.run_packet(session, payload, None))
        assert reply.returnCode == NNRT_SUCCESS
        np.testing.assert_array_equal(yr.array(0, np.float32, 4), np.arange(4) * (k + 1) + 1)
    assert len(binds) == 1 and len(decoded) == 1
    assert entry.checked_requests[payload].bound is not None
    registry.close(session)


def test_a_kept_request_naming_a_released_buffer_is_refused_before_running():
    registry, session, runner, entry, payload, (x_id, _), _ = _ort_session_with_add_one()
    assert pb.RunReply.FromString(runner.run_packet(session, payload, None)).returnCode == \
        NNRT_SUCCESS
    session.buffers.remove(x_id)  # unmapped: the kept binding's addresses are gone
    reply = pb.RunReply.FromString(runner.run_packet(session, payload, None))
    assert reply.returnCode == NNRT_INVALID_BUFFER
    assert f"unknown buffer id {x_id}" in reply.reason
    registry.close(session)


def test_a_kept_request_of_a_released_model_is_refused():
    registry, session, runner, entry, payload, _, _ = _ort_session_with_add_one()
    runner.run_packet(session, payload, None)
    session.release_prepared(1)
    reply = pb.RunReply.FromString(runner.run_packet(session, payload, None))
    assert reply.returnCode == NNRT_INVALID_MODEL
    registry.close(session)


def test_a_bound_run_from_many_threads_at_once_gives_each_its_result():
    """Concurrent runs of one kept binding (the same windows): each run binds afresh while
    the kept one is in use, and every result is the sum the inputs give."""
    registry, session, runner, entry, payload, (_, xr), (_, yr) = _ort_session_with_add_one()
    xr.array(0, np.float32, 4)[:] = [1, 2, 3, 4]
    codes = []

    def worker():
        for _ in range(200):
            codes.append(pb.RunReply.FromString(
                runner.run_packet(session, payload, None)).returnCode)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert codes == [NNRT_SUCCESS] * 800
    np.testing.assert_array_equal(yr.array(0, np.float32, 4), [2, 3, 4, 5])
    registry.close(session)


def _channel_run(sock, seq: int, think_us: int = channel.NO_THINK_TIME) -> tuple[int, int]:
    """One Run packet over a raw session socket: the reply's (seq, flags)."""
    sock.send(channel.RUN + channel.RUN_REQUEST.pack(seq, 0, think_us) + b"payload")
    data, fds = channel.receive_packet(sock)
    assert not fds and data[:1] == channel.RUN
    return channel.RUN_REPLY.unpack_from(data, 1)


@pytest.mark.parametrize("estimate, alone, expected", [
    (QUICK_RUN_S / 2, True, ("session-channel", channel.REPLY_POLL)),
    (QUICK_RUN_S / 2, False, ("session-channel", 0)),  # quick: here, but no polling
    (SOLO_RUN_S / 2, True, ("session-channel", 0)),  # short, alone: here
    (SOLO_RUN_S / 2, False, ("run", 0)),  # short, another session active: a worker
    (SOLO_RUN_S * 2, True, ("run", 0)),  # long: a worker
    (None, True, ("run", 0)),  # unknown: a worker
])
def test_which_thread_runs_a_run_and_whether_its_client_may_poll(tmp_path, estimate, alone,
                                                                 expected):
    """SessionChannelServer by the expected computation: quick runs on its own thread
    always, short ones only while their session is the only one active; REPLY_POLL only
    for a quick run of a session alone."""
    threads = []

    def handler(session, payload, deadline, cancelled):
        threads.append(threading.current_thread().name)
        return pb.RunReply().SerializeToString()

    server = SessionChannelServer(tmp_path / "s.session", SessionRegistry(),
                                  ChannelRunner(handler, estimate), workers=2)
    server.start()
    sockets = []
    try:
        for _ in range(2):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            sock.settimeout(5)
            sock.connect(str(tmp_path / "s.session"))
            channel.close_fds(channel.receive_message(sock)[1])  # the hello
            sockets.append(sock)
        mine, other = sockets
        _channel_run(mine, 6)
        if alone:
            time.sleep(0.05)  # nobody else sent anything within SOLO_S
        else:
            _channel_run(other, 1)  # the other session just sent a packet
        seq, flags = _channel_run(mine, 7)
        assert seq == 7 and (threads[-1].split("_")[0], flags) == expected
    finally:
        for sock in sockets:
            sock.close()
        server.stop()


def test_the_gap_before_a_clients_next_run_is_the_think_time_it_gives(tmp_path):
    """The driver polls for a client's next Run only while the client's gap between a
    reply and its next Run is short: the client's own word for it (think time), since
    measured at the driver it would also hold the driver's wake-up; without one, measured."""
    server = SessionChannelServer(tmp_path / "s.session", SessionRegistry(),
                                  ChannelRunner(lambda *args: pb.RunReply().SerializeToString(),
                                                QUICK_RUN_S / 2), workers=2)
    server.start()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        sock.settimeout(5)
        sock.connect(str(tmp_path / "s.session"))
        channel.close_fds(channel.receive_message(sock)[1])
        _channel_run(sock, 1)
        _channel_run(sock, 2, think_us=37)
        assert server._last_served.gap == 37e-6
        time.sleep(0.01)
        _channel_run(sock, 3)  # no think time given: measured, the sleep included
        assert server._last_served.gap >= 0.01
    finally:
        sock.close()
        server.stop()


def test_a_stopped_channel_takes_late_wake_ups_and_a_second_stop(tmp_path):
    """A reply queued by a worker as the channel stops pokes its selector: the wake-up pipe
    must be open until the selector thread has ended, and closed once (its fd numbers are
    not written to once they may be another file's)."""
    server = SessionChannelServer(tmp_path / "s.session", SessionRegistry(),
                                  ChannelRunner(lambda *args: pb.RunReply().SerializeToString()),
                                  workers=2)
    server.start()
    server.stop()
    assert (server._wake_r, server._wake_w) == (-1, -1)  # closed, after the thread ended
    server._poke()  # what a late worker's queued reply does: nothing, no error
    server.stop()  # again: nothing to close twice


def _windows(session, payload: bytes):
    """The input and output arrays ([2, 3] float32) of a `_request`."""
    request = pb.RunRequest.FromString(payload)
    return [session.buffers.get(io.data.bufferId).array(0, np.float32, 6).reshape(2, 3)
            for io in (request.inputs[0], request.outputs[0])]


def _holding_the_device(runner) -> tuple[threading.Thread, threading.Event]:
    """Another session's run computing on the runner's one slot until the event is set."""
    inside, release = threading.Event(), threading.Event()

    def hold() -> None:
        inside.set()
        assert release.wait(10)

    thread = threading.Thread(target=runner.scheduler.run, args=(99, lambda: False, hold))
    thread.start()
    assert inside.wait(5)
    return thread, release


def test_a_known_run_for_a_busy_device_is_queued_whole_and_answered_by_the_device_queue():
    registry, session, runner, entry, model_id = _session_with_model()
    payload = _request(session, model_id)
    x, y = _windows(session, payload)
    x[:] = [[1, 2, 3], [4, 5, 6]]
    job_done, replies = threading.Event(), []

    def job() -> None:  # what the session channel queues: compute and answer
        replies.append((threading.current_thread().name, runner.run_packet(session, payload,
                                                                             None)))
        job_done.set()

    assert not runner.queue(session, payload, job)  # never seen: a worker checks it
    runner.run_packet(session, payload, None)
    assert not runner.queue(session, payload, job)  # the device is idle: a worker
    y[:] = 0
    holder, release = _holding_the_device(runner)
    assert not runner.queue(session, b"\x08\x7f", job)  # an unknown model
    assert runner.queue(session, payload, job)
    assert runner.scheduler.queued == 1 and not job_done.is_set()
    release.set()
    assert job_done.wait(10)
    holder.join(10)
    (thread, reply), = replies
    assert thread.startswith("nnrt-compute-")  # no worker thread on its path
    assert pb.RunReply.FromString(reply).returnCode == NNRT_SUCCESS
    np.testing.assert_array_equal(y, [[1, 3, 5], [4, 6, 8]])  # x + [0, 1, 2]
    runner.scheduler.close()
    registry.close(session)


def test_a_queued_run_whose_caller_gave_up_is_answered_time_out_without_computing():
    registry, session, runner, entry, model_id = _session_with_model()
    payload = _request(session, model_id)
    x, y = _windows(session, payload)
    runner.run_packet(session, payload, None)
    y[:] = -1
    replies = []
    holder, release = _holding_the_device(runner)
    past = time.monotonic() + 0.05  # the caller's deadline passes while the run waits
    assert runner.queue(session, payload,
                              lambda: replies.append(runner.run_packet(session, payload, past)))
    time.sleep(0.1)
    release.set()
    holder.join(10)
    assert wait_until(lambda: replies, 5)
    assert pb.RunReply.FromString(replies[0]).returnCode == NNRT_TIME_OUT
    assert (y == -1).all()  # nothing computed
    runner.scheduler.close()
    registry.close(session)


def test_a_run_still_queued_when_the_driver_stops_is_answered_all_the_same():
    registry, session, runner, entry, model_id = _session_with_model()
    payload = _request(session, model_id)
    runner.run_packet(session, payload, None)
    replies = []
    holder, release = _holding_the_device(runner)
    assert runner.queue(session, payload,
                              lambda: replies.append(runner.run_packet(session, payload, None)))
    runner.scheduler.close()  # the driver stops, its grace over: the queue is answered
    assert [pb.RunReply.FromString(r).returnCode for r in replies] == [NNRT_OPERATION_FORBIDDEN]
    release.set()
    holder.join(10)
    registry.close(session)


def test_faults_in_force_keep_runs_out_of_the_device_queue():
    registry, session, runner, entry, model_id = _session_with_model(
        faults=FaultInjection(run_delay_ms=1))
    payload = _request(session, model_id)
    runner.run_packet(session, payload, None)
    holder, release = _holding_the_device(runner)
    assert not runner.queue(session, payload, lambda: None)
    release.set()
    holder.join(10)
    runner.scheduler.close()
    registry.close(session)


def test_a_reply_being_sent_does_not_hold_up_the_next_runs_admission(monkeypatch):
    """The thread sending a reply can lose its CPU to the client it wakes; the session
    channel's thread admitting that client's next Run must not wait for it."""
    from nnrt.server.channel_connection import ChannelPolicy, Connection

    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    connection = Connection(a, SessionRegistry().open(None), ChannelPolicy(), lambda c: None)
    sending, resume = threading.Event(), threading.Event()
    real_send = channel.send_packet

    def slow_send(sock, data, fds=()):
        sending.set()
        assert resume.wait(10)
        real_send(sock, data, fds)

    monkeypatch.setattr(channel, "send_packet", slow_send)
    sender = threading.Thread(target=connection.send, args=(b"reply",))
    sender.start()
    try:
        assert sending.wait(5)
        admitted = []
        admit = threading.Thread(target=lambda: admitted.append(connection.begin_run(7)))
        admit.start()
        admit.join(5)
        assert admitted == ["ok"]  # while the reply's send is still in progress
        connection.end_run(7)
    finally:
        resume.set()
        sender.join(5)
    assert b.recv(64) == b"reply"
    connection.end()
    b.close()
