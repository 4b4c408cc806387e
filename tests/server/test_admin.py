"""The admin service `nnrt.admin.v1.NnrtAdmin` of a driver process: GetStatus and SetFaults."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import grpc
import numpy as np
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from nnrt.protos import admin_pb2 as apb
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.common.errors import (
    HDF_ERR_INVALID_PARAM,
    HDF_ERR_NOPERM,
    NNRT_INVALID_INPUT,
    NNRT_SUCCESS,
)
from tests.conftest import start_driver, wait_until
from tests.helpers.admin import set_faults, status
from tests.helpers.hdi_models import add_model, io

ADMIN_SERVICE = "nnrt.admin.v1.NnrtAdmin"


def session_of(reply: apb.DriverStatus, session_id: int) -> apb.SessionStatus | None:
    return next((s for s in reply.sessions if s.sessionId == session_id), None)


def test_status_names_the_driver_and_needs_no_session(shared_driver):
    reply = status(shared_driver)
    assert (reply.kind, reply.name, reply.deviceName, reply.vendor) == \
        ("cpu", shared_driver.name, "nnrt-cpu", "nnrt")
    assert reply.pid == shared_driver.pid
    assert reply.uptimeSeconds > 0
    assert reply.faultInjectionEnabled is False
    assert reply.faults == apb.FaultConfig()
    assert status(shared_driver).uptimeSeconds >= reply.uptimeSeconds


def test_admin_service_is_in_health_and_reflection(shared_driver):
    with grpc.insecure_channel(f"unix:{shared_driver.grpc_path}") as channel:
        health = health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service=ADMIN_SERVICE), timeout=5)
        assert health.status == health_pb2.HealthCheckResponse.SERVING
        replies = reflection_pb2_grpc.ServerReflectionStub(channel).ServerReflectionInfo(
            iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=5)
        names = {s.name for reply in replies for s in reply.list_services_response.service}
    assert ADMIN_SERVICE in names


def test_status_reflects_sessions_buffers_and_prepared_models(shared_driver):
    client = shared_driver.client()
    try:
        assert session_of(status(shared_driver), client.session_id) == apb.SessionStatus(
            sessionId=client.session_id, peerPid=os.getpid(), peerUid=os.geteuid())
        _, small = client.allocate_buffer(16)
        _, big = client.allocate_buffer(4096)
        first = add_model().prepare(client)
        add_model().prepare(client)
        mine = session_of(status(shared_driver), client.session_id)
        assert (mine.buffers, mine.bufferBytes, mine.preparedModels) == (2, 4112, 2)
        with shared_driver.client() as other:  # each session is reported on its own
            theirs = session_of(status(shared_driver), other.session_id)
            assert (theirs.buffers, theirs.preparedModels) == (0, 0)
        assert client.release_prepared_model(first).returnCode == NNRT_SUCCESS
        assert client.release_buffer(big).returnCode == NNRT_SUCCESS
        mine = session_of(status(shared_driver), client.session_id)
        assert (mine.buffers, mine.bufferBytes, mine.preparedModels) == (1, 16, 1)
        small.close(), big.close()
    finally:
        client.close()
    assert wait_until(lambda: session_of(status(shared_driver), client.session_id) is None, 5.0)


def test_set_faults_is_refused_without_fault_injection(shared_driver):
    reply = set_faults(shared_driver, deviceStatus=ht.OFFLINE + 1, runHang=True)
    assert reply.returnCode == HDF_ERR_NOPERM
    assert reply.faults == apb.FaultConfig()
    assert status(shared_driver).faults == apb.FaultConfig()
    with shared_driver.client() as client:
        assert client.get_device_status().status == ht.AVAILABLE
    assert wait_until(lambda: "SetFaults refused" in shared_driver.log(), 2.0)


@pytest.fixture
def injecting_driver(runtime_dir: Path):
    """A driver started with --fault-injection and no fault in force."""
    driver = start_driver(runtime_dir, "cpu", "--fault-injection")
    yield driver
    driver.stop()


def test_set_faults_is_applied_with_fault_injection(injecting_driver):
    driver = injecting_driver
    before = status(driver)
    assert before.faultInjectionEnabled is True and before.faults == apb.FaultConfig()
    wanted = apb.FaultConfig(deviceStatus=ht.BUSY + 1, runDelayMs=5, exitOnRunProbability=0.25)
    reply = set_faults(driver, **{f.name: v for f, v in wanted.ListFields()})
    assert reply.returnCode == 0 and reply.faults == wanted
    assert status(driver).faults == wanted
    with driver.client() as client:
        assert client.get_device_status().status == ht.BUSY
    assert "WARNING nnrt.server.admin: FAULT INJECTION SET at runtime" in driver.log()
    # out of range: refused, nothing changed
    for bad in (dict(exitOnRunProbability=1.5), dict(deviceStatus=9)):
        refused = set_faults(driver, **bad)
        assert refused.returnCode == HDF_ERR_INVALID_PARAM and refused.faults == wanted
    # an empty config clears every fault; injection stays allowed
    assert set_faults(driver).faults == apb.FaultConfig()
    with driver.client() as client:
        assert client.get_device_status().status == ht.AVAILABLE
    assert status(driver).faultInjectionEnabled is True


@pytest.mark.multiprocess
def test_run_counters_in_flight_completed_failed_abandoned(runtime_dir):
    driver = start_driver(runtime_dir, "cpu", "--fault-run-delay-ms", "600")
    try:
        with driver.client() as client:
            model_id = add_model().prepare(client)
            _, x = client.allocate_buffer(16)
            _, y = client.allocate_buffer(16)
            x.array(np.float32, [4])[:] = 1
            replies = []
            worker = threading.Thread(target=lambda: replies.append(
                client.run(model_id, [io(x, 4)], [io(y, 4)], timeout=10)))
            worker.start()
            assert wait_until(lambda: status(driver).inFlightRuns == 1, 5.0)
            worker.join(10)
            assert replies[0].returnCode == NNRT_SUCCESS
            # refused by validation (after its injected delay): a failed run
            assert client.run(model_id, [], [io(y, 4)], timeout=10).returnCode == NNRT_INVALID_INPUT
            with pytest.raises(TimeoutError):  # the caller gives up during the delay
                client.run(model_id, [io(x, 4)], [io(y, 4)], timeout=0.2)
            assert wait_until(lambda: status(driver).runsAbandoned == 1, 5.0)
            reply = status(driver)
            assert (reply.inFlightRuns, reply.runsCompleted, reply.runsFailed,
                    reply.runsAbandoned) == (0, 1, 1, 1)
            x.close(), y.close()
    finally:
        assert driver.stop() == 0


@pytest.mark.multiprocess
def test_status_shows_the_run_queue_of_a_driver_with_a_core_budget(runtime_dir):
    """The CPU driver's onnxruntime engine computes on a budget of cores (one run a core,
    server/run_scheduler.py): its status says the budget, what computes and waits now, and
    since the start how many runs waited and for how long; the numpy engine has no budget."""
    from tests.helpers.hdi_models import mlp

    cores = len(os.sched_getaffinity(0))
    driver = start_driver(runtime_dir, "cpu", "--engine", "ort")
    plain = start_driver(runtime_dir, "cpu", "--engine", "numpy", name="plain")
    try:
        assert not status(plain).HasField("runQueue")
        assert status(driver).runQueue == apb.RunQueue(cores=cores)
        # Runs of ~0.1 s each, more at once than there are cores: some wait their turn.
        builder, _ = mlp(256, (1024, 2048, 2048))
        with driver.client() as client:
            model_id = builder.prepare(client)
            _, x = client.allocate_buffer(256 * 1024 * 4)
            x.array(np.float32, [256, 1024])[:] = 0.5
            outs = [client.allocate_buffer(256 * 2048 * 4)[1] for _ in range(cores + 2)]
            tensors = lambda memory, shape, index: ht.IOTensor(  # noqa: E731
                dataType=ht.DATA_TYPE_FLOAT32, dimensions=shape,
                format=builder.tensors[index].format, data=memory.descriptor())
            codes: list[int] = []

            def one(out) -> None:
                codes.append(client.run(
                    model_id, [tensors(x, [256, 1024], builder.inputs[0])],
                    [tensors(out, [256, 2048], builder.outputs[0])], timeout=60).returnCode)

            for _ in range(3):  # a burst whose runs did not overlap (a loaded machine) again
                threads = [threading.Thread(target=one, args=(out,)) for out in outs]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join(60)
                if status(driver).runQueue.waited:
                    break
            assert codes and set(codes) == {NNRT_SUCCESS}
            queue = status(driver).runQueue
            assert (queue.cores, queue.coresInUse, queue.queued, queue.gaveUp) == \
                (cores, 0, 0, 0)
            assert 1 <= queue.waited < len(codes)  # the first of a burst never waits
            assert 0 < queue.waitSeconds < 60 * queue.waited
            for memory in (x, *outs):
                memory.close()
    finally:
        assert driver.stop() == 0
        assert plain.stop() == 0
