"""Cancelling a run in flight (the session channel's cancel op, an nnrt addition): the driver
abandons it as at its deadline and still answers it, so the client reuses its buffers only
once the driver is done; through the HDI client, the core and the Pythonic API's asyncio."""

from __future__ import annotations

import asyncio
import threading
import time

import numpy as np
import pytest

from nnrt.client import Model
from nnrt.client.core import errors, execution
from nnrt.client.core.compiler import compile_model
from nnrt.client.core.device import DeviceRegistry, find_device
from nnrt.client.core.driver import DriverClient, RunTicket
from nnrt.client.core.execution import Binding, describe_binding
from nnrt.client.core.prepared_model import PreparedModel
from nnrt.common import session_channel as channel
from nnrt.common.errors import NNRT_INVALID_PARAMETER, NNRT_SUCCESS, NNRT_TIME_OUT
from nnrt.common.hdi_model import IODesc, LoweredModel
from nnrt.protos import hdi_pb2 as pb
from nnrt.protos import hdi_types_pb2 as ht
from tests.client.capi.util_capi import use_runtime
from tests.conftest import start_driver, wait_until
from tests.helpers.hdi_models import add_model, io

pytestmark = pytest.mark.multiprocess

DELAY_MS = 5000  # every run of the slow driver sleeps this long, honouring cancellation


@pytest.fixture(scope="module")
def slow(tmp_path_factory):
    driver = start_driver(tmp_path_factory.mktemp("cancel") / "rt", "cpu",
                          "--fault-run-delay-ms", str(DELAY_MS))
    yield driver
    driver.stop()


def _run_in_thread(target) -> tuple[threading.Thread, list]:
    result: list = []

    def body() -> None:
        try:
            result.append(target())
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            result.append(exc)

    thread = threading.Thread(target=body)
    thread.start()
    return thread, result


def _add(client):
    """The add model prepared in `client`'s session, and its input and output buffers."""
    _, x = client.allocate_buffer(16)
    _, y = client.allocate_buffer(16)
    return add_model().prepare(client), x, y


def test_a_cancelled_run_is_abandoned_and_still_answered(slow):
    with slow.client() as client:
        model_id, x, y = _add(client)
        ticket = RunTicket()
        abandoned = _abandoned(slow)
        started = time.monotonic()
        thread, result = _run_in_thread(
            lambda: client.run(model_id, [io(x, 4)], [io(y, 4)], timeout=30.0, ticket=ticket))
        assert wait_until(lambda: ticket._target is not None, 5.0)
        time.sleep(0.1)
        ticket.cancel()
        thread.join(5.0)
        assert not thread.is_alive()
        assert result[0].returnCode == NNRT_TIME_OUT  # the driver's answer: abandoned
        assert time.monotonic() - started < DELAY_MS / 1000 / 2
        assert wait_until(lambda: "cancelled by its client" in slow.log(), 2.0)
        assert _abandoned(slow) > abandoned
        x.close(), y.close()


def test_a_cancel_before_the_run_reaches_the_driver_takes_effect_when_it_does(slow):
    with slow.client() as client:
        model_id, x, y = _add(client)
        ticket = RunTicket()
        ticket.cancel()
        started = time.monotonic()
        reply = client.run(model_id, [io(x, 4)], [io(y, 4)], timeout=30.0, ticket=ticket)
        assert reply.returnCode == NNRT_TIME_OUT
        assert time.monotonic() - started < DELAY_MS / 1000 / 2
        x.close(), y.close()


def test_cancelling_what_is_not_in_flight_is_no_error_and_bad_ones_are_refused(slow):
    with slow.client() as client:
        assert client.cancel_run(12345) is False  # finished, or never sent: nothing to do
        for bad in ("7", None, -1, True, 1 << 64, 1.5):
            reply, fds = client._session_request({"op": "cancel", "run": bad})
            channel.close_fds(fds)
            assert reply["returnCode"] == NNRT_INVALID_PARAMETER, bad
        assert client.get_device_name().returnCode == NNRT_SUCCESS  # still served
    assert "cancel refused: NNRT_INVALID_PARAMETER" in slow.log()


def _dynamic_add() -> LoweredModel:
    from nnrt.common.hdi_model import HdiModelBuilder
    from nnrt.protos import node_attrs_pb2 as na

    b = HdiModelBuilder("add")
    x = b.input("x", np.float32, [4])
    y = b.tensor("y", np.float32, [4])
    b.node(na.NODE_TYPE_ADD_FUSION, [x, b.constant("one", np.ones(4, np.float32))], [y])
    b.mark_outputs(y)
    return LoweredModel(b, [IODesc("x", 11, [4], 0)], [IODesc("y", 11, [4], 0)])


def _core_model(registry: DeviceRegistry) -> tuple[PreparedModel, object]:
    """The add model compiled by the core on the registry's CPU device, and its session."""
    device = find_device(registry.devices(), "cpu")
    client = device.client()
    return PreparedModel(compile_model(device, client, ht.ModelConfig(), _dynamic_add()),
                         client), client


def test_the_cores_run_raises_run_cancelled(slow):
    registry = DeviceRegistry(slow.runtime_dir)
    try:
        model, client = _core_model(registry)
        _, xm = client.allocate_buffer(16)
        _, ym = client.allocate_buffer(16)
        x = Binding(xm, "x", ht.DATA_TYPE_FLOAT32, [4], ht.FORMAT_NONE, 16)
        y = Binding(ym, "y", ht.DATA_TYPE_FLOAT32, [4], ht.FORMAT_NONE)
        ticket = RunTicket()
        thread, result = _run_in_thread(
            lambda: execution.run(model, [x], [y], 30.0, describe_binding, ticket))
        assert wait_until(lambda: ticket._target is not None, 5.0)
        ticket.cancel()
        thread.join(5.0)
        assert isinstance(result[0], errors.RunCancelled)
        assert result[0].code == errors.OH_NN_FAILED and "cancelled" in str(result[0])
        model.close()
    finally:
        registry.close()


def test_cancelling_an_awaited_run_has_the_driver_abandon_it(slow, monkeypatch):
    with use_runtime(monkeypatch, slow.runtime_dir), Model() as m:
        x = m.input([4])
        m.outputs(m.add(x, 1.0))
        with m.compile("cpu") as compiled, compiled.executor() as ex:

            async def cancelled_then_again() -> float:
                task = asyncio.ensure_future(ex.run_async(np.zeros(4, np.float32), timeout=30))
                await asyncio.sleep(0.3)
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
                return time.monotonic()

            abandoned = _abandoned(slow)
            began = time.monotonic()
            asyncio.run(cancelled_then_again())
            # the driver abandoned the run at once (not after its 5 s delay)
            assert wait_until(lambda: _abandoned(slow) > abandoned, 3.0)
            assert time.monotonic() - began < DELAY_MS / 1000


def _driver_deadline_first(monkeypatch) -> None:
    """The client waits 5 s past a Run's deadline, so the driver's NNRT_TIME_OUT answer reaches
    the caller before the caller's own timer fires (a race a loaded machine's scheduler
    sometimes decides that way)."""
    wait = DriverClient._await

    def late(self, seq, waiter, timeout, spin=0.0):
        return wait(self, seq, waiter, None if timeout is None else timeout + 5.0, spin)

    monkeypatch.setattr(DriverClient, "_await", late)
    # and the asynchronous runtime's deadline thread leaves the late runs to their workers
    monkeypatch.setattr(execution.AsyncRun, "expire", lambda run: None)


def test_a_driver_timeout_answer_before_the_callers_timer_is_a_timeout(slow, monkeypatch):
    """However the race between the driver's NNRT_TIME_OUT answer and the caller's own timer
    ends, the caller sees its timeout: TimeoutError from the HDI client, RunTimeout
    (OH_NN_TIMEOUT) from a synchronous and an asynchronous run — at the deadline, not at the
    caller's late timer."""
    _driver_deadline_first(monkeypatch)
    abandoned = _abandoned(slow)
    with slow.client() as client:
        model_id, x, y = _add(client)
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            client.run(model_id, [io(x, 4)], [io(y, 4)], timeout=0.2)
        assert time.monotonic() - started < 4.0
        x.close(), y.close()
    with use_runtime(monkeypatch, slow.runtime_dir), Model() as m:
        x = m.input([4])
        m.outputs(m.add(x, 1.0))
        with m.compile("cpu") as compiled, compiled.executor() as ex:
            started = time.monotonic()
            with pytest.raises(errors.RunTimeout) as sync_timeout:
                ex.run(np.zeros(4, np.float32), timeout=0.2)
            with pytest.raises(errors.RunTimeout) as async_timeout:
                asyncio.run(ex.run_async(np.zeros(4, np.float32), timeout=0.2))
            assert time.monotonic() - started < 8.0
    for raised in (sync_timeout.value, async_timeout.value):
        assert raised.code == errors.OH_NN_TIMEOUT
    assert wait_until(lambda: _abandoned(slow) >= abandoned + 3, 5.0)


def test_a_timeout_reply_is_a_run_timeout():
    """A Run reply saying the driver abandoned the run (NNRT_TIME_OUT) reaching the core
    without the HDI client's TimeoutError (the deprecated synchronous path) is OH_NN_TIMEOUT,
    not a device failure."""
    with pytest.raises(errors.RunTimeout) as raised:
        execution.output_shapes(pb.RunReply(returnCode=NNRT_TIME_OUT, reason="abandoned"), 1)
    assert raised.value.code == errors.OH_NN_TIMEOUT and "abandoned" in raised.value.message


def _abandoned(driver) -> int:
    return driver.log().count("abandoned during its injected delay")


def test_an_execution_is_cancelled_from_another_thread(slow):
    registry = DeviceRegistry(slow.runtime_dir)
    try:
        model, _ = _core_model(registry)
        run = execution.Execution(model, [np.zeros(4, np.float32)])
        thread, result = _run_in_thread(lambda: run.run(30.0))
        assert wait_until(lambda: run._ticket is not None and run._ticket._target is not None,
                          5.0)
        run.cancel()
        thread.join(5.0)
        assert isinstance(result[0], errors.RunCancelled)
        run.close()
        model.close()
    finally:
        registry.close()


def test_a_session_cannot_cancel_another_sessions_run(tmp_path):
    """Cancels name runs of the sender's own session: another client (whose seqs may well
    be the same numbers) cancels nothing of it, however many it sends."""
    driver = start_driver(tmp_path / "rt", "cpu", "--fault-run-delay-ms", "300")
    try:
        with driver.client() as owner, driver.client() as other:
            model_id, x, y = _add(owner)
            x.array(np.float32, [4])[:] = 1
            thread, result = _run_in_thread(
                lambda: owner.run(model_id, [io(x, 4)], [io(y, 4)], timeout=30.0))
            for seq in range(2000):  # every seq the owner can have used by now, and more
                assert other.cancel_run(seq) is False
            thread.join(10.0)
            assert result[0].returnCode == NNRT_SUCCESS  # not abandoned
            np.testing.assert_array_equal(y.array(np.float32, [4]), [1, 2, 3, 4])
            assert other.get_device_name().returnCode == NNRT_SUCCESS
            x.close(), y.close()
    finally:
        driver.stop()
