"""Client sessions: the resources a client owns, and the channel whose lifetime is theirs.

A session is born when a client connects to `<name>.session` and dies when that connection
closes, for whatever reason (clean close, client crash, SIGKILL). Its buffers and prepared
models die with it. See server/session_channel.py for the wire protocol.
"""

from __future__ import annotations

import itertools
import logging
import os
import secrets
import selectors
import socket
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nnrt.protos import hdi_pb2 as pb
from nnrt.server import session_channel as channel
from nnrt.server.buffers import BufferTable, SharedRegion
from nnrt.server.device import PreparedModel
from nnrt.server.errors import (
    NNRT_FAILED,
    NNRT_INVALID_MODEL,
    NNRT_INVALID_PARAMETER,
    NNRT_OPERATION_FORBIDDEN,
    NNRT_SUCCESS,
    DriverError,
)

log = logging.getLogger(__name__)


@dataclass(eq=False)
class PreparedEntry:
    """A prepared model with what the host precomputed for validating its runs."""

    model: PreparedModel
    min_dims: list[list[int]]
    max_dims: list[list[int]]
    static_output_shapes: list[tuple[int, ...]] | None
    cache: list[int] = field(default_factory=list)  # buffer ids of exported cache blobs


class Session:
    def __init__(self, session_id: int, token: str, peer_pid: int | None) -> None:
        self.id = session_id
        self.token = token
        self.peer_pid = peer_pid
        self.buffers = BufferTable()
        self._prepared: dict[int, PreparedEntry] = {}
        self._next_model_id = itertools.count(1)
        self._lock = threading.Lock()
        self.closed = False

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
        if entry is None:
            raise DriverError(
                NNRT_INVALID_MODEL, f"unknown prepared model {model_id} in this session"
            )
        self._close_entry(entry)

    def prepared_count(self) -> int:
        return len(self._prepared)

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

    def close(self) -> tuple[int, int]:
        """Free everything; returns (prepared models, buffers) freed."""
        with self._lock:
            self.closed = True
            entries = list(self._prepared.values())
            self._prepared.clear()
        for entry in entries:
            self._close_entry(entry)
        return len(entries), self.buffers.close()


class SessionRegistry:
    def __init__(self) -> None:
        self._by_token: dict[str, Session] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def open(self, peer_pid: int | None) -> Session:
        session = Session(next(self._ids), secrets.token_hex(16), peer_pid)
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


# Serves one Run packet of a session: (session, RunRequest bytes, deadline) -> RunReply bytes.
RunHandler = Callable[[Session, bytes, "float | None"], bytes]


class _Connection:
    """A session's socket, closed only once no Run is still answering on it (so a reply
    can never go to a reused fd number)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.runs = 0
        self.ended = False
        self.lock = threading.Lock()

    def begin_run(self) -> bool:
        with self.lock:
            if self.ended:
                return False
            self.runs += 1
            return True

    def end_run(self) -> None:
        with self.lock:
            self.runs -= 1
            close = self.ended and self.runs == 0
        if close:
            self.sock.close()

    def end(self) -> None:
        with self.lock:
            self.ended = True
            close = self.runs == 0
        if close:
            self.sock.close()


class SessionChannelServer:
    """Accepts session connections and answers fetch/import on one thread (a selector);
    Run packets go to a pool of workers."""

    def __init__(self, path: Path, registry: SessionRegistry, run_handler: RunHandler,
                 workers: int = 32) -> None:
        self.path = path
        self.registry = registry
        self._run_handler = run_handler
        self._workers = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="run")
        self._runs = 0
        self._runs_done = threading.Condition()
        self._intake_closed = False
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._listener.bind(str(path))
        self._listener.listen(64)
        self._listener.setblocking(False)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listener, selectors.EVENT_READ, None)
        self._wake_r, self._wake_w = os.pipe()
        self._selector.register(self._wake_r, selectors.EVENT_READ, "wake")
        self._stopping = False
        self._thread = threading.Thread(target=self._loop, name="session-channel", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close_intake(self) -> None:
        """Refuse new Runs (NNRT_OPERATION_FORBIDDEN); the ones in flight go on."""
        self._intake_closed = True

    def stop(self, grace: float = 10.0) -> None:
        """Refuse new Runs, let those in flight finish (up to `grace` s), then end every
        session and close the socket (the caller unlinks it)."""
        self.close_intake()
        deadline = time.monotonic() + grace
        with self._runs_done:
            while self._runs and (left := deadline - time.monotonic()) > 0:
                self._runs_done.wait(left)
            if self._runs:
                log.warning("%d run(s) still in flight after %.1f s: ending their sessions",
                            self._runs, grace)
        self._stopping = True
        os.write(self._wake_w, b"x")
        self._thread.join(timeout=10)
        self._workers.shutdown(wait=False, cancel_futures=True)

    def _loop(self) -> None:
        while not self._stopping:
            for key, _ in self._selector.select():
                if key.data == "wake":
                    continue
                if key.data is None:
                    self._accept()
                else:
                    self._serve(key.fileobj, key.data[0])
        for key in list(self._selector.get_map().values()):
            if isinstance(key.data, tuple):
                self._end(key.fileobj, key.data[0])
        self._selector.close()
        self._listener.close()
        os.close(self._wake_r)
        os.close(self._wake_w)

    def _accept(self) -> None:
        try:
            conn, _ = self._listener.accept()
        except BlockingIOError:
            return
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
        peer_pid = int.from_bytes(creds[:4], "little")
        session = self.registry.open(peer_pid)
        try:
            conn.setblocking(True)
            conn.settimeout(5.0)  # a client that stops reading must not stall this thread
            channel.send_message(
                conn,
                {"protocol": channel.PROTOCOL_VERSION, "session": session.token,
                 "sessionId": session.id},
            )
        except OSError:
            conn.close()
            self.registry.close(session)
            return
        self._selector.register(conn, selectors.EVENT_READ, (session, _Connection(conn)))
        log.info("session %d opened by pid %d", session.id, peer_pid)

    def _end(self, conn: socket.socket, session: Session) -> None:
        _, connection = self._selector.get_key(conn).data
        self._selector.unregister(conn)
        connection.end()
        self.registry.close(session)

    def _serve(self, conn: socket.socket, session: Session) -> None:
        try:
            data, fds = channel.receive_packet(conn)
            message = None
            if data is not None and not data.startswith(channel.RUN):
                message = channel.parse_message(data, fds)
        except ValueError as exc:
            log.warning("session %d: malformed session-channel message: %s", session.id, exc)
            self._reply(conn, session, {"seq": None, "returnCode": NNRT_INVALID_PARAMETER})
            return
        except OSError:
            data, fds = None, []
        if data is None:
            self._end(conn, session)
            return
        if message is None:
            channel.close_fds(fds)
            self._start_run(conn, session, data)
            return
        reply, out_fds = self._handle(session, message, fds)
        self._reply(conn, session, reply, out_fds)

    def _start_run(self, conn: socket.socket, session: Session, data: bytes) -> None:
        header = channel.RUN_REQUEST
        if len(data) < 1 + header.size:
            log.warning("session %d: truncated Run packet", session.id)
            return
        seq, timeout_ms = header.unpack_from(data, 1)
        deadline = time.monotonic() + timeout_ms / 1000 if timeout_ms else None
        _, connection = self._selector.get_key(conn).data
        if self._intake_closed or not connection.begin_run():
            log.warning("session %d: Run refused: the driver is stopping", session.id)
            refused = pb.RunReply(returnCode=NNRT_OPERATION_FORBIDDEN).SerializeToString()
            self._send_run_reply(connection, seq, refused)
            return
        with self._runs_done:
            self._runs += 1
        self._workers.submit(self._run, connection, session, seq, deadline,
                             data[1 + header.size:])

    def _run(self, connection: _Connection, session: Session, seq: int, deadline: float | None,
             payload: bytes) -> None:
        try:
            self._send_run_reply(connection, seq, self._run_handler(session, payload, deadline))
        finally:
            connection.end_run()
            with self._runs_done:
                self._runs -= 1
                self._runs_done.notify_all()

    @staticmethod
    def _send_run_reply(connection: _Connection, seq: int, reply: bytes) -> None:
        try:
            connection.sock.send(channel.RUN + channel.RUN_REPLY.pack(seq) + reply)
        except OSError:
            pass  # the client went away: its session ends (or has ended) on its own

    def _reply(self, conn: socket.socket, session: Session, reply: dict[str, Any],
               fds: Sequence[int] = ()) -> None:
        try:
            channel.send_message(conn, reply, fds)
        except OSError as exc:
            log.warning("session %d: cannot answer on the session channel: %s", session.id, exc)
            self._end(conn, session)
        finally:
            channel.close_fds(fds)  # our duplicates; the client has its own now

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
                # A duplicate, so that a concurrent ReleaseBuffer cannot close the fd under us.
                with session.buffers.borrow([buffer_id]) as (region,):
                    fd = os.dup(region.fd)
                return {"seq": seq, "returnCode": NNRT_SUCCESS}, [fd]
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
        except Exception:  # this thread serves every session: it must survive any request
            log.exception("session %d: %s failed unexpectedly", session.id, op)
            return {"seq": seq, "returnCode": NNRT_FAILED}, []
