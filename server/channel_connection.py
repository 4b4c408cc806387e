"""One client of the session channel: what it is granted (`ChannelPolicy`), who it is
(peer credentials), and its connection (`Connection`: outgoing queue, Runs in flight).

- Sockets are non-blocking; each connection has a bounded outgoing queue (4096 packets,
  4 MiB). A client that does not read until it is full is dropped: its session ends exactly
  as at a disconnect. Waiting on it would stall every other session.
- Runs of a session in flight are capped (`ChannelPolicy.max_runs_per_session`, 64 by
  default): one more is answered NNRT_DEVICE_BUSY at once, so a flood holds bounded memory
  and a well-behaved session's Runs are queued behind at most that many of the flooder's.
- `--allow-uid` / `--allow-gid` restrict who may open a session (SO_PEERCRED at accept,
  SO_PEERGROUPS for supplementary groups); without a session no HDI method that needs one
  works, so this is the one door to check.
- Replies carrying fds that wait for a client's socket are bounded (`MAX_QUEUED_FDS`) like
  the rest of its queue.
"""

from __future__ import annotations

import array
import logging
import select
import socket
import struct
import threading
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from nnrt.common import session_channel as channel
from nnrt.server.channel_mailbox import ConnectionMailbox
from nnrt.server.sessions import Session
from nnrt.server.uid_quotas import DEFAULT_MAX_SESSIONS_PER_UID

log = logging.getLogger(__name__)


SPIN_S = 200e-6  # s the channel polls for a lone client's next Run (channel_server.QUICK_RUN_S)
DEFAULT_MAX_RUNS_PER_SESSION = 64  # Runs of one session in flight; beyond: NNRT_DEVICE_BUSY
MAX_QUEUED_PACKETS = 4096  # replies a connection may have waiting for its socket ...
MAX_QUEUED_BYTES = 4 << 20  # ... and their bytes; beyond either the session is dropped
# ... and the fds attached to them (fetch replies, each a duplicate in this process's fd
# table): a client that fetches without reading would otherwise hold 4096 fds a session.
MAX_QUEUED_FDS = 64
SO_PEERGROUPS = getattr(socket, "SO_PEERGROUPS", 59)  # Linux >= 4.13
_MAX_PEER_GROUPS = 1024


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


class Connection:
    """A session's socket, its outgoing queue and its Runs in flight.

    Every packet to the client goes through `send`, from any thread: written at once when
    the socket takes it, else queued (bounded by the policy) and written by the selector
    thread when the socket becomes writable. Nobody ever waits on a client: one whose queue
    is full is marked overflowed and dropped by the selector thread. The socket is closed
    only once no Run is still answering on it (so a reply can never go to a reused fd
    number)."""

    def __init__(self, sock: socket.socket, session: Session, policy: ChannelPolicy,
                 wake: Callable[[Connection], None]) -> None:
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
        self.readable = select.poll()  # channel_server._more_pending
        self.readable.register(sock, select.POLLIN)
        self.mailbox: ConnectionMailbox | None = None  # its Run mailbox (op "mailbox")

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
        if self.mailbox is not None:
            self.mailbox.close()
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


