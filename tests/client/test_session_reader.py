"""Who reads the session channel (client/core/driver.py): the waiting callers in turn, and
the watcher for hang-ups and for replies nobody waits for any more (many concurrent callers
on one session: tests/server/test_run_transports.py); and how long either side polls."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time

import numpy as np
import pytest

from nnrt.client.core.errors import DriverGone
from nnrt.common.errors import NNRT_SUCCESS, NNRT_TIME_OUT
from tests.conftest import in_threads, start_driver, wait_until
from tests.helpers.hdi_models import io, prepared_add

pytestmark = pytest.mark.multiprocess


def _nothing_waiting(sock: socket.socket) -> bool:
    try:
        sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
    except BlockingIOError:
        return True
    return False


def test_late_replies_are_read_while_the_client_is_idle(runtime_dir):
    """A Run that timed out is still answered by the driver; with no caller reading, the
    watcher takes that reply off the socket (the driver drops sessions that do not read)."""
    driver = start_driver(runtime_dir, "cpu", "--fault-run-delay-ms", "300")
    try:
        with driver.client() as client:
            model_id, x, y = prepared_add(client)
            timed_out = 0
            for _ in range(10):  # the driver abandons it at the same deadline: a race
                try:
                    client.run(model_id, [io(x, 4)], [io(y, 4)], timeout=0.05)
                except TimeoutError:
                    timed_out += 1
            assert timed_out >= 3
            assert wait_until(lambda: client._orphans == 0 and _nothing_waiting(client._sock),
                              5.0)
            reply = client.run(model_id, [io(x, 4)], [io(y, 4)], timeout=10)
            assert reply.returnCode == NNRT_SUCCESS
            np.testing.assert_array_equal(y.array(np.float32, [4]), [1, 3, 5, 7])
            x.close(), y.close()
    finally:
        assert driver.stop() == 0


def test_a_reader_that_times_out_hands_the_reading_on(runtime_dir):
    """The first caller reads; it gives up at its timeout while another caller still
    waits; that one must become the reader and get its reply."""
    driver = start_driver(runtime_dir, "cpu", "--fault-run-delay-ms", "600")
    try:
        with driver.client() as client:
            model_id, x, y = prepared_add(client)
            _, y2 = client.allocate_buffer(16)
            outcome = {}

            def short():
                try:  # the driver abandons it at the same deadline: either may come first
                    outcome["short"] = client.run(model_id, [io(x, 4)], [io(y, 4)],
                                                  timeout=0.1).returnCode
                except TimeoutError:
                    outcome["short"] = NNRT_TIME_OUT

            def long():
                time.sleep(0.02)  # after `short`, which then reads first
                outcome["long"] = client.run(model_id, [io(x, 4)], [io(y2, 4)],
                                             timeout=10).returnCode

            in_threads(lambda f: f(), [(short,), (long,)], timeout=20)
            assert outcome == {"short": NNRT_TIME_OUT, "long": NNRT_SUCCESS}
            np.testing.assert_array_equal(y2.array(np.float32, [4]), [1, 3, 5, 7])
            x.close(), y.close(), y2.close()
    finally:
        assert driver.stop() == 0


def test_death_while_a_caller_reads_fails_it_and_calls_back_on_the_watcher(runtime_dir):
    driver = start_driver(runtime_dir, "cpu", "--fault-run-delay-ms", "5000")
    client = driver.client()
    model_id, x, y = prepared_add(client)
    called_on = []
    client.on_death(lambda: called_on.append(threading.current_thread().name))
    failure = {}

    def running():
        started = time.monotonic()
        try:
            client.run(model_id, [io(x, 4)], [io(y, 4)], timeout=30)
        except DriverGone as exc:
            failure["error"], failure["after"] = exc, time.monotonic() - started

    worker = threading.Thread(target=running)
    worker.start()
    time.sleep(0.3)  # the caller is reading now
    driver.proc.send_signal(signal.SIGKILL)
    driver.proc.wait(10)
    worker.join(10)
    assert not worker.is_alive()
    assert failure["after"] < 5  # not at the driver's delay, nor the run's timeout
    # The death callback: on the watcher, never on a caller — which the watcher wakes
    # before it calls back, so the caller may be done first.
    assert wait_until(lambda: called_on, 5.0)
    assert called_on == ["nnrt-session-watch"]
    assert not client.alive
    with pytest.raises(DriverGone):
        client.run(model_id, [io(x, 4)], [io(y, 4)], timeout=1)
    x.close(), y.close()
    client.close()


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (/proc/<pid>/stat)."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_polling_for_the_next_run_stops_when_the_client_does(runtime_dir):
    """The driver polls for a client's next Run after a quick one (--spin-us) and the client
    for its reply (NNRT_CLIENT_SPIN_US): bounded to a window per run, so once the client
    stops, the driver sleeps (no CPU), and a run that takes long never polls."""
    driver = start_driver(runtime_dir, "cpu")
    try:
        with driver.client() as client:
            model_id, x, y = prepared_add(client)
            for _ in range(300):  # quick runs back to back: both sides poll
                assert client.run(model_id, [io(x, 4)], [io(y, 4)], timeout=10).returnCode == \
                    NNRT_SUCCESS
            time.sleep(0.1)
            before = _cpu_seconds(driver.pid)
            time.sleep(1.0)
            assert _cpu_seconds(driver.pid) - before < 0.1  # asleep, not polling
            x.close(), y.close()
    finally:
        assert driver.stop() == 0


def test_the_driver_says_when_a_client_may_poll_for_its_reply(runtime_dir):
    """REPLY_POLL: on a reply the driver's channel thread gave at once (a quick run, seen
    before) while no other session was active; the client polls for such a model's next
    reply and sleeps for any other."""
    driver = start_driver(runtime_dir, "cpu")
    try:
        with driver.client() as client, driver.client() as other:
            model_id, x, y = prepared_add(client)
            # recent runs known to be quick: answered at once (on a busy machine a run now
            # and then outlasts the quick bound, so runs go on until one is: bounded)
            assert wait_until(lambda: (client.run(model_id, [io(x, 4)], [io(y, 4)],
                                                  timeout=10),
                                       model_id in client._polled_models)[1], 10.0)
            # Another session sends packets all along: its runs count as activity.
            other_id, ox, oy = prepared_add(other)
            stop = threading.Event()

            def busy_other():
                while not stop.is_set():
                    other.run(other_id, [io(ox, 4)], [io(oy, 4)], timeout=10)

            worker = threading.Thread(target=busy_other)
            worker.start()
            try:
                assert wait_until(lambda: (client.run(model_id, [io(x, 4)], [io(y, 4)],
                                                      timeout=10),
                                           model_id not in client._polled_models)[1], 5.0)
            finally:
                stop.set()
                worker.join(10)
            assert not worker.is_alive()
            assert wait_until(lambda: (client.run(model_id, [io(x, 4)], [io(y, 4)],
                                                  timeout=10),
                                       model_id in client._polled_models)[1], 10.0)
            for buffer in (x, y, ox, oy):
                buffer.close()
    finally:
        assert driver.stop() == 0


def test_polling_for_a_reply_never_outlasts_the_callers_deadline(runtime_dir):
    """A caller polls for a quick model's reply (REPLY_POLL) up to its window, but never
    past its own deadline: the timeout comes at the deadline, not at the window's end."""
    driver = start_driver(runtime_dir, "cpu", "--fault-run-delay-ms", "2000")
    try:
        with driver.client() as client:
            model_id, x, y = prepared_add(client)
            client._spin = 1.0  # a window far beyond the deadline (the env allows 10 ms)
            client._polled_models.add(model_id)  # as if its last reply said REPLY_POLL
            started = time.monotonic()
            with pytest.raises(TimeoutError):
                client.run(model_id, [io(x, 4)], [io(y, 4)], timeout=0.1)
            assert time.monotonic() - started < 0.6
            x.close(), y.close()
    finally:
        assert driver.stop() == 0


def test_a_slow_run_waits_asleep(runtime_dir):
    driver = start_driver(runtime_dir, "cpu", "--fault-run-delay-ms", "400")
    try:
        with driver.client() as client:
            model_id, x, y = prepared_add(client)
            for _ in range(2):  # a run handed to a worker: its reply says not to poll
                started = time.thread_time()
                assert client.run(model_id, [io(x, 4)], [io(y, 4)], timeout=10).returnCode == \
                    NNRT_SUCCESS
                assert time.thread_time() - started < 0.1  # of a 0.4 s run
            x.close(), y.close()
    finally:
        assert driver.stop() == 0


def test_a_caller_at_end_of_file_marks_the_death_if_the_watcher_is_gone(runtime_dir,
                                                                          monkeypatch):
    """The watcher marks a driver's death; were it gone (a bug), a caller that read the
    end-of-file must not wait for it forever."""
    from nnrt.client.core.driver import DriverClient

    driver = start_driver(runtime_dir, "cpu", "--fault-run-delay-ms", "5000")
    monkeypatch.setattr(DriverClient, "_watch", lambda self: None)  # a watcher that ends
    client = driver.client()
    model_id, x, y = prepared_add(client)
    failure = {}

    def running():
        started = time.monotonic()
        try:
            client.run(model_id, [io(x, 4)], [io(y, 4)], timeout=30)
        except DriverGone:
            failure["after"] = time.monotonic() - started

    worker = threading.Thread(target=running)
    worker.start()
    time.sleep(0.3)
    driver.proc.send_signal(signal.SIGKILL)
    driver.proc.wait(10)
    worker.join(10)
    assert not worker.is_alive() and failure["after"] < 5
    assert not client.alive
    x.close(), y.close()
    client.close()
