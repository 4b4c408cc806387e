"""Shared-memory regions of a session: memfds mapped once, checked on every use.

A region is either allocated here (AllocateBuffer: a memfd sealed against shrinking, so a
client can never make the driver's mapping fault) or adopted from a client's fd (the
session channel's `import`, for OH_NNTensor_CreateWithFd); an adopted fd must be a memfd
that can be sealed against shrinking, for the same reason. Regions are named on the wire
by a session-scoped id; every use is bounds-checked against the real size.

Runs borrow regions (`BufferTable.borrow`); ReleaseBuffer removes a region from the table
at once and unmaps it when the last borrower is done, so a release racing a Run can
neither fail the Run nor leak the mapping.

Budgets (`SharedMemoryBudget`): every region a session registers, whichever way it came
(AllocateBuffer, the channel's `import`, exported model caches), is charged to its session
and to the driver at `BufferTable.add`, the one door every region passes, and given back when
the region is unmapped (not when it leaves the table: a borrowed region is still mapped).
What a request makes the driver hold outside the regions is charged to the same budgets
(`BufferTable.charge`): a prepared model's constants and descriptors, the cache or offline
blobs it was built from, for the model's life (server/servicers.py).
Beyond either limit the region is refused with NNRT_OUT_OF_MEMORY and the sizes; what is
held keeps working. The limits are the process's (one driver per process), set once at start
by `configure_budget` from the driver's options; the defaults are a fraction of physical
memory, or of the cgroup's memory limit when the process runs under a lower one (v2
`memory.max`, v1 `memory.limit_in_bytes`: a container, a unit with `MemoryMax=`;
hdi/memory_limits.py). Only what the driver maps is counted: a client's own pages
are the client's, and a memfd shared by both is counted once, here.
"""

from __future__ import annotations

import ctypes
import fcntl
import logging
import mmap
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import numpy as np

from nnrt.common.errors import (
    NNRT_INVALID_BUFFER,
    NNRT_INVALID_BUFFER_SIZE,
    NNRT_INVALID_PARAMETER,
    NNRT_OPERATION_FORBIDDEN,
    NNRT_OUT_OF_MEMORY,
    DriverError,
)
from nnrt.hdi.memory_limits import (
    MAX_REGION_BYTES,
    MIB,
    default_driver_limit,
    default_session_limit,
    memory_basis,
)
from nnrt.hdi.regions import notify_unmap

log = logging.getLogger(__name__)

def _size(nbytes: int) -> str:
    return f"{nbytes} bytes ({nbytes / MIB:.1f} MiB)"


class SharedMemoryBudget:
    """Shared-memory bytes held by the driver and by each session, against two limits."""

    def __init__(self, driver_limit: int | None = None,
                 session_limit: int | None = None) -> None:
        self.driver_limit = default_driver_limit() if driver_limit is None else driver_limit
        self.session_limit = (default_session_limit(self.driver_limit) if session_limit is None
                              else session_limit)
        self.used = 0
        self._lock = threading.Lock()

    def charge(self, table: BufferTable, nbytes: int) -> Callable[[], None]:
        """Count `nbytes` against the table's session and the driver; returns the function
        that gives them back (once). DriverError(NNRT_OUT_OF_MEMORY) when over a limit."""
        with self._lock:
            if table.charged + nbytes > self.session_limit:
                raise DriverError(
                    NNRT_OUT_OF_MEMORY,
                    f"a region of {_size(nbytes)} exceeds the session's shared-memory budget: "
                    f"it holds {_size(table.charged)} of {_size(self.session_limit)} "
                    "(--max-session-memory-mb)")
            if self.used + nbytes > self.driver_limit:
                raise DriverError(
                    NNRT_OUT_OF_MEMORY,
                    f"a region of {_size(nbytes)} exceeds the driver's shared-memory budget: "
                    f"its sessions hold {_size(self.used)} of {_size(self.driver_limit)} "
                    "(--max-driver-memory-mb)")
            table.charged += nbytes
            self.used += nbytes
        given_back = False

        def uncharge() -> None:
            nonlocal given_back
            with self._lock:
                if given_back:
                    return
                given_back = True
                table.charged -= nbytes
                self.used -= nbytes

        return uncharge


_budget = SharedMemoryBudget()


def configure_budget(driver_limit: int | None = None,
                     session_limit: int | None = None) -> SharedMemoryBudget:
    """Set the process's budgets (at driver start, before any session); None: the default."""
    global _budget
    _budget = SharedMemoryBudget(driver_limit, session_limit)
    basis = ""
    if driver_limit is None:
        nbytes, what = memory_basis()
        basis = f" (default: half of {what}, {_size(nbytes)})"
    log.info("shared-memory budgets: %s per driver%s, %s per session",
             _size(_budget.driver_limit), basis, _size(_budget.session_limit))
    return _budget


def process_budget() -> SharedMemoryBudget:
    return _budget


class SharedRegion:
    """One mapped region and its fd (kept to hand out over the session channel)."""

    def __init__(self, fd: int, size: int, origin: str) -> None:
        self.fd = fd
        self.size = size
        self.origin = origin  # "allocated" or "imported", for logs
        self._map = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        self._readonly = memoryview(self._map).toreadonly()  # inputs are viewed through it
        self.address = ctypes.addressof(ctypes.c_char.from_buffer(self._map))
        self._borrowers = 0  # guarded by the owning BufferTable's lock
        self._released = False
        self.on_close: Callable[[], None] | None = None  # called once, when it is closed
        self._uncharge: Callable[[], None] | None = None  # gives its bytes back to the budget

    @classmethod
    def allocate(cls, length: int) -> SharedRegion:
        if length <= 0:
            raise DriverError(NNRT_INVALID_PARAMETER, "AllocateBuffer length must be > 0")
        if length > MAX_REGION_BYTES:
            raise DriverError(
                NNRT_OUT_OF_MEMORY, f"AllocateBuffer {length} bytes exceeds {MAX_REGION_BYTES}"
            )
        fd = os.memfd_create("nnrt-buffer", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        try:
            os.ftruncate(fd, length)
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK)
            return cls(fd, length, "allocated")
        except OSError as exc:
            os.close(fd)
            raise DriverError(NNRT_OUT_OF_MEMORY, f"cannot create {length}-byte region: {exc}")

    @classmethod
    def adopt(cls, fd: int) -> SharedRegion:
        """Take ownership of a client's fd (closed here on any failure)."""
        try:
            try:
                seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
            except OSError:
                raise DriverError(NNRT_INVALID_BUFFER, "registered fd is not a sealable memfd")
            if not seals & fcntl.F_SEAL_SHRINK:
                try:
                    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK)
                except OSError:
                    raise DriverError(
                        NNRT_INVALID_BUFFER, "registered memfd cannot be sealed against shrinking"
                    )
            size = os.fstat(fd).st_size
            if size <= 0:
                raise DriverError(NNRT_INVALID_BUFFER_SIZE, "registered memfd is empty")
            if size > MAX_REGION_BYTES:
                raise DriverError(NNRT_OUT_OF_MEMORY, f"registered memfd of {size} bytes is too big")
            try:
                return cls(fd, size, "imported")
            except OSError as exc:  # e.g. a write-sealed or read-only memfd
                raise DriverError(NNRT_INVALID_BUFFER, f"registered memfd cannot be mapped: {exc}")
        except BaseException:
            os.close(fd)
            raise

    def array(self, offset: int, dtype: np.dtype, count: int) -> np.ndarray:
        """A writable numpy view of `count` elements at `offset` (bounds already checked)."""
        return np.frombuffer(self._map, dtype=dtype, count=count, offset=offset)

    def readonly_array(self, offset: int, dtype: np.dtype, count: int) -> np.ndarray:
        """A read-only numpy view (what kernels get as inputs: they must not write there)."""
        return np.frombuffer(self._readonly, dtype=dtype, count=count, offset=offset)

    def read(self, offset: int, length: int) -> bytes:
        return self._map[offset : offset + length]

    def release(self, lock: threading.Lock) -> None:
        """Unmap and close now, or when the last borrower gives it back (`lock`: the table's)."""
        with lock:
            if self._released:
                return
            self._released = True
            close_now = self._borrowers == 0
        if close_now:
            self._close()

    def _close(self) -> None:
        notify_unmap(self.address, self.size)
        try:
            self._readonly.release()
            self._map.close()
        except BufferError:
            # A numpy view is still alive somewhere; the mapping goes with the last view.
            log.warning("region of %d bytes still viewed at release; unmapped later", self.size)
        os.close(self.fd)
        if self._uncharge is not None:
            self._uncharge()
        if self.on_close is not None:
            self.on_close()


class BufferTable:
    """The regions of one session, by id. Ids start at 1; 0 means "no buffer"."""

    def __init__(self, budget: SharedMemoryBudget | None = None) -> None:
        self._regions: dict[int, SharedRegion] = {}
        self._next_id = 1
        self._lock = threading.Lock()
        self._closed = False
        self._budget = budget  # None: the process's, as configured when the table is used
        self.charged = 0  # bytes of this session's regions still mapped; the budget's lock

    def add(self, region: SharedRegion) -> int:
        """Register a region, charged to the budget; released at once (and the error
        raised) if the session ended meanwhile or the region is over budget."""
        refusal = None
        with self._lock:
            if self._closed:
                refusal = DriverError(NNRT_OPERATION_FORBIDDEN, "the session has ended")
            else:
                try:
                    region._uncharge = (self._budget or _budget).charge(self, region.size)
                except DriverError as exc:
                    refusal = exc
                else:
                    buffer_id = self._next_id
                    self._next_id += 1
                    self._regions[buffer_id] = region
        if refusal is not None:
            region.release(self._lock)
            raise refusal
        return buffer_id

    def charge(self, nbytes: int) -> Callable[[], None]:
        """Count `nbytes` the driver holds for this session outside its regions (what a
        prepared model copied out of them, its descriptors) against the same budgets as its
        regions; returns the function that gives them back (once).
        DriverError(NNRT_OUT_OF_MEMORY) when over a limit."""
        return (self._budget or _budget).charge(self, nbytes)

    def get(self, buffer_id: int) -> SharedRegion:
        region = self._regions.get(buffer_id)
        if region is None:
            raise DriverError(NNRT_INVALID_BUFFER, f"unknown buffer id {buffer_id} in this session")
        return region

    def remove(self, buffer_id: int) -> None:
        with self._lock:
            region = self._regions.pop(buffer_id, None)
        if region is None:
            raise DriverError(NNRT_INVALID_BUFFER, f"unknown buffer id {buffer_id} in this session")
        region.release(self._lock)

    def total_bytes(self) -> int:
        return sum(r.size for r in list(self._regions.values()))

    def __len__(self) -> int:
        return len(self._regions)

    def take(self, buffer_ids: Sequence[int]) -> list[SharedRegion]:
        """The regions of these ids, kept mapped until `give_back(regions)` — which the
        caller must call once, in a `finally` (`borrow` is the same as a block). A plain
        pair, not a generator: the one-frame Run (server/runner.py) borrows on every run."""
        with self._lock:  # also guards every region's borrower count
            regions = []
            for buffer_id in buffer_ids:
                region = self._regions.get(buffer_id)
                if region is None:
                    raise DriverError(
                        NNRT_INVALID_BUFFER, f"unknown buffer id {buffer_id} in this session"
                    )
                regions.append(region)
            for region in regions:
                region._borrowers += 1
        return regions

    def give_back(self, regions: list[SharedRegion]) -> None:
        """End a `take`: a region released meanwhile is unmapped by its last borrower."""
        closing = None
        with self._lock:
            for region in regions:
                region._borrowers -= 1
                if region._released and region._borrowers == 0:
                    if closing is None:
                        closing = set()
                    closing.add(region)
        if closing:
            for region in closing:
                region._close()

    @contextmanager
    def borrow(self, buffer_ids: Sequence[int]) -> Iterator[list[SharedRegion]]:
        """The regions of these ids, kept mapped until the block ends."""
        regions = self.take(buffer_ids)
        try:
            yield regions
        finally:
            self.give_back(regions)

    def close(self) -> int:
        """Release every region (session end); returns how many there were."""
        with self._lock:
            self._closed = True
            regions = list(self._regions.values())
            self._regions.clear()
        for region in regions:
            region.release(self._lock)
        return len(regions)
