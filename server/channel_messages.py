"""The session channel's JSON messages (common/session_channel.py items 2, 3 and 6): a
buffer's fd fetched, a client's memfd imported, a Run cancelled, and the replies to them.
The channel's thread (channel_server.py) calls these; Run packets are not here.
"""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Sequence
from typing import Any

from nnrt.common import session_channel as channel
from nnrt.common.errors import (
    NNRT_FAILED,
    NNRT_INVALID_PARAMETER,
    NNRT_OUT_OF_MEMORY,
    NNRT_SUCCESS,
    DriverError,
)
from nnrt.server.buffers import SharedRegion
from nnrt.server.channel_connection import Connection
from nnrt.server.sessions import Session

# The channel's log lines keep the one logger name operators filter by.
log = logging.getLogger("nnrt.server.channel_server")


def send_reply(connection: Connection, reply: dict[str, Any], fds: Sequence[int] = ()) -> None:
    """Send a JSON reply with `fds` (ours: duplicates made for it) attached; they are
    closed whatever happens to the reply (`Connection.send` from its hand-over on)."""
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

def cancel_run(connection: Connection, message: dict[str, Any]) -> dict[str, Any]:
    seq, run = message.get("seq"), message.get("run")
    if not isinstance(run, int) or isinstance(run, bool) or not 0 <= run < 1 << 64:
        log.warning("session %d: cancel refused: NNRT_INVALID_PARAMETER: run must be the "
                    "seq of a Run (an integer), not %r", connection.session.id, run)
        return {"seq": seq, "returnCode": NNRT_INVALID_PARAMETER}
    cancelled = connection.cancel(run)
    if cancelled:
        log.info("session %d: Run %d cancelled by its client", connection.session.id, run)
    return {"seq": seq, "returnCode": NNRT_SUCCESS, "cancelled": cancelled}


def handle_message(session: Session, message: dict[str, Any],
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
            # closed if the borrow's end fails after it was made (`send_reply` owns it after).
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
