"""Client sessions: the resources a client owns, and their lifetime.

A session is born when a client connects to `<name>.session` and dies when that connection
closes, for whatever reason (clean close, client crash, SIGKILL). Its buffers and prepared
models die with it. See common/session_channel.py for the wire protocol, and
server/channel_server.py for the channel whose lifetime is the session's.
"""

from __future__ import annotations

import ctypes
import itertools
import logging
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from nnrt.server.buffers import BufferTable
from nnrt.hdi.device import PreparedModel
from nnrt.common.errors import (
    NNRT_INVALID_MODEL,
    NNRT_INVALID_PARAMETER,
    DriverError,
)
from nnrt.server.uid_quotas import UidShare

if TYPE_CHECKING:
    from nnrt.server.execution import CheckedRequest  # execution imports this module

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
        # (runner._known), so that the run of the packet the estimate looked at does
        # not look it up again.
        self.known_run: tuple[bytes, PreparedEntry, CheckedRequest] | None = None
        self.run_mailbox = False  # its client handed it a Run mailbox (server/channel_mailbox.py)
        self.mailbox_runs = 0  # Runs that came through it (the channel's thread counts them)

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


