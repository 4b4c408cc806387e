"""The envelopes of the blobs a driver writes: what a blob is, which format version, who
wrote it, and a proof of the rest. Two of them:

* Keyed (`seal_keyed`; model caches, the blobs a client keeps and hands back):

      magic (8 bytes) | u32 format version | u32 identity length | identity (UTF-8)
      | HMAC-SHA256 (32 bytes) of everything else | payload

  The key is the driver's own (hdi/cache_key.py), so a blob that verifies was written by
  this driver (or one sharing its state directory) and not changed since: nothing a client
  crafted is parsed as a model, an engine's model or a program. The tag is checked before
  any byte of the payload is read.
* Checksummed (`seal`; offline binaries, portable between machines and written by a tool, so
  keyed by nothing: their reader validates everything in them as fresh input):

      magic (8 bytes) | u32 format version | u32 identity length | identity (UTF-8)
      | u32 CRC-32 of the payload | payload

`identity` names the device and driver version that wrote the blob (plus whatever the
payload depends on, e.g. the OpenCL driver). Either `unseal` refuses a blob of another
kind, version or identity, or whose tag or checksum does not match, with
NNRT_INVALID_MODEL_CACHE.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import struct
import zlib

from nnrt.common.errors import NNRT_INVALID_MODEL_CACHE, DriverError

from nnrt.hdi import cache_key

log = logging.getLogger(__name__)

TAG_BYTES = 32


def refusal(what: str, why: str) -> DriverError:
    return DriverError(NNRT_INVALID_MODEL_CACHE, f"{what} refused: {why}")


def _head(magic: bytes, version: int, identity: str) -> bytes:
    ident = identity.encode()
    return magic + struct.pack("<II", version, len(ident)) + ident


def seal(magic: bytes, version: int, identity: str, payload: bytes) -> bytes:
    return _head(magic, version, identity) + struct.pack("<I", zlib.crc32(payload)) + payload


def _tag(head: bytes | memoryview, payload: bytes | memoryview) -> bytes:
    mac = hmac.new(cache_key.key(), head, hashlib.sha256)
    mac.update(payload)
    return mac.digest()


def seal_keyed(magic: bytes, version: int, identity: str, payload: bytes) -> bytes:
    head = _head(magic, version, identity)
    return head + _tag(head, payload) + payload


def has_magic(blob: bytes | memoryview, magic: bytes) -> bool:
    """Whether a blob claims to be of this kind (unseal checks the rest)."""
    return bytes(memoryview(blob)[:len(magic)]) == magic


def _open(view: memoryview, magic: bytes, version: int, identity: str, what: str,
          proof_bytes: int) -> int:
    """Where the proof starts in an envelope of this kind, version and identity."""
    head = len(magic) + 8
    if len(view) < head or bytes(view[:len(magic)]) != magic:
        raise refusal(what, f"not an nnrt {what}")
    found, ident_length = struct.unpack_from("<II", view, len(magic))
    if found != version:
        raise refusal(what, f"format version {found}, this driver reads {version}")
    end = head + ident_length
    if len(view) < end + proof_bytes:
        raise refusal(what, "truncated")
    written_by = bytes(view[head:end]).decode(errors="replace")
    if written_by != identity:
        raise refusal(what, f"written by {written_by!r}, this is {identity!r}")
    return end


def unseal(blob: bytes | memoryview, magic: bytes, version: int, identity: str,
           what: str) -> memoryview:
    """The payload of a blob sealed with the same magic, version and identity (no copy)."""
    view = memoryview(blob)
    end = _open(view, magic, version, identity, what, 4)
    (checksum,) = struct.unpack_from("<I", view, end)
    payload = view[end + 4:]
    if zlib.crc32(payload) != checksum:
        raise refusal(what, "checksum mismatch (corrupt or truncated)")
    return payload


def unseal_keyed(blob: bytes | memoryview, magic: bytes, version: int, identity: str,
                 what: str) -> memoryview:
    """The payload of a blob this driver sealed with `seal_keyed` and the same magic, version
    and identity (no copy); refused (and logged) when its tag does not verify: changed,
    truncated, crafted, or made under another driver's key."""
    view = memoryview(blob)
    end = _open(view, magic, version, identity, what, TAG_BYTES)
    payload = view[end + TAG_BYTES:]
    if not hmac.compare_digest(_tag(view[:end], payload), bytes(view[end:end + TAG_BYTES])):
        log.warning("%s refused: its authentication tag does not verify (altered, truncated, "
                    "crafted, or made by a driver with another key)", what)
        raise refusal(what, "not authenticated: altered, truncated, or not made by this "
                            "driver (another key)")
    return payload
