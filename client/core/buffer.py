"""Buffers: shared memory the client and a driver both map (one memfd, no byte copied through
a message). A `SharedMemory` is the client's mapping of one driver buffer; it stays valid as
long as the client keeps it, whatever happens to the driver, and after a driver restart its
memfd is registered with the new session on first use (`buffer_in`), so bytes written
before the crash are what the new driver sees.
"""

from __future__ import annotations

import logging
import mmap
import os
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from nnrt.common.errors import NNRT_SUCCESS, code_name
from nnrt.protos import hdi_types_pb2 as ht

from .errors import DriverGone, OutOfMemory

if TYPE_CHECKING:
    from .driver import DriverClient

log = logging.getLogger(__name__)


class BufferNotShared(RuntimeError):
    """A driver refused to take a memfd into its session (`code`: its return code)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"{message}: {code}")
        self.code = code


class SharedMemory:
    """The client's mapping of one driver buffer (`bufferId` in this session)."""

    def __init__(self, buffer_id: int, fd: int, size: int) -> None:
        self.buffer_id = buffer_id
        self.fd = fd
        self.size = size
        self._map = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        self.closed = False
        # The session `buffer_id` belongs to (set by the DriverClient that made this memory;
        # None: unknown), and the ids of the same pages registered in later sessions.
        self.client: DriverClient | None = None
        self._elsewhere: dict[DriverClient, tuple[int, int]] = {}
        self._elsewhere_lock = threading.Lock()
        self._given_back = False  # release_in_sessions ran

    def view(self, offset: int = 0, length: int | None = None) -> memoryview:
        """A writable view of the shared pages themselves (no copy)."""
        end = self.size if length is None else offset + length
        return memoryview(self._map)[offset:end]

    def array(self, dtype, shape: Sequence[int], offset: int = 0) -> np.ndarray:
        """A numpy array over the shared pages (no copy)."""
        count = int(np.prod(shape, dtype=np.int64))
        return np.frombuffer(self._map, dtype=dtype, count=count, offset=offset).reshape(shape)

    def descriptor(self, offset: int = 0, length: int | None = None) -> ht.SharedBuffer:
        """The wire form of a window of this buffer."""
        size = self.size - offset if length is None else length
        return ht.SharedBuffer(bufferId=self.buffer_id, bufferSize=self.size, offset=offset,
                               dataSize=size)

    # -- the same pages in other sessions (a driver restarted) ----------------------------

    def buffer_in(self, client: DriverClient) -> tuple[int, int]:
        """(bufferId, bufferSize) of these pages in `client`'s session.

        In the session that made this memory, its own id. In any other (a new process of the
        same driver after a crash), the memfd is registered there once, on first use, and
        that id is kept for the session's lifetime; the client's mapping never changes, so
        the bytes written before are what the driver sees. DriverGone if the driver cannot
        be reached; BufferNotShared if it refuses the fd.
        """
        if self.client is None or self.client is client:
            return self.buffer_id, self.size
        with self._elsewhere_lock:
            for other in [c for c in self._elsewhere if not c.alive]:
                del self._elsewhere[other]  # that session has ended, and its id with it
            known = self._elsewhere.get(client)
            if known is not None:
                return known
            if self.closed:
                raise BufferNotShared(ht.NNRT_INVALID_BUFFER, "the memory is closed")
            code, buffer_id, size = client.import_fd(self.fd)
            if code != NNRT_SUCCESS:
                raise BufferNotShared(code, f"driver {client.grpc_path.name} refused the memfd")
            self._elsewhere[client] = (buffer_id, size)
            log.info("buffer %d of session %s registered again as buffer %d of session %s",
                     self.buffer_id, self.client.session_id, buffer_id, client.session_id)
            return buffer_id, size

    def descriptor_in(self, client: DriverClient, offset: int = 0,
                      length: int | None = None) -> ht.SharedBuffer:
        """`descriptor()` for `client`'s session (registering the memfd there if needed)."""
        buffer_id, size = self.buffer_in(client)
        data_size = size - offset if length is None else length
        return ht.SharedBuffer(bufferId=buffer_id, bufferSize=size, offset=offset,
                               dataSize=data_size)

    def sessions(self) -> list[DriverClient]:
        """The live sessions that know these pages (the one that made them first)."""
        with self._elsewhere_lock:
            others = list(self._elsewhere)
        every = ([self.client] if self.client is not None else []) + others
        return [c for c in every if c.alive]

    def release_in_sessions(self) -> None:
        """ReleaseBuffer in every live session that knows these pages (the one that made them
        and any registered later); sessions that have ended need nothing. Once; never raises."""
        with self._elsewhere_lock:
            if self._given_back:
                return
            self._given_back = True
            others, self._elsewhere = list(self._elsewhere.items()), {}
        origin = self.client
        targets = [(origin, self.buffer_id, self.size)] if origin is not None else []
        targets += [(c, bid, size) for c, (bid, size) in others]
        for client, buffer_id, size in targets:
            if not client.alive:
                continue
            try:
                reply = client.release_buffer(ht.SharedBuffer(bufferId=buffer_id, bufferSize=size,
                                                              offset=0, dataSize=size))
            except DriverGone:
                continue
            if reply.returnCode != NNRT_SUCCESS:
                log.warning("ReleaseBuffer %d failed: %s", buffer_id, reply.returnCode)

    def close(self) -> None:
        """Unmap and close the fd (the driver side is released separately)."""
        if self.closed:
            return
        self.closed = True
        try:
            self._map.close()
        except BufferError:
            log.warning("buffer %d still viewed at close; unmapped when the views go", self.buffer_id)
        os.close(self.fd)


def allocate(client: DriverClient, size: int, device_name: str) -> SharedMemory:
    """A fresh buffer of at least one byte in `client`'s session, mapped here; OutOfMemory
    naming the device and the driver's code when it refuses."""
    code, memory = client.allocate_buffer(max(size, 1))
    if code != NNRT_SUCCESS or memory is None:
        raise OutOfMemory(f"{device_name}: AllocateBuffer of {size} bytes failed: "
                          f"{code_name(code)}")
    return memory


def release_memory(client: DriverClient, memory: SharedMemory) -> None:
    """Unmap a SharedMemory and give it back to every live driver session that knows it
    (`client`'s if the memory does not say which made it; nothing to give if it died)."""
    if memory.client is None:
        memory.client = client
    memory.close()
    memory.release_in_sessions()
