"""Chaos across processes: the device manager supervises a CPU driver while a client keeps
500 asynchronous runs going; the driver is SIGKILLed at random moments several times.

Every accepted run gets exactly one completion, no call hangs, after each restart the next
run succeeds with correct results, the device manager's restart counter matches the kills,
and nothing is left behind (fds, memfd mappings, processes)."""

from __future__ import annotations

import gc
import os
import random
import signal
import time
from pathlib import Path

import numpy as np
import pytest

from nnrt.client import capi
from tests.client.capi.util_capi import W, add_model
from tests.client.capi.util_executor import Callbacks, array, make_executor, tensor, use_runtime
from tests.conftest import memfd_mappings, wait_until
from tests.devmgr.util import config_text, processes_using, start_devmgr

TOTAL_RUNS = 500
IN_FLIGHT = 8
KILLS = 4
RUN_TIMEOUT_MS = 10_000
SUCCESS, CONNECTION = capi.OH_NN_SUCCESS, capi.OH_NN_CONNECTION_EXCEPTION

DRIVERS = """
[drivers.cpu]
kind = "cpu"
restart = "always"
crash_loop_failures = 20
options = { fault-run-delay-ms = 3 }
"""


def _fd_count() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.multiprocess
def test_chaos_500_async_runs_through_random_kills(tmp_path: Path, monkeypatch) -> None:
    rng = random.Random(1234)
    gc.collect()  # what earlier tests left for the collector must not count either way
    fds_before, maps_before = _fd_count(), len(memfd_mappings(os.getpid()))
    devmgr = start_devmgr(tmp_path, config_text(DRIVERS))
    try:
        first = devmgr.wait_ready("cpu")["cpu"]
        with use_runtime(monkeypatch, devmgr.runtime_dir):
            _chaos(devmgr, first["pid"], rng)
        assert devmgr.stop() == 0
        assert wait_until(lambda: processes_using(devmgr.runtime_dir) == [], 10)
    finally:
        devmgr.kill_everything()
    # Everything of the client side is gone too (the registry closes on a helper thread).
    gc.collect()
    assert wait_until(lambda: _fd_count() <= fds_before, 10), (_fd_count(), fds_before)
    assert len(memfd_mappings(os.getpid())) <= maps_before


def _chaos(devmgr, pid: int, rng: random.Random) -> None:
    executor = make_executor(add_model())
    calls = Callbacks()
    assert capi.OH_NNExecutor_SetOnRunDone(executor, calls.on_done) == SUCCESS
    assert capi.OH_NNExecutor_SetOnServiceDied(executor, calls.on_died) == SUCCESS
    slots = []  # (input, output, input values): a slot is reused once its run completed
    for k in range(IN_FLIGHT):
        values = np.full((2, 3), float(k), np.float32)
        slots.append((tensor([2, 3], values), tensor([2, 3]), values))
    free = list(range(IN_FLIGHT))
    busy: dict[int, int] = {}  # run id -> slot
    accepted, refused = 0, 0
    kill_at = sorted(rng.sample(range(40, TOTAL_RUNS - 40), KILLS))
    kills = 0
    deadline = time.monotonic() + 120

    def completions() -> dict[int, list[tuple]]:
        by_run: dict[int, list[tuple]] = {}
        for event in calls.done():
            by_run.setdefault(event[1], []).append(event)
        return by_run

    def reap() -> None:
        done = completions()
        for run_id in [r for r in busy if r in done]:
            code = done[run_id][0][2]
            slot = busy.pop(run_id)
            if code == SUCCESS:
                _, output, values = slots[slot]
                np.testing.assert_allclose(array(output), values + W)
            else:
                assert code == CONNECTION, code
            free.append(slot)

    while accepted < TOTAL_RUNS:
        assert time.monotonic() < deadline, "chaos run took too long"
        reap()
        if kills < KILLS and accepted >= kill_at[kills]:
            os.kill(pid, signal.SIGKILL)
            kills += 1
            # After the restart, the next run succeeds with correct results.
            ready = devmgr.wait_drivers(
                lambda ds: ds["cpu"]["state"] == "ready" and ds["cpu"]["pid"] != pid,
                "cpu restarted")
            pid = ready["cpu"]["pid"]
            check_in, check_out, values = slots[free[0]] if free else (None, None, None)
            if check_in is not None:
                assert wait_until(lambda: capi.OH_NNExecutor_RunSync(
                    executor, [check_in], 1, [check_out], 1) == SUCCESS, 10)
                np.testing.assert_allclose(array(check_out), values + W)
        if not free:
            time.sleep(0.001)
            continue
        slot = free.pop()
        run_in, run_out, _ = slots[slot]
        code = capi.OH_NNExecutor_RunAsync(executor, [run_in], 1, [run_out], 1,
                                           RUN_TIMEOUT_MS, accepted)
        if code == SUCCESS:
            busy[accepted] = slot
            accepted += 1
        else:  # the driver is down: refused at once, nothing will call back
            assert code == CONNECTION, code
            refused += 1
            free.append(slot)
            time.sleep(0.002)

    calls.wait_done(TOTAL_RUNS, timeout=30)
    reap()
    done = completions()
    assert sorted(done) == list(range(TOTAL_RUNS))
    assert all(len(events) == 1 for events in done.values())  # exactly one completion each
    time.sleep(0.2)  # a late second callback would show up here
    assert all(len(events) == 1 for events in completions().values())
    died = {e[1] for e in calls.events if e[0] == "died"}
    failed = {r for r, events in done.items() if events[0][2] == CONNECTION}
    assert died == failed  # ServiceDied exactly for the runs the deaths cut short
    succeeded = TOTAL_RUNS - len(failed)
    assert succeeded > TOTAL_RUNS * 0.8
    assert devmgr.drivers()["cpu"]["restarts"] == KILLS
    print(f"chaos: {TOTAL_RUNS} runs, {KILLS} kills, {len(failed)} cut short by a death, "
          f"{refused} refusals while down")

    capi.OH_NNExecutor_Destroy(executor)
    for run_in, run_out, _ in slots:
        assert capi.OH_NNTensor_Destroy(run_in) == SUCCESS
        assert capi.OH_NNTensor_Destroy(run_out) == SUCCESS
