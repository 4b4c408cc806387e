"""The session channel: session lifetime and fd passing beside gRPC.

gRPC cannot carry file descriptors, so every driver also listens on `<name>.session`, an
AF_UNIX SOCK_SEQPACKET socket (message boundaries and SCM_RIGHTS, mode 0660 like the gRPC
socket). The handshake and messages (JSON objects, one per packet):

1. The client connects. The driver creates a session and sends
   `{"protocol": 2, "session": "<token>", "sessionId": <n>}`. The client sends the token as
   gRPC metadata `nnrt-session` on every call; it is a 128-bit secret, so no other client
   can name this session's buffers or prepared models.
2. `{"op": "fetch", "seq": s, "bufferId": b}` → `{"seq": s, "returnCode": 0}` with the fd of
   buffer b of this session attached (SCM_RIGHTS), or a non-zero `returnCode`
   (NNRT_INVALID_BUFFER) and no fd. This is how a client gets the memfd of AllocateBuffer.
3. `{"op": "import", "seq": s}` with one fd attached → `{"seq": s, "returnCode": 0,
   "bufferId": b, "bufferSize": n}`: the driver adopts the client's memfd (sealing it against
   shrinking) as a buffer of this session (OH_NNTensor_CreateWithFd).
4. Either side closing the connection ends the session: the driver releases every buffer
   and prepared model of it; that is also what happens when the client is SIGKILLed,
   because the kernel closes its socket. For the client, end-of-file means the driver died.

5. Run, the hot path, also travels here (the gRPC `IPreparedModel.Run` stays available and
   behaves the same): a binary packet `b"R" | u64 seq | u32 timeout ms (0 = none) |
   u32 think time µs | RunRequest protobuf` is answered by
   `b"R" | u64 seq | u8 flags | RunReply protobuf`. Runs are
   served concurrently, their replies may come in any order (matched by seq); the timeout
   is the run's deadline, after which the driver abandons it as it does at a gRPC
   deadline. The think time is how long the client took from its last Run reply to this
   request (NO_THINK_TIME: none yet): the driver polls for a client's next Run only while
   that is short, and cannot tell it from its own wake-up without being told. A request
   that does not fit in a packet goes over gRPC. Flag `REPLY_POLL` (1)
   says the driver answered this run at once on the channel's thread with no other session
   active: a client that runs this model again may poll for that reply rather than sleep
   (client/core/driver.py), since it comes sooner than a sleeping thread wakes.

6. `{"op": "cancel", "seq": s, "run": r}` → `{"seq": s, "returnCode": 0, "cancelled": bool}`:
   the Run of seq r in flight in this session is abandoned at the driver's next check
   between operators, as at its deadline (`cancelled`: whether one was in flight; a run that
   just finished is not an error). The Run is still answered (NNRT_TIME_OUT when abandoned,
   its result when it finished first), so the client knows when the driver is done with its
   buffers. An nnrt addition beyond HDI, for cancelled asynchronous runs.

7. `{"op": "mailbox", "seq": s}` with one fd attached → `{"seq": s, "returnCode": 0}`: the
   driver maps the client's Run mailbox (common/run_mailbox.py: a sealed memfd of
   `MAILBOX_BYTES`), where a polled Run's request and reply then travel while both sides
   poll, byte for byte these packets, with no system call. A driver that never polls
   (`--spin-us 0`) answers NNRT_OPERATION_FORBIDDEN; another fd, NNRT_INVALID_BUFFER; no fd,
   two, or a second mailbox, NNRT_INVALID_PARAMETER. The doorbell `b"M" | u64 seq` (both
   ways): from the client, "I stopped polling for Run s: answer on the socket"; the driver
   answers it with the Run's reply there, or echoes it when the reply is in the mailbox
   already ("look there"), or answers a seq that never came through the mailbox
   NNRT_INVALID_PARAMETER (server/channel_mailbox.py). An nnrt addition beyond HDI.

A malformed message gets `{"seq": s, "returnCode": 3}` (NNRT_INVALID_PARAMETER) and one log
line; fds attached to a message that takes none are closed, and so are those of a message
that cannot be parsed or answered, whatever the failure. A message is one flat JSON object:
one with more than `MAX_JSON_CONTAINERS` objects and arrays is refused before it is parsed,
so no nesting can drive the parser into deep recursion. Every packet is answered or
the session closed: a Run packet shorter than its header (whose seq cannot be read) gets
`{"seq": null, "returnCode": 3}`; an empty packet reads as end of file and ends the session.

Flow control (server/channel_server.py, channel_connection.py), so that no client can stall another:
- The driver never waits on a client. Each connection has a bounded outgoing queue
  (packets the socket did not take at once); a client that stops reading until the queue
  is full is dropped, its session ended as at a disconnect.
- At most `--max-runs-per-session` Runs of a session are in flight (default 64); one more is
  answered at once with `NNRT_DEVICE_BUSY` (14) and not queued.
- A driver started with `--allow-uid` / `--allow-gid` checks the connecting process's
  credentials (SO_PEERCRED, and SO_PEERGROUPS for its supplementary groups); a refused
  client gets `{"returnCode": -19, "reason": "..."}` (HDF_ERR_NOPERM) instead of a session,
  and the connection is closed.
- So does a uid that already has `--max-sessions-per-uid` sessions open (default 64, root
  included); a uid's sessions together hold at most `--max-uid-memory-mb` of shared memory
  (default: half the driver's budget), beyond which NNRT_OUT_OF_MEMORY.
- Replies carrying fds (fetch) that wait for a client's socket are bounded too (64): a
  client that fetches without reading is dropped before it makes the driver hold more.
"""

from __future__ import annotations

import array
import json
import os
import socket
import struct
from collections.abc import Sequence
from typing import Any

PROTOCOL_VERSION = 2  # 2: Run replies carry flags
MAX_PACKET = 65536
METADATA_KEY = "nnrt-session"
RUN = b"R"  # first byte of a Run packet (JSON messages start with "{")
RUN_REQUEST = struct.Struct("<QII")  # seq, timeout in ms, think time in µs
NO_THINK_TIME = 0xFFFFFFFF  # the client has no earlier reply to count from
RUN_REPLY = struct.Struct("<QB")  # seq, flags
REPLY_POLL = 1  # flag: answered at once, no other session active: poll for the next reply
# Objects and arrays ("{" and "[", counted in strings too) a JSON message may hold: ours hold
# one; the bound keeps json's recursive parser (and the encoder of an echoed value) far from
# the interpreter's recursion limit, which `[` * 60000 would otherwise reach.
MAX_JSON_CONTAINERS = 16


def encode_message(message: dict[str, Any]) -> bytes:
    """The packet of a JSON message."""
    return json.dumps(message, separators=(",", ":")).encode()


def send_packet(sock: socket.socket, data: bytes, fds: Sequence[int] = ()) -> None:
    """Send one packet, `fds` attached (SCM_RIGHTS). On a non-blocking socket a packet is
    sent whole or not at all (BlockingIOError): SOCK_SEQPACKET sends are atomic."""
    if fds:
        ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds).tobytes())]
        sock.sendmsg([data], ancillary)
    else:
        sock.send(data)


def send_message(sock: socket.socket, message: dict[str, Any], fds: Sequence[int] = ()) -> None:
    send_packet(sock, encode_message(message), fds)


_FD_SPACE = socket.CMSG_SPACE(16 * array.array("i").itemsize)  # up to 16 fds a packet
# Plain ints: an operation on socket's IntFlag members costs microseconds a packet.
_TRUNCATED = int(socket.MSG_TRUNC | socket.MSG_CTRUNC)
NOW = int(socket.MSG_DONTWAIT)
PEEK_NOW = int(socket.MSG_PEEK | socket.MSG_DONTWAIT)


def receive_into(sock: socket.socket, buffer: bytearray,
                 flags: int = 0) -> tuple[int | None, list[int]]:
    """(size, fds) of the next packet, read into `buffer` (MAX_PACKET bytes, the caller's
    alone: no fresh 64 KiB allocation per packet); (None, []) at end of file.

    Raises ValueError for a truncated packet (its fds already closed).
    """
    size, ancillary, msg_flags, _ = sock.recvmsg_into([buffer], _FD_SPACE, flags)
    if not ancillary and size and not msg_flags & _TRUNCATED:  # the common packet: no fds
        return size, []
    fds = array.array("i")
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - (len(payload) % fds.itemsize)])
    if not size and not fds:
        return None, []
    if msg_flags & _TRUNCATED:
        close_fds(list(fds))
        raise ValueError("truncated packet")
    return size, list(fds)


def receive_packet(sock: socket.socket,
                   buffer: bytearray | None = None) -> tuple[bytes | None, list[int]]:
    """(bytes, fds) of the next packet; (None, []) at end of file; ValueError for a
    truncated packet. `buffer`: as for `receive_into`."""
    if buffer is None:
        buffer = bytearray(MAX_PACKET)
    size, fds = receive_into(sock, buffer)
    return (None, []) if size is None else (bytes(memoryview(buffer)[:size]), fds)


def parse_message(data: bytes, fds: Sequence[int] = ()) -> dict[str, Any]:
    """The JSON object of a packet; ValueError for anything else, whatever the parser raised
    (`fds` closed on every failure: the packet's sender must not pin them in this process)."""
    try:
        containers = data.count(b"{") + data.count(b"[")
        if containers > MAX_JSON_CONTAINERS:
            raise ValueError(f"{containers} JSON objects or arrays, more than the "
                             f"{MAX_JSON_CONTAINERS} a message may hold")
        message = json.loads(data)
        if not isinstance(message, dict):
            raise ValueError("not a JSON object")
    except BaseException as exc:
        close_fds(fds)
        if isinstance(exc, ValueError) or not isinstance(exc, Exception):
            raise
        raise ValueError(f"unparsable ({type(exc).__name__}: {exc})") from exc
    return message


def receive_message(sock: socket.socket) -> tuple[dict[str, Any] | None, list[int]]:
    """(message, fds) of the next packet, which must be a JSON object; (None, []) at EOF."""
    data, fds = receive_packet(sock)
    if data is None:
        return None, []
    return parse_message(data, fds), fds


def close_fds(fds: Sequence[int]) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass
