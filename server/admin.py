"""`nnrt.admin.v1.NnrtAdmin` (protos/admin.proto): status and runtime fault injection.

Served by every driver on its gRPC socket beside the HDI services. gRPC on a Unix socket
does not tell a servicer who calls (the peer is "unix:"), so a caller is known by the
session it names: the `nnrt-session` metadata of a session it opened on the session channel,
whose peer uid the kernel gave at connect (SO_PEERCRED; the channel's `--allow-uid` /
`--allow-gid` check at that door). Root and the driver's own user are also known without a session by the admin token
(common/runtime_dir.py: a 0600 file of the driver's user beside its sockets, sent as
`nnrt-admin` metadata): that is how `nnrt status`, `nnrt fault`, the device manager and its
metrics ask a driver that serves only `--allow-uid` / `--allow-gid`. The uid policy, as on
the device manager's control socket:

* root and the driver's own user (the admin token, or a session of theirs): everything,
  SetFaults included;
* another uid with a session: GetStatus shows the peer pids of its own sessions only (the
  others' sessions are listed with their figures, peer pid 0); SetFaults refused
  (HDF_ERR_NOPERM) on a driver started with `--allow-uid` / `--allow-gid`;
* no session (a plain call): on a driver started with `--allow-uid` / `--allow-gid`, both
  refused with HDF_ERR_NOPERM and a log line (one in 100 while they keep coming); on an
  unrestricted driver, which serves anyone who may open its 0660 socket alike, the socket's
  mode stays the access control (everything shown; fault injection is off unless the
  driver was started with it).

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

import hmac
import logging
import os
import time

from nnrt.hdi.reference import graph_checks as reference
from nnrt.protos import admin_pb2 as pb
from nnrt.protos import admin_pb2_grpc as rpc
from nnrt.server import buffers
from nnrt.hdi.device import Device
from nnrt.common.errors import HDF_ERR_INVALID_PARAM, HDF_ERR_NOPERM, NNRT_FAILED
from nnrt.common.faults import faults_from_proto, faults_to_proto
from nnrt.server.faults import FaultInjection
from nnrt.server.run_scheduler import RunScheduler
from nnrt.common.runtime_dir import ADMIN_METADATA_KEY
from nnrt.common.session_channel import METADATA_KEY
from nnrt.server.channel_connection import ChannelPolicy
from nnrt.server.sessions import Session, SessionRegistry
from nnrt.server.uid_quotas import UidLedger
from nnrt.server.stats import LATENCY_BUCKETS, RunStats

log = logging.getLogger(__name__)

SERVICE_NAME = pb.DESCRIPTOR.services_by_name["NnrtAdmin"].full_name


class AdminServicer(rpc.NnrtAdminServicer):
    def __init__(self, device: Device, name: str, sessions: SessionRegistry,
                 faults: FaultInjection, stats: RunStats, started: float | None = None,
                 scheduler: RunScheduler | None = None,
                 policy: ChannelPolicy | None = None) -> None:
        self.device = device
        self.policy = policy or ChannelPolicy()  # who may open sessions: --allow-uid/-gid
        self._refusals = 0  # calls refused for want of a session (the log says some)
        self.scheduler = scheduler
        self.name = name
        self.sessions = sessions
        self.faults = faults
        self.stats = stats
        self.started = time.monotonic() if started is None else started
        self.token: str | None = None  # the admin token (written at the host's start)
        self.uids: UidLedger | None = None  # the session channel's (set once it exists)

    def _privileged_call(self, context) -> bool:
        """Whether the call carries this driver's admin token."""
        token = next((value for key, value in context.invocation_metadata()
                      if key == ADMIN_METADATA_KEY), None)
        return self.token is not None and token is not None and \
            hmac.compare_digest(token.encode(), self.token.encode())

    def _caller(self, context) -> Session | None:
        """The session the call names (its `nnrt-session` metadata), None without one."""
        token = next((value for key, value in context.invocation_metadata()
                      if key == METADATA_KEY), None)
        return self.sessions.lookup(token)

    @staticmethod
    def privileged(uid: int | None) -> bool:
        """Root and the driver's own user: they see every client and may set faults."""
        return uid is not None and uid in (0, os.geteuid())

    def _refuse_anonymous(self, method: str, reply):
        self._refusals += 1
        if self._refusals == 1 or self._refusals % 100 == 0:
            log.warning("%s refused: HDF_ERR_NOPERM: no session named (this driver serves "
                        "only --allow-uid / --allow-gid: its admin calls must carry the "
                        "nnrt-session metadata of a session of theirs; %d refused since the "
                        "start)", method, self._refusals)
        return reply(returnCode=HDF_ERR_NOPERM)

    def GetStatus(self, request, context):
        caller = self._caller(context)
        privileged = self._privileged_call(context)
        if caller is None and not privileged and self.policy.restricted:
            return self._refuse_anonymous("GetStatus", pb.DriverStatus)
        try:
            everyone = privileged or (self.privileged(caller.uid) if caller is not None
                                      else True)
            return self.status(caller, everyone)
        except Exception:
            log.exception("GetStatus failed unexpectedly")
            return pb.DriverStatus(returnCode=NNRT_FAILED)

    def status(self, caller: Session | None = None, everyone: bool = True) -> pb.DriverStatus:
        """The DriverStatus as `caller` may see it (`everyone`: every client's pids and
        uids); the driver's own metrics (server/prometheus.py) read it whole."""
        runs = self.stats.snapshot()
        budget = buffers.process_budget()
        queue = self.scheduler.stats() if self.scheduler is not None else None

        def shown_pid(session: Session) -> int:
            # Another user's pids are theirs: shown to root and the driver's user only.
            if everyone or (caller is not None and session.uid == caller.uid):
                return session.peer_pid or 0
            return 0

        sessions = [
            pb.SessionStatus(
                sessionId=s.id, peerPid=shown_pid(s), buffers=len(s.buffers),
                bufferBytes=s.buffers.total_bytes(), preparedModels=s.prepared_count(),
                peerUid=s.uid if shown_pid(s) and s.uid is not None else None,
                preparedModelNames=s.prepared_names() if shown_pid(s) else [],
                runMailbox=s.run_mailbox, mailboxRuns=s.mailbox_runs)
            for s in sorted(self.sessions.sessions(), key=lambda s: s.id)
        ]
        uids = [] if self.uids is None else [
            pb.UidStatus(uid=uid, sessions=count, sharedMemoryBytes=held)
            for uid, (count, held) in self.uids.accounts().items()
            if everyone or (caller is not None and uid == caller.uid)]
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
            uidMemoryBudgetBytes=0 if self.uids is None else self.uids.memory_limit,
            maxSessionsPerUid=0 if self.uids is None else self.uids.max_sessions,
            uids=uids,
            runsFailedByCode=runs.failed_by_code,
            modelRuns=[pb.ModelRuns(model=name, completed=c, failed=f, abandoned=a)
                       for name, (c, f, a) in sorted(runs.by_model.items())],
        )

    def SetFaults(self, request, context):
        current = self.faults.faults
        if self.policy.restricted and not self._privileged_call(context):
            caller = self._caller(context)
            if caller is None:
                return self._refuse_anonymous("SetFaults", lambda **kw: pb.FaultReply(
                    faults=faults_to_proto(current), **kw))
            if not self.privileged(caller.uid):
                log.warning("SetFaults refused (session %d, uid %s): HDF_ERR_NOPERM: only root "
                            "and uid %d may set faults", caller.id, caller.uid, os.geteuid())
                return pb.FaultReply(returnCode=HDF_ERR_NOPERM, faults=faults_to_proto(current))
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
