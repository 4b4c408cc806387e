"""Run travels over the session channel (the fast path) or through gRPC IPreparedModel.Run:
the same request gets the same reply either way, and the fast path keeps every promise of
the gRPC one (deadline abandonment, refusal while stopping, malformed packets, fallback)."""

from __future__ import annotations

import signal
import socket
import threading
import time

import numpy as np
import pytest

from nnrt.protos import hdi_types_pb2 as ht
from nnrt.common import session_channel as channel
from nnrt.common.errors import NNRT_OPERATION_FORBIDDEN, NNRT_SUCCESS
from tests.conftest import in_threads, start_driver
from tests.helpers.hdi_models import add_model, expect_run_abandoned, io


def _window(memory, n, dtype=ht.DATA_TYPE_FLOAT32, fmt=ht.FORMAT_NONE, dims=None, **data):
    descriptor = memory.descriptor()
    for key, value in data.items():
        setattr(descriptor, key, value)
    return ht.IOTensor(dataType=dtype, dimensions=dims or [n], format=fmt, data=descriptor)


@pytest.fixture
def rig(client):
    model_id = add_model().prepare(client)
    _, x = client.allocate_buffer(16)
    _, y = client.allocate_buffer(16)
    _, small = client.allocate_buffer(8)
    x.array(np.float32, [4])[:] = [1, 2, 3, 4]
    yield client, model_id, x, y, small
    for memory in (x, y, small):
        memory.close()


CASES = {
    "valid": lambda m, x, y, s: (m, [_window(x, 4)], [_window(y, 4)]),
    "unknown-model": lambda m, x, y, s: (m + 1000, [_window(x, 4)], [_window(y, 4)]),
    "input-count": lambda m, x, y, s: (m, [], [_window(y, 4)]),
    "dtype": lambda m, x, y, s: (m, [_window(x, 4, ht.DATA_TYPE_INT32)], [_window(y, 4)]),
    "format": lambda m, x, y, s: (m, [_window(x, 4, fmt=ht.FORMAT_NHWC)], [_window(y, 4)]),
    "shape": lambda m, x, y, s: (m, [_window(x, 4, dims=[5])], [_window(y, 4)]),
    "unknown-buffer": lambda m, x, y, s: (m, [_window(x, 4, bufferId=999)], [_window(y, 4)]),
    "bad-window": lambda m, x, y, s: (m, [_window(x, 4, offset=8)], [_window(y, 4)]),
    "output-too-small": lambda m, x, y, s: (m, [_window(x, 4)], [_window(s, 4)]),
}


@pytest.mark.parametrize("case", CASES)
def test_both_transports_give_the_same_reply(rig, case):
    client, model_id, x, y, small = rig
    request = CASES[case](model_id, x, y, small)
    fast, grpc_reply = client.run(*request), client.run_grpc(*request)
    assert fast == grpc_reply
    assert (fast.returnCode == NNRT_SUCCESS) == (case == "valid")
    if case == "valid":
        np.testing.assert_array_equal(y.array(np.float32, [4]), [1, 3, 5, 7])


def test_a_request_too_big_for_a_packet_goes_through_grpc(rig):
    client, model_id, x, y, _ = rig
    huge = _window(x, 4)
    huge.name = "x" * (channel.MAX_PACKET + 10)  # names are carried, not checked
    assert client.run(model_id, [huge], [_window(y, 4)]).returnCode == NNRT_SUCCESS


def test_many_runs_in_flight_on_one_session_are_matched_to_their_callers(rig):
    client, model_id, _, _, _ = rig
    results, errors = {}, []

    def worker(k):
        try:
            _, xin = client.allocate_buffer(16)
            _, yout = client.allocate_buffer(16)
            for i in range(20):
                xin.array(np.float32, [4])[:] = k * 100 + i
                reply = client.run(model_id, [_window(xin, 4)], [_window(yout, 4)], timeout=10)
                assert reply.returnCode == NNRT_SUCCESS
                expected = k * 100 + i + np.arange(4)
                np.testing.assert_array_equal(yout.array(np.float32, [4]), expected)
            results[k] = True
            xin.close(), yout.close()
        except Exception as exc:  # reported below
            errors.append(exc)

    in_threads(worker, [(k,) for k in range(6)], timeout=60)
    assert not errors and len(results) == 6


@pytest.mark.multiprocess
def test_a_fast_run_past_its_timeout_is_abandoned(runtime_dir):
    driver = start_driver(runtime_dir, "cpu", "--fault-run-delay-ms", "3000")
    try:
        with driver.client() as client:
            expect_run_abandoned(driver, client)
    finally:
        assert driver.stop() == 0


@pytest.mark.multiprocess
def test_runs_are_refused_once_the_driver_is_stopping(runtime_dir):
    driver = start_driver(runtime_dir, "cpu", "--fault-run-delay-ms", "1000")
    client = driver.client()
    model_id = add_model().prepare(client)
    _, x = client.allocate_buffer(16)
    _, y = client.allocate_buffer(16)
    first = {}
    worker = threading.Thread(target=lambda: first.setdefault(
        "reply", client.run(model_id, [io(x, 4)], [io(y, 4)], timeout=10)))
    worker.start()
    time.sleep(0.3)
    driver.proc.send_signal(signal.SIGTERM)
    time.sleep(0.2)
    late = client.run(model_id, [io(x, 4)], [io(y, 4)], timeout=10)
    assert late.returnCode == NNRT_OPERATION_FORBIDDEN
    worker.join(10)
    assert first["reply"].returnCode == NNRT_SUCCESS  # the run in flight finished
    assert driver.proc.wait(10) == 0
    x.close(), y.close()
    client.close()


def test_malformed_run_packets_do_not_hurt_the_session(rig):
    client, model_id, x, y, _ = rig
    sock: socket.socket = client._sock
    sock.send(channel.RUN + b"\x01")  # truncated header: ignored
    header = channel.RUN_REQUEST.pack(123456, 0, channel.NO_THINK_TIME)
    sock.send(channel.RUN + header + b"\xff\xff\xff")  # not protobuf
    assert client.run(model_id, [_window(x, 4)], [_window(y, 4)]).returnCode == NNRT_SUCCESS
