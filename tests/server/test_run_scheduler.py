"""The host's run scheduler (server/run_scheduler.py): a budget of concurrent runs, freed
slots handed to sessions in turn, waiting runs leaving when their caller gives up; and the
CPU driver's budget (concurrent runs x intra-op threads <= cores) through a real driver."""

from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest

from nnrt.common.errors import NNRT_OPERATION_FORBIDDEN, NNRT_TIME_OUT, DriverError
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.server import run_scheduler
from nnrt.hdi.cores import granted_cores
from nnrt.server.run_scheduler import QueueStats, RunScheduler
from tests.conftest import admin_details, in_threads, start_driver, wait_until

NEVER = lambda: False  # noqa: E731


def test_without_a_budget_every_run_computes_at_once():
    scheduler = RunScheduler(None)
    nested = lambda session, inner: lambda: scheduler.run(session, NEVER, inner)  # noqa: E731
    assert scheduler.run(1, NEVER, nested(1, nested(2, lambda: scheduler.queued))) == 0


def test_a_run_alone_gets_every_core_and_runs_under_load_one_core_each():
    scheduler = RunScheduler(2)
    assert scheduler.run(0, NEVER, granted_cores) == 2  # alone on the device
    first_inside, release_first = threading.Event(), threading.Event()
    together = threading.Barrier(2, timeout=10)  # two of the others compute at once
    grants: dict[int, int] = {}

    def first() -> None:
        grants[0] = granted_cores()
        first_inside.set()
        assert release_first.wait(10)

    def other(session: int) -> None:
        grants[session] = granted_cores()
        if session <= 2:
            together.wait()

    threads = [threading.Thread(target=scheduler.run, args=(0, NEVER, first))]
    threads[0].start()
    assert first_inside.wait(5)
    threads += [threading.Thread(target=scheduler.run, args=(k, NEVER, lambda k=k: other(k)))
                for k in (1, 2)]
    for t in threads[1:]:
        t.start()
    assert wait_until(lambda: scheduler.queued == 2, 5)  # the lone run holds both cores
    release_first.set()
    for t in threads:
        t.join(10)
    assert not any(t.is_alive() for t in threads)
    assert grants == {0: 2, 1: 1, 2: 1}  # shared: one core each, both at once (the barrier)
    assert scheduler.queued == 0 and granted_cores() is None
    # others ran just now: one core, the device idle or not
    assert scheduler.run(3, NEVER, granted_cores) == 1
    scheduler.close()


def test_every_core_only_for_the_only_active_session(monkeypatch):
    monkeypatch.setattr(run_scheduler, "ACTIVE_S", 0.2)
    scheduler = RunScheduler(2)
    assert scheduler.run(1, NEVER, granted_cores) == 2
    assert scheduler.run(2, NEVER, granted_cores) == 1  # another client process ran just now
    assert scheduler.run(1, NEVER, granted_cores) == 1
    time.sleep(0.3)  # session 2 went quiet
    assert scheduler.run(1, NEVER, granted_cores) == 2


def test_freed_slots_go_to_sessions_in_turn_not_to_the_longest_queue():
    scheduler = RunScheduler(1)
    order: list[str] = []
    hold = threading.Event()
    started = threading.Event()

    def first() -> None:
        started.set()
        assert hold.wait(10)

    def run(session: int, label: str) -> None:
        scheduler.run(session, NEVER, lambda: order.append(label))

    blocker = threading.Thread(target=scheduler.run, args=(0, NEVER, first))
    blocker.start()
    assert started.wait(5)
    # session 1 floods four runs, then session 2 queues one
    threads = []
    for k in range(4):
        threads.append(threading.Thread(target=run, args=(1, f"a{k}")))
        threads[-1].start()
        assert wait_until(lambda: scheduler.queued == k + 1, 5)
    threads.append(threading.Thread(target=run, args=(2, "b0")))
    threads[-1].start()
    assert wait_until(lambda: scheduler.queued == 5, 5)
    hold.set()
    for t in [blocker, *threads]:
        t.join(10)
    assert order[:2] == ["a0", "b0"], order  # b waited for one run of a, not four
    assert order[2:] == ["a1", "a2", "a3"]
    scheduler.close()


def test_a_waiting_run_whose_caller_gives_up_leaves_the_queue():
    scheduler = RunScheduler(1)

    def hold_the_slot() -> None:
        started = time.monotonic()
        with pytest.raises(DriverError) as info:
            scheduler.run(1, lambda: time.monotonic() - started > 0.2,
                          lambda: pytest.fail("computed after its caller gave up"))
        assert info.value.code == NNRT_TIME_OUT
        assert scheduler.queued == 0

    scheduler.run(0, NEVER, hold_the_slot)
    assert scheduler.run(2, NEVER, lambda: "free") == "free"  # the slot is free: nothing leaked
    scheduler.close()


@pytest.mark.multiprocess
def test_the_cpu_driver_runs_within_its_core_budget(tmp_path):
    from tests.helpers.hdi_models import f32, mlp, run

    driver = start_driver(tmp_path / "rt", "cpu", "--engine", "ort", "--threads", "1")
    try:
        details = admin_details(driver)
        assert int(details["concurrent_runs"]) == len(os.sched_getaffinity(0))  # one a core
        assert details["threads"] == "1"
        builder, reference = mlp(3, (12, 24, 6))
        x = f32(3, 12)
        failures: list[BaseException] = []

        def one(_: int) -> None:
            try:
                (y,) = run(client, builder, [x], [(3, 6)])
                np.testing.assert_allclose(y, reference(x), rtol=1e-5, atol=1e-6)
            except BaseException as exc:  # noqa: BLE001  (reported below)
                failures.append(exc)

        with driver.client() as client:
            threads = in_threads(one, [(k,) for k in range(16)], timeout=60)
        assert not any(t.is_alive() for t in threads)
        assert not failures, failures[0]
    finally:
        assert driver.stop() == 0


def _queued_behind(scheduler: RunScheduler, hold: threading.Event) -> threading.Thread:
    """A thread whose run holds the scheduler's only slot until `hold` is set."""
    inside = threading.Event()

    def holding() -> None:
        inside.set()
        assert hold.wait(10)

    thread = threading.Thread(target=scheduler.run, args=(0, NEVER, holding))
    thread.start()
    assert inside.wait(5)
    return thread


def test_a_queued_run_gives_its_caller_its_result_or_its_exception():
    scheduler = RunScheduler(1)
    hold = threading.Event()
    blocker = _queued_behind(scheduler, hold)
    outcomes: dict[str, object] = {}

    def call(label: str, compute) -> None:
        try:
            outcomes[label] = scheduler.run(1, NEVER, compute)
        except DriverError as exc:
            outcomes[label] = exc.code

    def failing() -> None:
        raise DriverError(NNRT_OPERATION_FORBIDDEN, "the computation's own error")

    threads = [threading.Thread(target=call,
                                args=("result", lambda: threading.current_thread().name)),
               threading.Thread(target=call, args=("error", failing))]
    for k, t in enumerate(threads):
        t.start()
        assert wait_until(lambda: scheduler.queued == k + 1, 5)
    hold.set()
    for t in [blocker, *threads]:
        t.join(10)
    # computed by the scheduler's thread, which went from the released slot to the next run
    assert str(outcomes["result"]).startswith("nnrt-compute-")
    assert outcomes["error"] == NNRT_OPERATION_FORBIDDEN
    assert scheduler.queued == 0 and not scheduler.busy
    scheduler.close()


def test_the_queue_figures_count_waits_and_the_runs_that_gave_up():
    assert RunScheduler(None).stats() is None  # no budget: no queue to speak of
    scheduler = RunScheduler(1)
    assert scheduler.stats() == QueueStats(1, 0, 0, 0, 0.0, 0)
    hold = threading.Event()
    blocker = _queued_behind(scheduler, hold)
    assert scheduler.stats() == QueueStats(1, 1, 0, 0, 0.0, 0)  # computing, nothing waits
    results: list[object] = []
    waiter = threading.Thread(target=lambda: results.append(
        scheduler.run(1, NEVER, lambda: "computed")))
    waiter.start()
    gives_up = threading.Event()

    def impatient() -> None:
        with pytest.raises(DriverError) as info:
            scheduler.run(2, gives_up.is_set, lambda: pytest.fail("computed after giving up"))
        results.append(info.value.code)

    quitter = threading.Thread(target=impatient)
    quitter.start()
    assert wait_until(lambda: scheduler.stats().queued == 2, 5)
    gives_up.set()
    quitter.join(10)
    assert scheduler.stats() == QueueStats(1, 1, 1, 0, 0.0, 1)
    # A whole run whose caller gives up while it waits: its turn comes, it never computes.
    assert scheduler.submit(3, lambda: results.append(
        pytest.raises(DriverError, scheduler.run, 3, lambda: True, pytest.fail).value.code))
    waited = 0.2
    time.sleep(waited)
    hold.set()
    for t in (blocker, waiter):
        t.join(10)
    assert wait_until(lambda: len(results) == 3, 5)
    assert sorted(map(str, results)) == sorted(map(str, [NNRT_TIME_OUT, "computed",
                                                         NNRT_TIME_OUT]))
    stats = scheduler.stats()
    assert (stats.cores_in_use, stats.queued, stats.waited, stats.gave_up) == (0, 0, 2, 2)
    assert 2 * waited <= stats.wait_seconds < 2 * (waited + 10)
    scheduler.close()


def test_a_run_computing_when_its_caller_gives_up_is_waited_for():
    """The scheduler only takes runs out of its queue; one computing sees `cancelled()` between
    its operators (execution.py) and the caller's thread waits for it: its buffers stay
    borrowed until then."""
    scheduler = RunScheduler(1)
    hold = threading.Event()
    blocker = _queued_behind(scheduler, hold)
    computing, finish, gave_up = threading.Event(), threading.Event(), threading.Event()
    result: list[object] = []

    def compute() -> str:
        computing.set()
        assert finish.wait(10)
        return "finished"

    caller = threading.Thread(
        target=lambda: result.append(scheduler.run(1, gave_up.is_set, compute)))
    caller.start()
    assert wait_until(lambda: scheduler.queued == 1, 5)
    hold.set()
    assert computing.wait(5)
    gave_up.set()
    time.sleep(2 * run_scheduler.POLL_S)
    assert caller.is_alive() and not result  # still waiting for its computation
    finish.set()
    for t in (blocker, caller):
        t.join(10)
    assert result == ["finished"]
    scheduler.close()


def test_closing_fails_the_queued_runs_and_ends_the_threads():
    before = set(threading.enumerate())
    scheduler = RunScheduler(1)
    hold = threading.Event()
    blocker = _queued_behind(scheduler, hold)
    codes: list[int] = []

    def queued() -> None:
        with pytest.raises(DriverError) as info:
            scheduler.run(1, NEVER, lambda: pytest.fail("computed after the close"))
        codes.append(info.value.code)

    thread = threading.Thread(target=queued)
    thread.start()
    assert wait_until(lambda: scheduler.queued == 1, 5)
    scheduler.close()  # as the driver stops: the run holding the slot goes on to its end
    hold.set()
    for t in (blocker, thread):
        t.join(10)
    assert codes == [NNRT_OPERATION_FORBIDDEN]
    assert not [t for t in set(threading.enumerate()) - before
                if t.name.startswith("nnrt-compute-")]
    with pytest.raises(DriverError) as info:
        scheduler.run(2, NEVER, lambda: None)
    assert info.value.code == NNRT_OPERATION_FORBIDDEN
    assert not scheduler.submit(2, lambda: pytest.fail("queued after the close"))


def test_a_whole_run_is_queued_only_while_the_device_is_busy():
    scheduler = RunScheduler(1)
    assert not RunScheduler(None).submit(1, lambda: None)  # no budget: nothing to queue
    assert not scheduler.submit(1, lambda: None)  # idle: the caller's thread computes
    hold = threading.Event()
    blocker = _queued_behind(scheduler, hold)
    grants: list[object] = []
    done = threading.Event()

    def whole() -> None:  # computes through run(), as the session channel's runs do
        grants.append(scheduler.run(1, NEVER, granted_cores))
        grants.append(threading.current_thread().name)
        done.set()

    assert scheduler.submit(1, whole)
    assert scheduler.queued == 1
    hold.set()
    assert done.wait(10)
    blocker.join(10)
    assert grants[0] == 1 and str(grants[1]).startswith("nnrt-compute-")
    assert wait_until(lambda: not scheduler.busy, 5)  # its core given back
    scheduler.close()


@pytest.mark.multiprocess
def test_sessions_running_the_same_requests_at_once_each_get_their_own_results(tmp_path):
    """Four sessions run their own requests back to back against one CPU driver: once the
    device is busy their known requests queue whole and the scheduler's threads compute and
    answer them (server/run_scheduler.py `submit`); every answer must be its own run's."""
    from tests.helpers.hdi_models import f32, mlp

    driver = start_driver(tmp_path / "rt", "cpu", "--engine", "ort")
    builder, reference = mlp(128, (512, 1024, 10))  # ~3 ms: runs meet a busy device
    inputs = [f32(128, 512) for _ in range(8)]
    expected = [reference(x) for x in inputs]  # before: the clients do little but run
    failures: list[BaseException] = []

    def session(k: int) -> None:
        try:
            with driver.client() as client:
                model_id = builder.prepare(client)
                _, x_memory = client.allocate_buffer(128 * 512 * 4)
                _, y_memory = client.allocate_buffer(128 * 10 * 4)
                ins = [ht.IOTensor(dataType=ht.DATA_TYPE_FLOAT32, dimensions=[128, 512],
                                   format=ht.FORMAT_NONE, data=x_memory.descriptor())]
                outs = [ht.IOTensor(dataType=ht.DATA_TYPE_FLOAT32, dimensions=[128, 10],
                                    format=ht.FORMAT_NONE, data=y_memory.descriptor())]
                x_view = x_memory.array(np.float32, [128, 512])
                y_view = y_memory.array(np.float32, [128, 10])
                for i in range(40):  # the same request bytes each time, new data in them
                    j = (k + i) % len(inputs)
                    x_view[:] = inputs[j]
                    assert client.run(model_id, ins, outs, timeout=30).returnCode == 0
                    np.testing.assert_allclose(y_view, expected[j], rtol=1e-4, atol=1e-5)
                del x_view, y_view
                x_memory.close()
                y_memory.close()
        except BaseException as exc:  # noqa: BLE001  (reported below)
            failures.append(exc)

    try:
        threads = in_threads(session, [(k,) for k in range(4)], timeout=120)
        assert not any(t.is_alive() for t in threads)
        assert not failures, failures[0]
    finally:
        assert driver.stop() == 0


def test_a_whole_run_that_raises_is_logged_and_its_cores_come_back(caplog):
    """The session channel's whole runs answer their callers and never raise; one that does
    (a bug) must cost neither the scheduler's thread nor the cores it held."""
    scheduler = RunScheduler(1)
    hold = threading.Event()
    blocker = _queued_behind(scheduler, hold)

    def broken() -> None:
        raise RuntimeError("a bug in a queued run")

    assert scheduler.submit(1, broken)
    hold.set()
    blocker.join(10)
    assert wait_until(lambda: not scheduler.busy, 5)
    assert "a queued run failed unexpectedly" in caplog.text
    assert scheduler.run(2, NEVER, lambda: "after") == "after"  # the slot is free again
    hold2 = threading.Event()
    blocker2 = _queued_behind(scheduler, hold2)
    done = threading.Event()
    assert scheduler.submit(1, done.set)  # the scheduler's thread goes on serving the queue
    hold2.set()
    assert done.wait(10)
    blocker2.join(10)
    scheduler.close()
