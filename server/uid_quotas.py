"""Per-uid quotas of the session channel.

Each peer uid (SO_PEERCRED) is one principal, whatever its processes and sessions
(`UidLedger`): at most `--max-sessions-per-uid` sessions open at once (64 by default; one
more is refused at the door with HDF_ERR_NOPERM and the reason, logged at WARNING at most
every 10 s, server/channel_server.py), and its sessions' shared memory together within
`--max-uid-memory-mb` (half the driver's shared-memory budget by default: no user can take
what the others need; beyond, NNRT_OUT_OF_MEMORY). Root is a uid like any other.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from nnrt.server.buffers import MIB, BufferTable, process_budget
from nnrt.common.errors import NNRT_OUT_OF_MEMORY, DriverError


DEFAULT_MAX_SESSIONS_PER_UID = 64  # sessions one uid may have open; one more is refused
UID_MEMORY_FRACTION = 0.5  # of the driver's shared-memory budget: one uid's default share


def default_uid_memory_limit() -> int:
    """One uid's default share: half the driver's shared-memory budget (as configured), so
    that however many sessions one user opens, the other users find the other half."""
    return int(process_budget().driver_limit * UID_MEMORY_FRACTION)


def format_mib(nbytes: int) -> str:
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
            f"a region of {format_mib(nbytes)} exceeds uid {uid}'s share of the driver's "
            f"shared-memory budget: its {self.sessions(uid)} session(s) hold {format_mib(held)} of "
            f"{format_mib(self.memory_limit)} (--max-uid-memory-mb)")


class UidShare:
    """The budget a session's BufferTable charges: its uid's share (`UidLedger.charge`)."""

    __slots__ = ("ledger", "uid")

    def __init__(self, ledger: UidLedger, uid: int) -> None:
        self.ledger = ledger
        self.uid = uid

    def charge(self, table: BufferTable, nbytes: int) -> Callable[[], None]:
        return self.ledger.charge(self.uid, table, nbytes)


