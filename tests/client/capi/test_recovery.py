"""Automatic recovery after a driver crash (beyond upstream NNRt, which never recovers).

Real processes throughout: a CPU driver is SIGKILLed and a new driver process of the same
identity is started on the same socket name (`restart`). Executors compiled before the
crash prepare their model again on their next run — from the cache blob their Build kept
client-side, or from the model when that blob is refused — and tensors made before the
crash are registered with the new session, their bytes untouched.

`test_time_from_sigkill_to_a_successful_run` prints its figures (pytest -s).
"""

from __future__ import annotations

import logging
import os
import re
import signal
import statistics
import threading
import time

import numpy as np
import pytest

from nnrt.client import capi
from nnrt.client.capi.structs import OH_NN_Tensor
from nnrt.client.core.driver import DriverGone
from tests.client.capi.util_capi import W, add_model, desc
from tests.client.capi.util_executor import (
    Callbacks,
    array,
    compile_model,
    make_executor,
    tensor,
    two_output_model,
    use_runtime,
)
from tests.conftest import RunningDriver, in_threads, memfd_mappings, start_driver, wait_until

OK = capi.OH_NN_SUCCESS
CONNECTION = capi.OH_NN_CONNECTION_EXCEPTION
FAST_FAIL_S = 0.1  # a call while the driver is down fails within this
RNG = np.random.default_rng(23)
log = logging.getLogger(__name__)

FROM_CACHE = re.compile(r"prepared model \d+ from its cache")
FROM_MODEL = re.compile(r"prepared model \d+ from \d+ nodes")


def report(message: str) -> None:
    print(message)
    log.info(message)


class Driver:
    """The CPU driver of one test, restartable under the same name."""

    def __init__(self, runtime_dir, *args: str) -> None:
        self.runtime_dir = runtime_dir
        self.current: RunningDriver = start_driver(runtime_dir, "cpu", *args)

    def kill(self) -> None:
        self.current.stop(signal.SIGKILL)

    def start(self, *args: str) -> RunningDriver:
        self.current = start_driver(self.runtime_dir, "cpu", *args)
        return self.current

    def restart(self, *args: str) -> RunningDriver:
        self.kill()
        return self.start(*args)

    def log(self) -> str:
        return self.current.log()

    def close(self) -> None:
        if self.current.proc.poll() is None:
            self.current.stop()


@pytest.fixture
def driver(runtime_dir, monkeypatch):
    d = Driver(runtime_dir)
    with use_runtime(monkeypatch, runtime_dir):
        yield d
    d.close()


def dead(executor) -> bool:
    return wait_until(lambda: not executor._client.alive, 2)


def fd_tensor(shape, values, offset: int = 16) -> tuple[capi.NN_Tensor, int]:
    """A tensor over the caller's own memfd (OH_NNTensor_CreateWithFd), data at `offset`."""
    fd = os.memfd_create("caller", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    size = offset + int(np.prod(shape)) * 4 + 8
    os.ftruncate(fd, size)
    d = desc(shape)
    t = capi.OH_NNTensor_CreateWithFd(0, d, fd, size, offset)
    capi.OH_NNTensorDesc_Destroy(d)
    assert t is not None
    array(t)[...] = values
    return t, fd


def destroy(*handles) -> None:
    for h in handles:
        if isinstance(h, capi.NN_Tensor):
            assert capi.OH_NNTensor_Destroy(h) == OK
        elif isinstance(h, capi.OH_NNExecutor):
            capi.OH_NNExecutor_Destroy(h)


# -- RunSync after a crash ------------------------------------------------------------------------


def test_run_sync_after_a_restart_uses_the_tensors_and_bytes_of_before(driver):
    """Same outputs from tensors made — and input bytes written — before the crash; the
    re-prepare came from the kept cache; calls while the driver is down fail fast."""
    executor = make_executor(two_output_model())
    a = RNG.standard_normal((2, 3)).astype(np.float32)
    b = RNG.standard_normal((2, 3)).astype(np.float32)
    x1 = tensor([2, 3], a)  # OH_NNTensor_Create: the driver's memfd
    x2, caller_fd = fd_tensor([2, 3], b)  # the caller's memfd, data at offset 16
    d = desc([2, 3])
    s, p = tensor([2, 3]), capi.OH_NNTensor_CreateWithSize(0, d, 64)
    capi.OH_NNTensorDesc_Destroy(d)
    assert capi.OH_NNExecutor_RunSync(executor, [x1, x2], 2, [s, p], 2) == OK
    before = array(s).copy(), array(p).copy()
    np.testing.assert_allclose(before[0], a + b, rtol=1e-6)
    np.testing.assert_allclose(before[1], a * b, rtol=1e-6)
    assert executor.built.cache is not None  # exported right after the Build

    driver.kill()
    assert dead(executor)
    np.testing.assert_array_equal(array(x1), a)  # the pages outlive the driver
    start = time.monotonic()
    assert capi.OH_NNExecutor_RunSync(executor, [x1, x2], 2, [s, p], 2) == CONNECTION
    assert time.monotonic() - start < FAST_FAIL_S
    array(s)[...] = 0  # outputs cleared; inputs are not written again
    array(p)[...] = 0

    new = driver.start()
    assert capi.OH_NNExecutor_RunSync(executor, [x1, x2], 2, [s, p], 2) == OK
    np.testing.assert_array_equal(array(s), before[0])
    np.testing.assert_array_equal(array(p), before[1])
    assert executor.recoveries == ["cache"]
    assert wait_until(lambda: FROM_CACHE.search(new.log()), 2), new.log()
    assert len(FROM_CACHE.findall(new.log())) == 1 and not FROM_MODEL.search(new.log())
    # a second run needs nothing more
    assert capi.OH_NNExecutor_RunSync(executor, [x1, x2], 2, [s, p], 2) == OK
    assert executor.recoveries == ["cache"]
    assert capi.OH_NNExecutor_GetOutputShape(executor, 1) == (OK, [2, 3])
    destroy(executor, x1, x2, s, p)
    os.fstat(caller_fd)  # the caller's fd is still the caller's
    os.close(caller_fd)


@pytest.mark.parametrize("kept", ["corrupt", "absent"])
def test_recovery_falls_back_to_the_model(driver, kept):
    """A kept cache blob the new driver refuses (corrupted here in-process), or none at all:
    the model is prepared from its lowered graph instead, with the same result."""
    executor = make_executor(add_model())
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    tin, tout = tensor([2, 3], x), tensor([2, 3])
    assert capi.OH_NNExecutor_RunSync(executor, [tin], 1, [tout], 1) == OK
    contents = executor.built.cache
    if kept == "corrupt":
        blob = bytearray(contents.blobs[0])
        blob[len(blob) // 2] ^= 0xFF
        contents.blobs[0] = bytes(blob)
    else:
        executor.built.cache = None
    new = driver.restart()
    array(tout)[...] = 0
    assert capi.OH_NNExecutor_RunSync(executor, [tin], 1, [tout], 1) == OK
    np.testing.assert_allclose(array(tout), x + W, rtol=1e-6)
    assert executor.recoveries == ["model"]
    assert wait_until(lambda: FROM_MODEL.search(new.log()), 2), new.log()
    assert not FROM_CACHE.search(new.log())
    if kept == "corrupt":
        assert "NNRT_INVALID_MODEL_CACHE" in new.log()
    destroy(executor, tin, tout)


def test_one_re_prepare_per_executor_however_many_threads(driver):
    """8 threads on 2 executors of one compilation, all first to run after the restart:
    exactly one re-prepare each; the shared input tensor is registered once."""
    compilation = compile_model(add_model())
    executors = [capi.OH_NNExecutor_Construct(compilation) for _ in range(2)]
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    tin = tensor([2, 3], x)
    outs = [tensor([2, 3]) for _ in range(8)]
    for i, tout in enumerate(outs):
        assert capi.OH_NNExecutor_RunSync(executors[i % 2], [tin], 1, [tout], 1) == OK
    new = driver.restart()
    barrier = threading.Barrier(8)
    codes = [None] * 8

    def run(i: int) -> None:
        barrier.wait(5)
        codes[i] = capi.OH_NNExecutor_RunSync(executors[i % 2], [tin], 1, [outs[i]], 1)

    threads = in_threads(run, [(i,) for i in range(8)], timeout=10)
    assert not any(t.is_alive() for t in threads)
    assert codes == [OK] * 8
    for tout in outs:
        np.testing.assert_allclose(array(tout), x + W, rtol=1e-6)
    assert [e.recoveries for e in executors] == [["cache"], ["cache"]]
    assert wait_until(lambda: len(FROM_CACHE.findall(new.log())) >= 2, 2)
    time.sleep(0.05)
    assert len(FROM_CACHE.findall(new.log())) == 2, new.log()
    assert len(tin.memory.sessions()) == 1  # the new session only, registered once
    capi.OH_NNCompilation_Destroy(compilation)
    destroy(*executors, tin, *outs)


# -- RunAsync ----------------------------------------------------------------------------------


@pytest.mark.multiprocess
def test_runs_in_flight_at_the_crash_then_run_async_after_the_restart(runtime_dir, monkeypatch):
    """In flight at the SIGKILL: NN_OnServiceDied then NN_OnRunDone(CONNECTION_EXCEPTION).
    While down: refused with CONNECTION_EXCEPTION. After the restart: RunAsync succeeds."""
    driver = Driver(runtime_dir, "--fault-run-delay-ms", "2000")  # runs stay in flight
    with use_runtime(monkeypatch, runtime_dir):
        try:
            executor = make_executor(add_model())
            cb = Callbacks()
            capi.OH_NNExecutor_SetOnRunDone(executor, cb.on_done)
            capi.OH_NNExecutor_SetOnServiceDied(executor, cb.on_died)
            x = RNG.standard_normal((2, 3)).astype(np.float32)
            tin, touts = tensor([2, 3], x), [tensor([2, 3]) for _ in range(3)]
            for i, tout in enumerate(touts):
                assert capi.OH_NNExecutor_RunAsync(executor, [tin], 1, [tout], 1, 10_000,
                                                   f"run{i}") == OK
            time.sleep(0.3)  # inside the driver's injected delay
            driver.kill()
            cb.wait_done(3, 5)
            with cb.lock:
                events = list(cb.events)
            for i in range(3):
                mine = [e for e in events if e[1] == f"run{i}"]
                assert [e[0] for e in mine] == ["died", "done"], mine
                assert mine[1][2] == CONNECTION
            start = time.monotonic()
            assert capi.OH_NNExecutor_RunAsync(executor, [tin], 1, [touts[0]], 1, 1000,
                                               "down") == CONNECTION
            assert time.monotonic() - start < FAST_FAIL_S
            driver.start()  # the same device, without the delay this time
            assert capi.OH_NNExecutor_RunAsync(executor, [tin], 1, [touts[0]], 1, 5000,
                                               "after") == OK
            event = cb.wait_done(4, 5)[3]
            assert event[1] == "after" and event[2] == OK
            np.testing.assert_allclose(array(touts[0]), x + W, rtol=1e-6)
            assert executor.recoveries == ["cache"]
            assert capi.OH_NNExecutor_RunSync(executor, [tin], 1, [touts[1]], 1) == OK
            np.testing.assert_allclose(array(touts[1]), x + W, rtol=1e-6)
            time.sleep(0.05)
            assert len(cb.events) == 7  # 3 × (died, done), "after"; "down" got none
            destroy(executor, tin, *touts)
        finally:
            driver.close()


def test_threads_running_through_two_crashes_never_deadlock(driver):
    """Threads run in a loop (sync and async) while the driver is killed and restarted twice:
    every call answers OK or CONNECTION_EXCEPTION, every async run gets its callback, and
    all threads finish (no deadlock between recovery and the death callbacks)."""
    executor = make_executor(add_model())
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    tin = tensor([2, 3], x)
    stop = threading.Event()
    seen: list[int] = []
    cb = Callbacks()
    capi.OH_NNExecutor_SetOnRunDone(executor, cb.on_done)
    accepted = [0]

    def sync_loop(tout) -> None:
        while not stop.is_set():
            try:
                seen.append(capi.OH_NNExecutor_RunSync(executor, [tin], 1, [tout], 1))
            except Exception as exc:  # noqa: BLE001 - a C function must never raise
                seen.append(exc)

    def async_loop(tout) -> None:
        while not stop.is_set():
            try:
                code = capi.OH_NNExecutor_RunAsync(executor, [tin], 1, [tout], 1, 2000, "a")
            except Exception as exc:  # noqa: BLE001
                code = exc
            seen.append(code)
            if code == OK:
                accepted[0] += 1
            time.sleep(0.002)

    outs = [tensor([2, 3]) for _ in range(4)]
    threads = [threading.Thread(target=sync_loop, args=(outs[i],)) for i in range(3)]
    threads.append(threading.Thread(target=async_loop, args=(outs[3],)))
    for t in threads:
        t.start()
    try:
        for _ in range(2):
            time.sleep(0.1)
            driver.restart()
        time.sleep(0.2)
    finally:
        stop.set()
        for t in threads:
            t.join(10)
    assert not any(t.is_alive() for t in threads)
    assert {c for c in seen if not isinstance(c, int)} == set()
    assert set(seen) <= {OK, CONNECTION}, set(seen)
    assert seen[-4:].count(OK) >= 1
    cb.wait_done(accepted[0], 5)  # every accepted run completed, exactly once
    time.sleep(0.05)
    assert len(cb.done()) == accepted[0]
    assert capi.OH_NNExecutor_RunSync(executor, [tin], 1, [outs[0]], 1) == OK
    np.testing.assert_allclose(array(outs[0]), x + W, rtol=1e-6)
    assert 1 <= len(executor.recoveries) <= 2
    destroy(executor, tin, *outs)


def test_a_call_racing_the_close_of_a_dead_session_is_driver_gone(driver):
    """A call that passed the liveness check just before another thread dropped the dead
    session (closing its channel, as Device.client() does when it reconnects) gets
    DriverGone — OH_NN_CONNECTION_EXCEPTION — not gRPC's ValueError."""
    client = driver.current.client()
    driver.kill()
    assert client.wait_dead(2)
    client.close()
    answers = [False]  # the first check still saw the session alive
    real = client._dead.is_set
    client._dead.is_set = lambda: answers.pop() if answers else real()
    with pytest.raises(DriverGone):
        client.get_version()


# -- the deprecated API's memory ---------------------------------------------------------------


def test_deprecated_bindings_and_memory_survive_a_restart(driver):
    """OH_NN_Memory from AllocateInput/OutputMemory and SetInput's copy stay bound and keep
    their bytes; OH_NNExecutor_Run works again after the restart."""
    executor = make_executor(two_output_model())
    a = RNG.standard_normal((2, 3)).astype(np.float32)
    b = RNG.standard_normal((2, 3)).astype(np.float32)
    t = OH_NN_Tensor(dataType=capi.OH_NN_FLOAT32, dimensionCount=2, dimensions=[2, 3],
                     quantParam=None, type=capi.OH_NN_TENSOR)
    m_in = capi.OH_NNExecutor_AllocateInputMemory(executor, 0, 24)
    m_out = capi.OH_NNExecutor_AllocateOutputMemory(executor, 0, 24)
    np.frombuffer(m_in.data, np.float32)[:] = a.ravel()
    assert capi.OH_NNExecutor_SetInputWithMemory(executor, 0, t, m_in) == OK
    assert capi.OH_NNExecutor_SetInput(executor, 1, t, b, b.nbytes) == OK
    assert capi.OH_NNExecutor_SetOutputWithMemory(executor, 0, m_out) == OK
    product = np.zeros(6, np.float32)
    assert capi.OH_NNExecutor_SetOutput(executor, 1, product, product.nbytes) == OK
    assert capi.OH_NNExecutor_Run(executor) == OK
    np.testing.assert_allclose(np.frombuffer(m_out.data, np.float32), (a + b).ravel(), rtol=1e-6)
    driver.kill()
    assert dead(executor)
    assert capi.OH_NNExecutor_Run(executor) == CONNECTION
    np.frombuffer(m_out.data, np.float32)[:] = 0
    product[:] = 0
    driver.start()
    assert capi.OH_NNExecutor_Run(executor) == OK
    np.testing.assert_allclose(np.frombuffer(m_out.data, np.float32), (a + b).ravel(), rtol=1e-6)
    np.testing.assert_allclose(product, (a * b).ravel(), rtol=1e-6)
    capi.OH_NNExecutor_DestroyInputMemory(executor, 0, m_in)
    capi.OH_NNExecutor_DestroyOutputMemory(executor, 0, m_out)
    capi.OH_NNExecutor_Destroy(executor)


# -- several crashes, leaks, timing -------------------------------------------------------------------


def _fd_count() -> int:
    return len(os.listdir("/proc/self/fd"))


def _cycle_objects():
    executor = make_executor(two_output_model())
    a = RNG.standard_normal((2, 3)).astype(np.float32)
    b = RNG.standard_normal((2, 3)).astype(np.float32)
    x1 = tensor([2, 3], a)
    x2, caller_fd = fd_tensor([2, 3], b)
    s, p = tensor([2, 3]), tensor([2, 3])
    return executor, (x1, x2, s, p), caller_fd, a, b


def test_three_crashes_in_a_row_without_leaks(driver):
    # warm-up: the registry's session, gRPC's own fds; then everything destroyed = baseline
    executor, tensors, caller_fd, _, _ = _cycle_objects()
    x1, x2, s, p = tensors
    assert capi.OH_NNExecutor_RunSync(executor, [x1, x2], 2, [s, p], 2) == OK
    destroy(executor, *tensors)
    os.close(caller_fd)
    fds, maps = _fd_count(), len(memfd_mappings(os.getpid()))

    executor, tensors, caller_fd, a, b = _cycle_objects()
    x1, x2, s, p = tensors
    assert capi.OH_NNExecutor_RunSync(executor, [x1, x2], 2, [s, p], 2) == OK
    for cycle in range(3):
        driver.restart()
        array(s)[...] = 0
        assert capi.OH_NNExecutor_RunSync(executor, [x1, x2], 2, [s, p], 2) == OK, cycle
        np.testing.assert_allclose(array(s), a + b, rtol=1e-6)
        np.testing.assert_allclose(array(p), a * b, rtol=1e-6)
    assert executor.recoveries == ["cache"] * 3
    destroy(executor, *tensors)
    os.close(caller_fd)
    assert wait_until(lambda: (_fd_count(), len(memfd_mappings(os.getpid()))) == (fds, maps), 2), \
        (_fd_count(), fds, memfd_mappings(os.getpid()), maps)
    report(f"3 crash/restart cycles: {fds} fds and {maps} memfd mappings before and after")


def test_time_from_sigkill_to_a_successful_run(driver):
    """Median over 10 SIGKILLs: from the new driver's SERVING to the end of the first
    successful RunSync (recovery: reconnect + re-prepare from the cache + run), and from the
    SIGKILL itself (also the new process's cold start, restarted at once)."""
    executor = make_executor(add_model())
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    tin, tout = tensor([2, 3], x), tensor([2, 3])
    assert capi.OH_NNExecutor_RunSync(executor, [tin], 1, [tout], 1) == OK
    start = time.monotonic()
    assert capi.OH_NNExecutor_RunSync(executor, [tin], 1, [tout], 1) == OK
    steady = time.monotonic() - start
    from_serving, from_kill, drivers = [], [], []
    for _ in range(10):
        killed = time.monotonic()
        drivers.append(driver.restart())
        serving = time.monotonic()
        assert capi.OH_NNExecutor_RunSync(executor, [tin], 1, [tout], 1) == OK
        done = time.monotonic()
        from_serving.append(done - serving)
        from_kill.append(done - killed)
    # the part spent inside each new driver on its first PrepareModelFromModelCache
    pattern = re.compile(r"prepared model \d+ from its cache in ([\d.]+) ms")
    assert wait_until(lambda: all(pattern.search(d.log()) for d in drivers), 2)
    in_driver = [float(pattern.search(d.log()).group(1)) / 1000 for d in drivers]
    np.testing.assert_allclose(array(tout), x + W, rtol=1e-6)
    assert executor.recoveries == ["cache"] * 10
    ms = lambda values: f"{statistics.median(values) * 1000:.1f} ms"  # noqa: E731
    report(f"SIGKILL -> first successful RunSync, median of 10: {ms(from_serving)} after the new "
           f"driver reports SERVING (min {min(from_serving) * 1000:.1f}, max "
           f"{max(from_serving) * 1000:.1f}); {ms(from_kill)} from the SIGKILL, cold start "
           f"included; of which the new driver's own first PrepareModelFromModelCache "
           f"{ms(in_driver)}; a steady-state RunSync takes {steady * 1000:.2f} ms")
    assert statistics.median(from_serving) < 2.0
    destroy(executor, tin, tout)
