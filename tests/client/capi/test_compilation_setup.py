"""OH_NNCompilation_* (capi.md 1.1–1.12): one test per row of every condition table of the
constructors, the cache buffers, extensions and options, end to end across processes (Build,
offline models, the cache table of 1.9 and Destroy, on this module's fixtures:
test_compilation_build.py).

Two drivers serve one runtime directory for the module: the real CPU driver ("cpu", device 0;
no model cache, no offline models) and the test feature driver ("feature",
tests/client/capi/util_compilation.py: cache, offline models, float16, performance modes,
priorities). A second directory holds feature drivers with one thing broken each, and
"bare", which has none of the features. A test that kills a driver starts its own.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import nnrt.client.core.device as devices_module
from nnrt.client import capi
from nnrt.client.core import model_cache
from nnrt.client.capi.compilation import OH_NNCompilation
from nnrt.client.core.device import DeviceRegistry, device_id_of
from tests.client.capi.util_capi import W, add_model
from tests.client.capi.util_compilation import (
    MAGIC,
    build,
    feature_id,
    run_add,
    start_feature_driver,
    start_feature_drivers,
)

SUCCESS = capi.OH_NN_SUCCESS
FAILED = capi.OH_NN_FAILED
INVALID = capi.OH_NN_INVALID_PARAMETER
FORBIDDEN = capi.OH_NN_OPERATION_FORBIDDEN
INVALID_FILE = capi.OH_NN_INVALID_FILE
INVALID_PATH = capi.OH_NN_INVALID_PATH
UNSUPPORTED = capi.OH_NN_UNSUPPORTED
CONNECTION = capi.OH_NN_CONNECTION_EXCEPTION
SAVE_CACHE = capi.OH_NN_SAVE_CACHE_EXCEPTION
UNAVAILABLE = capi.OH_NN_UNAVAILABLE_DEVICE

CPU_ID = device_id_of("nnrt-cpu_nnrt_v2_1", "cpu")
FEATURE_ID = feature_id("feature")
BARE_ID = feature_id("bare")
X = np.arange(6, dtype=np.float32).reshape(2, 3)


@pytest.fixture(scope="module")
def feature_driver(shared_driver):
    driver = start_feature_driver(shared_driver.runtime_dir, "feature")
    yield driver
    driver.stop()


@pytest.fixture(scope="module")
def registry(shared_driver, feature_driver):
    """One device registry for the module (sessions are reused across its tests)."""
    reg = DeviceRegistry(shared_driver.runtime_dir)
    yield reg
    reg.close()


@pytest.fixture
def rt(registry, feature_driver, monkeypatch):
    """Both drivers as the C API's devices: cpu first, then feature."""
    monkeypatch.setattr(devices_module, "_registry", registry)
    assert capi.OH_NNDevice_GetAllDevicesID() == (SUCCESS, [CPU_ID, FEATURE_ID])
    return feature_driver


@pytest.fixture(scope="module")
def broken_drivers(tmp_path_factory):
    """Feature drivers with one thing broken each, in a runtime directory of their own."""
    directory = tmp_path_factory.mktemp("broken") / "rt"
    drivers = start_feature_drivers(directory, {
        "caps": ["fp16_query", "perf_query", "prio_query", "cache_query"],
        "export": ["export"], "supported": ["supported"], "unsupported": ["unsupported"],
        "prepare": ["prepare"], "bare": ["nofeatures"],
    })
    reg = DeviceRegistry(directory)
    yield reg, drivers
    reg.close()
    for driver in drivers.values():
        driver.stop()


@pytest.fixture
def broken(broken_drivers, monkeypatch):
    reg, drivers = broken_drivers
    monkeypatch.setattr(devices_module, "_registry", reg)
    return drivers


@pytest.fixture
def model():
    m = add_model()
    yield m
    capi.OH_NNModel_Destroy(m)


def cpu_has_cache() -> bool:
    return devices_module.registry().get(CPU_ID).client().is_model_cache_supported().isSupported


def rt_cpu_log(rt) -> str:
    """The CPU driver's log (it writes beside the runtime directory, as the feature driver)."""
    return "".join(p.read_text(errors="replace") for p in rt.runtime_dir.parent.glob("cpu-*.log"))


def cache_dir(tmp_path: Path) -> Path:
    path = tmp_path / "cache"
    path.mkdir(exist_ok=True)
    return path


def compilation_on(model, device_id: int) -> OH_NNCompilation:
    c = capi.OH_NNCompilation_Construct(model)
    assert capi.OH_NNCompilation_SetDevice(c, device_id) == SUCCESS
    return c


def not_handles():
    destroyed = capi.OH_NNCompilation_ConstructForCache()
    capi.OH_NNCompilation_Destroy(destroyed)
    return [None, object(), capi.OH_NNTensorDesc_Create(), destroyed]


BAD_COMPILATIONS = pytest.mark.parametrize("bad", not_handles(),
                                           ids=["NULL", "object", "wrong-type", "destroyed"])


# -- 1.1 – 1.4 constructors --------------------------------------------------------------------


def test_construct_from_a_model(model) -> None:
    c = capi.OH_NNCompilation_Construct(model)
    assert isinstance(c, OH_NNCompilation) and c.built is None


@pytest.mark.parametrize("bad", ["NULL", "object", "desc", "destroyed"])
def test_construct_without_a_model_is_null(bad: str) -> None:
    if bad == "destroyed":
        m = add_model()
        capi.OH_NNModel_Destroy(m)
    else:
        m = {"NULL": None, "object": object(), "desc": capi.OH_NNTensorDesc_Create()}[bad]
    assert capi.OH_NNCompilation_Construct(m) is None


def test_construct_from_an_unfinished_model_builds_with_invalid_parameter(rt) -> None:
    m = add_model(finish=False)
    c = capi.OH_NNCompilation_Construct(m)
    assert c is not None
    assert capi.OH_NNCompilation_Build(c) == INVALID


def test_construct_with_offline_model_file(tmp_path: Path) -> None:
    assert capi.OH_NNCompilation_ConstructWithOfflineModelFile(None) is None
    assert capi.OH_NNCompilation_ConstructWithOfflineModelFile(42) is None
    for path in (str(tmp_path / "never-opened"), tmp_path / "x", b"/tmp/x"):
        c = capi.OH_NNCompilation_ConstructWithOfflineModelFile(path)
        assert isinstance(c, OH_NNCompilation)  # not opened or validated here


@pytest.mark.parametrize("buffer, size, ok", [
    (None, 3, False), (b"abc", 0, False), (b"abc", 4, False), ("abc", 3, False),
    (b"abc", -1, False), (b"abc", 3, True), (bytearray(b"abcd"), 2, True),
    (np.arange(4, dtype=np.int32), 16, True),
], ids=["NULL", "size-0", "size-too-big", "not-a-buffer", "negative", "ok", "prefix", "numpy"])
def test_construct_with_offline_model_buffer(buffer, size, ok: bool) -> None:
    c = capi.OH_NNCompilation_ConstructWithOfflineModelBuffer(buffer, size)
    assert (c is not None) == ok
    if ok:
        assert c.offline_buffer == bytes(memoryview(buffer).cast("B")[:size])


def test_offline_buffer_is_copied() -> None:
    data = bytearray(b"model")
    c = capi.OH_NNCompilation_ConstructWithOfflineModelBuffer(data, 5)
    data[:] = b"xxxxx"
    assert c.offline_buffer == b"model"


def test_construct_for_cache() -> None:
    c = capi.OH_NNCompilation_ConstructForCache()
    assert isinstance(c, OH_NNCompilation) and c.sources() == 0


# -- 1.5 ExportCacheToBuffer -------------------------------------------------------------------


@BAD_COMPILATIONS
def test_export_bad_handle(bad) -> None:
    assert capi.OH_NNCompilation_ExportCacheToBuffer(bad, bytearray(8), 8) == (INVALID, None)


def test_export_argument_rows(rt, model) -> None:
    c = compilation_on(model, FEATURE_ID)
    buf = bytearray(64)
    assert capi.OH_NNCompilation_ExportCacheToBuffer(c, None, 64) == (INVALID, None)
    assert capi.OH_NNCompilation_ExportCacheToBuffer(c, buf, 0) == (INVALID, None)
    assert capi.OH_NNCompilation_ExportCacheToBuffer(c, buf, 65) == (INVALID, None)
    assert capi.OH_NNCompilation_ExportCacheToBuffer(c, bytes(64), 64) == (INVALID, None)
    assert capi.OH_NNCompilation_ExportCacheToBuffer(c, buf, 64) == (INVALID, None)  # not built
    assert capi.OH_NNCompilation_Build(c) == SUCCESS
    assert capi.OH_NNCompilation_ExportCacheToBuffer(c, "text", 4) == (INVALID, None)


def test_export_after_a_failed_build(rt, model) -> None:
    c = compilation_on(model, 12345)
    assert capi.OH_NNCompilation_Build(c) == FAILED
    assert capi.OH_NNCompilation_ExportCacheToBuffer(c, bytearray(8), 8) == (INVALID, None)


def test_export_on_a_device_without_cache_is_unsupported(broken, model) -> None:
    code, c = build(model, device_id=BARE_ID)
    assert code == SUCCESS
    assert capi.OH_NNCompilation_ExportCacheToBuffer(c, bytearray(4096), 4096) == \
        (UNSUPPORTED, None)


def test_export_and_import_with_the_cpu_driver(rt, model) -> None:
    """The real CPU driver's cache through ExportCacheToBuffer / ImportCacheFromBuffer."""
    assert cpu_has_cache()
    code, c = build(model)  # device 0: the CPU driver
    assert code == SUCCESS
    buffer = bytearray(1 << 16)
    code, size = capi.OH_NNCompilation_ExportCacheToBuffer(c, buffer, len(buffer))
    assert code == SUCCESS and 0 < size < len(buffer)
    restored = capi.OH_NNCompilation_ConstructForCache()
    assert capi.OH_NNCompilation_SetDevice(restored, CPU_ID) == SUCCESS
    assert capi.OH_NNCompilation_ImportCacheFromBuffer(restored, bytes(buffer[:size]), size) \
        == SUCCESS
    assert capi.OH_NNCompilation_Build(restored) == SUCCESS
    np.testing.assert_allclose(run_add(restored, X), X + W)


def test_export_then_import_round_trip(rt, model) -> None:
    code, c = build(model, device_id=FEATURE_ID)
    assert code == SUCCESS
    code, needed = capi.OH_NNCompilation_ExportCacheToBuffer(c, bytearray(1), 1)
    assert code == INVALID and needed > 1  # too small: the size needed, nothing written
    small = bytearray(needed - 1)
    assert capi.OH_NNCompilation_ExportCacheToBuffer(c, small, len(small)) == (INVALID, needed)
    assert small == bytearray(needed - 1)
    buf = np.zeros(needed + 10, np.uint8)
    assert capi.OH_NNCompilation_ExportCacheToBuffer(c, buf, buf.nbytes) == (SUCCESS, needed)
    index, contents = model_cache.unpack(buf[:needed].tobytes())
    assert index.device_id == FEATURE_ID and contents.blobs[0] == MAGIC
    assert [d.shape for d in contents.inputs] == [[2, 3]]

    restored = capi.OH_NNCompilation_ConstructForCache()
    assert capi.OH_NNCompilation_SetDevice(restored, FEATURE_ID) == SUCCESS
    assert capi.OH_NNCompilation_ImportCacheFromBuffer(restored, buf, needed) == SUCCESS
    assert capi.OH_NNCompilation_Build(restored) == SUCCESS
    assert restored.built.source == "cache" and restored.built.model is None
    np.testing.assert_allclose(run_add(restored, X), X + W)
    assert "restored 1 nodes from a cache" in rt.log()
    # a restored compilation exports the same cache again
    again = bytearray(needed)
    assert capi.OH_NNCompilation_ExportCacheToBuffer(restored, again, needed) == (SUCCESS, needed)
    assert model_cache.unpack(again)[1] == contents


def test_export_when_the_driver_cannot(broken, model) -> None:
    code, c = build(model, device_id=feature_id("export"))
    assert code == SUCCESS
    assert capi.OH_NNCompilation_ExportCacheToBuffer(c, bytearray(99), 99) == (SAVE_CACHE, None)


# -- 1.6 ImportCacheFromBuffer -----------------------------------------------------------------


@BAD_COMPILATIONS
def test_import_bad_handle(bad) -> None:
    assert capi.OH_NNCompilation_ImportCacheFromBuffer(bad, b"abc", 3) == INVALID


@pytest.mark.parametrize("buffer, size, code", [
    (None, 3, INVALID), (b"abc", 0, INVALID), (b"abc", 4, INVALID), (42, 1, INVALID),
    (b"abc", 3, SUCCESS), (b"abc", 2, SUCCESS),
], ids=["NULL", "size-0", "size-too-big", "not-a-buffer", "ok", "prefix"])
def test_import_rows(buffer, size, code) -> None:
    c = capi.OH_NNCompilation_ConstructForCache()
    assert capi.OH_NNCompilation_ImportCacheFromBuffer(c, buffer, size) == code
    if code == SUCCESS:
        assert c.imported == bytes(buffer[:size])  # copied; validated only at Build


def _exported(model) -> bytes:
    code, c = build(model, device_id=FEATURE_ID)
    assert code == SUCCESS
    buf = bytearray(1 << 16)
    code, n = capi.OH_NNCompilation_ExportCacheToBuffer(c, buf, len(buf))
    assert code == SUCCESS
    return bytes(buf[:n])


@pytest.mark.parametrize("damage", ["garbage", "bitflip", "truncated"])
def test_build_from_a_bad_imported_cache_is_invalid_file(rt, model, damage) -> None:
    blob = bytearray(_exported(model))
    if damage == "garbage":
        blob = bytearray(b"not a cache at all")
    elif damage == "bitflip":
        blob[len(blob) - 3] ^= 0x04
    elif damage == "truncated":
        del blob[-1]
    c = capi.OH_NNCompilation_ConstructForCache()
    assert capi.OH_NNCompilation_ImportCacheFromBuffer(c, blob, len(blob)) == SUCCESS
    assert capi.OH_NNCompilation_SetDevice(c, FEATURE_ID) == SUCCESS
    assert capi.OH_NNCompilation_Build(c) == INVALID_FILE
    assert c.built is None


def test_imported_cache_of_another_device(rt, model) -> None:
    blob = _exported(model)
    index, contents = model_cache.unpack(blob)
    foreign = model_cache.pack(contents, index.version, index.device_id + 1, index.model_digest)
    c = capi.OH_NNCompilation_ConstructForCache()
    assert capi.OH_NNCompilation_SetDevice(c, FEATURE_ID) == SUCCESS
    assert capi.OH_NNCompilation_ImportCacheFromBuffer(c, foreign, len(foreign)) == SUCCESS
    assert capi.OH_NNCompilation_Build(c) == INVALID_FILE


def test_import_on_a_device_without_cache_is_forbidden(broken) -> None:
    blob = model_cache.pack(model_cache.CacheContents([MAGIC], [], []), 0, BARE_ID, "")
    c = capi.OH_NNCompilation_ConstructForCache()
    assert capi.OH_NNCompilation_SetDevice(c, BARE_ID) == SUCCESS
    assert capi.OH_NNCompilation_ImportCacheFromBuffer(c, blob, len(blob)) == SUCCESS
    assert capi.OH_NNCompilation_Build(c) == FORBIDDEN


# -- 1.7 AddExtensionConfig --------------------------------------------------------------------


@BAD_COMPILATIONS
def test_extension_bad_handle(bad) -> None:
    assert capi.OH_NNCompilation_AddExtensionConfig(bad, "k", b"v", 1) == INVALID


@pytest.mark.parametrize("name, value, size, code", [
    (None, b"v", 1, INVALID), ("k", None, 1, INVALID), ("k", b"v", 0, INVALID),
    ("", b"v", 1, INVALID), ("k", b"v", 2, INVALID), (3, b"v", 1, INVALID),
    ("k", 5, 1, INVALID), ("k", b"v", 1, SUCCESS), (b"k", bytearray(b"vw"), 1, SUCCESS),
], ids=["name-NULL", "value-NULL", "size-0", "name-empty", "size-too-big", "name-not-text",
        "value-not-buffer", "ok", "bytes-name"])
def test_extension_rows(name, value, size, code) -> None:
    c = capi.OH_NNCompilation_ConstructForCache()
    assert capi.OH_NNCompilation_AddExtensionConfig(c, name, value, size) == code
    if code == SUCCESS:
        assert c.extensions == {"k": b"v"}


def test_repeated_extension_appends_with_a_bar() -> None:
    c = capi.OH_NNCompilation_ConstructForCache()
    for value in (b"a", b"bc", b"d"):
        code = capi.OH_NNCompilation_AddExtensionConfig(c, "ModelName", value, len(value))
        assert code == SUCCESS
    assert c.extensions["ModelName"] == b"a|bc|d"


def test_every_extension_reaches_the_driver(rt, model) -> None:
    extensions = {"vendor.key": b"\x00\x01", "ModelName": b"m1", "NPU_FM_SHARED": b"1"}
    code, c = build(model, device_id=FEATURE_ID, extensions=extensions)
    assert code == SUCCESS
    assert c.built.config.extensions == {"vendor.key": b"\x00\x01", "ModelName": b"m1",
                                                  "NPU_FM_SHARED": b"1"}
    assert "extensions: [('ModelName', b'm1'), ('NPU_FM_SHARED', b'1'), " \
           "('vendor.key', b'\\x00\\x01')]" in rt.log()


def test_an_extension_the_driver_rejects_fails_build(rt, model) -> None:
    code, c = build(model, device_id=FEATURE_ID, extensions={"reject": b"1"})
    assert code == INVALID and c.built is None


# -- 1.8 – 1.12 options ------------------------------------------------------------------------

SETTERS = {
    "SetDevice": lambda c: capi.OH_NNCompilation_SetDevice(c, 0),
    "SetCache": lambda c: capi.OH_NNCompilation_SetCache(c, "/tmp", 1),
    "SetPerformanceMode": lambda c: capi.OH_NNCompilation_SetPerformanceMode(c, 0),
    "SetPriority": lambda c: capi.OH_NNCompilation_SetPriority(c, 0),
    "EnableFloat16": lambda c: capi.OH_NNCompilation_EnableFloat16(c, False),
}


@pytest.mark.parametrize("setter", SETTERS)
@BAD_COMPILATIONS
def test_setters_reject_bad_handles(setter, bad) -> None:
    assert SETTERS[setter](bad) == INVALID


@pytest.mark.parametrize("setter", SETTERS)
def test_setters_succeed_before_build(setter) -> None:
    assert SETTERS[setter](capi.OH_NNCompilation_ConstructForCache()) == SUCCESS


@pytest.mark.parametrize("setter", SETTERS)
def test_setters_after_build_are_forbidden(rt, model, setter) -> None:
    code, c = build(model)
    assert code == SUCCESS
    assert SETTERS[setter](c) == FORBIDDEN


def test_setters_after_a_failed_build_are_allowed(rt, model) -> None:
    c = compilation_on(model, 999)
    assert capi.OH_NNCompilation_Build(c) == FAILED
    for setter in SETTERS.values():
        assert setter(c) == SUCCESS


def test_set_device_values() -> None:
    c = capi.OH_NNCompilation_ConstructForCache()
    assert capi.OH_NNCompilation_SetDevice(c, FEATURE_ID) == SUCCESS and c.device_id == FEATURE_ID
    assert capi.OH_NNCompilation_SetDevice(c, 123) == SUCCESS  # not validated here
    assert capi.OH_NNCompilation_SetDevice(c, -1) == INVALID  # not a size_t
    assert capi.OH_NNCompilation_SetDevice(c, "0") == INVALID


def test_set_cache_values(tmp_path: Path) -> None:
    c = capi.OH_NNCompilation_ConstructForCache()
    assert capi.OH_NNCompilation_SetCache(c, None, 1) == INVALID
    assert capi.OH_NNCompilation_SetCache(c, str(tmp_path), 0) == SUCCESS
    assert capi.OH_NNCompilation_SetCache(c, tmp_path, 0) == SUCCESS  # os.PathLike
    assert capi.OH_NNCompilation_SetCache(c, b"/no/such/dir", 1) == SUCCESS  # checked at Build
    assert (c.cache_path, c.cache_version) == ("/no/such/dir", 1)
    assert capi.OH_NNCompilation_SetCache(c, "/tmp", model_cache.UINT32_MAX) == SUCCESS
    assert capi.OH_NNCompilation_SetCache(c, "/tmp", -1) == INVALID  # not a uint32_t
    assert capi.OH_NNCompilation_SetCache(c, "/tmp", 1 << 32) == INVALID
    assert capi.OH_NNCompilation_SetCache(c, 5, 1) == INVALID


@pytest.mark.parametrize("value, code", [(0, SUCCESS), (4, SUCCESS), (-1, INVALID), (5, INVALID),
                                         (1.0, INVALID), (None, INVALID)])
def test_set_performance_mode_values(value, code) -> None:
    c = capi.OH_NNCompilation_ConstructForCache()
    assert capi.OH_NNCompilation_SetPerformanceMode(c, value) == code


@pytest.mark.parametrize("value, code", [(0, SUCCESS), (3, SUCCESS), (-1, INVALID), (4, INVALID),
                                         ("1", INVALID)])
def test_set_priority_values(value, code) -> None:
    c = capi.OH_NNCompilation_ConstructForCache()
    assert capi.OH_NNCompilation_SetPriority(c, value) == code


@pytest.mark.parametrize("option, setter", [
    ("float16", lambda c: capi.OH_NNCompilation_EnableFloat16(c, True)),
    ("performance", lambda c: capi.OH_NNCompilation_SetPerformanceMode(c, 3)),
    ("priority", lambda c: capi.OH_NNCompilation_SetPriority(c, capi.OH_NN_PRIORITY_LOW)),
])
def test_unsupported_option_is_unavailable_device(broken, model, option, setter) -> None:
    c = compilation_on(model, BARE_ID)
    assert setter(c) == SUCCESS
    assert capi.OH_NNCompilation_Build(c) == UNAVAILABLE
    assert c.built is None


@pytest.mark.parametrize("setter", [
    lambda c: capi.OH_NNCompilation_EnableFloat16(c, True),
    lambda c: capi.OH_NNCompilation_SetPerformanceMode(c, capi.OH_NN_PERFORMANCE_HIGH),
    lambda c: capi.OH_NNCompilation_SetPriority(c, capi.OH_NN_PRIORITY_LOW),
], ids=["float16", "performance", "priority"])
def test_supported_option_builds(rt, model, setter) -> None:
    feature = compilation_on(model, FEATURE_ID)
    assert setter(feature) == SUCCESS
    assert capi.OH_NNCompilation_Build(feature) == SUCCESS


def test_options_reach_the_driver(rt, model) -> None:
    c = compilation_on(model, FEATURE_ID)
    assert capi.OH_NNCompilation_EnableFloat16(c, True) == SUCCESS
    assert capi.OH_NNCompilation_SetPerformanceMode(c, capi.OH_NN_PERFORMANCE_EXTREME) == SUCCESS
    assert capi.OH_NNCompilation_SetPriority(c, capi.OH_NN_PRIORITY_HIGH) == SUCCESS
    assert capi.OH_NNCompilation_Build(c) == SUCCESS
    assert "compiling 1 nodes (float16=True mode=4 priority=3)" in rt.log()
    np.testing.assert_allclose(run_add(c, X), X + W, rtol=1e-3)


@pytest.mark.parametrize("query, setter, code", [
    ("fp16_query", lambda c: capi.OH_NNCompilation_EnableFloat16(c, True), UNAVAILABLE),
    ("perf_query", lambda c: capi.OH_NNCompilation_SetPerformanceMode(c, 1), FAILED),
    ("prio_query", lambda c: capi.OH_NNCompilation_SetPriority(c, 1), UNAVAILABLE),
    ("cache_query", lambda c: capi.OH_NNCompilation_SetCache(c, "/tmp", 1), UNAVAILABLE),
])
def test_failed_capability_queries(broken, model, query, setter, code) -> None:
    c = compilation_on(model, feature_id("caps"))
    assert setter(c) == SUCCESS
    assert capi.OH_NNCompilation_Build(c) == code
    plain = compilation_on(model, feature_id("caps"))  # default options: no query needed
    assert capi.OH_NNCompilation_Build(plain) == SUCCESS
