"""The session channel's server: one selector thread that every session shares.

Nothing a client does may make it wait or die (the decisions of a system service: gRPC
core, binder):
- accept() failures (EMFILE at the fd limit, ENFILE, ENOBUFS, ENOMEM, anything unexpected)
  stop the listener being polled for a backoff (10 ms doubling to 1 s, as gRPC core retries
  every second), logged once per episode and once at recovery; open sessions are served
  meanwhile and pending clients wait in the listen queue. A failure of the one connection
  being accepted (ECONNABORTED, ...) is skipped.
- Each connection's queue, its cap on Runs in flight and who may connect:
  server/channel_connection.py; the per-uid quotas: server/uid_quotas.py.
- Every packet gets an answer (or the session ends); an unexpected exception ends at most
  the session it came from.
- A packet's fds are closed on every path that does not keep them, the failures included
  (an unparsable packet is answered NNRT_INVALID_PARAMETER and the session goes on), and so
  are the fds duplicated for a reply that cannot be sent.
- Every Run packet is served by the host's Runner (server/runner.py); this thread only
  chooses whether it computes it itself, queues it with the device or hands it to a worker.
"""

from __future__ import annotations

import errno
import logging
import os
import select
import selectors
import socket
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nnrt.protos import hdi_pb2 as pb
from nnrt.common import session_channel as channel
from nnrt.common.cpus import spare_cpu
from nnrt.common.run_mailbox import DOORBELL, DOORBELL_PACKET
from nnrt.common.errors import (
    HDF_ERR_NOPERM,
    NNRT_DEVICE_BUSY,
    NNRT_FAILED,
    NNRT_INVALID_PARAMETER,
    NNRT_OPERATION_FORBIDDEN,
)
from nnrt.server.channel_mailbox import Doorbell, open_mailbox
from nnrt.server.channel_messages import cancel_run, handle_message, send_reply
from nnrt.server.channel_connection import (ChannelPolicy, Connection, peer_credentials,
                                           peer_groups)
from nnrt.server.sessions import SessionRegistry
from nnrt.server.uid_quotas import UidLedger, format_mib, default_uid_memory_limit

if TYPE_CHECKING:
    from nnrt.server.runner import Runner  # the runner imports the sessions, not this module

log = logging.getLogger(__name__)


_RUN_HEADER = channel.RUN_REQUEST.unpack_from
_RUN_AT = len(channel.RUN) + channel.RUN_REQUEST.size  # where a Run packet's RunRequest starts
_pack_run_reply = channel.RUN_REPLY.pack

# RunReply bytes of the refusals the channel itself answers.
_BUSY = pb.RunReply(returnCode=NNRT_DEVICE_BUSY).SerializeToString()
_FORBIDDEN = pb.RunReply(returnCode=NNRT_OPERATION_FORBIDDEN).SerializeToString()
_FAILED = pb.RunReply(returnCode=NNRT_FAILED).SerializeToString()
_INVALID = pb.RunReply(returnCode=NNRT_INVALID_PARAMETER).SerializeToString()

# The channel's own thread computes a Run seen before that is expected to take less than
# QUICK_RUN_S (the hand-off to a worker would cost more), or, while its session is the only
# one active (no other session's packet within SOLO_S), less than SOLO_RUN_S: then nobody
# else waits, and running it here spares the worker's wake-up and lets the thread poll for
# that client's next Run. After a quick one it polls for the next packet for up to
# `ChannelPolicy.spin_s` (--spin-us, 200 µs) before it sleeps (SessionChannelServer._spin),
# when that session is alone, its last gap between reply and next Run fitted and a CPU is
# spare (common/cpus.py: no runnable task waits for one): the poll then costs nobody a core
# and spares this thread's wake-up on another CPU, on a VM the largest part of a tiny round
# trip (benchmarks/run_cost.py). On a busy machine it sleeps: a poller would hold a CPU its
# client waits for; so it does after a longer run, whose device threads may spin on after
# it (the CPU driver's onnxruntime pool). The reply to a quick run of a session alone
# carries REPLY_POLL, whatever the gap: the client polls for the next one by the same rule
# (NNRT_CLIENT_SPIN_US).
QUICK_RUN_S = 200e-6
_MAILBOX_LOOKS = 128  # looks at a polled session's mailbox between two polls of the sockets
SOLO_RUN_S = 0.005
MAX_SPIN_US = 10_000
SOLO_S = 0.002
ACCEPT_BACKOFF_INITIAL = 0.01  # s; doubled per failed accept() in a row ...
ACCEPT_BACKOFF_MAX = 1.0  # ... up to this (gRPC core retries a failing accept every 1 s)

# accept() failing for want of a resource (fds, memory): it fails again at once until
# something is freed, so the listener stops being polled for a while (a level-triggered
# selector would spin on it) and existing sessions go on being served.
_ACCEPT_RESOURCE_ERRORS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
# accept() failing for the one connection at the head of the queue (reset while queued,
# refused by a security module): the next one may be fine.
_ACCEPT_CONNECTION_ERRORS = frozenset({errno.ECONNABORTED, errno.EPROTO, errno.EPERM,
                                       errno.EINTR})


def _more_pending(poller: select.poll) -> bool:
    """Whether another packet already waits on the connection (`poller`: its socket's, for
    POLLIN): a client that sends Runs without waiting for each (pipelining, a flood) gets
    workers and the per-session cap, not the channel's own thread. A hang-up or an error
    counts as pending too: the worker path meets it. (A poll, not a peeking recv: that
    raises BlockingIOError in the common case, and an exception costs a µs or two.)"""
    return bool(poller.poll(0))



class _RateLimitedLog:
    """One log line per `interval` s at most; the lines left out are counted in the next."""

    def __init__(self, interval: float = 10.0) -> None:
        self.interval = interval
        self._last = -interval
        self._suppressed = 0

    def __call__(self, level: int, message: str, *args: object, **kwargs: Any) -> None:
        now = time.monotonic()
        if now - self._last < self.interval:
            self._suppressed += 1
            return
        if self._suppressed:
            message += f" ({self._suppressed} more like it since the last such line)"
        self._last, self._suppressed = now, 0
        log.log(level, message, *args, **kwargs)


class SessionChannelServer:
    """Accepts session connections and answers fetch/import on one thread (a selector);
    Run packets go to a pool of workers, their replies through each connection's queue.

    The selector thread must outlive anything a client or the machine does: accept()
    failures back off and retry, no send blocks, and an unexpected exception ends at most
    the session it came from."""

    def __init__(self, path: Path, registry: SessionRegistry, runner: Runner,
                 workers: int = 32, policy: ChannelPolicy | None = None) -> None:
        """`runner` (server/runner.py) serves every Run packet (`run_packet`); this thread
        only chooses which thread computes it. Asked `runner.estimate(session, payload)`
        (how long it is expected to compute, None when it must go to a worker): one
        expected under QUICK_RUN_S (or SOLO_RUN_S, its session alone) is run by this thread
        itself (others wait at most that long), and only for a session with no further
        packet waiting (a caller waiting for its reply); one that pipelines Runs gets
        workers and the per-session cap. Asked `runner.queue(session, payload, job)`: a Run
        that would only wait for the busy device is queued there whole, run and answered by
        the device's queue (no worker's wake-up on its path)."""
        self.path = path
        self.registry = registry
        self.policy = policy or ChannelPolicy()
        self.runner = runner
        self._workers = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="run")
        self._runs = 0
        self._runs_lock = threading.Lock()  # `_runs` (a plain lock: taken twice a run)
        self._runs_done = threading.Condition()  # notified only while `stop` drains
        self._draining = False
        self._intake_closed = False
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._listener.bind(str(path))
        self._listener.listen(64)
        self._listener.setblocking(False)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listener, selectors.EVENT_READ, None)
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._wake_lock = threading.Lock()  # the pipe is closed only under it (`stop`)
        self._selector.register(self._wake_r, selectors.EVENT_READ, "wake")
        self._pending: deque[Connection] = deque()  # connections whose state changed
        self._accept_failures = 0  # failed accept() calls in a row (an episode)
        self._accept_failing_since = 0.0
        self._accept_resume: float | None = None  # when the listener is polled again
        self._refusal_log = _RateLimitedLog()
        self._session_cap_log = _RateLimitedLog()
        self._error_log = _RateLimitedLog()
        self.uids = UidLedger(
            self.policy.max_sessions_per_uid,
            default_uid_memory_limit() if self.policy.max_uid_memory is None
            else self.policy.max_uid_memory)
        log.info("session channel: per uid at most %d sessions (--max-sessions-per-uid) and "
                 "%s of shared memory (--max-uid-memory-mb%s)", self.uids.max_sessions,
                 format_mib(self.uids.memory_limit), ": default, half the driver's budget"
                 if self.policy.max_uid_memory is None else "")
        self._stopping = False
        self._packet = bytearray(channel.MAX_PACKET)  # what the selector thread reads into
        self._spin_next = False  # poll for the next packet before sleeping (`_spin`) ...
        self._spin_until = 0.0  # ... until then (perf_counter) ...
        self._polled: Connection | None = None  # ... and this session's Run mailbox, if any
        spare_cpu()  # its one fd opened now, with the driver's own, not at some client's run
        self._last_served: Connection | None = None  # whose packet came last ...
        self._others_until = 0.0  # ... and till when another session counts as active
        self._thread = threading.Thread(target=self._loop, name="session-channel", daemon=True)
        self.turned_at = time.monotonic()  # when the selector thread last came round (health)

    def start(self) -> None:
        self._thread.start()

    def poke(self) -> None:
        """Wake the selector thread: it comes round (`turned_at`) unless it is wedged."""
        self._poke()

    @property
    def serving(self) -> bool:
        """Whether the selector thread runs (it ends only at `stop`)."""
        return self._thread.is_alive() and not self._stopping

    def close_intake(self) -> None:
        """Refuse new Runs (NNRT_OPERATION_FORBIDDEN); the ones in flight go on."""
        self._intake_closed = True

    def stop(self, grace: float = 10.0) -> None:
        """Refuse new Runs, let those in flight finish (up to `grace` s), then end every
        session and close the socket (the caller unlinks it)."""
        self.close_intake()
        deadline = time.monotonic() + grace
        self._draining = True
        with self._runs_done:
            # Bounded waits: a run may finish between the check and the wait.
            while self._runs and (left := deadline - time.monotonic()) > 0:
                self._runs_done.wait(min(left, 0.05))
            if self._runs:
                log.warning("%d run(s) still in flight after %.1f s: ending their sessions",
                            self._runs, grace)
        self._stopping = True
        self._poke()
        self._thread.join(timeout=10)
        if not self._thread.is_alive() and self._wake_w >= 0:
            # Here, not by the selector thread as it ends: any thread may still poke, and
            # a write to a closed fd number fails (EBADF) or, reused, lands elsewhere.
            with self._wake_lock:
                os.close(self._wake_r)
                os.close(self._wake_w)
                self._wake_r = self._wake_w = -1
        self._workers.shutdown(wait=False, cancel_futures=True)

    def _poke(self) -> None:
        with self._wake_lock:
            if self._wake_w < 0:
                return  # stopped: nobody selects any more
            try:
                os.write(self._wake_w, b"x")
            except BlockingIOError:
                pass  # the pipe is full: the selector wakes anyway

    def _request(self, connection: Connection) -> None:
        """From any thread: the selector thread should look at `connection` (it has
        packets queued, or overflowed)."""
        self._pending.append(connection)
        self._poke()

    def _loop(self) -> None:
        while not self._stopping:
            self.turned_at = time.monotonic()
            try:
                self._once()
            except Exception:  # this thread serves every session
                self._error_log(logging.ERROR, "session channel: unexpected error (serving "
                                "goes on)", exc_info=True)
                time.sleep(0.05)  # never a hot loop on a persistent error
        for key in list(self._selector.get_map().values()):
            if isinstance(key.data, Connection):
                self._end(key.data)
        self._selector.close()
        self._listener.close()

    def _once(self) -> None:
        timeout = None
        if self._accept_resume is not None:
            timeout = max(0.0, self._accept_resume - time.monotonic())
        events = self._spin() if self._spin_next else []
        if events is None:  # it served a Run from the mailbox: round again (to poll on)
            events = []
        elif not events:
            events = self._selector.select(timeout)
        if self._accept_resume is not None and time.monotonic() >= self._accept_resume:
            self._accept_resume = None
            self._selector.register(self._listener, selectors.EVENT_READ, None)
        for key, mask in events:
            data = key.data
            if data is None:
                self._accept()
            elif isinstance(data, Connection):
                self._service(data, mask)
            else:  # the wake pipe
                self._drain_wake()
        while self._pending:
            self._update(self._pending.popleft())

    def _spin(self) -> list:
        """Poll for up to `spin_s` before sleeping: a client running in a loop sends its next
        Run within tens of µs of its reply, and finding it by polling spares the wake-up of
        a sleeping thread (on a 2-vCPU VM ~30-40 µs each way, the largest part of a tiny
        Run's round trip). Only after a run this thread made for the one active session
        whose last gap fitted (`_start_run`), so a busy driver or a client that works
        between its runs costs no CPU; at most `spin_s` per run otherwise. It yields the
        CPU between looks: a client on the same vCPU runs meanwhile.

        A session with a Run mailbox (common/run_mailbox.py) may post its Run there
        meanwhile: looked at between the sockets' polls, served at once (None returned: come
        round again, to poll on after it). The mailbox says "polled" only while this loop
        runs (opened with the reply, `_plan_spin`, closed on the way out)."""
        self._spin_next = False
        until = self._spin_until
        select = self._selector.select
        connection, self._polled = self._polled, None
        box = connection.mailbox if connection is not None and connection.registered else None
        if box is None or box.closed:
            while True:
                events = select(0)
                if events or time.perf_counter() >= until:
                    return events
                os.sched_yield()
        posted = box.mailbox.posted
        while True:
            # The sockets first, every round: a client posting Run after Run must not keep
            # the other sessions' packets unread (they end the polling: no longer alone).
            events = select(0)
            if events or time.perf_counter() >= until:
                box.mailbox.close_window()
                if posted():  # posted as the window closed: served now, not at a doorbell
                    self._take_from_mailbox(connection)
                    return events or None
                return events
            for _ in range(_MAILBOX_LOOKS):
                if posted():
                    box.mailbox.close_window()
                    self._take_from_mailbox(connection)
                    return None
            os.sched_yield()

    def _plan_spin(self, connection: Connection, spin: bool) -> None:
        """Whether this thread polls for `connection`'s next Run after the reply it is about
        to send; the session's mailbox says so before that reply leaves (its client decides
        on the mailbox as soon as it has the reply)."""
        self._spin_next = spin
        if not spin:
            return
        self._spin_until = time.perf_counter() + self.policy.spin_s
        self._polled = connection
        box = connection.mailbox
        if box is not None and not box.closed:
            box.mailbox.open_window(time.monotonic_ns() + int(self.policy.spin_s * 1e9))

    def _take_from_mailbox(self, connection: Connection) -> None:
        """Serve the Run request posted in `connection`'s mailbox, as one from the socket."""
        try:
            seq, data = connection.mailbox.mailbox.take_request()
        except ValueError as exc:
            log.warning("session %d: malformed mailbox request: %s", connection.session.id, exc)
            connection.send(channel.encode_message(
                {"seq": None, "returnCode": NNRT_INVALID_PARAMETER}))
            return
        if not data.startswith(channel.RUN) or len(data) < _RUN_AT or \
                _RUN_HEADER(data, 1)[0] != seq:
            log.warning("session %d: mailbox request %d is not a Run packet of that seq: "
                        "refused", connection.session.id, seq)
            self._send_run_reply(connection, seq, _INVALID)
            return
        connection.session.mailbox_runs += 1
        self._start_run(connection, data, posted=True)

    def _doorbell(self, connection: Connection, data: bytes) -> None:
        """The client of a mailbox Run stopped polling and sleeps on the socket."""
        box = connection.mailbox
        if box is None or len(data) != len(DOORBELL) + DOORBELL_PACKET.size:
            log.warning("session %d: doorbell of %d bytes%s: refused", connection.session.id,
                        len(data), "" if box is not None else " and no mailbox")
            connection.send(channel.encode_message(
                {"seq": None, "returnCode": NNRT_INVALID_PARAMETER}))
            return
        (seq,) = DOORBELL_PACKET.unpack_from(data, len(DOORBELL))
        found = box.ring(seq)
        if found is Doorbell.POSTED:
            connection.send(data)  # echoed: "your reply is in the mailbox"
        elif found is Doorbell.WAITING:
            self._take_from_mailbox(connection)  # its reply goes to the socket: it rang
        elif found is Doorbell.UNKNOWN:
            log.warning("session %d: doorbell for Run %d, which is not in its mailbox",
                        connection.session.id, seq)
            self._send_run_reply(connection, seq, _INVALID)
        # PENDING: computing; its reply goes to the socket

    def _drain_wake(self) -> None:
        try:
            while os.read(self._wake_r, 4096):
                pass
        except BlockingIOError:
            pass

    def _service(self, connection: Connection, mask: int) -> None:
        if not connection.registered:
            return  # ended earlier in this round
        try:
            if mask & selectors.EVENT_WRITE:
                connection.flush()
                self._update(connection)
            if mask & selectors.EVENT_READ and connection.registered:
                self._serve(connection)
        except Exception:  # a bug must cost one session, not the channel
            log.exception("session %d: unexpected error on the session channel: ending the "
                          "session", connection.session.id)
            if connection.registered:
                self._end(connection)

    def _update(self, connection: Connection) -> None:
        """Apply a connection's state to the selector: drop it when overflowed, watch for
        writability while packets are queued."""
        if not connection.registered:
            return
        if connection.overflowed:
            packets, nbytes, fds = connection.queued()
            log.warning("session %d (pid %s): dropped: it does not read its replies (%d "
                        "packets, %d bytes, %d fds waiting: a limit reached)",
                        connection.session.id, connection.session.peer_pid, packets, nbytes,
                        fds)
            self._end(connection)
            return
        events = selectors.EVENT_READ | (selectors.EVENT_WRITE if connection.writing else 0)
        if events != connection.events:
            self._selector.modify(connection.sock, events, connection)
            connection.events = events

    def _accept(self) -> None:
        try:
            sock, _ = self._listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            if exc.errno in _ACCEPT_CONNECTION_ERRORS:
                log.debug("session channel: accept: %s (that connection is lost)", exc)
                return
            self._accept_failed(exc)
            return
        if self._accept_failures:
            log.warning("session channel: accepting again after %d failed accept() calls "
                        "over %.2f s", self._accept_failures,
                        time.monotonic() - self._accept_failing_since)
            self._accept_failures = 0
        try:
            self._open(sock)
        except Exception:  # e.g. out of memory opening the session
            log.exception("session channel: cannot open a session: connection closed")
            sock.close()

    def _accept_failed(self, exc: OSError) -> None:
        """Stop polling the listener for a while (exponential backoff, the episode logged
        once); pending clients wait in the listen queue meanwhile."""
        now = time.monotonic()
        if not self._accept_failures:
            self._accept_failing_since = now
            hint = (" (the fd limit: raise LimitNOFILE= or end sessions)"
                    if exc.errno in (errno.EMFILE, errno.ENFILE) else "")
            kind = "out of a resource" if exc.errno in _ACCEPT_RESOURCE_ERRORS else "unexpected"
            log.error("session channel: accept() failed, %s: %s%s; new sessions wait, "
                      "retrying every %.2f-%.1f s; open sessions are served meanwhile",
                      kind, exc, hint, ACCEPT_BACKOFF_INITIAL, ACCEPT_BACKOFF_MAX)
        self._accept_failures += 1
        delay = min(ACCEPT_BACKOFF_MAX,
                    ACCEPT_BACKOFF_INITIAL * 2 ** min(self._accept_failures - 1, 20))
        self._selector.unregister(self._listener)
        self._accept_resume = now + delay

    @staticmethod
    def _refuse(sock: socket.socket, reason: str) -> None:
        """Answer a connection HDF_ERR_NOPERM with the reason instead of a session; close it."""
        try:
            sock.send(channel.encode_message({"returnCode": HDF_ERR_NOPERM, "reason": reason}))
        except OSError:
            pass
        sock.close()

    def _open(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        pid, uid, gid = peer_credentials(sock)
        refusal, count = None, None
        if self.policy.restricted and not self.policy.allows(uid, peer_groups(sock, gid)):
            refusal = (self._refusal_log, f"uid {uid} gid {gid} may not use this driver (it "
                                          "serves only --allow-uid / --allow-gid)")
        elif (count := self.uids.admit(uid)) is None:
            refusal = (self._session_cap_log,
                       f"uid {uid} has {self.uids.max_sessions} sessions open, the most one "
                       "uid may have (--max-sessions-per-uid): end one first")
        if refusal is not None:
            say, reason = refusal
            self._refuse(sock, reason)
            say(logging.WARNING, "session channel: refused pid %d: %s", pid, reason)
            return
        session = None
        try:
            session = self.registry.open(pid, uid, self.uids.share(uid))
            connection = Connection(sock, session, self.policy, self._request)
            connection.admitted_uid = uid
            connection.send(channel.encode_message(
                {"protocol": channel.PROTOCOL_VERSION, "session": session.token,
                 "sessionId": session.id}))
            connection.events = selectors.EVENT_READ
            self._selector.register(sock, connection.events, connection)
        except BaseException:  # the caller closes the socket
            if session is not None:
                self.registry.close(session)
            self.uids.leave(uid)
            raise
        connection.registered = True
        self._update(connection)
        log.info("session %d opened by pid %d (uid %d, its session %d of at most %d)",
                 session.id, pid, uid, count, self.uids.max_sessions)

    def _end(self, connection: Connection) -> None:
        if connection is self._last_served:  # keep no ended session alive from here
            self._last_served = None
        if connection.registered:
            connection.registered = False
            self._selector.unregister(connection.sock)
        connection.end()
        self.registry.close(connection.session)
        uid, connection.admitted_uid = connection.admitted_uid, None
        if uid is not None:
            self.uids.leave(uid)

    def _serve(self, connection: Connection) -> None:
        session = connection.session
        if connection is not self._last_served:  # another session is active
            self._last_served = connection
            self._others_until = time.monotonic() + SOLO_S
        try:
            data, fds = channel.receive_packet(connection.sock, self._packet)
        except (BlockingIOError, InterruptedError):
            return
        except ValueError as exc:
            log.warning("session %d: malformed session-channel message: %s", session.id, exc)
            connection.send(channel.encode_message(
                {"seq": None, "returnCode": NNRT_INVALID_PARAMETER}))
            return
        except OSError:
            data, fds = None, []
        if data is None:
            self._end(connection)
            return
        if data.startswith(channel.RUN):
            if fds:  # a Run carries none (a call less per Run when it does not)
                channel.close_fds(fds)
            self._start_run(connection, data)
            return
        if data.startswith(DOORBELL):
            channel.close_fds(fds)
            self._doorbell(connection, data)
            return
        try:
            message = channel.parse_message(data, fds)
        except ValueError as exc:
            log.warning("session %d: malformed session-channel message: %s", session.id, exc)
            connection.send(channel.encode_message(
                {"seq": None, "returnCode": NNRT_INVALID_PARAMETER}))
            return
        if message.get("op") == "cancel":
            channel.close_fds(fds)
            send_reply(connection, cancel_run(connection, message))
            return
        if message.get("op") == "mailbox":
            send_reply(connection, open_mailbox(connection, message.get("seq"), fds,
                                                self.policy.spin_s > 0))
            return
        reply, out_fds = handle_message(session, message, fds)
        send_reply(connection, reply, out_fds)

    def _start_run(self, connection: Connection, data: bytes, posted: bool = False) -> None:
        """Serve a Run packet (`posted`: from the session's mailbox, whose client polls for
        this one reply: no packet behind it to look for)."""
        session = connection.session
        header = channel.RUN_REQUEST
        if len(data) < 1 + header.size:
            log.warning("session %d: Run packet of %d bytes, shorter than its header (%d): "
                        "refused", session.id, len(data), 1 + header.size)
            connection.send(channel.encode_message(
                {"seq": None, "returnCode": NNRT_INVALID_PARAMETER}))
            return
        seq, timeout_ms, think_us = _RUN_HEADER(data, 1)
        deadline = time.monotonic() + timeout_ms / 1000 if timeout_ms else None
        if connection.answered_at:
            # The client's word for it where it gives one: measured here, the gap also
            # holds this thread's own wake-up when it slept (100-500 µs on a VM whose
            # vCPU halted), which would keep it from ever polling again.
            connection.gap = think_us / 1e6 if think_us != channel.NO_THINK_TIME else \
                time.perf_counter() - connection.answered_at
            connection.answered_at = 0.0
        if not self._runs and not connection.runs and not connection.busy_refused and \
                not self._intake_closed and time.monotonic() >= self._others_until and \
                self.policy.max_runs_per_session and \
                (posted or not _more_pending(connection.readable)):
            # The common Run, every state trivial: no Run in flight anywhere on the channel
            # (so none of this session's to cap or cancel, and no other thread sends on this
            # connection), no other session active, no packet behind it. The Runner says
            # whether the rest is (`run_known`); then this thread computes and answers it in
            # one go, no connection bookkeeping, no estimate asked apart.
            def answer(reply: bytes, expected: float) -> None:
                quick = expected < QUICK_RUN_S
                self._plan_spin(connection, quick and connection.gap < self.policy.spin_s and
                                spare_cpu().now())
                self._send_alone(connection, seq, reply, channel.REPLY_POLL if quick else 0)
                connection.answered_at = time.perf_counter()

            if self.runner.run_known(session, data[_RUN_AT:], deadline, SOLO_RUN_S, answer):
                return
        state = "stopping" if self._intake_closed else connection.begin_run(seq)
        if state == "busy":
            connection.busy_refused += 1
            if connection.busy_refused == 1:
                log.warning("session %d: %d Runs in flight (--max-runs-per-session): more are "
                            "answered NNRT_DEVICE_BUSY", session.id,
                            self.policy.max_runs_per_session)
            self._send_run_reply(connection, seq, _BUSY)
            return
        if state != "ok":
            log.warning("session %d: Run refused: the driver is stopping", session.id)
            self._send_run_reply(connection, seq, _FORBIDDEN)
            return
        if connection.busy_refused:
            log.info("session %d: accepting Runs again (%d answered NNRT_DEVICE_BUSY)",
                     session.id, connection.busy_refused)
            connection.busy_refused = 0
        with self._runs_lock:
            self._runs += 1
        payload = data[_RUN_AT:]
        estimate = self.runner.estimate(session, payload)
        if estimate is not None and estimate < SOLO_RUN_S and \
                not _more_pending(connection.readable):
            solo = self._runs == 1 and time.monotonic() >= self._others_until
            quick = estimate < QUICK_RUN_S
            if quick or solo:
                self._plan_spin(connection, solo and quick and
                                connection.gap < self.policy.spin_s and spare_cpu().now())
                self._run(connection, seq, deadline, payload,
                          channel.REPLY_POLL if solo and quick else 0)
                connection.answered_at = time.perf_counter()
                return
        if self.runner.queue(session, payload,
                             lambda: self._run(connection, seq, deadline, payload)):
            return
        try:
            self._workers.submit(self._run, connection, seq, deadline, payload)
        except RuntimeError:  # the pool is shut down: the driver is stopping
            self._run_finished(connection, seq)
            self._send_run_reply(connection, seq, _FORBIDDEN)

    def _run(self, connection: Connection, seq: int, deadline: float | None,
             payload: bytes, flags: int = 0) -> None:
        cancelled = connection.cancelled
        try:
            try:
                reply = self.runner.run_packet(connection.session, payload, deadline,
                                               lambda: seq in cancelled)
            except Exception:  # the runner never raises; answer regardless
                log.exception("session %d: Run failed unexpectedly", connection.session.id)
                reply = _FAILED
            self._send_run_reply(connection, seq, reply, flags)
        finally:
            self._run_finished(connection, seq)

    def _run_finished(self, connection: Connection, seq: int) -> None:
        connection.end_run(seq)
        with self._runs_lock:
            self._runs -= 1
        if self._draining:
            with self._runs_done:
                self._runs_done.notify_all()

    @staticmethod
    def _send_alone(connection: Connection, seq: int, reply: bytes, flags: int) -> None:
        """`_send_run_reply` for the one-frame Run (`_start_run`): on this thread with no
        Run of the connection in flight nobody else sends on it, so `Connection.send`'s
        lock and queue are needed only when packets wait already (or it ended)."""
        packet = b"".join((channel.RUN, _pack_run_reply(seq, flags), reply))
        if connection.mailbox is not None and connection.mailbox.post_reply(seq, packet):
            return
        if connection.writing or connection.ended or connection.overflowed:
            connection.send(packet)  # behind what is queued, or dropped
            return
        try:
            connection.sock.send(packet)
        except BlockingIOError:
            connection.send(packet)  # queued for the selector
        except OSError:
            pass  # the client went away: its end of file ends the session

    @staticmethod
    def _send_run_reply(connection: Connection, seq: int, reply: bytes,
                        flags: int = 0) -> None:
        """A Run's reply: to the mailbox when the run came from there and its client still
        polls it, else to the socket."""
        packet = b"".join((channel.RUN, _pack_run_reply(seq, flags), reply))
        if connection.mailbox is None or not connection.mailbox.post_reply(seq, packet):
            connection.send(packet)
