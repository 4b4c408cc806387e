"""Client sessions: the resources a client owns, and the channel whose lifetime is theirs.

A session is born when a client connects to `<name>.session` and dies when that connection
closes, for whatever reason (clean close, client crash, SIGKILL). Its buffers and prepared
models die with it. See common/session_channel.py for the wire protocol.

The channel is one selector thread that every session shares, so nothing a client does may
make it wait or die (the decisions of a system service: gRPC core, binder):
- accept() failures (EMFILE at the fd limit, ENFILE, ENOBUFS, ENOMEM, anything unexpected)
  stop the listener being polled for a backoff (10 ms doubling to 1 s, as gRPC core retries
  every second), logged once per episode and once at recovery; open sessions are served
  meanwhile and pending clients wait in the listen queue. A failure of the one connection
  being accepted (ECONNABORTED, ...) is skipped.
- Sockets are non-blocking; each connection has a bounded outgoing queue (4096 packets,
  4 MiB). A client that does not read until it is full is dropped: its session ends exactly
  as at a disconnect. Waiting on it would stall every other session.
- Runs of a session in flight are capped (`ChannelPolicy.max_runs_per_session`, 64 by
  default): one more is answered NNRT_DEVICE_BUSY at once, so a flood holds bounded memory
  and a well-behaved session's Runs are queued behind at most that many of the flooder's.
- Every packet gets an answer (or the session ends); an unexpected exception ends at most
  the session it came from.
- `--allow-uid` / `--allow-gid` restrict who may open a session (SO_PEERCRED at accept,
  SO_PEERGROUPS for supplementary groups); without a session no HDI method that needs one
  works, so this is the one door to check.
- Each peer uid (SO_PEERCRED) is one principal, whatever its processes and sessions
  (`UidLedger`): at most `--max-sessions-per-uid` sessions open at once (64 by default; one
  more is refused at the door with HDF_ERR_NOPERM and the reason, logged at WARNING at most
  every 10 s), and its sessions' shared memory together within `--max-uid-memory-mb` (half
  the driver's shared-memory budget by default: no user can take what the others need;
  beyond, NNRT_OUT_OF_MEMORY). Root is a uid like any other.
- A packet's fds are closed on every path that does not keep them, the failures included
  (an unparsable packet is answered NNRT_INVALID_PARAMETER and the session goes on), and so
  are the fds duplicated for a reply that cannot be sent. Replies carrying fds that wait for
  a client's socket are bounded (`MAX_QUEUED_FDS`) like the rest of its queue.
"""

from __future__ import annotations

import array
import ctypes
import errno
import itertools
import logging
import os
import secrets
import select
import selectors
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nnrt.protos import hdi_pb2 as pb
from nnrt.common import session_channel as channel
from nnrt.server.buffers import MIB, BufferTable, SharedRegion, process_budget
from nnrt.hdi.device import PreparedModel
from nnrt.common.errors import (
    HDF_ERR_NOPERM,
    NNRT_DEVICE_BUSY,
    NNRT_FAILED,
    NNRT_INVALID_MODEL,
    NNRT_INVALID_PARAMETER,
    NNRT_OPERATION_FORBIDDEN,
    NNRT_OUT_OF_MEMORY,
    NNRT_SUCCESS,
    DriverError,
)

if TYPE_CHECKING:
    from nnrt.server.execution import CheckedRequest  # execution imports this module
    from nnrt.server.runner import Runner  # the runner imports this module

log = logging.getLogger(__name__)


@dataclass(eq=False)
class PreparedEntry:
    """A prepared model with what the host precomputed for validating its runs."""

    model: PreparedModel
    min_dims: list[list[int]]
    max_dims: list[list[int]]
    static_output_shapes: list[tuple[int, ...]] | None
    cache: list[int] = field(default_factory=list)  # buffer ids of exported cache blobs
    # Run requests already checked (execution.CheckedRequest), by their serialized
    # RunRequest: a client that runs the same tensors again sends the same bytes; bounded
    # (execution.MAX_CHECKED_REQUESTS), first come first kept.
    checked_requests: dict[bytes, CheckedRequest] = field(default_factory=dict)
    success_reply: bytes | None = None  # the serialized RunReply of a run with static shapes
    recent_run_s: float = float("inf")  # a moving average of its runs' computation
    on_close: Callable[[], None] | None = None  # at its close: gives back what prepare charged
    name: str = ""  # the model's (Model.name), for the run counters' model label


class Session:
    def __init__(self, session_id: int, token: str, peer_pid: int | None,
                 uid: int | None = None, budget: UidShare | None = None) -> None:
        """`budget`: what its regions are charged to (its uid's share, then the process's
        budgets); None: the process's budgets alone."""
        self.id = session_id
        self.token = token
        self.peer_pid = peer_pid
        self.uid = uid  # the peer's, at connect (SO_PEERCRED); None when opened in-process
        self.buffers = BufferTable(budget)  # type: ignore[arg-type]  # UidShare charges alike
        self._prepared: dict[int, PreparedEntry] = {}
        self._next_model_id = itertools.count(1)
        self._lock = threading.Lock()
        self.closed = False
        # (payload, entry, checked request) of the Run request last found known
        # (servicers._known), so that the run of the packet the estimate looked at does
        # not look it up again.
        self.known_run: tuple[bytes, PreparedEntry, CheckedRequest] | None = None

    def add_prepared(self, entry: PreparedEntry) -> int:
        with self._lock:
            if self.closed:
                raise DriverError(NNRT_INVALID_PARAMETER, "session is closing")
            model_id = next(self._next_model_id)
            self._prepared[model_id] = entry
        return model_id

    def prepared(self, model_id: int) -> PreparedEntry:
        entry = self._prepared.get(model_id)
        if entry is None:
            raise DriverError(
                NNRT_INVALID_MODEL, f"unknown prepared model {model_id} in this session"
            )
        return entry

    def release_prepared(self, model_id: int) -> None:
        with self._lock:
            entry = self._prepared.pop(model_id, None)
            self.known_run = None  # holds no released model
        if entry is None:
            raise DriverError(
                NNRT_INVALID_MODEL, f"unknown prepared model {model_id} in this session"
            )
        self._close_entry(entry)

    def prepared_entries(self) -> dict[int, PreparedEntry]:
        """The table itself, for a lookup that must not raise (read-only)."""
        return self._prepared

    def prepared_count(self) -> int:
        return len(self._prepared)

    def prepared_names(self) -> list[str]:
        """Its prepared models' names, in the order they were prepared."""
        return [entry.name for entry in list(self._prepared.values())]

    def _close_entry(self, entry: PreparedEntry) -> None:
        for buffer_id in entry.cache:
            try:
                self.buffers.remove(buffer_id)
            except DriverError:
                pass
        try:
            entry.model.close()
        except Exception:
            log.exception("closing a prepared model failed")
        if entry.on_close is not None:
            entry.on_close()

    def close(self) -> tuple[int, int]:
        """Free everything; returns (prepared models, buffers) freed."""
        with self._lock:
            self.closed = True
            self.known_run = None
            entries = list(self._prepared.values())
            self._prepared.clear()
        for entry in entries:
            self._close_entry(entry)
        count = len(entries)
        del entries  # the prepared models die here (their engines' memory with them)
        if count:
            trim_heap()
        return count, self.buffers.close()


def _more_pending(poller: select.poll) -> bool:
    """Whether another packet already waits on the connection (`poller`: its socket's, for
    POLLIN): a client that sends Runs without waiting for each (pipelining, a flood) gets
    workers and the per-session cap, not the channel's own thread. A hang-up or an error
    counts as pending too: the worker path meets it. (A poll, not a peeking recv: that
    raises BlockingIOError in the common case, and an exception costs a µs or two.)"""
    return bool(poller.poll(0))


def _load_malloc_trim() -> Callable[[int], int] | None:
    try:
        return ctypes.CDLL(None).malloc_trim  # glibc
    except (OSError, AttributeError):
        return None


_malloc_trim = _load_malloc_trim()


def trim_heap() -> None:
    """Give freed heap pages back to the system (glibc keeps them by default): a session's
    prepared models free megabytes (compiled engine sessions) in many small blocks, which
    a long-running driver would otherwise hold as RSS after the session is gone."""
    if _malloc_trim is not None:
        _malloc_trim(0)


class SessionRegistry:
    def __init__(self) -> None:
        self._by_token: dict[str, Session] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def open(self, peer_pid: int | None, uid: int | None = None,
             budget: UidShare | None = None) -> Session:
        session = Session(next(self._ids), secrets.token_hex(16), peer_pid, uid, budget)
        with self._lock:
            self._by_token[session.token] = session
        return session

    def lookup(self, token: str | None) -> Session | None:
        if token is None:
            return None
        return self._by_token.get(token)

    def close(self, session: Session) -> None:
        with self._lock:
            self._by_token.pop(session.token, None)
        models, buffers = session.close()
        log.info(
            "session %d (pid %s) ended: freed %d prepared models, %d buffers",
            session.id, session.peer_pid, models, buffers,
        )

    def sessions(self) -> list[Session]:
        with self._lock:
            return list(self._by_token.values())


DEFAULT_MAX_SESSIONS_PER_UID = 64  # sessions one uid may have open; one more is refused
UID_MEMORY_FRACTION = 0.5  # of the driver's shared-memory budget: one uid's default share


def default_uid_memory_limit() -> int:
    """One uid's default share: half the driver's shared-memory budget (as configured), so
    that however many sessions one user opens, the other users find the other half."""
    return int(process_budget().driver_limit * UID_MEMORY_FRACTION)


def _mib(nbytes: int) -> str:
    return f"{nbytes} bytes ({nbytes / MIB:.1f} MiB)"


class UidLedger:
    """What each peer uid holds across all its sessions, against the per-uid limits: the
    sessions it has open (`admit`/`leave`) and the shared memory its sessions' regions map
    (`share(uid)`, what their BufferTables charge). Accounts exist only while something is
    held; a region still mapped after its session ended (borrowed by a Run) still counts."""

    def __init__(self, max_sessions: int, memory_limit: int) -> None:
        self.max_sessions = max_sessions
        self.memory_limit = memory_limit
        self._sessions: dict[int, int] = {}
        self._held: dict[int, int] = {}
        self._lock = threading.Lock()

    def admit(self, uid: int) -> int | None:
        """Count one more session of `uid`; None when it has `max_sessions` open already,
        else how many it has now."""
        with self._lock:
            count = self._sessions.get(uid, 0)
            if count >= self.max_sessions:
                return None
            self._sessions[uid] = count + 1
            return count + 1

    def leave(self, uid: int) -> None:
        with self._lock:
            count = self._sessions.get(uid, 0) - 1
            if count > 0:
                self._sessions[uid] = count
            else:
                self._sessions.pop(uid, None)

    def sessions(self, uid: int) -> int:
        return self._sessions.get(uid, 0)

    def accounts(self) -> dict[int, tuple[int, int]]:
        """uid -> (sessions open, bytes held), for every uid that has either now."""
        with self._lock:
            return {uid: (self._sessions.get(uid, 0), self._held.get(uid, 0))
                    for uid in sorted(self._sessions.keys() | self._held.keys())}

    def held(self, uid: int) -> int:
        """Bytes of shared memory the sessions of `uid` hold."""
        return self._held.get(uid, 0)

    def share(self, uid: int) -> UidShare:
        return UidShare(self, uid)

    def charge(self, uid: int, table: BufferTable, nbytes: int) -> Callable[[], None]:
        """Count `nbytes` against the uid's share and the process's budgets (the session's,
        the driver's); returns the function that gives them back (once).
        DriverError(NNRT_OUT_OF_MEMORY) when over a limit, the first one met named: the
        session's, the driver's, the uid's share."""
        with self._lock:
            give_back_budget = process_budget().charge(table, nbytes)
            held = self._held.get(uid, 0)
            if held + nbytes > self.memory_limit:
                give_back_budget()
                raise self._over_share(uid, held, nbytes)
            self._held[uid] = held + nbytes
        given_back = False

        def give_back() -> None:
            nonlocal given_back
            with self._lock:
                if given_back:
                    return
                given_back = True
                left = self._held.get(uid, 0) - nbytes
                if left > 0:
                    self._held[uid] = left
                else:
                    self._held.pop(uid, None)
            give_back_budget()

        return give_back

    def _over_share(self, uid: int, held: int, nbytes: int) -> DriverError:
        return DriverError(
            NNRT_OUT_OF_MEMORY,
            f"a region of {_mib(nbytes)} exceeds uid {uid}'s share of the driver's "
            f"shared-memory budget: its {self.sessions(uid)} session(s) hold {_mib(held)} of "
            f"{_mib(self.memory_limit)} (--max-uid-memory-mb)")


class UidShare:
    """The budget a session's BufferTable charges: its uid's share (`UidLedger.charge`)."""

    __slots__ = ("ledger", "uid")

    def __init__(self, ledger: UidLedger, uid: int) -> None:
        self.ledger = ledger
        self.uid = uid

    def charge(self, table: BufferTable, nbytes: int) -> Callable[[], None]:
        return self.ledger.charge(self.uid, table, nbytes)


_RUN_HEADER = channel.RUN_REQUEST.unpack_from
_RUN_AT = len(channel.RUN) + channel.RUN_REQUEST.size  # where a Run packet's RunRequest starts
_pack_run_reply = channel.RUN_REPLY.pack

# RunReply bytes of the refusals the channel itself answers.
_BUSY = pb.RunReply(returnCode=NNRT_DEVICE_BUSY).SerializeToString()
_FORBIDDEN = pb.RunReply(returnCode=NNRT_OPERATION_FORBIDDEN).SerializeToString()
_FAILED = pb.RunReply(returnCode=NNRT_FAILED).SerializeToString()

# The channel's own thread computes a Run seen before that is expected to take less than
# QUICK_RUN_S (the hand-off to a worker would cost more), or, while its session is the only
# one active (no other session's packet within SOLO_S), less than SOLO_RUN_S: then nobody
# else waits, and running it here spares the worker's wake-up and lets the thread poll for
# that client's next Run. Afterwards it may poll for the next packet for up to
# `ChannelPolicy.spin_s` (--spin-us) before it sleeps (SessionChannelServer._spin), when that
# session is alone and its last gap between reply and next Run fitted; by default it does not
# (issue 32, benchmarks/run_cost.py): with neither side polling the kernel runs a client and
# the driver on one CPU and a tiny Run costs ~45 µs of CPU in all, no other CPU woken; a
# polling driver holds the other CPU, keeps the pair apart and its CPU time equals the whole
# round trip's (56 µs a run measured, beside the client's). The reply to a quick run of a
# session alone carries REPLY_POLL, whatever the gap: a client configured to poll polls for
# the next one (NNRT_CLIENT_SPIN_US).
QUICK_RUN_S = 200e-6
SOLO_RUN_S = 0.005
SPIN_S = 0.0
MAX_SPIN_US = 10_000
SOLO_S = 0.002
DEFAULT_MAX_RUNS_PER_SESSION = 64  # Runs of one session in flight; beyond: NNRT_DEVICE_BUSY
MAX_QUEUED_PACKETS = 4096  # replies a connection may have waiting for its socket ...
MAX_QUEUED_BYTES = 4 << 20  # ... and their bytes; beyond either the session is dropped
# ... and the fds attached to them (fetch replies, each a duplicate in this process's fd
# table): a client that fetches without reading would otherwise hold 4096 fds a session.
MAX_QUEUED_FDS = 64
ACCEPT_BACKOFF_INITIAL = 0.01  # s; doubled per failed accept() in a row ...
ACCEPT_BACKOFF_MAX = 1.0  # ... up to this (gRPC core retries a failing accept every 1 s)
SO_PEERGROUPS = getattr(socket, "SO_PEERGROUPS", 59)  # Linux >= 4.13
_MAX_PEER_GROUPS = 1024

# accept() failing for want of a resource (fds, memory): it fails again at once until
# something is freed, so the listener stops being polled for a while (a level-triggered
# selector would spin on it) and existing sessions go on being served.
_ACCEPT_RESOURCE_ERRORS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
# accept() failing for the one connection at the head of the queue (reset while queued,
# refused by a security module): the next one may be fine.
_ACCEPT_CONNECTION_ERRORS = frozenset({errno.ECONNABORTED, errno.EPROTO, errno.EPERM,
                                       errno.EINTR})


@dataclass(frozen=True)
class ChannelPolicy:
    """What the session channel grants each client (nnrt-driver options)."""

    max_runs_per_session: int = DEFAULT_MAX_RUNS_PER_SESSION
    allow_uids: frozenset[int] = frozenset()  # with allow_gids empty too: anyone who can
    allow_gids: frozenset[int] = frozenset()  # open the (0660) socket
    max_queued_packets: int = MAX_QUEUED_PACKETS
    max_queued_bytes: int = MAX_QUEUED_BYTES
    max_queued_fds: int = MAX_QUEUED_FDS
    max_sessions_per_uid: int = DEFAULT_MAX_SESSIONS_PER_UID
    max_uid_memory: int | None = None  # bytes; None: default_uid_memory_limit()
    spin_s: float = SPIN_S  # 0: the channel's thread never polls (--spin-us)

    @property
    def restricted(self) -> bool:
        return bool(self.allow_uids or self.allow_gids)

    def allows(self, uid: int, gids: Iterable[int]) -> bool:
        """Whether a peer of `uid` in groups `gids` may open a session. Only those listed:
        root is not implied (it could open the socket anyway, but need not be served)."""
        if not self.restricted:
            return True
        return uid in self.allow_uids or not self.allow_gids.isdisjoint(gids)


def peer_credentials(sock: socket.socket) -> tuple[int, int, int]:
    """(pid, uid, gid) of the process at the other end of a Unix socket, at connect time."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, gid = struct.unpack("3i", creds)
    return pid, uid, gid


def peer_groups(sock: socket.socket, gid: int) -> set[int]:
    """The peer's primary and supplementary groups (SO_PEERGROUPS); the primary alone where
    the kernel cannot say (group members are usually in `nnrt` as a supplementary group)."""
    groups = {gid}
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, SO_PEERGROUPS, 4 * _MAX_PEER_GROUPS)
    except OSError as exc:
        log.debug("SO_PEERGROUPS unavailable (%s): primary group only", exc)
        return groups
    groups.update(array.array("I", raw[: len(raw) - len(raw) % 4]))
    return groups


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


class _Connection:
    """A session's socket, its outgoing queue and its Runs in flight.

    Every packet to the client goes through `send`, from any thread: written at once when
    the socket takes it, else queued (bounded by the policy) and written by the selector
    thread when the socket becomes writable. Nobody ever waits on a client: one whose queue
    is full is marked overflowed and dropped by the selector thread. The socket is closed
    only once no Run is still answering on it (so a reply can never go to a reused fd
    number)."""

    def __init__(self, sock: socket.socket, session: Session, policy: ChannelPolicy,
                 wake: Callable[[_Connection], None]) -> None:
        self.sock = sock
        self.session = session
        self.policy = policy
        self.runs = 0
        self.in_flight: dict[int, int] = {}  # Run seq -> how many with that seq are in flight
        self.cancelled: set[int] = set()  # seqs of Runs in flight the client cancelled
        self.busy_refused = 0  # Runs answered NNRT_DEVICE_BUSY in the current episode
        self.answered_at = 0.0  # when the channel's thread last answered a run of it itself
        self.gap = float("inf")  # from that answer to its next Run packet (s)
        self.ended = False
        self.registered = False  # in the selector (selector thread only)
        self.events = 0  # the selector's interest (selector thread only)
        self.overflowed = False
        self.writing = False  # packets are queued: the selector watches for writability
        self.lock = threading.Lock()  # the Runs in flight and `ended`
        # The outgoing queue, apart: a reply's send (a syscall, and its thread may lose the
        # CPU to the client it wakes) must not hold up the next Run's admission.
        self._send_lock = threading.Lock()
        self._queue: deque[tuple[bytes, list[int]]] = deque()
        self._queued_bytes = 0
        self._queued_fds = 0
        self._wake = wake
        self.admitted_uid: int | None = None  # counted in the UidLedger until the session ends
        self.readable = select.poll()  # `_more_pending`
        self.readable.register(sock, select.POLLIN)

    def begin_run(self, seq: int) -> str:
        """"ok" (counted in flight), "busy" (at the session's cap) or "ended"."""
        with self.lock:
            if self.ended:
                return "ended"
            if self.runs >= self.policy.max_runs_per_session:
                return "busy"
            self.runs += 1
            self.in_flight[seq] = self.in_flight.get(seq, 0) + 1
            return "ok"

    def cancel(self, seq: int) -> bool:
        """Mark the Run `seq` cancelled; False when none of that seq is in flight. (Bounded:
        only seqs in flight are kept, at most max_runs_per_session of them.)"""
        with self.lock:
            if seq not in self.in_flight:
                return False
            self.cancelled.add(seq)
            return True

    def end_run(self, seq: int) -> None:
        with self.lock:
            self.runs -= 1
            left = self.in_flight.pop(seq, 1) - 1
            if left > 0:
                self.in_flight[seq] = left
            else:
                self.cancelled.discard(seq)
            close = self.ended and self.runs == 0
        if close:
            self.sock.close()

    def end(self) -> None:
        with self.lock:
            self.ended = True
            close = self.runs == 0
        with self._send_lock:  # a send past its check of `ended` finishes first
            dropped, self._queue = list(self._queue), deque()
            self._queued_bytes = self._queued_fds = 0
        for _, fds in dropped:
            channel.close_fds(fds)
        if close:
            self.sock.close()

    def queued(self) -> tuple[int, int, int]:
        """(packets, bytes, fds) waiting for the socket."""
        with self._send_lock:
            return len(self._queue), self._queued_bytes, self._queued_fds

    def send(self, data: bytes, fds: Sequence[int] = ()) -> None:
        """Send one packet or queue it; never blocks. Takes `fds` (closed once sent or
        dropped, or when the packet cannot be sent at all: they are our duplicates, the
        client gets its own)."""
        notify = False
        with self._send_lock:
            if self.ended or self.overflowed:
                channel.close_fds(fds)
                return
            if not self._queue:  # keep the order: nothing may overtake a queued packet
                try:
                    channel.send_packet(self.sock, data, fds)
                except BlockingIOError:
                    pass
                except BaseException as exc:
                    # OSError: the client went away, its end of file ends the session.
                    # Anything else is a bug, raised for the caller to log; no fd stays.
                    channel.close_fds(fds)
                    if isinstance(exc, OSError):
                        return
                    raise
                else:
                    channel.close_fds(fds)
                    return
            if (len(self._queue) >= self.policy.max_queued_packets
                    or self._queued_bytes + len(data) > self.policy.max_queued_bytes
                    or self._queued_fds + len(fds) > self.policy.max_queued_fds):
                self.overflowed = True
                channel.close_fds(fds)
                notify = True
            else:
                self._queue.append((data, list(fds)))
                self._queued_bytes += len(data)
                self._queued_fds += len(fds)
                notify = not self.writing
                self.writing = True
        if notify:
            self._wake(self)

    def flush(self) -> None:
        """Write what the socket takes of the queue (the selector thread, when writable)."""
        with self._send_lock:
            while self._queue and not self.ended:
                data, fds = self._queue[0]
                try:
                    channel.send_packet(self.sock, data, fds)
                except BlockingIOError:
                    return
                except OSError:  # the client went away: its end of file ends the session
                    for _, queued_fds in self._queue:
                        channel.close_fds(queued_fds)
                    self._queue.clear()
                    self._queued_bytes = self._queued_fds = 0
                    break
                self._queue.popleft()
                self._queued_bytes -= len(data)
                self._queued_fds -= len(fds)
                channel.close_fds(fds)
            self.writing = False


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
        self._pending: deque[_Connection] = deque()  # connections whose state changed
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
                 _mib(self.uids.memory_limit), ": default, half the driver's budget"
                 if self.policy.max_uid_memory is None else "")
        self._stopping = False
        self._packet = bytearray(channel.MAX_PACKET)  # what the selector thread reads into
        self._spin_next = False  # poll for the next packet before sleeping (`_spin`)
        self._last_served: _Connection | None = None  # whose packet came last ...
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

    def _request(self, connection: _Connection) -> None:
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
            if isinstance(key.data, _Connection):
                self._end(key.data)
        self._selector.close()
        self._listener.close()

    def _once(self) -> None:
        timeout = None
        if self._accept_resume is not None:
            timeout = max(0.0, self._accept_resume - time.monotonic())
        events = self._spin() if self._spin_next else None
        if not events:
            events = self._selector.select(timeout)
        if self._accept_resume is not None and time.monotonic() >= self._accept_resume:
            self._accept_resume = None
            self._selector.register(self._listener, selectors.EVENT_READ, None)
        for key, mask in events:
            data = key.data
            if data is None:
                self._accept()
            elif isinstance(data, _Connection):
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
        CPU between looks: a client on the same vCPU runs meanwhile."""
        self._spin_next = False
        until = time.perf_counter() + self.policy.spin_s
        select = self._selector.select
        while True:
            events = select(0)
            if events or time.perf_counter() >= until:
                return events
            os.sched_yield()

    def _drain_wake(self) -> None:
        try:
            while os.read(self._wake_r, 4096):
                pass
        except BlockingIOError:
            pass

    def _service(self, connection: _Connection, mask: int) -> None:
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

    def _update(self, connection: _Connection) -> None:
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
            connection = _Connection(sock, session, self.policy, self._request)
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

    def _end(self, connection: _Connection) -> None:
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

    def _serve(self, connection: _Connection) -> None:
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
            channel.close_fds(fds)
            self._start_run(connection, data)
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
            self._reply(connection, self._cancel(connection, message))
            return
        reply, out_fds = self._handle(session, message, fds)
        self._reply(connection, reply, out_fds)

    @staticmethod
    def _reply(connection: _Connection, reply: dict[str, Any], fds: Sequence[int] = ()) -> None:
        """Send a JSON reply with `fds` (ours: duplicates made for it) attached; they are
        closed whatever happens to the reply (`_Connection.send` from its hand-over on)."""
        try:
            packet = channel.encode_message(reply)
        except Exception as exc:  # e.g. a seq echoed back that JSON cannot say
            channel.close_fds(fds)
            log.warning("session %d: reply cannot be encoded (%s): NNRT_INVALID_PARAMETER",
                        connection.session.id, exc)
            connection.send(channel.encode_message(
                {"seq": None, "returnCode": NNRT_INVALID_PARAMETER}))
            return
        connection.send(packet, fds)

    @staticmethod
    def _cancel(connection: _Connection, message: dict[str, Any]) -> dict[str, Any]:
        seq, run = message.get("seq"), message.get("run")
        if not isinstance(run, int) or isinstance(run, bool) or not 0 <= run < 1 << 64:
            log.warning("session %d: cancel refused: NNRT_INVALID_PARAMETER: run must be the "
                        "seq of a Run (an integer), not %r", connection.session.id, run)
            return {"seq": seq, "returnCode": NNRT_INVALID_PARAMETER}
        cancelled = connection.cancel(run)
        if cancelled:
            log.info("session %d: Run %d cancelled by its client", connection.session.id, run)
        return {"seq": seq, "returnCode": NNRT_SUCCESS, "cancelled": cancelled}

    def _start_run(self, connection: _Connection, data: bytes) -> None:
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
                self._run(connection, seq, deadline, payload,
                          channel.REPLY_POLL if solo and quick else 0)
                connection.answered_at = time.perf_counter()
                self._spin_next = solo and connection.gap < self.policy.spin_s
                return
        if self.runner.queue(session, payload,
                             lambda: self._run(connection, seq, deadline, payload)):
            return
        try:
            self._workers.submit(self._run, connection, seq, deadline, payload)
        except RuntimeError:  # the pool is shut down: the driver is stopping
            self._run_finished(connection, seq)
            self._send_run_reply(connection, seq, _FORBIDDEN)

    def _run(self, connection: _Connection, seq: int, deadline: float | None,
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

    def _run_finished(self, connection: _Connection, seq: int) -> None:
        connection.end_run(seq)
        with self._runs_lock:
            self._runs -= 1
        if self._draining:
            with self._runs_done:
                self._runs_done.notify_all()

    @staticmethod
    def _send_run_reply(connection: _Connection, seq: int, reply: bytes,
                        flags: int = 0) -> None:
        connection.send(b"".join((channel.RUN, _pack_run_reply(seq, flags), reply)))

    def _handle(self, session: Session, message: dict[str, Any],
                fds: list[int]) -> tuple[dict[str, Any], list[int]]:
        seq = message.get("seq")
        op = message.get("op")
        try:
            if op == "fetch":
                channel.close_fds(fds)
                buffer_id = message.get("bufferId")
                if not isinstance(buffer_id, int):
                    raise DriverError(NNRT_INVALID_PARAMETER, "fetch needs an integer bufferId")
                # A duplicate, so that a concurrent ReleaseBuffer cannot close the fd under us;
                # closed if the borrow's end fails after it was made (`_reply` owns it after).
                duplicate: list[int] = []
                try:
                    with session.buffers.borrow([buffer_id]) as (region,):
                        duplicate.append(os.dup(region.fd))
                except BaseException:
                    channel.close_fds(duplicate)
                    raise
                return {"seq": seq, "returnCode": NNRT_SUCCESS}, duplicate
            if op == "import":
                if len(fds) != 1:
                    channel.close_fds(fds)
                    raise DriverError(NNRT_INVALID_PARAMETER, f"import needs one fd, got {len(fds)}")
                region = SharedRegion.adopt(fds[0])
                buffer_id = session.buffers.add(region)
                log.debug("session %d imported %d bytes as buffer %d", session.id, region.size,
                          buffer_id)
                return {"seq": seq, "returnCode": NNRT_SUCCESS, "bufferId": buffer_id,
                        "bufferSize": region.size}, []
            channel.close_fds(fds)
            raise DriverError(NNRT_INVALID_PARAMETER, f"unknown session-channel op {op!r}")
        except DriverError as exc:
            log.warning("session %d: %s refused: %s", session.id, op, exc)
            return {"seq": seq, "returnCode": exc.code}, []
        except OSError as exc:
            if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOMEM):
                # E.g. the fd of a fetch cannot be duplicated: the driver is at its fd limit.
                log.warning("session %d: %s refused: the driver is out of fds or memory: %s",
                            session.id, op, exc)
                return {"seq": seq, "returnCode": NNRT_OUT_OF_MEMORY}, []
            log.exception("session %d: %s failed unexpectedly", session.id, op)
            return {"seq": seq, "returnCode": NNRT_FAILED}, []
        except Exception:  # this thread serves every session: it must survive any request
            log.exception("session %d: %s failed unexpectedly", session.id, op)
            return {"seq": seq, "returnCode": NNRT_FAILED}, []
