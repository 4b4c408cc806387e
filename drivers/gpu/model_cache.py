"""The program half of a GPU model cache: the compiled OpenCL programs a model uses.

A GPU model cache is two blobs: the validated graph (hdi/graph_cache.py, the format
every graph-caching driver shares) and this one, the binaries (`CL_PROGRAM_BINARIES`) of
the programs the model's kernels come from, keyed like the process's program cache (a
digest of the device, build options and source the driver itself would build). Both carry
the identity of the driver version and the OpenCL device and driver that wrote them: a
cache from another one is refused with NNRT_INVALID_MODEL_CACHE (the client rebuilds).

The blob is sealed with the driver's key (hdi/sealed_blob.py `seal_keyed`: magic
"NNRTCLPB", format version 2, identity, HMAC-SHA256), so a binary is loaded only when this
driver wrote it; even then it serves the model it came with alone
(drivers/gpu/opencl.py `ProgramCache`), never another session's. The payload (little
endian):

    u32 count | count x (64-byte hex key | u64 length | binary)
"""

from __future__ import annotations

import string
import struct

from nnrt.hdi.sealed_blob import refusal, seal_keyed, unseal_keyed

MAGIC = b"NNRTCLPB"
WHAT = "GPU program cache"
FORMAT_VERSION = 2
KEY_BYTES = 64


def encode(binaries: dict[str, bytes], identity: str) -> bytes:
    body = [struct.pack("<I", len(binaries))]
    for key, binary in sorted(binaries.items()):
        body.append(key.encode().ljust(KEY_BYTES, b"\0") + struct.pack("<Q", len(binary)))
        body.append(binary)
    return seal_keyed(MAGIC, FORMAT_VERSION, identity, b"".join(body))


def decode(blob: bytes, identity: str) -> dict[str, bytes]:
    """Program key -> binary; DriverError(NNRT_INVALID_MODEL_CACHE) for anything else."""
    payload = unseal_keyed(blob, MAGIC, FORMAT_VERSION, identity, WHAT)
    if len(payload) < 4:
        raise refusal(WHAT, "truncated")
    (count,) = struct.unpack_from("<I", payload, 0)
    offset, binaries = 4, {}
    for _ in range(count):
        if offset + KEY_BYTES + 8 > len(payload):
            raise refusal(WHAT, "truncated entry")
        key = bytes(payload[offset:offset + KEY_BYTES]).decode(errors="replace")
        if len(key) != KEY_BYTES or not set(key) <= set(string.hexdigits) or key in binaries:
            raise refusal(WHAT, "a program key that is not a digest, or twice")
        (length,) = struct.unpack_from("<Q", payload, offset + KEY_BYTES)
        offset += KEY_BYTES + 8
        if offset + length > len(payload):
            raise refusal(WHAT, "truncated binary")
        binaries[key] = bytes(payload[offset:offset + length])
        offset += length
    if offset != len(payload):
        raise refusal(WHAT, "trailing bytes")
    return binaries
