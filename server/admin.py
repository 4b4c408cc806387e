"""`nnrt.admin.v1.NnrtAdmin` (protos/admin.proto): status and runtime fault injection.

Served by every driver on its gRPC socket beside the HDI services. Neither method needs a
session: the socket's mode (0660) is the access control, as for the device queries.

* `GetStatus`: the driver's identity, pid and uptime, its Run counters and the latency
  histogram of its completed runs (server/stats.py), every open session with the buffers,
  bytes and prepared models it holds, the faults in force, and the memory budgets in force
  (shared memory per driver and per session, model memory per run) with the shared memory
  held now; for a device with a core budget, its run queue (server/run_scheduler.py): the
  cores, those in use, the runs waiting now, and since the start how many runs waited,
  for how long in all, and how many left it without computing.
* `SetFaults`: replaces the faults in force — only on a driver started with fault
  injection enabled (`--fault-injection` or any `--fault-*` option); otherwise refused
  with HDF_ERR_NOPERM and a log line. Every change is logged at WARNING. A config out of
  range (probability outside [0, 1], an unknown device status) is refused with
  HDF_ERR_INVALID_PARAM and changes nothing.
"""

from __future__ import annotations

import logging
import os
import time

from nnrt.drivers import reference
from nnrt.protos import admin_pb2 as pb
from nnrt.protos import admin_pb2_grpc as rpc
from nnrt.server import buffers
from nnrt.server.device import Device
from nnrt.common.errors import HDF_ERR_INVALID_PARAM, HDF_ERR_NOPERM, NNRT_FAILED
from nnrt.common.faults import faults_from_proto, faults_to_proto
from nnrt.server.faults import FaultInjection
from nnrt.server.run_scheduler import RunScheduler
from nnrt.server.sessions import SessionRegistry
from nnrt.server.stats import LATENCY_BUCKETS, RunStats

log = logging.getLogger(__name__)

SERVICE_NAME = pb.DESCRIPTOR.services_by_name["NnrtAdmin"].full_name


class AdminServicer(rpc.NnrtAdminServicer):
    def __init__(self, device: Device, name: str, sessions: SessionRegistry,
                 faults: FaultInjection, stats: RunStats, started: float | None = None,
                 scheduler: RunScheduler | None = None) -> None:
        self.device = device
        self.scheduler = scheduler
        self.name = name
        self.sessions = sessions
        self.faults = faults
        self.stats = stats
        self.started = time.monotonic() if started is None else started

    def GetStatus(self, request, context):
        try:
            runs = self.stats.snapshot()
            budget = buffers.process_budget()
            queue = self.scheduler.stats() if self.scheduler is not None else None
            sessions = [
                pb.SessionStatus(
                    sessionId=s.id, peerPid=s.peer_pid or 0, buffers=len(s.buffers),
                    bufferBytes=s.buffers.total_bytes(), preparedModels=s.prepared_count())
                for s in sorted(self.sessions.sessions(), key=lambda s: s.id)
            ]
            return pb.DriverStatus(
                kind=self.device.kind, name=self.name, deviceName=self.device.name,
                vendor=self.device.vendor, pid=os.getpid(),
                uptimeSeconds=time.monotonic() - self.started,
                inFlightRuns=runs.in_flight, runsCompleted=runs.completed,
                runsFailed=runs.failed, runsAbandoned=runs.abandoned, sessions=sessions,
                faultInjectionEnabled=self.faults.allowed,
                faults=faults_to_proto(self.faults.faults),
                details=self.device.details(),
                runLatency=pb.RunLatency(upperBoundsSeconds=LATENCY_BUCKETS,
                                         counts=runs.latency_counts,
                                         sumSeconds=runs.latency_sum),
                sharedMemoryBudgetBytes=budget.driver_limit,
                sessionMemoryBudgetBytes=budget.session_limit,
                modelMemoryLimitBytes=reference.model_memory_limit(),
                sharedMemoryUsedBytes=budget.used,
                runQueue=None if queue is None else pb.RunQueue(
                    cores=queue.cores, coresInUse=queue.cores_in_use, queued=queue.queued,
                    waited=queue.waited, waitSeconds=queue.wait_seconds,
                    gaveUp=queue.gave_up),
            )
        except Exception:
            log.exception("GetStatus failed unexpectedly")
            return pb.DriverStatus(returnCode=NNRT_FAILED)

    def SetFaults(self, request, context):
        current = self.faults.faults
        if not self.faults.allowed:
            log.warning("SetFaults refused (%s): HDF_ERR_NOPERM: fault injection is not enabled "
                        "(start the driver with --fault-injection)", context.peer())
            return pb.FaultReply(returnCode=HDF_ERR_NOPERM, faults=faults_to_proto(current))
        try:
            faults = faults_from_proto(request)
        except ValueError as exc:
            log.warning("SetFaults refused: HDF_ERR_INVALID_PARAM: %s", exc)
            return pb.FaultReply(returnCode=HDF_ERR_INVALID_PARAM, faults=faults_to_proto(current))
        self.faults.apply(faults)
        log.warning("FAULT INJECTION SET at runtime: %s (was: %s)", faults.describe(),
                    current.describe())
        return pb.FaultReply(faults=faults_to_proto(faults))
