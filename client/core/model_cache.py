"""The compiled-model cache of `OH_NNCompilation_SetCache` / `ExportCacheToBuffer` (capi.md 1.9, B).

On disk the layout is upstream's (capi.md Appendix B), inside the cache directory, with
`<p>` the `ModelName` extension value (empty by default):

* `<p>0.nncache` … `<p>{N-3}.nncache` — the driver's ExportModelCache blobs, verbatim;
* `<p>{N-2}.nncache`, `<p>{N-1}.nncache` — the input / output tensor descriptors (records of
  int32 data type, int32 format, int32 tensor type, uint64 rank, rank × int32 dims, name +
  NUL; little-endian);
* `<p>cache_info.nncache` — the index, JSON on one line:
  `{"CheckSum": c, "DataSha256": "…", "data": {"deviceId", "fileNumber", "fileSha256",
  "fileSize", "isExceedRamLimit", "liteGraphModelId", "modelCheckSum", "modelDigest",
  "nnrtCacheFormat", "opVersion", "version"}}`, keys sorted, no spaces.

Beyond upstream's 16-bit checksums (kept, so the index reads like upstream's), every file
carries its size and SHA-256 and the index its own SHA-256: upstream's checksum samples
large files and cannot see a swapped pair of words, ours sees every bit. `modelDigest`
names the model the cache was compiled from, so another model's cache is recognised.

Nothing read back is trusted: any malformed, truncated, resized or altered piece raises
`CacheInvalid`, and the caller (compilation.py) answers OH_NN_INVALID_FILE.

The index is written last and removed first, so an interrupted write leaves no index (= no
cache) rather than a half-written one; every file is written to a temporary name and
renamed into place.

The cache directory may be shared or hostile: a temporary file is created exclusively
(`O_CREAT | O_EXCL | O_NOFOLLOW`, a random name: a name planted in advance, symlink or not,
makes that attempt fail and another name is drawn, never a write through it), mode 0600
(compiled models are the user's), and renamed over the final name (rename replaces a symlink
there, it does not follow it). Reads do not follow a symlink either and take regular files
only (`O_NOFOLLOW | O_NONBLOCK`: a FIFO planted there cannot block a Build).

`pack` / `unpack` give the same content as one blob for ExportCacheToBuffer /
ImportCacheFromBuffer: magic `NNRTCCH1`, uint32 index length, the index JSON, then the N
files back to back.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import secrets
import stat
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from nnrt.common.hdi_model import IODesc, LoweredModel

__all__: list[str] = []  # no C functions here

UINT32_MAX = 0xFFFFFFFF
INVALID_VERSION = UINT32_MAX  # reserved (capi.md 0.3)
MAX_FILES = 100  # upstream's limit on fileNumber, descriptor files included
MAX_INDEX_BYTES = 1 << 20
MAX_RANK = 200
MAX_NAME_BYTES = 1 << 16
FORMAT_VERSION = 1  # our own layout revision ("nnrtCacheFormat")
OP_VERSION = 1  # the operator-set revision of the front end ("opVersion")
INDEX_NAME = "cache_info.nncache"
SUFFIX = ".nncache"
MAGIC = b"NNRTCCH1"
_LARGE_FILE = 2 << 20  # upstream samples files this large when computing their checksum
_RECORD_HEAD = struct.Struct("<iiiQ")
_BLOB_HEAD = struct.Struct("<8sI")


class CacheInvalid(Exception):
    """The cache (directory or blob) cannot be trusted: corrupt, truncated, foreign."""


def checksum16(data: bytes | bytearray | memoryview) -> int:
    """Upstream's file checksum (capi.md Appendix B).

    The 16-bit ones'-complement of the end-around-carry sum of the little-endian 16-bit
    words; a trailing odd byte is added as an 8-bit value. Files of 2 MiB or more sum only
    every k-th word (k = length // 2 MiB) and add the file's final byte instead.
    """
    view = memoryview(data).cast("B")
    length = len(view)
    words = np.frombuffer(view, dtype="<u2", count=length // 2)
    if length >= _LARGE_FILE:
        total = int(words[:: length // _LARGE_FILE].sum(dtype=np.uint64)) + view[length - 1]
    else:
        total = int(words.sum(dtype=np.uint64)) + (view[length - 1] if length % 2 else 0)
    while total >> 16:
        total = (total >> 16) + (total & 0xFFFF)
    return ~total & 0xFFFF


def _sha256(data: bytes | bytearray | memoryview) -> str:
    return hashlib.sha256(data).hexdigest()


# -- tensor descriptor files ------------------------------------------------------------------


def encode_descs(descs: list[IODesc]) -> bytes:
    """The descriptor-file form of a list of I/O descriptors (Appendix B record layout)."""
    out = bytearray()
    for desc in descs:
        name = desc.name.encode()
        out += _RECORD_HEAD.pack(desc.data_type, desc.format, 0, len(desc.shape))
        out += struct.pack(f"<{len(desc.shape)}i", *desc.shape)
        out += name + b"\0"
    return bytes(out)


def decode_descs(data: bytes) -> list[IODesc]:
    """Parse a descriptor file; CacheInvalid if it is not exactly a list of sane records."""
    descs = []
    pos = 0
    while pos < len(data):
        if pos + _RECORD_HEAD.size > len(data):
            raise CacheInvalid("truncated tensor descriptor")
        data_type, fmt, tensor_type, rank = _RECORD_HEAD.unpack_from(data, pos)
        pos += _RECORD_HEAD.size
        if not 0 <= data_type <= 12 or not 0 <= fmt <= 3 or tensor_type != 0 or rank > MAX_RANK:
            raise CacheInvalid(f"bad tensor descriptor ({data_type}, {fmt}, {tensor_type}, {rank})")
        if pos + 4 * rank > len(data):
            raise CacheInvalid("truncated tensor descriptor dimensions")
        shape = list(struct.unpack_from(f"<{rank}i", data, pos))
        pos += 4 * rank
        end = data.find(b"\0", pos, pos + MAX_NAME_BYTES)
        if end < 0:
            raise CacheInvalid("tensor descriptor name without its NUL")
        try:
            name = data[pos:end].decode()
        except UnicodeDecodeError as exc:
            raise CacheInvalid(f"tensor descriptor name is not UTF-8: {exc}") from exc
        pos = end + 1
        descs.append(IODesc(name, data_type, shape, fmt))
    return descs


# -- the index ------------------------------------------------------------------------------


@dataclass
class CacheContents:
    """What a cache holds: the driver's blobs and the model's I/O descriptors."""

    blobs: list[bytes]
    inputs: list[IODesc]
    outputs: list[IODesc]

    def files(self) -> list[bytes]:
        return [*self.blobs, encode_descs(self.inputs), encode_descs(self.outputs)]


@dataclass
class CacheIndex:
    """The `data` object of the index file."""

    version: int
    device_id: int
    model_digest: str
    sizes: list[int]
    checksums: list[int]
    sha256: list[str]
    is_exceed_ram_limit: int = 0
    lite_graph_model_id: int = 0
    op_version: int = OP_VERSION
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def file_number(self) -> int:
        return len(self.sizes)

    @classmethod
    def describe(cls, files: list[bytes], version: int, device_id: int,
                 model_digest: str) -> CacheIndex:
        return cls(version, device_id, model_digest, [len(f) for f in files],
                   [checksum16(f) for f in files], [_sha256(f) for f in files])

    def data(self) -> dict[str, Any]:
        return {
            "deviceId": self.device_id,
            "fileNumber": self.file_number,
            "fileSha256": self.sha256,
            "fileSize": self.sizes,
            "isExceedRamLimit": self.is_exceed_ram_limit,
            "liteGraphModelId": self.lite_graph_model_id,
            "modelCheckSum": self.checksums,
            "modelDigest": self.model_digest,
            "nnrtCacheFormat": FORMAT_VERSION,
            "opVersion": self.op_version,
            "version": self.version,
        }

    def to_json(self) -> bytes:
        text = _compact(self.data()).encode()
        return _compact({"CheckSum": checksum16(text), "DataSha256": _sha256(text),
                         "data": self.data()}).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> CacheIndex:
        """Parse and verify an index; CacheInvalid for anything unexpected."""
        if len(raw) > MAX_INDEX_BYTES:
            raise CacheInvalid(f"index of {len(raw)} bytes is too big")
        try:
            top = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            raise CacheInvalid(f"index is not JSON: {exc}") from exc
        if not isinstance(top, dict) or set(top) != {"CheckSum", "DataSha256", "data"} or \
                not isinstance(top["data"], dict):
            raise CacheInvalid("index is not an nnrt cache index")
        text = _compact(top["data"]).encode()
        if top["CheckSum"] != checksum16(text) or top["DataSha256"] != _sha256(text):
            raise CacheInvalid("index checksum mismatch")
        data = top["data"]
        try:
            if data["nnrtCacheFormat"] != FORMAT_VERSION:
                raise CacheInvalid(f"cache format {data['nnrtCacheFormat']!r} is not ours")
            index = cls(
                version=_int(data["version"], 0, UINT32_MAX),
                device_id=_int(data["deviceId"], -(1 << 63), (1 << 63) - 1),
                model_digest=_str(data["modelDigest"]),
                sizes=[_int(s, 0, 1 << 62) for s in _list(data["fileSize"])],
                checksums=[_int(c, 0, 0xFFFF) for c in _list(data["modelCheckSum"])],
                sha256=[_str(s) for s in _list(data["fileSha256"])],
                is_exceed_ram_limit=_int(data["isExceedRamLimit"], 0, 1),
                lite_graph_model_id=_int(data["liteGraphModelId"], -(1 << 63), (1 << 64) - 1),
                op_version=_int(data["opVersion"], -(1 << 63), (1 << 64) - 1),
            )
            file_number = _int(data["fileNumber"], 3, MAX_FILES)
        except KeyError as exc:
            raise CacheInvalid(f"index lacks {exc}") from exc
        if not (file_number == len(index.sizes) == len(index.checksums) == len(index.sha256)):
            raise CacheInvalid("index file lists disagree with fileNumber")
        if index.version == INVALID_VERSION:
            raise CacheInvalid("index carries the reserved version UINT32_MAX")
        return index

    def verify(self, files: list[bytes]) -> CacheContents:
        """Check files against the index; the contents they hold, or CacheInvalid."""
        if len(files) != self.file_number:
            raise CacheInvalid(f"{len(files)} files, the index names {self.file_number}")
        for i, data in enumerate(files):
            if len(data) != self.sizes[i]:
                raise CacheInvalid(f"file {i} has {len(data)} bytes, the index says "
                                   f"{self.sizes[i]}")
            if checksum16(data) != self.checksums[i] or _sha256(data) != self.sha256[i]:
                raise CacheInvalid(f"file {i} checksum mismatch")
        return CacheContents(list(files[:-2]), decode_descs(files[-2]), decode_descs(files[-1]))


def _compact(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _int(value: Any, low: int, high: int) -> int:
    if type(value) is not int or not low <= value <= high:
        raise CacheInvalid(f"index value {value!r} is not an integer in [{low}, {high}]")
    return value


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise CacheInvalid(f"index value {value!r} is not a string")
    return value


def _list(value: Any) -> list:
    if not isinstance(value, list):
        raise CacheInvalid(f"index value {value!r} is not a list")
    return value


def _check_count(contents: CacheContents) -> list[bytes]:
    files = contents.files()
    if not 3 <= len(files) <= MAX_FILES:
        raise ValueError(f"a cache holds 1..{MAX_FILES - 2} driver blobs, "
                         f"not {len(contents.blobs)}")
    return files


# -- the directory ---------------------------------------------------------------------------


class CacheDir:
    """The cache of one model (file-name prefix) inside a cache directory."""

    def __init__(self, path: str | os.PathLike, prefix: str = "") -> None:
        self.path = Path(path)
        self.prefix = prefix

    @property
    def index_path(self) -> Path:
        return self.path / f"{self.prefix}{INDEX_NAME}"

    def file_path(self, i: int) -> Path:
        return self.path / f"{self.prefix}{i}{SUFFIX}"

    def read_index(self) -> CacheIndex | None:
        """The verified index; None when there is none; CacheInvalid when it is unusable."""
        try:
            raw = _read_file(self.index_path, MAX_INDEX_BYTES + 1)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise CacheInvalid(f"cannot read {self.index_path}: {exc}") from exc
        return CacheIndex.from_json(raw)

    def load(self, index: CacheIndex) -> CacheContents:
        """Read and verify every file the index names; CacheInvalid on any mismatch."""
        files = []
        for i in range(index.file_number):
            path = self.file_path(i)
            try:
                data = _read_file(path, index.sizes[i] + 1)  # one more byte: a longer file
            except OSError as exc:
                raise CacheInvalid(f"cannot read {path}: {exc}") from exc
            files.append(data)
        return index.verify(files)

    def write(self, contents: CacheContents, version: int, device_id: int,
              model_digest: str) -> CacheIndex:
        """Replace this model's cache; OSError / ValueError when it cannot be written."""
        if not 0 <= version < INVALID_VERSION:
            raise ValueError(f"cache version {version} cannot be saved")
        files = _check_count(contents)
        index = CacheIndex.describe(files, version, device_id, model_digest)
        self.remove()
        for i, data in enumerate(files):
            _write_atomically(self.file_path(i), data)
        _write_atomically(self.index_path, index.to_json())
        return index

    def remove(self) -> None:
        """Remove the index, then the files a readable index names (others are left alone)."""
        try:
            old = self.read_index()
        except CacheInvalid:
            old = None
        try:
            os.unlink(self.index_path)
        except FileNotFoundError:
            pass
        if old is not None:
            for i in range(old.file_number):
                try:
                    os.unlink(self.file_path(i))
                except FileNotFoundError:
                    pass


_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
FILE_MODE = 0o600


def _read_file(path: Path, limit: int) -> bytes:
    """Up to `limit` bytes of the regular file at `path`, not following a symlink."""
    fd = os.open(path, _READ_FLAGS)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read(limit)
    finally:
        os.close(fd)


def _write_atomically(path: Path, data: bytes) -> None:
    """Write `data` to a new 0600 file created exclusively at a random name beside `path`,
    then rename it over `path`."""
    for _ in range(100):
        temp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
        try:
            fd = os.open(temp, _CREATE_FLAGS, FILE_MODE)
            break
        except FileExistsError:  # planted, or a 1-in-2^64 collision: draw again
            continue
    else:
        raise FileExistsError(errno.EEXIST, "no free temporary name", str(path.parent))
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(temp, path)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise


# -- one blob ----------------------------------------------------------------------------------


def pack(contents: CacheContents, version: int, device_id: int, model_digest: str) -> bytes:
    """The whole cache as one blob (ExportCacheToBuffer)."""
    files = _check_count(contents)
    index = CacheIndex.describe(files, version, device_id, model_digest).to_json()
    return b"".join([_BLOB_HEAD.pack(MAGIC, len(index)), index, *files])


def unpack(blob: bytes | bytearray | memoryview) -> tuple[CacheIndex, CacheContents]:
    """Parse and verify a blob made by `pack`; CacheInvalid on anything else."""
    blob = bytes(blob)
    if len(blob) < _BLOB_HEAD.size:
        raise CacheInvalid("cache blob is truncated")
    magic, index_length = _BLOB_HEAD.unpack_from(blob)
    if magic != MAGIC:
        raise CacheInvalid("not an nnrt cache blob")
    start = _BLOB_HEAD.size + index_length
    if index_length > MAX_INDEX_BYTES or start > len(blob):
        raise CacheInvalid("cache blob is truncated")
    index = CacheIndex.from_json(blob[_BLOB_HEAD.size:start])
    if start + sum(index.sizes) != len(blob):
        raise CacheInvalid(f"cache blob has {len(blob)} bytes, its index accounts for "
                           f"{start + sum(index.sizes)}")
    files, pos = [], start
    for size in index.sizes:
        files.append(blob[pos:pos + size])
        pos += size
    return index, index.verify(files)


# -- model identity ------------------------------------------------------------------------------


def model_digest(model: LoweredModel | None) -> str:
    """A digest of the lowered model (graph, constants, I/O descriptors); "" for none."""
    if model is None:
        return ""
    h = hashlib.sha256(b"nnrt-model-1\0")
    h.update(model.hdi.model().SerializeToString(deterministic=True))
    for index in sorted(model.hdi.constants):
        data = np.ascontiguousarray(model.hdi.constants[index])
        h.update(struct.pack("<q", index))
        h.update(str(data.dtype.str).encode() + b"\0")
        h.update(data.reshape(-1).view(np.uint8))
    h.update(encode_descs(model.inputs))
    h.update(b"\1")
    h.update(encode_descs(model.outputs))
    return h.hexdigest()
