"""Nothing a client hands back is trusted as the driver's own (ARCHITECTURE decision 14): model
caches carry an HMAC under a key only the driver reads (hdi/cache_key.py), the onnxruntime
models inside one may not reach outside the blob, a graph blob is validated as a fresh model,
and OpenCL binaries a cache brings serve its own model alone. Real driver processes."""

from __future__ import annotations

import json
import os
import stat
import struct
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper

from nnrt.common.errors import NNRT_INVALID_MODEL_CACHE, NNRT_SUCCESS
from nnrt.protos import model_types_pb2 as mt
from nnrt.hdi import cache_key, sealed_blob
from tests.conftest import admin_details, open_fds, start_driver, wait_until
from tests.helpers.hdi_models import f32, mlp
from tests.helpers.model_cache import BATCH, SIZES, exported_blobs, prepare_from, run_prepared

pytestmark = pytest.mark.multiprocess

KEY = bytes(range(7, 7 + cache_key.KEY_BYTES))  # a key the test knows: a leaked one
SECRET = np.arange(BATCH * SIZES[2], dtype=np.float32) + 1234.5  # what a 0600 file holds


def _state(tmp_path: Path, key: bytes | None = KEY) -> Path:
    """A state directory (0700), holding `key` as the driver keeps it when given."""
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    if key is not None:
        fd = os.open(state / cache_key.KEY_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, key)
        os.close(fd)
    return state


def _cpu(tmp_path: Path, state: Path, tag: str = "rt"):
    return start_driver(tmp_path / tag, "cpu", "--engine", "ort", "--state-dir", str(state))


def _envelope(blob: bytes) -> tuple[bytes, int, str, bytes]:
    """(magic, version, identity, payload) of a keyed blob."""
    version, length = struct.unpack_from("<II", blob, 8)
    identity = blob[16:16 + length].decode()
    return blob[:8], version, identity, blob[16 + length + sealed_blob.TAG_BYTES:]


def _reseal(blob: bytes, payload: bytes, key: bytes, monkeypatch) -> bytes:
    """`payload` in `blob`'s envelope, tagged with `key` (as whoever holds it would)."""
    magic, version, identity, _ = _envelope(blob)
    with monkeypatch.context() as patch:
        patch.setattr(cache_key, "key", lambda: key)
        return sealed_blob.seal_keyed(magic, version, identity, payload)


# -- the onnxruntime optimised-model blob: the file-read attack ---------------------------------


def _ort_parts(payload: bytes) -> tuple[dict, list[bytes]]:
    (length,) = struct.unpack_from("<Q", payload, 0)
    header = json.loads(payload[8:8 + length])
    offset, models = 8 + length, []
    for _ in header["segments"]:
        (size,) = struct.unpack_from("<Q", payload, offset)
        models.append(payload[offset + 8:offset + 8 + size])
        offset += 8 + size
    return header, models


def _ort_payload(header: dict, models: list[bytes]) -> bytes:
    head = json.dumps(header).encode()
    return b"".join([struct.pack("<Q", len(head)), head,
                     *(struct.pack("<Q", len(m)) + m for m in models)])


def _file_reading_segment(model: bytes, secret: Path) -> bytes:
    """The segment model rewritten to output an initializer whose data is `secret`, named by a
    path relative to the driver's working directory, '/' as under systemd ('../../...':
    onnxruntime only checks that it resolves inside that directory)."""
    own = onnx.ModelProto.FromString(model)
    relative = "../../" + str(secret).lstrip("/")
    stolen = onnx.TensorProto(name="stolen", data_type=onnx.TensorProto.FLOAT,
                              dims=[BATCH, SIZES[2]],
                              data_location=onnx.TensorProto.EXTERNAL)
    for k, v in (("location", relative), ("offset", "0"), ("length", str(SECRET.nbytes))):
        stolen.external_data.add(key=k, value=v)
    (output,) = own.graph.output
    graph = helper.make_graph([helper.make_node("Identity", ["stolen"], [output.name])],
                              "stolen", list(own.graph.input), [output], [stolen])
    evil = helper.make_model(graph, opset_imports=list(own.opset_import), producer_name="nnrt")
    evil.ir_version = own.ir_version
    return evil.SerializeToString()


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    path = tmp_path / "secret.bin"
    path.write_bytes(SECRET.tobytes())
    path.chmod(0o600)
    return path


def test_a_crafted_onnxruntime_cache_reading_a_file_is_refused(tmp_path, secret, monkeypatch):
    state = _state(tmp_path)
    with monkeypatch.context() as patch:
        patch.chdir("/")  # the driver's working directory, as a service's
        driver = _cpu(tmp_path, state)
    try:
        with driver.client() as client:
            builder, reference = mlp(BATCH, SIZES)
            graph_blob, ort_blob = exported_blobs(client, builder.prepare(client))
            magic, version, identity, payload = _envelope(ort_blob)
            header, models = _ort_parts(payload)
            assert len(models) == 1  # the whole MLP is one onnxruntime segment
            evil = _ort_payload(header, [_file_reading_segment(models[0], secret)])
            fds = open_fds(driver.pid)
            forged = {
                # as the blob was before keys: a CRC over the crafted payload
                "crc": sealed_blob.seal(magic, 1, identity, evil),
                # the keyed layout, without the key: the tag of another key
                "no-key": _reseal(ort_blob, evil, bytes(32), monkeypatch),
                # the original tag over crafted content
                "kept-tag": ort_blob[:len(ort_blob) - len(payload)] + evil,
                # the key leaked: the second wall (no external data) holds
                "leaked-key": _reseal(ort_blob, evil, KEY, monkeypatch),
            }
            for how, blob in forged.items():
                reply = prepare_from(client, [graph_blob, blob])
                if reply.returnCode == NNRT_SUCCESS:  # the hole: what a run would hand out
                    stolen = run_prepared(client, reply.preparedModelId, f32(BATCH, SIZES[0]))
                    assert not np.array_equal(stolen.ravel(), SECRET), \
                        f"{how}: the driver read the 0600 file"
                assert reply.returnCode == NNRT_INVALID_MODEL_CACHE, how
            # nothing kept open by a refusal (a transient fd of gRPC's comes and goes)
            assert wait_until(lambda: open_fds(driver.pid) <= fds, 5), \
                open_fds(driver.pid) - fds
            # the driver's own blobs still prepare and compute (no secret in any output)
            reply = prepare_from(client, [graph_blob, ort_blob])
            assert reply.returnCode == NNRT_SUCCESS
            x = f32(BATCH, SIZES[0])
            y = run_prepared(client, reply.preparedModelId, x)
            np.testing.assert_allclose(y, reference(x), rtol=1e-5, atol=1e-6)
            assert not np.isin(SECRET, y).any()
        log = driver.log()
        assert "authentication tag does not verify" in log
        assert "names external data" in log
    finally:
        driver.stop()


def test_a_leaked_key_still_refuses_a_model_the_driver_did_not_produce(tmp_path, monkeypatch):
    driver = _cpu(tmp_path, _state(tmp_path))
    try:
        with driver.client() as client:
            builder, _ = mlp(BATCH, SIZES)
            graph_blob, ort_blob = exported_blobs(client, builder.prepare(client))
            header, (model,) = _ort_parts(_envelope(ort_blob)[3])
            own = onnx.ModelProto.FromString(model)
            foreign = onnx.ModelProto()
            foreign.CopyFrom(own)
            foreign.producer_name = "pytorch"
            alien = onnx.ModelProto()
            alien.CopyFrom(own)
            alien.graph.node[0].domain = "org.pytorch.aten"
            misplaced = onnx.ModelProto()
            misplaced.CopyFrom(own)
            misplaced.graph.input[0].name = "t999"
            for bad in (foreign, alien, misplaced):
                blob = _reseal(ort_blob, _ort_payload(header, [bad.SerializeToString()]), KEY,
                               monkeypatch)
                assert prepare_from(client, [graph_blob, blob]).returnCode == \
                    NNRT_INVALID_MODEL_CACHE
        log = driver.log()
        assert "produced by 'pytorch', not by nnrt" in log
        assert "of domain 'org.pytorch.aten'" in log
        assert "not those of its place in the model" in log
    finally:
        driver.stop()


# -- the graph blob ----------------------------------------------------------------------------


def test_a_tampered_graph_blob_is_refused_and_a_forged_one_validated_afresh(tmp_path,
                                                                            monkeypatch):
    driver = _cpu(tmp_path, _state(tmp_path))
    try:
        with driver.client() as client:
            builder, _ = mlp(BATCH, SIZES)
            graph_blob, ort_blob = exported_blobs(client, builder.prepare(client))
            payload = _envelope(graph_blob)[3]
            # one weight changed, and the CRC of old would have matched it: refused by its tag
            changed = bytearray(graph_blob)
            changed[-5] ^= 0x40
            assert prepare_from(client, [bytes(changed)]).returnCode == NNRT_INVALID_MODEL_CACHE
            assert prepare_from(client, [bytes(changed), ort_blob]).returnCode == \
                NNRT_INVALID_MODEL_CACHE
            # with the key: a model no PrepareModel would accept (a node reading tensor 99)
            (length,) = struct.unpack_from("<Q", payload, 0)
            model = mt.Model.FromString(payload[8:8 + length])
            model.nodes[0].inputIndex[0] = 99
            body = model.SerializeToString()
            forged = _reseal(graph_blob, struct.pack("<Q", len(body)) + body +
                             payload[8 + length:], KEY, monkeypatch)
            assert prepare_from(client, [forged]).returnCode == NNRT_INVALID_MODEL_CACHE
            assert prepare_from(client, [graph_blob, ort_blob]).returnCode == NNRT_SUCCESS
        log = driver.log()
        assert "model cache refused: not authenticated" in log
        assert "model cache refused:" in log and "99" in log
    finally:
        driver.stop()


# -- the key: one per state directory, kept, 0600 ----------------------------------------------


def _key_file(state: Path) -> bytes:
    path = state / cache_key.KEY_FILE
    st = os.lstat(path)
    assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600
    assert st.st_uid == os.geteuid() and st.st_nlink == 1
    return path.read_bytes()


def test_the_key_is_kept_across_restarts_and_another_key_refuses(tmp_path):
    state, other = _state(tmp_path, key=None), tmp_path / "other-state"
    other.mkdir(mode=0o700)
    x = f32(BATCH, SIZES[0])
    first = _cpu(tmp_path, state)
    try:
        with first.client() as client:
            builder, reference = mlp(BATCH, SIZES)
            blobs = exported_blobs(client, builder.prepare(client))
    finally:
        first.stop()
    key = _key_file(state)  # created at the first export, 0600
    assert len(key) == cache_key.KEY_BYTES
    stranger = _cpu(tmp_path, other, "rt2")
    try:
        with stranger.client() as client:
            assert prepare_from(client, blobs).returnCode == NNRT_INVALID_MODEL_CACHE
            assert prepare_from(client, blobs[:1]).returnCode == NNRT_INVALID_MODEL_CACHE
        assert "authentication tag does not verify" in stranger.log()
    finally:
        stranger.stop()
    again = _cpu(tmp_path, state)
    try:
        with again.client() as client:
            reply = prepare_from(client, blobs)
            assert reply.returnCode == NNRT_SUCCESS
            np.testing.assert_allclose(run_prepared(client, reply.preparedModelId, x),
                                       reference(x), rtol=1e-5, atol=1e-6)
        assert "(kept)" in again.log()
    finally:
        again.stop()
    assert _key_file(state) == key


def test_without_a_state_dir_option_the_key_is_kept_in_the_runtime_dir(tmp_path, monkeypatch):
    monkeypatch.delenv(cache_key.STATE_ENV, raising=False)
    monkeypatch.delenv(cache_key.SYSTEMD_STATE_ENV, raising=False)
    runtime = tmp_path / "rt"
    blobs = []
    for _ in range(2):
        driver = start_driver(runtime, "cpu")
        try:
            with driver.client() as client:
                builder, _ = mlp(BATCH, SIZES)
                if not blobs:
                    blobs = exported_blobs(client, builder.prepare(client))
                else:
                    assert prepare_from(client, blobs).returnCode == NNRT_SUCCESS
        finally:
            driver.stop()
    assert len(_key_file(runtime)) == cache_key.KEY_BYTES


def test_an_exposed_key_is_replaced_and_its_caches_refused(tmp_path):
    state = _state(tmp_path)
    (state / cache_key.KEY_FILE).chmod(0o644)  # others may have read it
    driver = _cpu(tmp_path, state)
    try:
        with driver.client() as client:
            builder, _ = mlp(BATCH, SIZES)
            blobs = exported_blobs(client, builder.prepare(client))
            assert prepare_from(client, blobs).returnCode == NNRT_SUCCESS
        assert "is unfit (readable or writable by others (mode 0644))" in driver.log()
    finally:
        driver.stop()
    assert _key_file(state) != KEY  # a new key, 0600


def test_without_a_usable_state_dir_caches_live_as_long_as_the_process(tmp_path):
    not_a_dir = tmp_path / "state"
    not_a_dir.write_bytes(b"")
    driver = _cpu(tmp_path, not_a_dir)
    try:
        with driver.client() as client:
            builder, _ = mlp(BATCH, SIZES)
            blobs = exported_blobs(client, builder.prepare(client))
            assert prepare_from(client, blobs).returnCode == NNRT_SUCCESS
        assert "a key of this process alone" in driver.log()
    finally:
        driver.stop()
    driver = _cpu(tmp_path, not_a_dir)
    try:
        with driver.client() as client:
            assert prepare_from(client, blobs).returnCode == NNRT_INVALID_MODEL_CACHE
    finally:
        driver.stop()


# -- the GPU program cache ---------------------------------------------------------------------


ANY = ("--cl-device", "any")


def _gpu(tmp_path: Path, state: Path, tag: str):
    return start_driver(tmp_path / tag, "gpu", *ANY, "--state-dir", str(state))


def _program_entries(payload: bytes) -> list[tuple[bytes, bytes]]:
    (count,) = struct.unpack_from("<I", payload, 0)
    offset, entries = 4, []
    for _ in range(count):
        key = payload[offset:offset + 64]
        (length,) = struct.unpack_from("<Q", payload, offset + 64)
        entries.append((key, payload[offset + 72:offset + 72 + length]))
        offset += 72 + length
    return entries


def _program_payload(entries: list[tuple[bytes, bytes]]) -> bytes:
    return struct.pack("<I", len(entries)) + b"".join(
        key + struct.pack("<Q", len(binary)) + binary for key, binary in entries)


def test_a_poisoned_program_cache_never_reaches_another_session(tmp_path, monkeypatch):
    """A cache whose binaries sit under the keys of other programs (tagged with a leaked key,
    the worst case) is loaded by the session that brought it alone: another session's model,
    prepared afterwards, computes right."""
    pytest.importorskip("pyopencl")
    state = _state(tmp_path)
    builder, reference = mlp(BATCH, SIZES)
    x = f32(BATCH, SIZES[0])
    first = _gpu(tmp_path, state, "rt1")
    try:
        with first.client() as session:
            graph_blob, program_blob = exported_blobs(session, builder.prepare(session))
    finally:
        first.stop()
    entries = _program_entries(_envelope(program_blob)[3])
    assert len(entries) >= 2
    keys, binaries = zip(*entries)
    poisoned = list(zip(keys, binaries[1:] + binaries[:1]))  # each binary under another's key
    poisoned_blob = _reseal(program_blob, _program_payload(poisoned), KEY, monkeypatch)
    unkeyed_blob = _reseal(program_blob, _program_payload(poisoned), bytes(32), monkeypatch)
    driver = _gpu(tmp_path, state, "rt2")  # nothing built yet in this process
    try:
        with driver.client() as attacker, driver.client() as victim:
            assert prepare_from(attacker, [graph_blob, unkeyed_blob]).returnCode == \
                NNRT_INVALID_MODEL_CACHE
            attacked = prepare_from(attacker, [graph_blob, poisoned_blob])
            assert int(admin_details(driver)["programs_loaded_from_binary"]) >= 1
            model_id = builder.prepare(victim)
            np.testing.assert_allclose(run_prepared(victim, model_id, x), reference(x),
                                       rtol=1e-4, atol=1e-6)
            # the sound cache still loads, for its own model
            reply = prepare_from(victim, [graph_blob, program_blob])
            assert reply.returnCode == NNRT_SUCCESS
            np.testing.assert_allclose(run_prepared(victim, reply.preparedModelId, x),
                                       reference(x), rtol=1e-4, atol=1e-6)
            if attacked.returnCode == NNRT_SUCCESS:  # its own model runs what it brought
                attacker.release_prepared_model(attacked.preparedModelId)
    finally:
        driver.stop()
