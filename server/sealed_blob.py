"""The envelope of every model-cache blob a driver writes: what it is, which format version,
who wrote it, and a CRC-32 of the rest.

    magic (8 bytes) | u32 format version | u32 identity length | identity (UTF-8)
    | u32 CRC-32 of the payload | payload

`identity` names the device and driver version that wrote the blob (plus whatever the
payload depends on, e.g. the OpenCL driver); `unseal` refuses a blob of another kind,
version or identity, or whose checksum does not match, with NNRT_INVALID_MODEL_CACHE. (A
CRC detects corruption and truncation at memory speed; a cache is not a security boundary:
whoever can write it can write the model too.)
"""

from __future__ import annotations

import struct
import zlib

from nnrt.common.errors import NNRT_INVALID_MODEL_CACHE, DriverError


def refusal(what: str, why: str) -> DriverError:
    return DriverError(NNRT_INVALID_MODEL_CACHE, f"{what} refused: {why}")


def seal(magic: bytes, version: int, identity: str, payload: bytes) -> bytes:
    ident = identity.encode()
    return (magic + struct.pack("<II", version, len(ident)) + ident
            + struct.pack("<I", zlib.crc32(payload)) + payload)


def has_magic(blob: bytes | memoryview, magic: bytes) -> bool:
    """Whether a blob claims to be of this kind (unseal checks the rest)."""
    return bytes(memoryview(blob)[:len(magic)]) == magic


def unseal(blob: bytes | memoryview, magic: bytes, version: int, identity: str,
           what: str) -> memoryview:
    """The payload of a blob sealed with the same magic, version and identity (no copy)."""
    view = memoryview(blob)
    head = len(magic) + 8
    if len(view) < head or bytes(view[:len(magic)]) != magic:
        raise refusal(what, f"not an nnrt {what}")
    found, ident_length = struct.unpack_from("<II", view, len(magic))
    if found != version:
        raise refusal(what, f"format version {found}, this driver reads {version}")
    end = head + ident_length
    if len(view) < end + 4:
        raise refusal(what, "truncated")
    written_by = bytes(view[head:end]).decode(errors="replace")
    if written_by != identity:
        raise refusal(what, f"written by {written_by!r}, this is {identity!r}")
    (checksum,) = struct.unpack_from("<I", view, end)
    payload = view[end + 4:]
    if zlib.crc32(payload) != checksum:
        raise refusal(what, "checksum mismatch (corrupt or truncated)")
    return payload
