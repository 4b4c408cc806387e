"""A session's Run mailbox on the driver's side (common/run_mailbox.py): which request came
through it, and whether its reply goes there or, once the client rang the doorbell, to the
socket.

The channel's thread takes requests from the mailbox only while it polls for that session
(channel_server.SessionChannelServer._spin); the reply of a request taken there is posted
there, whichever thread computes it, unless the client has stopped polling and said so on the
socket (`DOORBELL`): then it goes to the socket, as any reply. The lock makes "posted" and
"rang" exclusive, so a reply is delivered exactly once, on the side the client watches.
"""

from __future__ import annotations

import enum
import logging
import threading
from typing import TYPE_CHECKING, Any

from nnrt.common import session_channel as channel
from nnrt.common.errors import (
    NNRT_INVALID_BUFFER,
    NNRT_INVALID_PARAMETER,
    NNRT_OPERATION_FORBIDDEN,
    NNRT_SUCCESS,
    DriverError,
)
from nnrt.common.run_mailbox import SLOT_BYTES, SUPPORTED, MailboxRefused, RunMailbox

if TYPE_CHECKING:
    from nnrt.server.channel_connection import Connection

log = logging.getLogger(__name__)


class Doorbell(enum.Enum):
    """What a doorbell for a seq finds."""

    POSTED = "posted"  # the reply is in the mailbox already: tell the client to look there
    PENDING = "pending"  # taken and still running: its reply will go to the socket
    WAITING = "waiting"  # posted, never taken (the driver stopped polling): take it now
    UNKNOWN = "unknown"  # no such request came through the mailbox


class ConnectionMailbox:
    """The mailbox of one connection and the fate of the Run that came through it."""

    def __init__(self, mailbox: RunMailbox) -> None:
        self.mailbox = mailbox
        self._lock = threading.Lock()
        self._posted = 0  # seq whose reply is in the mailbox
        self._rang = 0  # seq whose client sleeps on the socket (rang the doorbell)
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def post_reply(self, seq: int, packet: bytes) -> bool:
        """Post the reply to request `seq` when that request came through the mailbox and its
        client still polls: True; False: send it on the socket."""
        if seq != self.mailbox.taken or len(packet) > SLOT_BYTES:
            return False
        with self._lock:
            if self._closed or self._rang == seq:
                return False
            self.mailbox.put_reply(seq, packet)
            self._posted = seq
            return True

    def ring(self, seq: int) -> Doorbell:
        """The client of `seq` stopped polling and sleeps on the socket."""
        with self._lock:
            if self._closed:
                return Doorbell.UNKNOWN
            if self._posted and seq <= self._posted:  # (or one before it, whose client
                return Doorbell.POSTED  # took its reply as it rang, and posted the next)
            if seq == self.mailbox.taken:
                self._rang = seq
                return Doorbell.PENDING
            if seq == self.mailbox.posted():
                self._rang = seq
                return Doorbell.WAITING
            return Doorbell.UNKNOWN

    def close(self) -> None:
        """Unmap (the session ended); a reply still computing then goes to the socket."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self.mailbox.close_window()
            self.mailbox.close()


def open_mailbox(connection: Connection, seq: Any, fds: list[int], polls: bool) -> dict[str, Any]:
    """Session-channel op "mailbox": adopt the client's mailbox fd (closed here in every
    case: the mapping keeps the memory). NNRT_OPERATION_FORBIDDEN where the driver never
    polls (--spin-us 0) or the machine's memory model does not allow it; one per session."""
    try:
        if not SUPPORTED or not polls:
            raise DriverError(NNRT_OPERATION_FORBIDDEN, "this driver never polls for a Run "
                              "(--spin-us 0, or a CPU whose memory model the mailbox cannot use)")
        if len(fds) != 1:
            raise DriverError(NNRT_INVALID_PARAMETER, f"mailbox needs one fd, got {len(fds)}")
        if connection.mailbox is not None:
            raise DriverError(NNRT_INVALID_PARAMETER, "the session has its mailbox already")
        try:
            connection.mailbox = ConnectionMailbox(RunMailbox.adopt(fds[0]))
            connection.session.run_mailbox = True
        except MailboxRefused as exc:
            raise DriverError(NNRT_INVALID_BUFFER, f"mailbox fd refused: {exc}") from None
        log.debug("session %d: Run mailbox mapped", connection.session.id)
        return {"seq": seq, "returnCode": NNRT_SUCCESS}
    except DriverError as exc:
        log.warning("session %d: mailbox refused: %s", connection.session.id, exc)
        return {"seq": seq, "returnCode": exc.code}
    finally:
        channel.close_fds(fds)
