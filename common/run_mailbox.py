"""The Run mailbox: one shared page pair per session where a polled Run's request and reply
travel while both sides poll, instead of the session socket.

While a client and its driver both poll (a quick Run, a CPU spare: common/cpus.py), the
socket's system calls are most of a tiny Run's round trip: a send, a poll and a receive on
each side, ~5 µs of the ~20 (benchmarks/run_cost.py), against ~0.3 µs for two processes that
poll one word of shared memory. So the client hands the driver a memfd of `MAILBOX_BYTES` once
(session-channel op "mailbox"), and a polled Run's packets, byte for byte those of the socket
(`b"R" | header | RunRequest`, `b"R" | seq | flags | RunReply`), are written there:

    offset 0     request seq (u64; written last, after the bytes and their length)
    offset 8     request length (u64)
    offset 64    reply seq (u64; written last)
    offset 72    reply length (u64)
    offset 128   the driver polls this mailbox until (CLOCK_MONOTONIC ns; 0: it does not)
    REQUEST_AT   the request packet (at most SLOT_BYTES)
    REPLY_AT     the reply packet (at most SLOT_BYTES)

The socket stays the session's lifeline and doorbell. A client uses the mailbox only while the
driver says it polls it (with `CLIENT_MARGIN_NS` to spare); when its own polling window ends
without the reply it rings the doorbell (`DOORBELL` packet on the socket: "I sleep on the
socket for seq s"), and the driver answers there (server/channel_mailbox.py). A request
written just as the driver stopped polling is thus found at the doorbell: late, never lost.

Ordering: each side writes the bytes, then the length, then the seq, and reads in the reverse
order; x86's memory model (stores are not reordered with stores, loads not with loads) makes
that enough, so the mailbox is offered on x86 only (`SUPPORTED`). A driver copies a request
out before it parses it: the client can write the page at any time, and a packet from the
mailbox is checked exactly as one from the socket.
"""

from __future__ import annotations

import fcntl
import mmap
import os
import platform
import struct
import time

MAILBOX_BYTES = 32768
REQUEST_AT = 4096
REPLY_AT = 18432
SLOT_BYTES = 14336  # the most a request or a reply may take (more: the socket)
CLIENT_MARGIN_NS = 20_000  # the client uses the mailbox only if the driver polls this much longer
DOORBELL = b"M"  # `b"M" | u64 seq`, both ways: "reply on the socket" / "the reply is in the mailbox"
DOORBELL_PACKET = struct.Struct("<Q")


def ordered_machine(machine: str) -> bool:
    """Whether a CPU (platform.machine()) keeps stores in program order and loads in program
    order, which the protocol needs (see above): x86."""
    return machine.lower() in {"x86_64", "amd64", "i386", "i686"}


SUPPORTED = ordered_machine(platform.machine())

# Word indexes into the header page (u64 each).
_REQUEST_SEQ, _REQUEST_LEN, _REPLY_SEQ, _REPLY_LEN, _POLL_UNTIL = 0, 1, 8, 9, 16


class MailboxRefused(ValueError):
    """A mailbox fd the driver will not map (why in the message)."""


class RunMailbox:
    """One session's mailbox, mapped (either side). Not thread-safe: each side serialises its
    own use (the client its reader, the driver its channel thread and a lock)."""

    __slots__ = ("_map", "_words", "taken")

    def __init__(self, fd: int) -> None:
        self._map = mmap.mmap(fd, MAILBOX_BYTES, mmap.MAP_SHARED,
                              mmap.PROT_READ | mmap.PROT_WRITE)
        self._words = memoryview(self._map)[:REQUEST_AT].cast("Q")
        self.taken = 0  # the driver's: seq of the last request it took

    @classmethod
    def create(cls) -> tuple[RunMailbox, int]:
        """A new mailbox (the client's) and its fd, sealed against shrinking, to send."""
        fd = os.memfd_create("nnrt-run-mailbox", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        try:
            os.ftruncate(fd, MAILBOX_BYTES)
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW)
            return cls(fd), fd
        except BaseException:
            os.close(fd)
            raise

    @classmethod
    def adopt(cls, fd: int) -> RunMailbox:
        """Map a client's mailbox fd (the driver's side; the fd stays the caller's to close).
        MailboxRefused unless it is a memfd of exactly MAILBOX_BYTES that can no longer
        shrink: a page the client could truncate would fault the driver when read."""
        try:
            seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
        except OSError as exc:
            raise MailboxRefused(f"not a sealable memfd ({exc.strerror})") from None
        if not seals & fcntl.F_SEAL_SHRINK:
            try:
                fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK)
            except OSError as exc:
                raise MailboxRefused(f"cannot be sealed against shrinking ({exc.strerror})") \
                    from None
        size = os.fstat(fd).st_size
        if size != MAILBOX_BYTES:
            raise MailboxRefused(f"{size} bytes, not {MAILBOX_BYTES}")
        try:
            return cls(fd)
        except (OSError, ValueError) as exc:  # write-sealed, or mapped read-only
            raise MailboxRefused(f"cannot be mapped shared for writing ({exc})") from None

    def close(self) -> None:
        self._words.release()
        self._map.close()

    # -- the client's side ----------------------------------------------------------------

    def driver_polls(self) -> bool:
        """Whether the driver polls this mailbox for long enough to find a request now."""
        return self._words[_POLL_UNTIL] > time.monotonic_ns() + CLIENT_MARGIN_NS

    def put_request(self, seq: int, packet: bytes) -> None:
        """Post a request packet (len(packet) <= SLOT_BYTES); the seq last."""
        words = self._words
        self._map[REQUEST_AT:REQUEST_AT + len(packet)] = packet
        words[_REQUEST_LEN] = len(packet)
        words[_REQUEST_SEQ] = seq

    def replied(self, seq: int) -> bool:
        return self._words[_REPLY_SEQ] == seq

    def reply(self, seq: int) -> bytes | None:
        """The reply packet to request `seq`, or None when the mailbox holds no such reply."""
        words = self._words
        if words[_REPLY_SEQ] != seq:
            return None
        length = words[_REPLY_LEN]
        if not 0 < length <= SLOT_BYTES:
            return None
        return self._map[REPLY_AT:REPLY_AT + length]

    # -- the driver's side ----------------------------------------------------------------

    def open_window(self, until_ns: int) -> None:
        """Say the driver polls this mailbox until `until_ns` (CLOCK_MONOTONIC)."""
        self._words[_POLL_UNTIL] = until_ns

    def close_window(self) -> None:
        self._words[_POLL_UNTIL] = 0

    def posted(self) -> int:
        """The seq of a request posted and not yet taken; 0 when there is none."""
        seq = self._words[_REQUEST_SEQ]
        return 0 if seq == self.taken else seq

    def take_request(self) -> tuple[int, bytes]:
        """(seq, a copy of the packet) of the request posted, marked taken. ValueError for a
        length out of bounds (the request is taken all the same: it is not looked at again)."""
        words = self._words
        seq = words[_REQUEST_SEQ]
        length = words[_REQUEST_LEN]
        self.taken = seq
        if not 0 < length <= SLOT_BYTES:
            raise ValueError(f"a mailbox request of {length} bytes (at most {SLOT_BYTES})")
        return seq, self._map[REQUEST_AT:REQUEST_AT + length]

    def put_reply(self, seq: int, packet: bytes) -> None:
        """Post a reply packet (len(packet) <= SLOT_BYTES); the seq last."""
        words = self._words
        self._map[REPLY_AT:REPLY_AT + len(packet)] = packet
        words[_REPLY_LEN] = len(packet)
        words[_REPLY_SEQ] = seq
