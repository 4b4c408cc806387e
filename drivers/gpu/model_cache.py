"""The program half of a GPU model cache: the compiled OpenCL programs a model uses.

A GPU model cache is two blobs: the validated graph (server/graph_cache.py, the format
every graph-caching driver shares) and this one, the binaries (`CL_PROGRAM_BINARIES`) of
the programs the model's kernels come from, keyed like the process's program cache. Both
carry the identity of the driver version and the OpenCL device and driver that wrote them:
a cache from another one is refused with NNRT_INVALID_MODEL_CACHE (the client rebuilds).

Layout (little endian):

    magic "NNRTCLPB" | u32 format version | u32 identity length | identity (UTF-8)
    | u32 CRC-32 of the rest | u32 count | count x (64-byte hex key | u64 length | binary)
"""

from __future__ import annotations

import struct
import zlib

from nnrt.server.errors import NNRT_INVALID_MODEL_CACHE, DriverError

MAGIC = b"NNRTCLPB"
FORMAT_VERSION = 1
KEY_BYTES = 64


def _refuse(why: str) -> DriverError:
    return DriverError(NNRT_INVALID_MODEL_CACHE, f"program cache refused: {why}")


def encode(binaries: dict[str, bytes], identity: str) -> bytes:
    body = [struct.pack("<I", len(binaries))]
    for key, binary in sorted(binaries.items()):
        body.append(key.encode().ljust(KEY_BYTES, b"\0") + struct.pack("<Q", len(binary)))
        body.append(binary)
    payload = b"".join(body)
    ident = identity.encode()
    return (MAGIC + struct.pack("<II", FORMAT_VERSION, len(ident)) + ident
            + struct.pack("<I", zlib.crc32(payload)) + payload)


def decode(blob: bytes, identity: str) -> dict[str, bytes]:
    """Program key -> binary; DriverError(NNRT_INVALID_MODEL_CACHE) for anything else."""
    view = memoryview(blob)
    head = len(MAGIC) + 8
    if len(view) < head or bytes(view[:len(MAGIC)]) != MAGIC:
        raise _refuse("not an nnrt GPU program cache")
    version, ident_length = struct.unpack_from("<II", view, len(MAGIC))
    if version != FORMAT_VERSION:
        raise _refuse(f"format version {version}, this driver reads {FORMAT_VERSION}")
    end = head + ident_length
    if len(view) < end + 8:
        raise _refuse("truncated")
    written_by = bytes(view[head:end]).decode(errors="replace")
    if written_by != identity:
        raise _refuse(f"written by {written_by!r}, this is {identity!r}")
    (checksum,) = struct.unpack_from("<I", view, end)
    payload = view[end + 4:]
    if zlib.crc32(payload) != checksum:
        raise _refuse("checksum mismatch (corrupt or truncated)")
    (count,) = struct.unpack_from("<I", payload, 0)
    offset, binaries = 4, {}
    for _ in range(count):
        if offset + KEY_BYTES + 8 > len(payload):
            raise _refuse("truncated entry")
        key = bytes(payload[offset:offset + KEY_BYTES]).rstrip(b"\0").decode(errors="replace")
        (length,) = struct.unpack_from("<Q", payload, offset + KEY_BYTES)
        offset += KEY_BYTES + 8
        if offset + length > len(payload):
            raise _refuse("truncated binary")
        binaries[key] = bytes(payload[offset:offset + length])
        offset += length
    if offset != len(payload):
        raise _refuse("trailing bytes")
    return binaries
