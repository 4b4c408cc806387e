"""The host's run scheduler (server/run_scheduler.py): a budget of concurrent runs, freed
slots handed to sessions in turn, waiting runs leaving when their caller gives up; and the
CPU driver's budget (concurrent runs x intra-op threads <= cores) through a real driver."""

from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest

from nnrt.server.errors import NNRT_TIME_OUT, DriverError
from nnrt.server.run_scheduler import RunScheduler
from tests.conftest import admin_details, in_threads, start_driver, wait_until

NEVER = lambda: False  # noqa: E731


def test_without_a_budget_every_run_computes_at_once():
    scheduler = RunScheduler(None)
    with scheduler.slot(1, NEVER), scheduler.slot(1, NEVER), scheduler.slot(2, NEVER):
        assert scheduler.queued == 0


def test_a_budget_holds_back_the_extra_runs_until_a_slot_frees():
    scheduler = RunScheduler(2)
    inside = threading.Semaphore(0)
    leave = threading.Event()
    active, peak = [0], [0]
    lock = threading.Lock()

    def run(session: int) -> None:
        with scheduler.slot(session, NEVER):
            with lock:
                active[0] += 1
                peak[0] = max(peak[0], active[0])
            inside.release()
            assert leave.wait(10)
            with lock:
                active[0] -= 1

    threads = [threading.Thread(target=run, args=(k,)) for k in range(5)]
    for t in threads:
        t.start()
    for _ in range(2):
        assert inside.acquire(timeout=5)
    assert wait_until(lambda: scheduler.queued == 3, 5)
    assert not inside.acquire(timeout=0.2)  # nobody else got in
    leave.set()
    for t in threads:
        t.join(10)
    assert peak[0] == 2 and scheduler.queued == 0


def test_freed_slots_go_to_sessions_in_turn_not_to_the_longest_queue():
    scheduler = RunScheduler(1)
    order: list[str] = []
    hold = threading.Event()
    started = threading.Event()

    def first() -> None:
        with scheduler.slot(0, NEVER):
            started.set()
            assert hold.wait(10)

    def run(session: int, label: str) -> None:
        with scheduler.slot(session, NEVER):
            order.append(label)

    blocker = threading.Thread(target=first)
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


def test_a_waiting_run_whose_caller_gives_up_leaves_the_queue():
    scheduler = RunScheduler(1)
    gave_up = threading.Event()
    with scheduler.slot(0, NEVER):
        started = time.monotonic()
        with pytest.raises(DriverError) as info:
            with scheduler.slot(1, lambda: time.monotonic() - started > 0.2):
                pytest.fail("computed after its caller gave up")
        gave_up.set()
        assert info.value.code == NNRT_TIME_OUT
        assert scheduler.queued == 0
    with scheduler.slot(2, NEVER):  # the slot is free again: nothing leaked
        pass


def test_the_cpu_driver_runs_within_its_core_budget(tmp_path):
    from tests.test_models_e2e import f32, mlp, run

    driver = start_driver(tmp_path / "rt", "cpu", "--engine", "ort", "--threads", "1")
    try:
        details = admin_details(driver)
        assert int(details["concurrent_runs"]) * int(details["threads"]) <= \
            len(os.sched_getaffinity(0))
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
