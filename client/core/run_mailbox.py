"""A session's Run mailbox on the client's side (common/run_mailbox.py): a polled Run posted
in shared memory and its reply polled there, with no system call while the driver polls too.

`DriverClient.run_reply` (driver.py) posts a Run here only when it would poll for the reply
anyway (a quick model, a CPU spare, the driver just answered) and the driver says it polls
the mailbox now; otherwise, and for a packet too big for the mailbox, the socket. When its
polling window ends without the reply it rings the doorbell on the socket, and the reply (or
the driver's word that it is in the mailbox) comes there: the caller's ordinary wait.

NNRT_RUN_MAILBOX=0 keeps every Run on the socket (1, the default: the mailbox where the
driver and the CPU allow it).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Sequence

from nnrt.common import session_channel as channel
from nnrt.common.errors import NNRT_SUCCESS
from nnrt.common.run_mailbox import (DOORBELL, DOORBELL_PACKET, SLOT_BYTES, SUPPORTED,
                                     RunMailbox)

log = logging.getLogger(__name__)

MAILBOX_ENV = "NNRT_RUN_MAILBOX"
_LOOKS = 32  # looks at the reply's seq between two looks at the clock (a yield with it)


def mailbox_wanted() -> bool:
    """NNRT_RUN_MAILBOX: "1" (default) or "0"; anything else is warned of and taken as 1.
    False on a CPU whose memory model the mailbox cannot use."""
    text = os.environ.get(MAILBOX_ENV, "").strip()
    if text not in ("", "0", "1"):
        log.warning("%s=%r is neither 0 nor 1: 1 used", MAILBOX_ENV, text)
    return SUPPORTED and text != "0"


class ClientMailbox:
    """The client's end of a session's mailbox: post a Run, poll for its reply, ring."""

    def __init__(self, mailbox: RunMailbox) -> None:
        self._mailbox = mailbox

    @classmethod
    def open(cls, request: Callable[[dict, Sequence[int]], tuple[dict, list[int]]],
             driver: str) -> ClientMailbox | None:
        """A new mailbox handed to the driver through `request` (the session's message and
        its reply: DriverClient._session_request); None where it cannot be made, or the
        driver declines it (--spin-us 0) or does not know it (an older driver): every Run
        then goes on the socket. DriverGone from `request` goes through."""
        try:
            mailbox, fd = RunMailbox.create()
        except OSError as exc:
            log.debug("no Run mailbox: %s", exc)
            return None
        try:
            try:
                reply, fds = request({"op": "mailbox"}, [fd])
            finally:
                os.close(fd)
            channel.close_fds(fds)
        except BaseException:
            mailbox.close()
            raise
        if reply.get("returnCode") == NNRT_SUCCESS:
            return cls(mailbox)
        log.debug("driver %s keeps Runs on the socket (mailbox: returnCode %s)", driver,
                  reply.get("returnCode"))
        mailbox.close()
        return None

    def takes(self, packet: bytes) -> bool:
        """Whether `packet` may go through the mailbox now: it fits, and the driver polls."""
        return len(packet) <= SLOT_BYTES and self._mailbox.driver_polls()

    def post_and_poll(self, sock, seq: int, packet: bytes, until: float,
                      dead: threading.Event) -> bytes | None:
        """Post Run `seq` and poll for its reply until `until` (time.monotonic) or the
        session's death: the reply packet; None once the doorbell rang (the reply then comes
        on `sock`). OSError when the doorbell cannot be sent (the driver is gone)."""
        mailbox = self._mailbox
        mailbox.put_request(seq, packet)
        replied, clock = mailbox.replied, time.monotonic
        looks = 0
        while not replied(seq):
            looks += 1
            if looks == _LOOKS:
                looks = 0
                if clock() >= until or dead.is_set():
                    break
                os.sched_yield()  # a peer sharing this CPU (it is not spare after all)
        else:
            return mailbox.reply(seq)
        sock.send(DOORBELL + DOORBELL_PACKET.pack(seq))
        return mailbox.reply(seq)  # answered as it rang: the driver's echo is then dropped

    def reply(self, seq: int) -> bytes | None:
        """The reply to Run `seq` in the mailbox (the driver's echo said so), or None."""
        return self._mailbox.reply(seq)

    def close(self) -> None:
        self._mailbox.close()
