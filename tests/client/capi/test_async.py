"""OH_NNExecutor_RunAsync and its callbacks (capi.md 1.44, 1.45, 1.47; our contract): argument
rows, completion, many runs in flight, timeouts against a slow driver, a driver SIGKILLed
mid-run, a synchronous run whose driver dies, and destroy while runs are in flight.

The timing tests print the measured delays (run pytest with -s, or read the captured output
of a failure): SIGKILL → callbacks, and deadline → TIMEOUT callback.
"""

from __future__ import annotations

import logging
import threading
import time

import numpy as np
import pytest

from nnrt.client import capi
from nnrt.client.core import execution
from tests.client.capi.util_capi import W, add_model
from tests.client.capi.util_executor import Callbacks, array, make_executor, tensor, use_runtime
from tests.conftest import start_driver, wait_until

OK = capi.OH_NN_SUCCESS
INVALID = capi.OH_NN_INVALID_PARAMETER
TIMEOUT_BOUND_S = 0.050  # a late run completes no later than this after its deadline
DEATH_BOUND_S = 0.100  # runs of a dead driver complete no later than this after the death
log = logging.getLogger(__name__)


def report(message: str) -> None:
    """A measured delay: printed (pytest -s) and logged (captured with the test's log)."""
    print(message)
    log.info(message)


@pytest.fixture
def slow_driver(runtime_dir, monkeypatch):
    """A CPU driver of its own whose every Run sleeps 2 s (abandoned at the caller's deadline)."""
    driver = start_driver(runtime_dir, "cpu", "--fault-run-delay-ms", "2000")
    with use_runtime(monkeypatch, runtime_dir):
        yield driver
    if driver.proc.poll() is None:
        driver.stop()


# -- 1.47 argument rows -----------------------------------------------------------------------------


def test_run_async_null_executor(io):
    tin, tout, _ = io
    assert capi.OH_NNExecutor_RunAsync(None, [tin], 1, [tout], 1, 1000, 1) == INVALID
    assert capi.OH_NNExecutor_RunAsync(object(), [tin], 1, [tout], 1, 1000, 1) == INVALID


def test_run_async_null_inputs(ex, io):
    _, tout, _ = io
    assert capi.OH_NNExecutor_RunAsync(ex, None, 1, [tout], 1, 1000, 1) == INVALID


@pytest.mark.parametrize("count", [0, 201, 2])
def test_run_async_bad_input_count(ex, io, count):
    tin, tout, _ = io
    assert capi.OH_NNExecutor_RunAsync(ex, [tin], count, [tout], 1, 1000, 1) == INVALID


def test_run_async_null_outputs(ex, io):
    tin, _, _ = io
    assert capi.OH_NNExecutor_RunAsync(ex, [tin], 1, None, 1, 1000, 1) == INVALID


@pytest.mark.parametrize("count", [0, 201, 2])
def test_run_async_bad_output_count(ex, io, count):
    tin, tout, _ = io
    assert capi.OH_NNExecutor_RunAsync(ex, [tin], 1, [tout], count, 1000, 1) == INVALID


def test_run_async_null_user_data(ex, io):
    tin, tout, _ = io
    assert capi.OH_NNExecutor_RunAsync(ex, [tin], 1, [tout], 1, 1000, None) == INVALID


@pytest.mark.parametrize("timeout", [0, -5, 2**31, 1.5, None])
def test_run_async_bad_timeout(ex, io, timeout):
    tin, tout, _ = io
    assert capi.OH_NNExecutor_RunAsync(ex, [tin], 1, [tout], 1, timeout, 1) == INVALID


def test_run_async_up_front_checks_of_run_sync(ex, io):
    tin, tout, _ = io
    cb = Callbacks()
    capi.OH_NNExecutor_SetOnRunDone(ex, cb.on_done)
    assert capi.OH_NNExecutor_RunAsync(ex, [tin, tin], 2, [tout], 1, 1000, 1) == INVALID
    assert capi.OH_NNExecutor_RunAsync(ex, [None], 1, [tout], 1, 1000, 1) == capi.OH_NN_NULL_PTR
    assert capi.OH_NNExecutor_RunAsync(ex, [tin], 1, [None], 1, 1000, 1) == INVALID
    desc = capi.OH_NNTensor_GetTensorDesc(tin)
    capi.OH_NNTensorDesc_SetShape(desc, [2, 4], 2)
    assert capi.OH_NNExecutor_RunAsync(ex, [tin], 1, [tout], 1, 1000, 1) == INVALID
    capi.OH_NNTensorDesc_SetShape(desc, [2, 3], 2)
    out_desc = capi.OH_NNTensor_GetTensorDesc(tout)
    capi.OH_NNTensorDesc_SetShape(out_desc, [4, 3], 2)  # bigger than its region
    assert capi.OH_NNExecutor_RunAsync(ex, [tin], 1, [tout], 1, 1000, 1) == capi.OH_NN_FAILED
    time.sleep(0.05)
    assert cb.events == []  # refused runs get no callback


# -- completion -----------------------------------------------------------------------------------


def test_run_async_completes_on_a_runtime_thread(ex, io):
    tin, tout, x = io
    cb = Callbacks()
    seen = {}
    returned = threading.Event()

    def on_done(user_data, code, outputs, count):
        seen["returned_before_callback"] = returned.is_set()
        seen["values"] = array(outputs[0]).copy()  # outputs are valid in the callback
        cb.on_done(user_data, code, outputs, count)

    assert capi.OH_NNExecutor_SetOnRunDone(ex, on_done) == OK
    outputs = [tout]
    user_data = object()
    assert capi.OH_NNExecutor_RunAsync(ex, [tin], 1, outputs, 1, 2000, user_data) == OK
    returned.set()
    (event,) = cb.wait_done(1, 5)
    _, got_user_data, code, got_outputs, count, _, thread = event
    assert got_user_data is user_data
    assert code == OK and isinstance(code, capi.OH_NN_ReturnCode)
    assert got_outputs[0] is tout and count == 1
    assert thread is not threading.current_thread()
    np.testing.assert_allclose(seen["values"], x + W, rtol=1e-6)
    assert capi.OH_NNExecutor_GetOutputShape(ex, 0) == (OK, [2, 3])


def test_run_async_without_callback_is_allowed(ex, io):
    tin, tout, x = io
    assert capi.OH_NNExecutor_RunAsync(ex, [tin], 1, [tout], 1, 2000, "quiet") == OK
    assert wait_until(lambda: np.allclose(array(tout), x + W, rtol=1e-6), 5)


def test_callbacks_in_force_at_the_call_are_used(ex, io):
    tin, tout, _ = io
    first, second = Callbacks(), Callbacks()
    capi.OH_NNExecutor_SetOnRunDone(ex, first.on_done)
    assert capi.OH_NNExecutor_RunAsync(ex, [tin], 1, [tout], 1, 2000, "a") == OK
    capi.OH_NNExecutor_SetOnRunDone(ex, second.on_done)
    assert capi.OH_NNExecutor_RunAsync(ex, [tin], 1, [tout], 1, 2000, "b") == OK
    assert [e[1] for e in first.wait_done(1, 5)] == ["a"]
    assert [e[1] for e in second.wait_done(1, 5)] == ["b"]


def test_fifty_runs_in_flight_keep_their_user_data_apart(ex):
    cb = Callbacks()
    capi.OH_NNExecutor_SetOnRunDone(ex, cb.on_done)
    runs = {}
    for i in range(50):
        x = np.full((2, 3), float(i), np.float32)
        tin, tout = tensor([2, 3], x), tensor([2, 3])
        runs[i] = (tin, tout, x)
    for i, (tin, tout, _) in runs.items():
        assert capi.OH_NNExecutor_RunAsync(ex, [tin], 1, [tout], 1, 10_000, i) == OK
    events = cb.wait_done(50, 20)
    assert sorted(e[1] for e in events) == list(range(50))  # exactly once each
    for _, user_data, code, outputs, count, _, _ in events:
        tin, tout, x = runs[user_data]
        assert code == OK and count == 1 and outputs[0] is tout
        np.testing.assert_allclose(array(tout), x + W, rtol=1e-6)
    time.sleep(0.05)
    assert len(cb.events) == 50
    for tin, tout, _ in runs.values():
        capi.OH_NNTensor_Destroy(tin)
        capi.OH_NNTensor_Destroy(tout)


def test_destroy_with_runs_in_flight_still_calls_back_once(ex, io):
    tin, tout, _ = io
    cb = Callbacks()
    capi.OH_NNExecutor_SetOnRunDone(ex, cb.on_done)
    for i in range(10):
        assert capi.OH_NNExecutor_RunAsync(ex, [tin], 1, [tout], 1, 5000, i) == OK
    capi.OH_NNExecutor_Destroy(ex)
    events = cb.wait_done(10, 10)
    assert sorted(e[1] for e in events) == list(range(10))
    assert capi.OH_NNExecutor_RunAsync(ex, [tin], 1, [tout], 1, 5000, 99) == INVALID


def test_a_failing_run_reports_the_run_sync_code(ex, io):
    _, tout, _ = io
    wrong = tensor([2, 3], np.zeros((2, 3), np.int32), capi.OH_NN_INT32)
    cb = Callbacks()
    capi.OH_NNExecutor_SetOnRunDone(ex, cb.on_done)
    assert capi.OH_NNExecutor_RunAsync(ex, [wrong], 1, [tout], 1, 2000, "bad") == OK
    (event,) = cb.wait_done(1, 5)
    assert event[2] == capi.OH_NN_UNAVAILABLE_DEVICE
    capi.OH_NNTensor_Destroy(wrong)


def test_a_raising_callback_does_not_break_the_runtime(ex, io):
    tin, tout, _ = io
    calls = []

    def bad(user_data, code, outputs, count):
        calls.append(user_data)
        raise RuntimeError("user bug")

    capi.OH_NNExecutor_SetOnRunDone(ex, bad)
    for i in range(3):
        assert capi.OH_NNExecutor_RunAsync(ex, [tin], 1, [tout], 1, 2000, i) == OK
    assert wait_until(lambda: len(calls) == 3, 5)


# -- timeout --------------------------------------------------------------------------------------


def test_timeout_completes_within_50_ms_and_the_driver_abandons(slow_driver):
    executor = make_executor()
    tin, tout = tensor([2, 3], np.ones((2, 3), np.float32)), tensor([2, 3])
    cb = Callbacks()
    capi.OH_NNExecutor_SetOnRunDone(executor, cb.on_done)
    delays = []
    for i, timeout_ms in enumerate((150, 300)):
        start = time.monotonic()
        assert capi.OH_NNExecutor_RunAsync(executor, [tin], 1, [tout], 1, timeout_ms, i) == OK
        assert time.monotonic() - start < 0.05  # returns at once
        event = cb.wait_done(i + 1, 5)[i]
        assert event[1] == i and event[2] == capi.OH_NN_TIMEOUT
        delay = event[5] - (start + timeout_ms / 1000)
        delays.append(delay)
        report(f"timeout {timeout_ms} ms -> TIMEOUT callback {delay * 1000:+.1f} ms after the "
              "deadline")
        assert 0 <= delay <= TIMEOUT_BOUND_S
    assert wait_until(lambda: slow_driver.log().count("abandoned during its injected delay") >= 2,
                      5), slow_driver.log()
    time.sleep(0.1)
    assert len(cb.events) == 2  # the abandoned runs' late answers call nothing
    capi.OH_NNExecutor_Destroy(executor)
    capi.OH_NNTensor_Destroy(tin)
    capi.OH_NNTensor_Destroy(tout)


def test_timeout_bound_holds_even_if_grpc_is_late(ex, io, monkeypatch):
    """The runtime's own timer decides; a driver call that never returns changes nothing."""
    tin, tout, _ = io
    release = threading.Event()
    monkeypatch.setattr(ex._client, "run", lambda *a, **k: release.wait(5))
    cb = Callbacks()
    capi.OH_NNExecutor_SetOnRunDone(ex, cb.on_done)
    start = time.monotonic()
    assert capi.OH_NNExecutor_RunAsync(ex, [tin], 1, [tout], 1, 100, "late") == OK
    (event,) = cb.wait_done(1, 5)
    release.set()
    assert event[2] == capi.OH_NN_TIMEOUT
    assert 0 <= event[5] - (start + 0.1) <= TIMEOUT_BOUND_S


# -- the driver dies ------------------------------------------------------------------------------


def test_sigkill_mid_run_service_died_then_connection_exception(slow_driver):
    executor = make_executor()
    cb = Callbacks()
    capi.OH_NNExecutor_SetOnRunDone(executor, cb.on_done)
    capi.OH_NNExecutor_SetOnServiceDied(executor, cb.on_died)
    tensors = [(tensor([2, 3], np.ones((2, 3), np.float32)), tensor([2, 3])) for _ in range(3)]
    for i, (tin, tout) in enumerate(tensors):
        assert capi.OH_NNExecutor_RunAsync(executor, [tin], 1, [tout], 1, 10_000, f"run{i}") == OK
    time.sleep(0.3)  # the runs are inside the driver's injected delay
    killed = time.monotonic()
    slow_driver.proc.kill()
    events = cb.wait_done(3, 5)
    slow_driver.proc.wait(5)
    with cb.lock:
        all_events = list(cb.events)
    for i in range(3):
        mine = [e for e in all_events if e[1] == f"run{i}"]
        assert [e[0] for e in mine] == ["died", "done"], mine
        died, done = mine
        assert done[2] == capi.OH_NN_CONNECTION_EXCEPTION
        report(f"SIGKILL -> run{i}: NN_OnServiceDied +{(died[2] - killed) * 1000:.1f} ms, "
              f"NN_OnRunDone(11) +{(done[5] - killed) * 1000:.1f} ms")
        assert done[5] - killed <= DEATH_BOUND_S
    assert len(events) == 3
    # later calls on executors of that device fail fast with 11
    tin, tout = tensors[0]
    start = time.monotonic()
    assert capi.OH_NNExecutor_RunSync(executor, [tin], 1, [tout], 1) == \
        capi.OH_NN_CONNECTION_EXCEPTION
    assert capi.OH_NNExecutor_RunAsync(executor, [tin], 1, [tout], 1, 1000, "late") == \
        capi.OH_NN_CONNECTION_EXCEPTION
    assert time.monotonic() - start < 0.1
    time.sleep(0.05)
    assert len(cb.events) == 6  # the refused run got no callback
    assert capi.OH_NNExecutor_GetInputCount(executor) == (OK, 1)  # no driver needed
    capi.OH_NNExecutor_Destroy(executor)
    for pair in tensors:
        for t in pair:
            capi.OH_NNTensor_Destroy(t)  # freed on this side; the driver's session is gone


def test_sync_run_whose_driver_dies_returns_promptly(slow_driver):
    executor = make_executor()
    tin, tout = tensor([2, 3], np.ones((2, 3), np.float32)), tensor([2, 3])
    result = {}

    def run():
        result["code"] = capi.OH_NNExecutor_RunSync(executor, [tin], 1, [tout], 1)
        result["at"] = time.monotonic()

    thread = threading.Thread(target=run)
    thread.start()
    time.sleep(0.3)
    killed = time.monotonic()
    slow_driver.proc.kill()
    thread.join(5)
    assert not thread.is_alive()
    report(f"SIGKILL -> RunSync returned 11 after {(result['at'] - killed) * 1000:.1f} ms")
    assert result["code"] == capi.OH_NN_CONNECTION_EXCEPTION
    assert result["at"] - killed <= DEATH_BOUND_S
    capi.OH_NNExecutor_Destroy(executor)
    capi.OH_NNTensor_Destroy(tin)
    capi.OH_NNTensor_Destroy(tout)


@pytest.mark.multiprocess
def test_executor_works_again_once_the_device_is_back(runtime_dir, monkeypatch):
    driver = start_driver(runtime_dir)
    with use_runtime(monkeypatch, runtime_dir):
        executor = make_executor(add_model())
        x = np.arange(6, dtype=np.float32).reshape(2, 3)
        old_in, old_out = tensor([2, 3], x), tensor([2, 3])
        driver.proc.kill()
        driver.proc.wait(5)
        assert wait_until(lambda: not executor._client.alive, 2)
        assert capi.OH_NNExecutor_RunSync(executor, [old_in], 1, [old_out], 1) == \
            capi.OH_NN_CONNECTION_EXCEPTION
        driver = start_driver(runtime_dir)
        try:
            # the executor recovers; tensors of the dead session are registered with the new
            # one (tests/client/capi/test_recovery.py), and new ones run on the same executor too
            assert capi.OH_NNExecutor_RunSync(executor, [old_in], 1, [old_out], 1) == OK
            np.testing.assert_allclose(array(old_out), x + W, rtol=1e-6)
            tin, tout = tensor([2, 3], x), tensor([2, 3])
            assert capi.OH_NNExecutor_RunSync(executor, [tin], 1, [tout], 1) == OK
            np.testing.assert_allclose(array(tout), x + W, rtol=1e-6)
            for t in (tin, tout, old_in, old_out):
                capi.OH_NNTensor_Destroy(t)
            capi.OH_NNExecutor_Destroy(executor)
        finally:
            driver.stop()


def test_workers_and_deadline_thread_are_runtime_threads(ex, io):
    tin, tout, _ = io
    names = []
    capi.OH_NNExecutor_SetOnRunDone(ex, lambda u, c, o, n: names.append(
        threading.current_thread().name))
    assert capi.OH_NNExecutor_RunAsync(ex, [tin], 1, [tout], 1, 1000, 1) == OK
    assert wait_until(lambda: names, 5)
    assert names[0].startswith("nnrt-")
    assert execution.WORKERS >= 50
