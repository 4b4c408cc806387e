"""The host's one run path: every Run, over gRPC or the session channel, is served here.

A Run's story, in order: decode the request (or find it among the requests this session
sent before, `known`), find its prepared model, check it against the model and the
session's buffers (hdi.md 4.3, server/execution.py), schedule it on the device's cores in
its session's turn (server/run_scheduler.py), execute it, and reply — counted in the run
counters (server/stats.py) from the moment it reaches the Runner, refusals included.

Two doors lead here: `IPreparedModel.Run` (server/servicers.py: decoded by gRPC, then
`run_request`) and the session channel (server/channel_server.py: `run_packet` with the
request's bytes, after asking `estimate` whether its own thread should compute it and
`queue` whether the device's queue should; or, for the common Run with every state
trivial — known and bound, quick, no fault, the device idle, nothing else in flight —
`run_known`, the whole story in one frame). Both doors hold the same Runner, made by the
host (server/host.py).
"""

from __future__ import annotations

import functools
import logging
import os
import time
from collections.abc import Callable

from nnrt.protos import hdi_pb2 as pb
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.server import execution
from nnrt.server.run_scheduler import RunScheduler
from nnrt.hdi.device import StepTime
from nnrt.common.errors import (
    NNRT_CANCELLED,
    NNRT_FAILED,
    NNRT_INVALID_PARAMETER,
    NNRT_SUCCESS,
    NNRT_TIME_OUT,
    DriverError,
)
from nnrt.server.faults import FaultInjection
from nnrt.server.sessions import PreparedEntry, Session, SessionRegistry
from nnrt.server.stats import RunStats

log = logging.getLogger(__name__)


def refusal(name: str, where: str, exc: Exception, reply: type,
            logger: logging.Logger = log):
    """The reply (and the one log line, on `logger`) of a request that failed with `exc`."""
    if isinstance(exc, DriverError):
        logger.warning("%s refused (%s): %s", name, where, exc)
        if isinstance(exc, execution.InsufficientBuffer):
            return reply(returnCode=exc.code, reason=exc.message,
                         outputDims=[ht.Int32Array(values=s) for s in exc.shapes])
        return reply(returnCode=exc.code, reason=exc.message)
    logger.error("%s failed unexpectedly (%s)", name, where, exc_info=exc)
    return reply(returnCode=NNRT_FAILED,
                 reason=f"{name} failed unexpectedly in the driver ({type(exc).__name__}); "
                        f"its log has the details")


def _known(session: Session, payload: bytes) -> tuple[PreparedEntry, execution.CheckedRequest] | None:
    """The prepared model and checked request of a serialized RunRequest seen before in
    this session, found without decoding it: `preparedModelId = 1` comes first as protobuf
    writes it (ids below 128 in one byte), and the request is kept under its whole bytes by
    the model those bytes named when they were decoded."""
    last = session.known_run
    if last is not None and last[0] is payload:  # the packet the estimate looked at
        return last[1], last[2]
    if len(payload) < 2 or payload[0] != 8 or payload[1] >= 128:
        return None
    entry = session.prepared_entries().get(payload[1])
    if entry is None:
        return None
    checked = entry.checked_requests.get(payload)
    if checked is None:
        return None
    session.known_run = (payload, entry, checked)
    return entry, checked


def _run_profile(received: float, steps: list[StepTime]) -> pb.RunProfile:
    """A profiled run's RunProfile: its steps, and the compute from the first to the last."""
    spans = [pb.ProfileSpan(name=s.name, nodes=s.nodes, startSeconds=s.start,
                            seconds=s.seconds, simulatedSeconds=s.simulated,
                            hostSeconds=s.host, deviceSeconds=s.device, op=s.op)
             for s in steps]
    start = min((s.start for s in steps), default=received)
    end = max((s.start + s.seconds for s in steps), default=received)
    return pb.RunProfile(pid=os.getpid(), receivedSeconds=received, computeStartSeconds=start,
                         computeEndSeconds=end, spans=spans, repliedSeconds=time.monotonic())


class Runner:
    """Serves Runs for both transports: known request → check → schedule → execute → reply,
    counted in `stats`, never raising."""

    def __init__(self, sessions: SessionRegistry, faults: FaultInjection,
                 stats: RunStats | None = None, scheduler: RunScheduler | None = None) -> None:
        self.sessions = sessions
        self.faults = faults
        self.stats = stats or RunStats()
        self.scheduler = scheduler or RunScheduler(None)

    def refused(self, where: str, error: Exception) -> pb.RunReply:
        """A Run refused before it reached a prepared model, counted as a failed run."""
        self.stats.started()
        self.stats.finished(succeeded=False, abandoned=False,
                            code=getattr(error, "code", NNRT_FAILED))
        return refusal("Run", where, error, pb.RunReply)

    def run_packet(self, session: Session, payload: bytes, deadline: float | None,
                   cancelled: Callable[[], bool] = lambda: False) -> bytes:
        """Run as the session channel carries it (common/session_channel.py): bytes in and
        out, the caller's timeout as a deadline, `cancelled()` its cancel. A request seen
        before (`_known`) is not decoded again."""
        if deadline is None:
            caller_active = lambda: not cancelled()  # noqa: E731
        else:
            caller_active = lambda: time.monotonic() < deadline and not cancelled()  # noqa: E731
        known = _known(session, payload)
        if known is not None:
            reply = self._run(session, known[0], known[1], caller_active, payload)
        else:
            try:
                request = pb.RunRequest.FromString(payload)
            except Exception as exc:  # protobuf's DecodeError
                error = DriverError(NNRT_INVALID_PARAMETER, f"undecodable RunRequest: {exc}")
                return self.refused(f"session {session.id}", error).SerializeToString()
            reply = self.run_request(session, request, caller_active, payload)
        if isinstance(reply, bytes):
            return reply
        return reply.SerializeToString()

    def estimate(self, session: Session, payload: bytes) -> float | None:
        """How long this request is expected to compute (s), for the session channel to
        choose whether its own thread runs it (SessionChannelServer): a request seen before
        (`_known`) of a model of static shapes, its recent runs' moving average. None — a
        worker runs it — for any other, while a fault is in force, or with the device busy
        (a queued run would make the channel wait)."""
        if self.faults.enabled or self.scheduler.busy:
            return None
        known = _known(session, payload)
        if known is None:
            return None
        entry = known[0]
        return entry.recent_run_s if entry.static_output_shapes is not None else None

    def run_known(self, session: Session, payload: bytes, deadline: float | None,
                  within_s: float, answer: Callable[[bytes, float], None]) -> bool:
        """The common Run in one frame: a request seen, checked and bound before
        (`CheckedRequest.bound`), of a model of static shapes whose serialized reply is
        kept, expected to compute in less than `within_s`, no fault in force, the device
        idle, its caller's deadline not passed. True once served: computed, answered
        through `answer(reply bytes, the expected seconds)`, then counted. False, with
        nothing done, when any of these does not hold: the caller then takes the ordinary
        path (`estimate`, `run_packet`), which makes the same checks one by one and answers
        the others. What `_run` and execution.execute do for such a run, without their
        calls: counted in the stats, the buffers borrowed (a released one is refused with
        its code), computed in the scheduler's turn, the recent time kept — the buffers'
        return, the time and the count after the answer, which nobody waits for then (its
        caller may be polling for it). The caller's cancel is its own concern: it asks only
        with no Run of the session in flight (nothing to cancel)."""
        if self.faults.armed or session.closed:
            return False
        last = session.known_run
        if last is None or last[0] != payload:
            last = _known(session, payload)
            if last is None:
                return False
            entry, request = last
        else:
            entry, request = last[1], last[2]
        bound, reply = request.bound, entry.success_reply
        expected = entry.recent_run_s
        if bound is None or reply is None or expected >= within_s or self.scheduler.busy \
                or (deadline is not None and time.monotonic() >= deadline):
            return False
        stats = self.stats

        def cancelled() -> bool:  # as `_run`'s, with no cancel of its own to ask
            stats.progress()
            return session.closed or (deadline is not None and time.monotonic() >= deadline)

        started_at = stats.begin()
        code = NNRT_FAILED
        regions = None
        took = None
        try:
            try:
                started = time.perf_counter()
                buffers = session.buffers
                regions = buffers.take(request.buffer_ids)  # refuses a released buffer
                self.scheduler.run(session.id, cancelled, functools.partial(bound, cancelled))
                took = time.perf_counter() - started
                code = NNRT_SUCCESS
            except Exception as exc:
                refused = refusal("Run", f"session {session.id}", exc, pb.RunReply)
                code = refused.returnCode
                reply = refused.SerializeToString()
            counting = stats.lock  # held over the answer: nobody who saw it reads the
            counting.acquire()  # counters before this run is counted in them
            try:
                answer(reply, expected)
            finally:
                gone = code in (NNRT_TIME_OUT, NNRT_CANCELLED) or \
                    (deadline is not None and time.monotonic() >= deadline)
                stats.end_held(started_at, code == NNRT_SUCCESS, gone, code, entry.name)
                counting.release()
        finally:
            if regions is not None:
                buffers.give_back(regions)
            if took is not None:
                entry.recent_run_s = 0.8 * expected + 0.2 * took
        return True

    def queue(self, session: Session, payload: bytes, job: Callable[[], None]) -> bool:
        """For the session channel: queue a Run whole with the device's run scheduler when
        it would wait there anyway (the device busy), so that the scheduler's thread runs
        `job` — computes and answers — and no worker thread wakes for it. Only a request
        seen and checked before (`_known`: a run the checks refuse never waits), no fault
        in force."""
        if self.faults.enabled:
            return False
        known = _known(session, payload)
        if known is None or not known[1].windows_checked:
            return False
        return self.scheduler.submit(session.id, job)  # False with the device not busy

    def run_request(self, session: Session, request: pb.RunRequest,
                    caller_active: Callable[[], bool],
                    request_key: bytes | None = None) -> pb.RunReply | bytes:
        """Run a decoded request over either transport. With `request_key` (the session
        channel's serialized request) the checked request is kept under it."""
        try:
            entry = session.prepared(request.preparedModelId)
        except DriverError as exc:
            return self.refused(f"session {session.id}", exc)
        if request.profile:  # timed on the plain path, never kept: the next one is timed too
            return self._run(session, entry, request, caller_active, None, profile=True)
        return self._run(session, entry, request, caller_active, request_key)

    def _run(self, session: Session, entry: PreparedEntry,
             request: pb.RunRequest | execution.CheckedRequest,
             caller_active: Callable[[], bool],
             request_key: bytes | None = None, profile: bool = False) -> pb.RunReply | bytes:
        """Counted in the stats, never raises (server/stats.py). With `request_key` a
        successful run of static shapes answers with its prepared model's serialized reply
        (always the same). `profile`: the reply says the run step by step (RunProfile)."""
        received = time.monotonic() if profile else 0.0
        steps: list[StepTime] | None = [] if profile else None
        self.stats.started()
        reply = None
        try:
            def cancelled() -> bool:  # asked between operators: the health watchdog's
                self.stats.progress()  # sign that the execution path moves (server/stats.py)
                return not caller_active() or session.closed

            self.faults.on_run(cancelled)
            if not isinstance(request, execution.CheckedRequest):
                request = execution.check_request(entry, request.inputs, request.outputs)
                if request_key is not None and \
                        len(entry.checked_requests) < execution.MAX_CHECKED_REQUESTS:
                    entry.checked_requests[request_key] = request
            started = time.perf_counter()
            # execute hands the computation straight to the scheduler (no frame of ours)
            dims = execution.execute(
                entry, request, session.buffers, cancelled,
                functools.partial(self.scheduler.run, session.id, cancelled),
                keep=request_key is not None, steps=steps)
            took = time.perf_counter() - started
            entry.recent_run_s = took if entry.recent_run_s == float("inf") else \
                0.8 * entry.recent_run_s + 0.2 * took
            if request_key is not None and entry.static_output_shapes is not None:
                if entry.success_reply is None:
                    entry.success_reply = pb.RunReply(outputDims=[
                        ht.Int32Array(values=d) for d in entry.static_output_shapes
                    ]).SerializeToString()
                reply = entry.success_reply
                return reply
            reply = pb.RunReply(outputDims=[ht.Int32Array(values=d) for d in dims])
            if steps is not None:
                reply.profile.CopyFrom(_run_profile(received, steps))
        except Exception as exc:
            reply = refusal("Run", f"session {session.id}", exc, pb.RunReply)
        finally:
            code = NNRT_FAILED if reply is None else \
                NNRT_SUCCESS if isinstance(reply, bytes) else reply.returnCode
            gone = code in (NNRT_TIME_OUT, NNRT_CANCELLED) or not caller_active()
            self.stats.finished(succeeded=code == NNRT_SUCCESS, abandoned=gone,
                                code=code, model=entry.name)
        return reply
