"""The HDI client layer: one connection (= one session) to one driver process.

`DriverClient` opens the driver's session channel (common/session_channel.py) and its gRPC
socket, then offers every HDI method. Methods return the reply message, whose
`returnCode` the caller checks: driver-level errors are data. Transport failures raise
`DriverGone` — the driver died or stopped — and are noticed promptly: the session channel
reaches end-of-file the moment the driver process dies, a watcher thread marks the client
dead, fails every waiting request and calls the death callbacks, and every later call
raises at once.

Who reads the session channel: the threads waiting for a reply, not a thread of its own.
Of the callers waiting, one at a time is the reader (leader/followers): it receives packets
and hands each to its waiter until its own reply comes, then wakes another waiting caller
to take over. A caller alone — the common synchronous Run — thus reads its own reply and
no thread hand-off sits on the path (a wake-up of another thread and a GIL hand-over: ~80
µs of a ~280 µs tiny Run on a 2-vCPU VM, benchmarks/transport.py (c)). The watcher thread
sleeps in poll() for the peer's hang-up only (POLLRDHUP), so replies do not wake it; at a
hang-up it takes the reader's place, delivers what the driver sent before it went, reads
end-of-file and marks the client dead (death callbacks run on it, never on a caller). It
also reads replies that nobody waits for any more (a Run that timed out) when no caller
is reading, so that they never pile up at the driver, which drops a session that does not
read its replies.

Trust, before anything is sent: the runtime directory must pass `check_runtime_dir`
(common/runtime_dir.py), and the process serving the session channel must be ours, root's
or the service user's (`NNRT_SERVICE_USER`) by the kernel's SO_PEERCRED, the gRPC socket a
socket bound by that same uid; otherwise `UntrustedDriver` (a DriverGone) says why. The
gRPC socket cannot be checked by peer credentials from here (gRPC connects it), hence the
owner check: in a trusted directory only trusted users can bind it.

Buffers come back as `SharedMemory` (buffer.py): the client's own mapping of the driver's
memfd, plus the fd, valid as long as the client keeps it, whatever happens to the driver.

The HDI's gRPC calls are `HdiCalls` (hdi_calls.py); a Run's bytes and its cancel handle are
run_framing.py's. This module is the transport (the session channel's reader and waiters)
and Run over the session channel.
"""

from __future__ import annotations

import itertools
import logging
import math
import os
import select
import socket
import struct
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import grpc

from nnrt.protos import hdi_pb2 as pb
from nnrt.protos import hdi_pb2_grpc as rpc
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.common import session_channel as channel
from nnrt.common.cpus import spare_cpu
from nnrt.common.errors import NNRT_FAILED, NNRT_SUCCESS
from nnrt.common.run_mailbox import DOORBELL, DOORBELL_PACKET

from .errors import DriverGone, UntrustedDriver
from .hdi_calls import HdiCalls
from .peer_trust import check_peer
from .run_mailbox import ClientMailbox, mailbox_wanted
from .waiting import DEFAULT_SPIN_US, SPIN_ENV, Waiter, spin_seconds  # noqa: F401 (theirs)
from .run_framing import PROFILE_FIELD, RunTicket, run_request_bytes, unless_past_deadline
from nnrt.common.runtime_dir import (UnsafeRuntimeDir, check_runtime_dir, grpc_socket,
                                     runtime_dir, session_socket)

log = logging.getLogger(__name__)

_MAX_KEPT_REQUESTS = 256  # Run requests' bytes a session keeps (`DriverClient.run_reply`)
_MAX_KEPT_REPLIES = 256  # successful Run replies a session keeps decoded (`DriverClient.run`)
_perf_counter = time.perf_counter
_MAX_MESSAGE_BYTES = 64 << 20
_RUN_HEADER = channel.RUN_REQUEST.pack  # Run packet: RUN | seq, timeout_ms, think | RunRequest
_RUN_OVERHEAD = len(channel.RUN) + channel.RUN_REQUEST.size


_RUN_BYTE = channel.RUN[0]
_RUN_REPLY_HEADER = channel.RUN_REPLY.unpack_from
_receive_into = channel.receive_into
_NOW = channel.NOW
_RUN_REPLY_AT = len(channel.RUN) + channel.RUN_REPLY.size  # where a Run reply's protobuf starts
_DOORBELL_BYTE = DOORBELL[0]
_DOORBELL_SIZE = len(DOORBELL) + DOORBELL_PACKET.size
_LOST_REPLY = pb.RunReply(returnCode=NNRT_FAILED, reason="the driver said the reply was in "
                          "the Run mailbox: it was not").SerializeToString()


def _drain_pipe(fd: int) -> None:
    try:
        while os.read(fd, 4096):
            pass
    except BlockingIOError:
        pass


class DriverClient(HdiCalls):
    """A session with one driver. Thread-safe."""

    def __init__(self, grpc_path: Path, session_path: Path, *, timeout: float = 5.0) -> None:
        self.grpc_path = Path(grpc_path)
        self.session_path = Path(session_path)
        self._dead = threading.Event()
        self._death_reason = ""
        self._death_callbacks: list[Callable[[], None]] = []
        self._waiters: dict[int, Waiter] = {}
        self._seq = itertools.count(1)
        self._lock = threading.Lock()
        self._reader = threading.Lock()  # held by the thread that reads the socket now
        # One packet buffer for the session's lifetime (channel.receive_into); only the
        # reader uses it.
        self._buffer = bytearray(channel.MAX_PACKET)
        self._view = memoryview(self._buffer)
        self._orphans = 0  # replies still to come for requests whose callers gave up
        self._polled_models: set[int] = set()  # whose last Run reply said REPLY_POLL
        # Run requests' bytes by (model, tensors' serialized IOTensors): `run_reply`
        self._requests: dict[tuple, bytes] = {}
        self._replies: dict[bytes, pb.RunReply] = {}  # successful replies decoded (`run`)
        self._replied_at = 0.0  # when the last Run reply was read (think times, `run`)
        self._spin = spin_seconds()  # how long a quick Run polls for its reply (`run`)
        self._hung_up = False  # the reader met end-of-file (the watcher marks the death)
        self._mailbox: ClientMailbox | None = None  # polled Runs' (client/core/run_mailbox.py)
        self._mailbox_wanted = mailbox_wanted()  # not asked for yet, and wanted
        try:  # who may have put these sockets there: before anything is sent or received
            check_runtime_dir(self.session_path.parent)
        except UnsafeRuntimeDir as exc:
            raise UntrustedDriver(str(exc)) from exc
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
        self._readable = select.poll()  # the reader's wait with a deadline
        self._readable.register(self._sock, select.POLLIN)
        try:
            self._sock.settimeout(timeout)
            self._sock.connect(str(self.session_path))
            check_peer(self._sock, self.session_path, self.grpc_path)
            hello, fds = channel.receive_message(self._sock)
            channel.close_fds(fds)
            if not hello or hello.get("protocol") != channel.PROTOCOL_VERSION:
                raise DriverGone(f"{self.session_path}: unexpected greeting {hello!r}")
            self._sock.settimeout(None)
        except UntrustedDriver:
            self._sock.close()
            raise
        except (OSError, ValueError) as exc:
            self._sock.close()
            raise DriverGone(f"cannot open a session on {self.session_path}: {exc}") from exc
        self.session_id = hello["sessionId"]
        self._metadata = ((channel.METADATA_KEY, hello["session"]),)
        self._channel = grpc.insecure_channel(
            f"unix:{self.grpc_path}",
            options=[("grpc.max_receive_message_length", _MAX_MESSAGE_BYTES),
                     ("grpc.max_send_message_length", _MAX_MESSAGE_BYTES)],
        )
        try:
            grpc.channel_ready_future(self._channel).result(timeout=timeout)
        except grpc.FutureTimeoutError as exc:
            self._sock.close()
            self._channel.close()
            raise DriverGone(f"{self.grpc_path} did not answer within {timeout} s") from exc
        self.device = rpc.INnrtDeviceStub(self._channel)
        self.prepared = rpc.IPreparedModelStub(self._channel)
        # The watcher's poll() is woken through this pipe when its interest changes (replies
        # orphaned: read them too) and at close.
        self._poke_r, self._poke_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._watcher = threading.Thread(target=self._watch, name="nnrt-session-watch", daemon=True)
        self._watcher.start()

    @classmethod
    def connect(cls, name: str, directory: Path | None = None, *, timeout: float = 5.0) -> DriverClient:
        """Open a session with the driver called `name` in the runtime directory."""
        directory = runtime_dir() if directory is None else Path(directory)
        return cls(grpc_socket(directory, name), session_socket(directory, name), timeout=timeout)

    # -- liveness -------------------------------------------------------------------------

    @property
    def alive(self) -> bool:
        return not self._dead.is_set()

    def on_death(self, callback: Callable[[], None]) -> None:
        """Call `callback()` (on the watcher thread) when the driver goes away."""
        with self._lock:
            if not self._dead.is_set():
                self._death_callbacks.append(callback)
                return
        callback()

    def wait_dead(self, timeout: float) -> bool:
        return self._dead.wait(timeout)

    def _watch(self) -> None:
        poller = select.poll()
        poller.register(self._poke_r, select.POLLIN)
        interest = select.POLLRDHUP  # POLLHUP and POLLERR are always reported
        # The number, not the socket object: close() (which marks the client dead first)
        # may close the socket between two polls; its number then reads as a hang-up.
        sock_fd = self._sock.fileno()
        poller.register(sock_fd, interest)
        try:
            while not self._dead.is_set():
                hung_up = readable = False
                for fd, events in poller.poll():
                    if fd == self._poke_r:
                        _drain_pipe(self._poke_r)
                    elif events & (select.POLLRDHUP | select.POLLHUP | select.POLLERR |
                                   select.POLLNVAL):
                        hung_up = True
                    elif events & select.POLLIN:
                        readable = True
                if self._dead.is_set():
                    return
                if hung_up:
                    # Deliver what the driver sent before it went, then end-of-file.
                    with self._reader:
                        while self._read_one(block=True):
                            pass
                    self._mark_dead(self._death_reason or "the driver closed the session")
                    return
                if readable and self._orphans:
                    # Late replies may be waiting: take what is there, after the reader of
                    # the moment (if any) — it drops them too, and a caller's reply it
                    # leaves is delivered from here.
                    with self._reader:
                        while self._read_one(block=False):
                            pass
                    self._hand_on()
                wanted = select.POLLRDHUP | (select.POLLIN if self._orphans else 0)
                if wanted != interest:
                    poller.modify(sock_fd, wanted)
                    interest = wanted
        finally:
            with self._lock:  # no poke may write to a number reused by then
                os.close(self._poke_r)
                os.close(self._poke_w)
                self._poke_w = -1

    def _poke(self) -> None:
        """Wake the watcher (it looks at `_orphans` and the death again). `_lock` held."""
        if self._poke_w >= 0:
            try:
                os.write(self._poke_w, b"x")
            except BlockingIOError:
                pass  # full: it wakes anyway

    def _read_one(self, block: bool) -> bool:
        """The reader only: receive one packet and hand it to its waiter. False when there
        was none (`block` False) or at end-of-file / a socket error (`_hung_up` set)."""
        buffer, view = self._buffer, self._view
        try:
            size, fds = _receive_into(self._sock, buffer, 0 if block else _NOW)
            flags = 0
            if size is None:
                reply, seq = None, None
            elif size and buffer[0] == _RUN_BYTE:  # a Run reply: protobuf bytes
                if size < _RUN_REPLY_AT:
                    raise ValueError(f"a Run reply of {size} bytes")
                seq, flags = _RUN_REPLY_HEADER(buffer, 1)
                reply = bytes(view[_RUN_REPLY_AT:size])
                self._replied_at = _perf_counter()
            elif size and buffer[0] == _DOORBELL_BYTE:  # "the reply is in the mailbox"
                if size != _DOORBELL_SIZE:
                    raise ValueError(f"a doorbell of {size} bytes")
                (seq,) = DOORBELL_PACKET.unpack_from(buffer, len(DOORBELL))
                if seq in self._waiters:  # else: taken from the mailbox as it rang
                    self._deliver_from_mailbox(seq, self._mailbox.reply(seq)
                                               if self._mailbox is not None else None)
                return True
            else:
                reply = channel.parse_message(bytes(view[:size]), fds)
                seq = reply.get("seq")
        except (BlockingIOError, InterruptedError):
            return False
        except (ValueError, struct.error) as exc:
            log.warning("driver %s sent a malformed message: %s", self.grpc_path.name, exc)
            return True
        except OSError as exc:
            self._death_reason = self._death_reason or str(exc)
            self._hung_up = True
            return False
        if size is None:
            self._hung_up = True
            return False
        waiter = self._waiters.pop(seq, None)
        if waiter is None:  # its caller gave up (a Run past its timeout)
            channel.close_fds(fds)
            with self._lock:
                self._orphans = max(0, self._orphans - 1)
            return True
        waiter.deliver(reply, fds, flags)
        return True

    def _deliver_from_mailbox(self, seq: int, packet: bytes | None) -> None:
        """Hand Run `seq`'s reply packet, read from the mailbox, to its waiter."""
        if packet is None or len(packet) < _RUN_REPLY_AT or packet[0] != _RUN_BYTE:
            log.error("driver %s: the reply to Run %d is not in the Run mailbox",
                      self.grpc_path.name, seq)
            reply, flags = _LOST_REPLY, 0
        else:
            _, flags = _RUN_REPLY_HEADER(packet, 1)
            reply = packet[_RUN_REPLY_AT:]
        self._replied_at = _perf_counter()
        waiter = self._waiters.pop(seq, None)
        if waiter is not None:
            waiter.deliver(reply, [], flags)

    def _open_mailbox(self) -> None:
        """Hand the driver this session's Run mailbox (once: see ClientMailbox.open)."""
        with self._lock:
            if not self._mailbox_wanted:
                return
            self._mailbox_wanted = False
        self._mailbox = ClientMailbox.open(self._session_request, self.grpc_path.name)

    def _hand_on(self) -> None:
        """Wake a waiting caller to become the reader (no reader now, somebody waits)."""
        if not self._waiters or self._reader.locked():  # (a lone caller: nobody to wake)
            return
        waiting = list(self._waiters.values())
        if waiting:
            waiting[0].wake()

    def _await(self, seq: int, waiter: Waiter, timeout: float | None,
               spin: float = 0.0) -> bool:
        """Wait for the reply to request `seq`, reading the socket while no other thread
        does. True once settled (answered, or the session is dead); False after `timeout`
        seconds, the request abandoned (its late reply is dropped by whoever reads).
        `spin`: poll for the reply that many seconds before sleeping (`run`)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not waiter.answered and not self._dead.is_set():
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                if self._waiters.pop(seq, None) is None:  # delivered meanwhile
                    return True
                with self._lock:
                    self._orphans += 1
                    self._poke()  # the watcher reads late replies while nobody else does
                self._hand_on()  # I may have been woken to read: pass it on
                return False
            if self._hung_up:  # the driver is gone: the watcher marks the death
                if not self._watcher.is_alive():  # (never left without anyone to mark it)
                    self._mark_dead(self._death_reason or "the driver closed the session")
                    continue
                waiter.sleep(left if left is not None and left < 1.0 else 1.0)
                continue
            if not self._reader.acquire(False):
                waiter.sleep(left)  # woken with the reply, at the death, or to read
                continue
            try:
                if spin and len(self._waiters) == 1:  # nobody else waits on this session
                    until = time.monotonic() + spin
                    if deadline is not None:  # never past the caller's deadline
                        until = min(until, deadline)
                    ready = self._readable.poll  # a look costs 0.3 µs, a failed read 1.3
                    while not waiter.answered and not self._hung_up and \
                            time.monotonic() < until:
                        if not ready(0) or not self._read_one(block=False):
                            os.sched_yield()
                while not waiter.answered and not self._dead.is_set():
                    if deadline is not None:
                        left = deadline - time.monotonic()
                        if left <= 0:
                            break
                        # Rounded down to the millisecond: a wait never ends past the
                        # caller's deadline (the driver abandons the run at the same
                        # deadline: its reply would race the timeout); the rest in polls.
                        if not self._readable.poll(int(left * 1000)):
                            continue
                    if not self._read_one(block=True) and self._hung_up:
                        break
            finally:
                self._reader.release()
                self._hand_on()
        return True

    def _mark_dead(self, reason: str) -> None:
        with self._lock:
            if self._dead.is_set():
                return
            self._death_reason = reason
            self._dead.set()
            callbacks, self._death_callbacks = self._death_callbacks, []
            waiters, self._waiters = self._waiters, {}
            self._poke()
        for waiter in list(waiters.values()):
            waiter.wake()
        if reason != "closed by the client":
            log.warning("driver %s is gone: %s", self.grpc_path.name, reason)
        for callback in callbacks:
            try:
                callback()
            except Exception:
                log.exception("death callback failed")

    def _gone(self) -> DriverGone:
        return DriverGone(f"driver {self.grpc_path.name} is gone: {self._death_reason}")

    # -- transport --------------------------------------------------------------------------

    def _call(self, method, request, timeout: float | None = None):
        if self._dead.is_set():
            raise self._gone()
        try:
            return method(request, metadata=self._metadata, timeout=timeout)
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                raise TimeoutError(f"{method._method.decode()} exceeded {timeout} s") from exc
            if self._dead.is_set():
                raise self._gone() from exc
            raise DriverGone(f"driver {self.grpc_path.name}: {exc.code().name}: {exc.details()}") from exc
        except ValueError as exc:
            # The channel was closed between the check above and the call: the session was
            # dropped after the driver died (Device.client() reconnecting on another thread).
            if self._dead.is_set():
                raise self._gone() from exc
            raise

    def _session_request(self, message: dict, fds: Sequence[int] = (), timeout: float = 5.0):
        seq = next(self._seq)
        waiter = Waiter()
        with self._lock:
            if self._dead.is_set():
                raise self._gone()
            self._waiters[seq] = waiter
        try:
            channel.send_message(self._sock, {**message, "seq": seq}, fds)
        except OSError as exc:
            self._waiters.pop(seq, None)
            raise DriverGone(f"session channel: {exc}") from exc
        if not self._await(seq, waiter, timeout):
            raise DriverGone(f"driver {self.grpc_path.name} did not answer within {timeout} s")
        if not waiter.answered:
            raise self._gone()
        return waiter.reply, waiter.fds

    # -- IPreparedModel: Run (the session channel's fast path, or gRPC) ---------------------

    def run(self, model_id: int, inputs: Sequence[ht.IOTensor | bytes],
            outputs: Sequence[ht.IOTensor | bytes], timeout: float | None = None,
            ticket: RunTicket | None = None, profile: bool = False) -> pb.RunReply:
        """Run over the session channel (the fast path; see common/session_channel.py).

        Each tensor is an IOTensor, or its serialized bytes (what a caller that runs the same
        tensors again keeps: nothing to build per run). `timeout` (seconds) is the run's
        deadline: TimeoutError then, and the driver abandons the run between operators.
        DriverGone when the driver dies meanwhile. `ticket.cancel()`, from any thread, has
        the driver abandon the run as at its deadline; the call still returns the driver's
        reply (when the driver is done with the run's buffers).

        A Run of a model whose last reply said the driver answered it at once, with no
        other session active (REPLY_POLL), polls for its reply up to NNRT_CLIENT_SPIN_US
        (200 µs by default) before it sleeps, when it is the only request of this session
        waiting and a CPU is spare; a model that computes longer never polls (the poller
        would take a core from its computation), nor does anyone on a busy machine.

        `profile`: the driver times the run step by step (RunReply.profile).

        A successful reply that comes again byte for byte (a model of static shapes is
        answered with the same bytes every time) is not decoded again: the caller gets the
        message decoded the first time, shared — read it, never change it.
        """
        raw = self.run_reply(model_id, inputs, outputs, timeout, ticket, profile)
        reply = self._replies.get(raw)
        if reply is not None:
            return reply
        reply = unless_past_deadline(pb.RunReply.FromString(raw), timeout, ticket)
        if not reply.returnCode and not reply.reason and not profile:
            if len(self._replies) >= _MAX_KEPT_REPLIES:
                self._replies.clear()
            self._replies[raw] = reply
        return reply

    def run_reply(self, model_id: int, inputs: Sequence[ht.IOTensor | bytes],
                  outputs: Sequence[ht.IOTensor | bytes], timeout: float | None = None,
                  ticket: RunTicket | None = None, profile: bool = False) -> bytes:
        """`run` without the reply's decoding: the serialized RunReply (a caller that runs
        the same tensors again gets the same bytes for the same answer, and may keep what
        it made of them). A reply that says the driver abandoned the run at `timeout` is
        returned as such (`run` raises TimeoutError for it)."""
        key = None
        if not profile:  # the same tensors again: the request's bytes are made once
            key = (model_id, len(inputs), *inputs, *outputs)
            try:
                data = self._requests.get(key)
            except TypeError:  # IOTensor messages are not hashable: built each time
                data = key = None
        else:
            data = None
        if data is None:
            data = run_request_bytes(model_id, inputs, outputs)
            if profile:
                data += PROFILE_FIELD
            if _RUN_OVERHEAD + len(data) > channel.MAX_PACKET:
                return self.run_grpc(model_id, inputs, outputs, timeout, ticket,
                                     profile).SerializeToString()
            if key is not None:
                if len(self._requests) >= _MAX_KEPT_REQUESTS:
                    self._requests.clear()
                self._requests[key] = data
        timeout_ms = 0 if timeout is None else max(1, math.ceil(timeout * 1000))
        replied_at = self._replied_at
        think = channel.NO_THINK_TIME if not replied_at else \
            min(int((_perf_counter() - replied_at) * 1e6), channel.NO_THINK_TIME - 1)
        # Polling pays while the driver polls for this Run too (the same window, after a
        # reply): later, it is asleep, and its wake-up alone outlasts the window (a call
        # after 0.2 s idle polled its whole 200 µs, measured)
        spin = self._spin if think < self._spin * 1e6 and model_id in self._polled_models \
            and spare_cpu().now() else 0.0
        if spin and self._mailbox_wanted:
            self._open_mailbox()
        seq = next(self._seq)
        packet = b"".join((channel.RUN, _RUN_HEADER(seq, timeout_ms, think), data))
        waiter = Waiter()
        with self._lock:
            if self._dead.is_set():
                raise self._gone()
            self._waiters[seq] = waiter
        posted = False
        if spin and self._mailbox is not None and self._reader.acquire(False):
            try:  # posted in the mailbox, polled there (client/core/run_mailbox.py)
                mailbox = self._mailbox  # read holding the reader: `close` unmaps under it
                posted = mailbox is not None and len(self._waiters) == 1 and \
                    mailbox.takes(packet)
                if posted:
                    self._run_in_mailbox(mailbox, seq, packet, timeout, ticket)
            finally:
                self._reader.release()
                self._hand_on()
        if not posted:
            try:
                self._sock.send(packet)
            except OSError as exc:
                self._waiters.pop(seq, None)
                if self._dead.is_set():
                    raise self._gone() from exc
                raise DriverGone(f"session channel: {exc}") from exc
            if ticket is not None:
                ticket.started(self, seq)
        if not waiter.answered and not self._await(seq, waiter, timeout,
                                                   0.0 if posted else spin):
            raise TimeoutError(f"Run exceeded {timeout} s")
        if not waiter.answered:
            raise self._gone()
        if waiter.flags & channel.REPLY_POLL:
            if len(self._polled_models) >= 1024:
                self._polled_models.clear()
            self._polled_models.add(model_id)
        else:
            self._polled_models.discard(model_id)
        return waiter.reply

    def _run_in_mailbox(self, mailbox: ClientMailbox, seq: int, packet: bytes,
                        timeout: float | None, ticket: RunTicket | None) -> None:
        """Post Run `seq` in the mailbox and poll for its reply for the polling window (never
        past the caller's deadline); then the doorbell, and the caller waits on the socket."""
        until = time.monotonic() + (self._spin if timeout is None else min(self._spin, timeout))
        if ticket is not None:
            ticket.started(self, seq)
        try:
            reply = mailbox.post_and_poll(self._sock, seq, packet, until, self._dead)
        except OSError as exc:  # the doorbell: the driver is gone (the watcher says so)
            self._death_reason = self._death_reason or f"session channel: {exc}"
            self._hung_up = True
            return
        if reply is not None:
            self._deliver_from_mailbox(seq, reply)

    def cancel_run(self, seq: int) -> bool:
        """Have the driver abandon the Run `seq` of this session (True when it was in flight
        there); the run's caller still gets the driver's reply. DriverGone if unreachable."""
        reply, fds = self._session_request({"op": "cancel", "run": seq})
        channel.close_fds(fds)
        return reply.get("returnCode") == NNRT_SUCCESS and bool(reply.get("cancelled"))

    # -- lifetime -----------------------------------------------------------------------------

    def close(self) -> None:
        """End the session: the driver frees its buffers and prepared models."""
        self._mark_dead("closed by the client")
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        if self._mailbox is not None and self._reader.acquire(timeout=1.0):
            try:  # no reader polls it now, nor will (the session is dead)
                self._mailbox.close()
                self._mailbox = None
            finally:
                self._reader.release()
        self._sock.close()
        self._channel.close()
        if threading.current_thread() is not self._watcher:
            self._watcher.join(timeout=5)

    def __enter__(self) -> DriverClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
