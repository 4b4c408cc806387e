"""The on-disk / in-blob compiled-model cache (client/core/model_cache.py), without a driver.

Written, read back, and every kind of damage detected: bit flips anywhere, truncation,
growth, missing files, files of another model, a foreign or altered index.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import numpy as np
import pytest

from nnrt.client.core import model_cache as mc
from nnrt.common.hdi_model import IODesc
from tests.client.capi.util_compilation import lowered_add

DEVICE = 0x1234_5678_9ABC_DEF0
DIGEST = "ab" * 32


def contents(blob_sizes=(10, 7)) -> mc.CacheContents:
    rng = np.random.default_rng(sum(blob_sizes))
    blobs = [rng.integers(0, 256, n, np.uint8).tobytes() for n in blob_sizes]
    return mc.CacheContents(
        blobs,
        [IODesc("in:0", 11, [1, -1, 3], 1), IODesc("", 2, [], 0)],
        [IODesc("out", 10, [7], 3)],
    )


def reference_checksum(data: bytes) -> int:
    """Appendix B, written independently: ones'-complement sum of LE 16-bit words."""
    total = 0
    n = len(data)
    if n >= 2 << 20:
        k = n // (2 << 20)
        for i in range(0, n // 2, k):
            total += data[2 * i] | data[2 * i + 1] << 8
        total += data[-1]
    else:
        for i in range(0, n - 1, 2):
            total += data[i] | data[i + 1] << 8
        if n % 2:
            total += data[-1]
    while total > 0xFFFF:
        total = (total & 0xFFFF) + (total >> 16)
    return (~total) & 0xFFFF


# -- checksum ----------------------------------------------------------------------------------


@pytest.mark.parametrize("data", [b"", b"\x01", b"\x01\x02", b"\xff\xff\xff\xff\x01",
                                  bytes(range(256)) * 3 + b"\x07"])
def test_checksum16_matches_the_appendix(data: bytes) -> None:
    assert mc.checksum16(data) == reference_checksum(data)


def test_checksum16_known_values() -> None:
    assert mc.checksum16(b"") == 0xFFFF
    assert mc.checksum16(b"\x01\x02") == (~0x0201) & 0xFFFF
    assert mc.checksum16(b"\x05") == (~0x05) & 0xFFFF
    # end-around carry: 0xFFFF + 0x0001 = 0x10000 → 0x0001
    assert mc.checksum16(b"\xff\xff\x01\x00") == (~0x0001) & 0xFFFF


def test_checksum16_samples_large_files() -> None:
    data = bytearray(np.random.default_rng(1).integers(0, 256, (4 << 20) + 3, np.uint8).tobytes())
    assert mc.checksum16(data) == reference_checksum(bytes(data))
    # k = 2: odd words are not sampled, so upstream's checksum cannot see this change ...
    data[2 * 1001] ^= 0xFF
    assert mc.checksum16(data) == reference_checksum(bytes(data))


# -- descriptor files ------------------------------------------------------------------------------


def test_descriptor_records_have_the_appendix_layout() -> None:
    raw = mc.encode_descs([IODesc("ab", 11, [2, -1], 2)])
    assert raw == struct.pack("<iiiQ2i", 11, 2, 0, 2, 2, -1) + b"ab\0"
    assert mc.decode_descs(raw) == [IODesc("ab", 11, [2, -1], 2)]


def test_descriptors_round_trip() -> None:
    descs = contents().inputs + contents().outputs
    assert mc.decode_descs(mc.encode_descs(descs)) == descs
    assert mc.decode_descs(b"") == []


@pytest.mark.parametrize("raw", [
    struct.pack("<iii", 11, 0, 0),  # truncated head
    struct.pack("<iiiQ", 11, 0, 0, 3) + struct.pack("<2i", 1, 2),  # truncated dims
    struct.pack("<iiiQ", 11, 0, 0, 0) + b"name",  # no NUL
    struct.pack("<iiiQ", 13, 0, 0, 0) + b"\0",  # data type out of range
    struct.pack("<iiiQ", 11, 4, 0, 0) + b"\0",  # format out of range
    struct.pack("<iiiQ", 11, 0, 5, 0) + b"\0",  # not an OH_NN_TENSOR
    struct.pack("<iiiQ", 11, 0, 0, 1 << 40) + b"\0",  # absurd rank
    struct.pack("<iiiQ", 11, 0, 0, 0) + b"\xff\0",  # name not UTF-8
])
def test_malformed_descriptors_are_rejected(raw: bytes) -> None:
    with pytest.raises(mc.CacheInvalid):
        mc.decode_descs(raw)


# -- the directory ---------------------------------------------------------------------------------


def test_write_then_read_back(tmp_path: Path) -> None:
    cache = mc.CacheDir(tmp_path)
    cc = contents()
    cache.write(cc, 7, DEVICE, DIGEST)
    assert sorted(os.listdir(tmp_path)) == ["0.nncache", "1.nncache", "2.nncache", "3.nncache",
                                            "cache_info.nncache"]
    assert (tmp_path / "0.nncache").read_bytes() == cc.blobs[0]  # driver blobs verbatim
    assert (tmp_path / "2.nncache").read_bytes() == mc.encode_descs(cc.inputs)
    index = cache.read_index()
    assert (index.version, index.device_id, index.model_digest, index.file_number) == \
        (7, DEVICE, DIGEST, 4)
    assert cache.load(index) == cc


def test_index_is_one_line_of_sorted_compact_json(tmp_path: Path) -> None:
    mc.CacheDir(tmp_path).write(contents(), 3, DEVICE, DIGEST)
    text = (tmp_path / "cache_info.nncache").read_text()
    assert "\n" not in text and " " not in text
    top = json.loads(text)
    data_text = json.dumps(top["data"], sort_keys=True, separators=(",", ":"))
    assert data_text in text and list(top) == sorted(top)
    assert top["CheckSum"] == reference_checksum(data_text.encode())
    data = top["data"]
    assert data["version"] == 3 and data["deviceId"] == DEVICE and data["fileNumber"] == 4
    files = [(tmp_path / f"{i}.nncache").read_bytes() for i in range(4)]
    assert data["modelCheckSum"] == [reference_checksum(f) for f in files]
    assert data["fileSize"] == [len(f) for f in files]


def test_no_index_means_no_cache(tmp_path: Path) -> None:
    assert mc.CacheDir(tmp_path).read_index() is None


def test_prefixes_keep_models_apart(tmp_path: Path) -> None:
    a, b = contents((5,)), contents((9, 9, 9))
    mc.CacheDir(tmp_path, "a").write(a, 1, DEVICE, DIGEST)
    mc.CacheDir(tmp_path, "b").write(b, 2, DEVICE, DIGEST)
    assert (tmp_path / "acache_info.nncache").exists() and (tmp_path / "b4.nncache").exists()
    for prefix, cc, version in (("a", a, 1), ("b", b, 2)):
        cache = mc.CacheDir(tmp_path, prefix)
        index = cache.read_index()
        assert index.version == version and cache.load(index) == cc
    assert mc.CacheDir(tmp_path).read_index() is None


def test_rewrite_replaces_the_old_cache(tmp_path: Path) -> None:
    cache = mc.CacheDir(tmp_path)
    cache.write(contents((4, 4, 4)), 1, DEVICE, DIGEST)
    (tmp_path / "unrelated.nncache").write_bytes(b"keep me")
    cache.write(contents((6,)), 2, DEVICE, DIGEST)
    assert not (tmp_path / "3.nncache").exists() and not (tmp_path / "4.nncache").exists()
    assert (tmp_path / "unrelated.nncache").read_bytes() == b"keep me"
    index = cache.read_index()
    assert index.version == 2 and cache.load(index) == contents((6,))
    assert not [p for p in os.listdir(tmp_path) if ".tmp" in p]


def test_write_refuses_what_cannot_be_a_cache(tmp_path: Path) -> None:
    cache = mc.CacheDir(tmp_path)
    with pytest.raises(ValueError):
        cache.write(contents(), mc.UINT32_MAX, DEVICE, DIGEST)
    with pytest.raises(ValueError):
        cache.write(contents(()), 1, DEVICE, DIGEST)  # no driver blob
    with pytest.raises(ValueError):
        cache.write(contents((1,) * 99), 1, DEVICE, DIGEST)  # 101 files
    assert os.listdir(tmp_path) == []


def _written(tmp_path: Path) -> mc.CacheDir:
    cache = mc.CacheDir(tmp_path)
    cache.write(contents((300, 5)), 1, DEVICE, DIGEST)
    return cache


def _load(cache: mc.CacheDir) -> mc.CacheContents:
    index = cache.read_index()
    return cache.load(index)


@pytest.mark.parametrize("file", [0, 1, 2, 3])
@pytest.mark.parametrize("where", [0, -1, "middle"])
def test_a_bit_flip_in_any_file_is_detected(tmp_path: Path, file: int, where) -> None:
    cache = _written(tmp_path)
    path = tmp_path / f"{file}.nncache"
    data = bytearray(path.read_bytes())
    pos = len(data) // 2 if where == "middle" else where
    data[pos] ^= 0x10
    path.write_bytes(bytes(data))
    with pytest.raises(mc.CacheInvalid, match="checksum"):
        _load(cache)


def test_swapped_words_are_detected(tmp_path: Path) -> None:
    """A ones'-complement sum does not see reordered words; the SHA-256 does."""
    cache = _written(tmp_path)
    path = tmp_path / "0.nncache"
    data = bytearray(path.read_bytes())
    data[0:2], data[2:4] = data[2:4], data[0:2]
    assert data != path.read_bytes() and mc.checksum16(data) == mc.checksum16(path.read_bytes())
    path.write_bytes(bytes(data))
    with pytest.raises(mc.CacheInvalid):
        _load(cache)


@pytest.mark.parametrize("change", ["truncate", "grow", "empty", "missing"])
def test_resized_or_missing_files_are_detected(tmp_path: Path, change: str) -> None:
    cache = _written(tmp_path)
    path = tmp_path / "1.nncache"
    data = path.read_bytes()
    if change == "truncate":
        path.write_bytes(data[:-1])
    elif change == "grow":
        path.write_bytes(data + b"\0")
    elif change == "empty":
        path.write_bytes(b"")
    else:
        path.unlink()
    with pytest.raises(mc.CacheInvalid):
        _load(cache)


def test_another_models_file_is_detected(tmp_path: Path) -> None:
    cache = _written(tmp_path)
    mc.CacheDir(tmp_path, "other").write(contents((300, 5)[::-1]), 1, DEVICE, DIGEST)
    os.replace(tmp_path / "other0.nncache", tmp_path / "0.nncache")
    with pytest.raises(mc.CacheInvalid):
        _load(cache)


@pytest.mark.parametrize("damage", ["bitflip", "truncate", "not-json", "empty", "edited",
                                    "edited-consistently", "foreign", "dir"])
def test_a_damaged_index_is_detected(tmp_path: Path, damage: str) -> None:
    cache = _written(tmp_path)
    path = cache.index_path
    text = path.read_text()
    if damage == "bitflip":
        raw = bytearray(text.encode())
        raw[len(raw) // 2] ^= 0x01
        path.write_bytes(bytes(raw))
    elif damage == "truncate":
        path.write_text(text[:-5])
    elif damage == "not-json":
        path.write_bytes(b"\x00\xff garbage")
    elif damage == "empty":
        path.write_text("")
    elif damage == "edited":  # a newer version claimed without fixing the checksums
        path.write_text(text.replace('"version":1', '"version":2'))
    elif damage == "edited-consistently":  # upstream's 16-bit checksum fixed, our SHA-256 not
        top = json.loads(text)
        top["data"]["version"] = 2
        data_text = json.dumps(top["data"], sort_keys=True, separators=(",", ":"))
        top["CheckSum"] = reference_checksum(data_text.encode())
        path.write_text(json.dumps(top, sort_keys=True, separators=(",", ":")))
    elif damage == "foreign":  # upstream's own index format, checksummed correctly
        data = {"deviceId": 1, "fileNumber": 1, "isExceedRamLimit": 0, "liteGraphModelId": 0,
                "modelCheckSum": [1], "opVersion": 1, "version": 1}
        data_text = json.dumps(data, sort_keys=True, separators=(",", ":"))
        path.write_text(json.dumps({"CheckSum": reference_checksum(data_text.encode()),
                                    "data": data}, sort_keys=True, separators=(",", ":")))
    else:
        path.unlink()
        path.mkdir()
    with pytest.raises(mc.CacheInvalid):
        cache.read_index()


def test_large_file_damage_outside_upstreams_samples_is_detected(tmp_path: Path) -> None:
    cache = mc.CacheDir(tmp_path)
    big = np.random.default_rng(2).integers(0, 256, 4 << 20, np.uint8).tobytes()
    cache.write(mc.CacheContents([big], [], []), 1, DEVICE, DIGEST)
    path = tmp_path / "0.nncache"
    data = bytearray(path.read_bytes())
    data[2 * 1001] ^= 0xFF  # an unsampled word: the 16-bit checksum stays the same
    assert mc.checksum16(data) == mc.checksum16(big)
    path.write_bytes(bytes(data))
    with pytest.raises(mc.CacheInvalid):
        _load(cache)


# -- one blob ----------------------------------------------------------------------------------


def test_pack_unpack_round_trip() -> None:
    cc = contents()
    blob = mc.pack(cc, 5, DEVICE, DIGEST)
    assert blob.startswith(mc.MAGIC)
    index, back = mc.unpack(blob)
    assert back == cc
    assert (index.version, index.device_id, index.model_digest) == (5, DEVICE, DIGEST)
    assert mc.unpack(memoryview(bytearray(blob)))[1] == cc


def test_every_single_bit_flip_of_a_blob_is_detected() -> None:
    blob = mc.pack(contents((3, 2)), 5, DEVICE, DIGEST)
    for pos in range(len(blob)):
        damaged = bytearray(blob)
        damaged[pos] ^= 1 << (pos % 8)
        with pytest.raises(mc.CacheInvalid):
            mc.unpack(bytes(damaged))


@pytest.mark.parametrize("cut", [0, 4, 11, 40, -1])
def test_truncated_blob_is_detected(cut: int) -> None:
    blob = mc.pack(contents(), 5, DEVICE, DIGEST)
    with pytest.raises(mc.CacheInvalid):
        mc.unpack(blob[:cut])


def test_blob_with_trailing_bytes_or_foreign_magic_is_detected() -> None:
    blob = mc.pack(contents(), 5, DEVICE, DIGEST)
    with pytest.raises(mc.CacheInvalid):
        mc.unpack(blob + b"\0")
    with pytest.raises(mc.CacheInvalid):
        mc.unpack(b"XXXXXXXX" + blob[8:])
    with pytest.raises(mc.CacheInvalid):
        mc.unpack(b"")


def test_model_digest_names_the_model() -> None:
    a = mc.model_digest(lowered_add())
    assert a == mc.model_digest(lowered_add()) and len(a) == 64
    other = np.array([[0.5, -1.0, 2.0], [3.0, 0.25, -4.5]], np.float32)
    assert mc.model_digest(lowered_add(other)) != a
    assert mc.model_digest(None) == ""
