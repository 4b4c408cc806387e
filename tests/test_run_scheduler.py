"""The host's run scheduler (server/run_scheduler.py): a budget of concurrent runs, freed
slots handed to sessions in turn, waiting runs leaving when their caller gives up; and the
CPU driver's budget (concurrent runs x intra-op threads <= cores) through a real driver."""

from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest

from nnrt.common.errors import NNRT_TIME_OUT, DriverError
from nnrt.server import run_scheduler
from nnrt.server.run_scheduler import RunScheduler, granted_cores
from tests.conftest import admin_details, in_threads, start_driver, wait_until

NEVER = lambda: False  # noqa: E731


def test_without_a_budget_every_run_computes_at_once():
    scheduler = RunScheduler(None)
    with scheduler.slot(1, NEVER), scheduler.slot(1, NEVER), scheduler.slot(2, NEVER):
        assert scheduler.queued == 0


def test_a_run_alone_gets_every_core_and_runs_under_load_one_core_each():
    scheduler = RunScheduler(2)
    with scheduler.slot(0, NEVER):
        assert granted_cores() == 2  # alone on the device
    first_inside, release_first = threading.Event(), threading.Event()
    together = threading.Barrier(2, timeout=10)  # two of the others compute at once
    grants: dict[int, int] = {}

    def first() -> None:
        with scheduler.slot(0, NEVER):
            grants[0] = granted_cores()
            first_inside.set()
            assert release_first.wait(10)

    def other(session: int) -> None:
        with scheduler.slot(session, NEVER):
            grants[session] = granted_cores()
            if session <= 2:
                together.wait()

    threads = [threading.Thread(target=first)]
    threads[0].start()
    assert first_inside.wait(5)
    threads += [threading.Thread(target=other, args=(k,)) for k in (1, 2)]
    for t in threads[1:]:
        t.start()
    assert wait_until(lambda: scheduler.queued == 2, 5)  # the lone run holds both cores
    release_first.set()
    for t in threads:
        t.join(10)
    assert not any(t.is_alive() for t in threads)
    assert grants == {0: 2, 1: 1, 2: 1}  # shared: one core each, both at once (the barrier)
    assert scheduler.queued == 0 and granted_cores() is None
    with scheduler.slot(3, NEVER):
        assert granted_cores() == 1  # others ran just now: one core, the device idle or not


def test_every_core_only_for_the_only_active_session(monkeypatch):
    monkeypatch.setattr(run_scheduler, "ACTIVE_S", 0.2)
    scheduler = RunScheduler(2)
    with scheduler.slot(1, NEVER):
        assert granted_cores() == 2
    with scheduler.slot(2, NEVER):  # another client process ran just now
        assert granted_cores() == 1
    with scheduler.slot(1, NEVER):
        assert granted_cores() == 1
    time.sleep(0.3)  # session 2 went quiet
    with scheduler.slot(1, NEVER):
        assert granted_cores() == 2


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
