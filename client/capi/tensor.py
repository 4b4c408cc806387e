"""`NN_Tensor`: a tensor descriptor plus device shared memory (capi.md 1.27–1.35).

The memory of a tensor is a region the driver of its device can read and write without a
copy: either a fresh driver buffer (`OH_NNTensor_Create`, `_CreateWithSize`, through
AllocateBuffer) or the caller's own memfd (`OH_NNTensor_CreateWithFd`, registered with the
driver's session). Both are mapped into this process (`SharedMemory`), and
`OH_NNTensor_GetDataBuffer` hands out a writable memoryview of those very pages.

`OH_NNTensor_CreateWithFd` follows the header's layout, not upstream's quirk (capi.md 1.29,
5.2): the region is `[0, size)` of the fd and the tensor's data is `[offset, size)`; the
driver is sent `{buffer, bufferSize = the region's real size, offset, dataSize = size -
offset}` (the driver insists that bufferSize is the region's true size, which may exceed
`size`). The tensor does not own the caller's fd: Destroy unmaps and unregisters, the
caller's fd stays open.

A tensor outlives its driver process (beyond upstream): its mapping is the client's own, so
when the driver crashes the pages and the bytes in them stay. A run with a session other
than the one the tensor was made in (a new process of the same driver) registers the memfd
there first, once per session (`SharedMemory.buffer_in`), and sends that session's buffer
id; Destroy gives the region back in every live session that knows it.

What a run sends of a tensor — its serialized IOTensor for a session — is kept with the
tensor (`io_bytes`) and built again only when the descriptor (name, data type, shape,
format) or the session differs from the last run's, so a run of unchanged tensors builds
no message.
"""

from __future__ import annotations

import logging
import os
import weakref
from typing import Any, NamedTuple

from nnrt.client.capi._objects import Handle, live
from nnrt.common.hdi_model import DATA_TYPES, hdi_format
from nnrt.client.capi.enums import (
    OH_NN_DYNAMIC_SHAPE,
    OH_NN_INVALID_PARAMETER,
    OH_NN_NULL_PTR,
    OH_NN_SUCCESS,
    OH_NN_ReturnCode,
)
from nnrt.client.capi.device import find_device
from nnrt.client.capi.structs import c_count, c_int
from nnrt.client.capi.tensor_desc import NN_TensorDesc, OH_NNTensorDesc_GetByteSize
from nnrt.client.core.device import Device
from nnrt.client.core.driver import DriverClient, DriverGone
from nnrt.client.core.buffer import SharedMemory
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.common.errors import NNRT_SUCCESS, code_name

__all__ = [
    "NN_Tensor",
    "OH_NNTensor_Create",
    "OH_NNTensor_CreateWithSize",
    "OH_NNTensor_CreateWithFd",
    "OH_NNTensor_Destroy",
    "OH_NNTensor_GetTensorDesc",
    "OH_NNTensor_GetDataBuffer",
    "OH_NNTensor_GetFd",
    "OH_NNTensor_GetSize",
    "OH_NNTensor_GetOffset",
]

log = logging.getLogger(__name__)

MAX_TENSOR_BYTES = 1 << 30  # capi.md 0.3: the largest NN_Tensor allocation
INT_MAX = (1 << 31) - 1


class NN_Tensor(Handle):
    """The opaque `NN_Tensor` handle.

    `desc` is the tensor's own descriptor (owned by it; executors write output shapes into
    it), `memory` the mapping of its region, `client` the driver session the region was
    first registered in (later sessions register it on first use: `io_tensor`), `fd` the
    fd `OH_NNTensor_GetFd` reports (the driver's memfd, or the caller's fd for
    CreateWithFd), `owns_buffer` False for a wrapped caller fd.
    """

    def __init__(self, device: Device, client: DriverClient, desc: NN_TensorDesc,
                 memory: SharedMemory, size: int, offset: int, fd: int,
                 owns_buffer: bool) -> None:
        super().__init__()
        self.device = device
        self.client = client
        self.desc = desc
        self.memory = memory
        self.size = size
        self.offset = offset
        self.fd = fd
        self.owns_buffer = owns_buffer
        self.wire: WireForm | None = None  # io_bytes' cache
        self.run_size: RunSize | None = None  # executor.py's cache of the byte size
        desc.owner = self
        # Give the region back when Destroy runs it, or when the tensor is garbage.
        if memory.client is None:
            memory.client = client
        self.release = weakref.finalize(self, _release, client, memory)
        self.release.atexit = False  # at exit the session ends, and its buffers with it

    def take_shape(self, shape: list[int]) -> None:
        """An output's shape after a run: written into its descriptor (capi.md 1.46)."""
        with self.lock:
            desc = self.desc
            if desc.shape != shape:  # (the same shape as last run: nothing to write)
                desc.shape = list(shape)

    def __repr__(self) -> str:
        if self.destroyed:
            return "<NN_Tensor destroyed>"
        return f"<NN_Tensor {self.desc!r} size={self.size} offset={self.offset} fd={self.fd}>"


class WireForm(NamedTuple):
    """A tensor's serialized IOTensor, and what it was built from (valid while they hold)."""

    client: DriverClient | None
    shape: list[int] | None
    data_type: int
    name: str | None
    format: int
    data: bytes


class RunSize(NamedTuple):
    """The byte size a run needs of a tensor, for the descriptor it was worked out from."""

    shape: list[int] | None
    data_type: int
    nbytes: int | None  # None: not computable; 0: dynamic


def io_tensor(tensor: NN_Tensor, client: DriverClient | None = None) -> ht.IOTensor:
    """The HDI IOTensor of a tensor (capi.md Appendix A "Run-time tensors") for a run in
    `client`'s session (default: the one the tensor was made in). The tensor's memfd is
    registered with that session first if it is a later one (DriverGone / BufferNotShared
    when that fails)."""
    with tensor.lock:
        desc = tensor.desc
        window = (tensor.offset, tensor.size - tensor.offset)
        data = tensor.memory.descriptor(*window) if client is None else \
            tensor.memory.descriptor_in(client, *window)
        return ht.IOTensor(
            name=desc.name or "",
            dataType=DATA_TYPES.get(desc.data_type, (ht.DATA_TYPE_UNKNOWN, None))[0],
            dimensions=list(desc.shape or []),
            format=hdi_format(desc.format),
            data=data,
        )


def io_bytes(tensor: NN_Tensor, client: DriverClient | None = None) -> bytes:
    """`io_tensor(tensor, client)` serialized, as DriverClient.run takes it: kept with the
    tensor and built again only when its descriptor or the session changed since."""
    with tensor.lock:
        desc = tensor.desc
        wire = tensor.wire
        if wire is not None and wire.client is client and wire.shape == desc.shape and \
                wire.data_type == desc.data_type and wire.name == desc.name and \
                wire.format == desc.format:
            return wire.data
        data = io_tensor(tensor, client).SerializeToString()
        shape = desc.shape
        tensor.wire = WireForm(client, None if shape is None else list(shape), desc.data_type,
                               desc.name, desc.format, data)
        return data


# -- helpers -----------------------------------------------------------------------------------


def _device(device_id: Any) -> Device | None:
    """The registered device of an ID (0 = first), None when there is none."""
    return find_device(device_id)


def _byte_size(desc: NN_TensorDesc) -> int | None:
    """The descriptor's byte size, 0 for a dynamic shape, None when it cannot be computed."""
    code, size = OH_NNTensorDesc_GetByteSize(desc)
    if code == OH_NN_DYNAMIC_SHAPE:
        return 0
    if code != OH_NN_SUCCESS:
        return None
    return size


def _client(device: Device, what: str) -> DriverClient | None:
    try:
        return device.client()
    except DriverGone as exc:
        log.warning("%s: device %s is not available: %s", what, device.name, exc)
        return None


def _allocate(desc: NN_TensorDesc, device: Device, size: int, what: str) -> NN_Tensor | None:
    client = _client(device, what)
    if client is None:
        return None
    try:
        code, memory = client.allocate_buffer(size)
    except DriverGone as exc:
        log.warning("%s: AllocateBuffer(%d) on %s: %s", what, size, device.name, exc)
        return None
    if code != NNRT_SUCCESS or memory is None:
        log.warning("%s: AllocateBuffer(%d) on %s failed: %s", what, size, device.name,
                    code_name(code))
        return None
    return NN_Tensor(device, client, desc.copy(), memory, size, 0, memory.fd, True)


# -- 1.27 – 1.30 ---------------------------------------------------------------------------------


def OH_NNTensor_Create(deviceID: int, tensorDesc: NN_TensorDesc | None) -> NN_Tensor | None:
    """capi.md 1.27: a tensor with a driver buffer of exactly the descriptor's byte size."""
    desc = live(tensorDesc, NN_TensorDesc)
    if desc is None:
        return None
    device = _device(deviceID)
    if device is None:
        return None
    size = _byte_size(desc)
    if size is None or size > MAX_TENSOR_BYTES or size == 0:
        return None  # no size; above 1 GiB; dynamic shape (a 0-byte allocation is refused)
    return _allocate(desc, device, size, "OH_NNTensor_Create")


def OH_NNTensor_CreateWithSize(deviceID: int, tensorDesc: NN_TensorDesc | None,
                               size: int) -> NN_Tensor | None:
    """capi.md 1.28: a tensor with a driver buffer of `size` bytes (≥ the byte size)."""
    desc = live(tensorDesc, NN_TensorDesc)
    if desc is None:
        return None
    device = _device(deviceID)
    if device is None:
        return None
    length = c_count(size)
    if length is None or length > MAX_TENSOR_BYTES:
        return None
    need = _byte_size(desc)
    if need is None or length < need:
        return None  # dynamic shapes have byte size 0: no check
    if length == 0:
        return None  # the driver refuses a 0-byte allocation
    return _allocate(desc, device, length, "OH_NNTensor_CreateWithSize")


def OH_NNTensor_CreateWithFd(deviceID: int, tensorDesc: NN_TensorDesc | None, fd: int,
                             size: int, offset: int) -> NN_Tensor | None:
    """capi.md 1.29: wrap `[0, size)` of the caller's memfd; the data is `[offset, size)`."""
    desc = live(tensorDesc, NN_TensorDesc)
    if desc is None:
        return None
    fd_value = c_int(fd, -(1 << 31), INT_MAX)
    if fd_value is None or fd_value < 0:
        return None
    length = c_count(size)
    where = c_count(offset)
    if length is None or where is None or length == 0 or length < where:
        return None
    need = _byte_size(desc)
    if need is None or length - where < need:
        return None
    device = _device(deviceID)
    if device is None:
        return None
    try:
        os.fstat(fd_value)
    except OSError as exc:
        log.warning("OH_NNTensor_CreateWithFd: fd %d: %s", fd_value, exc.strerror)
        return None
    client = _client(device, "OH_NNTensor_CreateWithFd")
    if client is None:
        return None
    try:
        code, memory = client.register_fd(fd_value)
    except (DriverGone, OSError) as exc:
        log.warning("OH_NNTensor_CreateWithFd: registering fd %d with %s: %s", fd_value,
                    device.name, exc)
        return None
    if code != NNRT_SUCCESS or memory is None:
        log.warning("OH_NNTensor_CreateWithFd: %s refused fd %d: %s", device.name, fd_value,
                    code_name(code))
        return None
    if memory.size < length:
        log.warning("OH_NNTensor_CreateWithFd: fd %d holds %d bytes, not %d", fd_value,
                    memory.size, length)
        _release(client, memory)
        return None
    return NN_Tensor(device, client, desc.copy(), memory, length, where, fd_value, False)


def _release(client: DriverClient, memory: SharedMemory) -> None:
    """Unmap our side and give the region back to every live driver session that knows it
    (the one it was made in, and any it was registered with after a driver restart;
    nothing to give where the driver died)."""
    if memory.client is None:
        memory.client = client
    memory.close()
    memory.release_in_sessions()


def OH_NNTensor_Destroy(tensor: NN_Tensor | None) -> OH_NN_ReturnCode:
    """capi.md 1.30: unmap, give a runtime buffer back, free the descriptor.

    A tensor whose driver session is gone is freed on this side all the same; the call then
    answers OH_NN_NULL_PTR if its device is no longer registered (no driver serves it).
    """
    t = live(tensor, NN_Tensor)
    if t is None:
        return OH_NN_INVALID_PARAMETER
    with t.lock:
        if t.destroyed:
            return OH_NN_INVALID_PARAMETER
        t.destroyed = True
        client, desc = t.client, t.desc
    desc.owner = None
    desc.destroy()
    alive = bool(t.memory.sessions()) or client.alive
    t.release()
    if not alive:
        if find_device(t.device.id) is None:
            return OH_NN_NULL_PTR
    return OH_NN_SUCCESS


# -- 1.31 – 1.35 ---------------------------------------------------------------------------------


def OH_NNTensor_GetTensorDesc(tensor: NN_Tensor | None) -> NN_TensorDesc | None:
    """capi.md 1.31: the tensor's own descriptor (borrowed: do not destroy it)."""
    t = live(tensor, NN_Tensor)
    return None if t is None else t.desc


def OH_NNTensor_GetDataBuffer(tensor: NN_Tensor | None) -> memoryview | None:
    """capi.md 1.32: a writable view of the data bytes `[offset, size)` (no copy)."""
    t = live(tensor, NN_Tensor)
    if t is None:
        return None
    with t.lock:
        if t.destroyed or t.memory is None or t.memory.closed:
            return None
        return t.memory.view(t.offset, t.size - t.offset)


def OH_NNTensor_GetFd(tensor: NN_Tensor | None) -> tuple[OH_NN_ReturnCode, int | None]:
    """capi.md 1.33: `(code, fd)` — the region's fd, reusable with OH_NNTensor_CreateWithFd."""
    t = live(tensor, NN_Tensor)
    if t is None:
        return OH_NN_INVALID_PARAMETER, None
    return OH_NN_SUCCESS, t.fd


def OH_NNTensor_GetSize(tensor: NN_Tensor | None) -> tuple[OH_NN_ReturnCode, int | None]:
    """capi.md 1.34: `(code, size)` — the region size in bytes."""
    t = live(tensor, NN_Tensor)
    if t is None:
        return OH_NN_INVALID_PARAMETER, None
    return OH_NN_SUCCESS, t.size


def OH_NNTensor_GetOffset(tensor: NN_Tensor | None) -> tuple[OH_NN_ReturnCode, int | None]:
    """capi.md 1.35: `(code, offset)` — where the data starts (0 unless CreateWithFd)."""
    t = live(tensor, NN_Tensor)
    if t is None:
        return OH_NN_INVALID_PARAMETER, None
    return OH_NN_SUCCESS, t.offset
