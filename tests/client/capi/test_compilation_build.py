"""OH_NNCompilation_Build (capi.md 1.13), offline models, the cache directory (the table of 1.9)
and Destroy (1.14), end to end across processes, on the drivers and fixtures of
test_compilation_setup.py (constructors, the cache buffers, extensions and options: 1.1–1.12)."""

from __future__ import annotations

import gc
import os
import re
import signal
import threading
from pathlib import Path

import numpy as np
import pytest

import nnrt.client.core.device as devices_module
from nnrt.client import capi
from nnrt.client.core import model_cache
from nnrt.common.errors import NNRT_INVALID_MODEL
from tests.client.capi.util_capi import W, add_model, use_runtime
from tests.client.capi.test_compilation_setup import (  # noqa: F401  (fixtures among them)
    BAD_COMPILATIONS,
    BARE_ID,
    CONNECTION,
    CPU_ID,
    FAILED,
    FEATURE_ID,
    FORBIDDEN,
    INVALID,
    INVALID_FILE,
    INVALID_PATH,
    SAVE_CACHE,
    SUCCESS,
    UNAVAILABLE,
    X,
    broken,
    broken_drivers,
    cache_dir,
    compilation_on,
    feature_driver,
    model,
    registry,
    rt,
    rt_cpu_log,
)
from tests.client.capi.util_compilation import build, feature_id, offline_model_bytes, run_add
from tests.conftest import start_driver, wait_until


# -- 1.13 Build --------------------------------------------------------------------------------


@BAD_COMPILATIONS
def test_build_bad_handle(bad) -> None:
    assert capi.OH_NNCompilation_Build(bad) == INVALID


def test_build_with_two_sources_is_invalid(rt, model) -> None:
    c = capi.OH_NNCompilation_Construct(model)
    assert capi.OH_NNCompilation_ImportCacheFromBuffer(c, b"cache", 5) == SUCCESS
    assert capi.OH_NNCompilation_Build(c) == INVALID
    offline = capi.OH_NNCompilation_ConstructWithOfflineModelBuffer(b"m", 1)
    assert capi.OH_NNCompilation_ImportCacheFromBuffer(offline, b"cache", 5) == SUCCESS
    assert capi.OH_NNCompilation_Build(offline) == INVALID


def test_build_twice(rt, model) -> None:
    code, c = build(model)
    assert code == SUCCESS
    assert capi.OH_NNCompilation_Build(c) == FORBIDDEN


def test_build_retry_after_failure(rt, model) -> None:
    c = compilation_on(model, 777)
    assert capi.OH_NNCompilation_Build(c) == FAILED
    assert capi.OH_NNCompilation_Build(c) == FAILED
    assert capi.OH_NNCompilation_SetDevice(c, 0) == SUCCESS
    assert capi.OH_NNCompilation_Build(c) == SUCCESS
    np.testing.assert_allclose(run_add(c, X), X + W)


def test_build_on_an_unknown_device_fails(rt, model) -> None:
    c = compilation_on(model, 1)
    assert capi.OH_NNCompilation_Build(c) == FAILED


def test_build_without_any_device_fails(capi_no_device, model) -> None:
    assert capi.OH_NNCompilation_Build(capi.OH_NNCompilation_Construct(model)) == FAILED


def test_build_result(rt, model) -> None:
    code, c = build(model)
    assert code == SUCCESS
    built = c.built
    assert built.device.id == CPU_ID and built.prepared_model_id > 0
    assert [(d.data_type, d.shape) for d in built.inputs] == [(capi.OH_NN_FLOAT32, [2, 3])]
    assert [(d.data_type, d.shape) for d in built.outputs] == [(capi.OH_NN_FLOAT32, [2, 3])]
    assert built.min_dims == [[2, 3]] and built.max_dims == [[2, 3]]
    assert built.model is model.lowered() and built.client.alive
    np.testing.assert_allclose(run_add(c, X), X + W)


def test_the_model_may_go_after_build(rt) -> None:
    m = add_model()
    code, c = build(m)
    assert code == SUCCESS
    capi.OH_NNModel_Destroy(m)
    np.testing.assert_allclose(run_add(c, X), X + W)


def test_build_after_the_model_was_destroyed_is_invalid(rt) -> None:
    m = add_model()
    c = capi.OH_NNCompilation_Construct(m)
    capi.OH_NNModel_Destroy(m)
    assert capi.OH_NNCompilation_Build(c) == INVALID


def test_build_for_cache_without_a_cache_is_invalid(rt) -> None:
    c = capi.OH_NNCompilation_ConstructForCache()
    assert capi.OH_NNCompilation_SetDevice(c, FEATURE_ID) == SUCCESS
    assert capi.OH_NNCompilation_Build(c) == INVALID


@pytest.mark.parametrize("failing, code", [("supported", UNAVAILABLE), ("unsupported", FAILED)])
def test_supported_operation_rows(broken, model, failing, code) -> None:
    assert capi.OH_NNCompilation_Build(compilation_on(model, feature_id(failing))) == code


def test_driver_prepare_failure_fails_build(broken, model) -> None:
    assert capi.OH_NNCompilation_Build(compilation_on(model, feature_id("prepare"))) == FAILED


@pytest.mark.multiprocess
def test_driver_dying_during_build_is_a_connection_exception(runtime_dir, monkeypatch,
                                                             model) -> None:
    driver = start_driver(runtime_dir, "cpu", "--fault-exit-on-prepare", "1")
    try:
        with use_runtime(monkeypatch, runtime_dir):
            c = capi.OH_NNCompilation_Construct(model)
            assert capi.OH_NNCompilation_Build(c) == CONNECTION
            assert c.built is None
    finally:
        driver.stop(signal.SIGKILL)


# offline models (1.2, 1.3 "Ours")


def test_offline_model_on_the_cpu_driver(rt) -> None:
    data = offline_model_bytes()
    c = capi.OH_NNCompilation_ConstructWithOfflineModelBuffer(data, len(data))
    assert capi.OH_NNCompilation_Build(c) == FAILED  # the CPU driver: NNRT_NOT_SUPPORT
    assert "PrepareOfflineModel refused" in rt_cpu_log(rt)


def test_offline_model_on_a_device_that_cannot_take_it(broken) -> None:
    data = offline_model_bytes()
    c = capi.OH_NNCompilation_ConstructWithOfflineModelBuffer(data, len(data))
    assert capi.OH_NNCompilation_SetDevice(c, BARE_ID) == SUCCESS
    assert capi.OH_NNCompilation_Build(c) == FAILED


def test_offline_model_buffer_and_file(rt, tmp_path: Path) -> None:
    data = offline_model_bytes()
    c = capi.OH_NNCompilation_ConstructWithOfflineModelBuffer(data, len(data))
    assert capi.OH_NNCompilation_SetDevice(c, FEATURE_ID) == SUCCESS
    assert capi.OH_NNCompilation_Build(c) == SUCCESS
    assert c.built.source == "offline" and c.built.prepared_model_id > 0
    path = tmp_path / "model.om"
    path.write_bytes(data)
    f = capi.OH_NNCompilation_ConstructWithOfflineModelFile(str(path))
    assert capi.OH_NNCompilation_SetDevice(f, FEATURE_ID) == SUCCESS
    assert capi.OH_NNCompilation_Build(f) == SUCCESS
    assert "offline model of %d bytes" % len(data) in rt.log()


@pytest.mark.parametrize("case, code", [("missing", INVALID_PATH), ("missing-dir", INVALID_PATH),
                                        ("directory", INVALID_FILE), ("empty", INVALID_FILE)])
def test_offline_model_file_problems(rt, tmp_path: Path, case, code) -> None:
    path = {"missing": tmp_path / "none.om", "missing-dir": tmp_path / "no" / "x.om",
            "directory": tmp_path, "empty": tmp_path / "empty.om"}[case]
    if case == "empty":
        path.write_bytes(b"")
    c = capi.OH_NNCompilation_ConstructWithOfflineModelFile(str(path))
    assert capi.OH_NNCompilation_SetDevice(c, FEATURE_ID) == SUCCESS
    assert capi.OH_NNCompilation_Build(c) == code


def test_offline_model_the_device_refuses(rt) -> None:
    c = capi.OH_NNCompilation_ConstructWithOfflineModelBuffer(b"\xffnot a model", 12)
    assert capi.OH_NNCompilation_SetDevice(c, FEATURE_ID) == SUCCESS
    assert capi.OH_NNCompilation_Build(c) == FAILED


# -- the cache directory (1.9 header table) ----------------------------------------------------


def cached_build(model, path, version, device_id=FEATURE_ID, **kw):
    code, c = build(model, device_id=device_id, cache=(str(path), version), **kw)
    return code, c


def test_cache_on_a_device_without_cache_is_forbidden(broken, model, tmp_path) -> None:
    code, c = cached_build(model, cache_dir(tmp_path), 1, device_id=BARE_ID)
    assert code == FORBIDDEN and os.listdir(cache_dir(tmp_path)) == []


def test_cache_with_the_cpu_driver(rt, shared_driver, model, tmp_path) -> None:
    """Build with a cache dir on the real CPU driver, rebuild from it (the driver's
    PrepareModelFromModelCache is what prepares it), results equal; a damaged cache is
    detected."""
    path = cache_dir(tmp_path)
    code, first = cached_build(model, path, 1, device_id=CPU_ID)
    assert code == SUCCESS and first.built.source == "model"
    from_cache_before = shared_driver.log().count("from its cache")
    code, second = cached_build(model, path, 1, device_id=CPU_ID)
    assert code == SUCCESS and second.built.source == "cache"
    assert wait_until(lambda: shared_driver.log().count("from its cache") > from_cache_before, 2)
    np.testing.assert_array_equal(run_add(second, X), run_add(first, X))
    np.testing.assert_allclose(run_add(second, X), X + W)
    blob = path / "0.nncache"
    data = bytearray(blob.read_bytes())
    data[len(data) // 2] ^= 0x04
    blob.write_bytes(bytes(data))
    code, third = cached_build(model, path, 1, device_id=CPU_ID)
    assert code == INVALID_FILE and third.built is None


def test_empty_cache_path_means_no_cache(broken, model) -> None:
    code, _ = cached_build(model, "", 1, device_id=BARE_ID)
    assert code == SUCCESS


def test_cache_life_cycle(rt, model, tmp_path) -> None:
    path = cache_dir(tmp_path)
    # no cache: compile, then write it tagged with the version
    code, first = cached_build(model, path, 3)
    assert code == SUCCESS and first.built.source == "model"
    index = model_cache.CacheDir(path).read_index()
    assert index.version == 3 and index.device_id == FEATURE_ID
    assert sorted(os.listdir(path)) == ["0.nncache", "1.nncache", "2.nncache", "3.nncache",
                                        "cache_info.nncache"]
    # same version: restored, not compiled
    compiled = rt.log().count("compiling")
    code, second = cached_build(model, path, 3)
    assert code == SUCCESS and second.built.source == "cache"
    assert rt.log().count("compiling") == compiled
    np.testing.assert_allclose(run_add(second, X), X + W)
    # an empty compilation restores it too, with the descriptors from the cache
    c = capi.OH_NNCompilation_ConstructForCache()
    assert capi.OH_NNCompilation_SetDevice(c, FEATURE_ID) == SUCCESS
    assert capi.OH_NNCompilation_SetCache(c, str(path), 3) == SUCCESS
    assert capi.OH_NNCompilation_Build(c) == SUCCESS
    assert [d.shape for d in c.built.inputs] == [[2, 3]] and c.built.inputs[0].name == "Tensor: 0"
    np.testing.assert_allclose(run_add(c, X), X + W)
    # requested version higher: the cache is stale, compile and overwrite
    code, third = cached_build(model, path, 4)
    assert code == SUCCESS and third.built.source == "model"
    assert model_cache.CacheDir(path).read_index().version == 4
    # requested version lower than the cache: refused, cache untouched
    code, fourth = cached_build(model, path, 2)
    assert code == INVALID and fourth.built is None
    assert model_cache.CacheDir(path).read_index().version == 4
    # an empty compilation with a stale cache has nothing to compile
    stale = capi.OH_NNCompilation_ConstructForCache()
    capi.OH_NNCompilation_SetDevice(stale, FEATURE_ID)
    capi.OH_NNCompilation_SetCache(stale, str(path), 5)
    assert capi.OH_NNCompilation_Build(stale) == INVALID


@pytest.mark.parametrize("damage", ["blob-bitflip", "desc-bitflip", "index-bitflip", "truncated",
                                    "missing-file", "another-model", "another-device",
                                    "driver-refuses"])
def test_a_corrupt_cache_is_invalid_file(rt, model, tmp_path, damage) -> None:
    path = cache_dir(tmp_path)
    assert cached_build(model, path, 1)[0] == SUCCESS
    cache = model_cache.CacheDir(path)
    if damage in ("blob-bitflip", "desc-bitflip", "truncated"):
        victim = path / ("1.nncache" if damage != "desc-bitflip" else "2.nncache")
        data = bytearray(victim.read_bytes())
        if damage == "truncated":
            del data[len(data) // 2:]
        else:
            data[len(data) // 2] ^= 0x80
        victim.write_bytes(bytes(data))
    elif damage == "index-bitflip":
        raw = bytearray(cache.index_path.read_bytes())
        raw[len(raw) - 10] ^= 0x01
        cache.index_path.write_bytes(bytes(raw))
    elif damage == "missing-file":
        (path / "0.nncache").unlink()
    elif damage == "another-model":  # another model's complete, valid cache in its place
        other = add_model(w=W * 2)
        (tmp_path / "other").mkdir()
        assert cached_build(other, tmp_path / "other", 1)[0] == SUCCESS
        for name in os.listdir(tmp_path / "other"):
            os.replace(tmp_path / "other" / name, path / name)
    elif damage == "another-device":
        index = cache.read_index()
        cache.write(cache.load(index), 1, CPU_ID, index.model_digest)
    else:  # checksums fine, but the driver cannot use the blobs
        index = cache.read_index()
        contents = cache.load(index)
        contents.blobs[0] = b"something else"
        cache.write(contents, 1, FEATURE_ID, index.model_digest)
    before = {p: (path / p).read_bytes() for p in os.listdir(path)}
    code, c = cached_build(model, path, 1)
    assert code == INVALID_FILE and c.built is None
    assert {p: (path / p).read_bytes() for p in os.listdir(path)} == before  # never replaced


def test_cache_of_another_model_restores_for_cache_compilations(rt, model, tmp_path) -> None:
    """Without a model there is nothing to compare: the cache names the model it holds."""
    path = cache_dir(tmp_path)
    other = add_model(w=W * 2)
    assert cached_build(other, path, 1)[0] == SUCCESS
    c = capi.OH_NNCompilation_ConstructForCache()
    capi.OH_NNCompilation_SetDevice(c, FEATURE_ID)
    capi.OH_NNCompilation_SetCache(c, str(path), 1)
    assert capi.OH_NNCompilation_Build(c) == SUCCESS
    np.testing.assert_allclose(run_add(c, X), X + 2 * W)


@pytest.mark.parametrize("case", ["missing", "a-file"])
def test_missing_cache_directory_is_invalid_path(rt, model, tmp_path, case) -> None:
    path = tmp_path / "nope"
    if case == "a-file":
        path.write_bytes(b"")
    code, c = cached_build(model, path, 1)
    assert code == INVALID_PATH and c.built is None
    empty = capi.OH_NNCompilation_ConstructForCache()
    capi.OH_NNCompilation_SetDevice(empty, FEATURE_ID)
    capi.OH_NNCompilation_SetCache(empty, str(path), 1)
    assert capi.OH_NNCompilation_Build(empty) == INVALID_PATH


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions")
def test_inaccessible_cache_directory_is_invalid_path(rt, model, tmp_path) -> None:
    path = cache_dir(tmp_path)
    path.chmod(0o500)
    try:
        assert cached_build(model, path, 1)[0] == INVALID_PATH
    finally:
        path.chmod(0o700)


def test_reserved_cache_version_is_invalid(rt, model, tmp_path) -> None:
    assert cached_build(model, cache_dir(tmp_path), model_cache.UINT32_MAX)[0] == INVALID


def test_relative_cache_path(rt, model, tmp_path, monkeypatch) -> None:
    cache_dir(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert cached_build(model, "cache", 1)[0] == SUCCESS
    assert cached_build(model, "./cache/", 1)[1].built.source == "cache"


def test_cache_that_cannot_be_saved(rt, model, tmp_path) -> None:
    path = cache_dir(tmp_path)
    (path / "0.nncache").mkdir()  # a file name the cache needs is taken by a directory
    code, c = cached_build(model, path, 1)
    assert code == SAVE_CACHE and c.built is None
    assert model_cache.CacheDir(path).read_index() is None


def test_cache_the_driver_cannot_export(broken, model, tmp_path) -> None:
    device = feature_id("export")
    code, c = build(model, device_id=device, cache=(str(cache_dir(tmp_path)), 1))
    assert code == SAVE_CACHE and c.built is None
    assert os.listdir(cache_dir(tmp_path)) == []
    # the Build failed, so the model it prepared is gone from the driver again
    model_id = int(re.findall(r"prepared model (\d+) from", broken["export"].log())[-1])
    client = devices_module.registry().get(device).client()
    assert client.get_input_dim_ranges(model_id).returnCode == NNRT_INVALID_MODEL


def test_model_name_prefixes_the_cache_files(rt, tmp_path) -> None:
    path = cache_dir(tmp_path)
    a, b = add_model(), add_model(w=W * 3)
    assert cached_build(a, path, 1, extensions={"ModelName": b"alpha"})[0] == SUCCESS
    assert cached_build(b, path, 1, extensions={"ModelName": b"beta"})[0] == SUCCESS
    names = sorted(os.listdir(path))
    assert "alphacache_info.nncache" in names and "beta3.nncache" in names
    assert "cache_info.nncache" not in names
    code, ca = cached_build(a, path, 1, extensions={"ModelName": b"alpha"})
    code_b, cb = cached_build(b, path, 1, extensions={"ModelName": b"beta"})
    assert code == code_b == SUCCESS
    assert ca.built.source == cb.built.source == "cache"
    np.testing.assert_allclose(run_add(cb, X), X + 3 * W)
    # under the default (empty) prefix there is no cache yet
    assert cached_build(a, path, 1)[1].built.source == "model"


@pytest.mark.parametrize("name", [b"a/b", b"\xff", b"x\x00y"])
def test_model_name_that_cannot_name_files(rt, model, tmp_path, name) -> None:
    code, _ = cached_build(model, cache_dir(tmp_path), 1, extensions={"ModelName": name})
    assert code == INVALID


# -- 1.14 Destroy and life cycle ---------------------------------------------------------------


def test_destroy_null_and_twice() -> None:
    assert capi.OH_NNCompilation_Destroy(None) is None
    assert capi.OH_NNCompilation_Destroy(object()) is None
    c = capi.OH_NNCompilation_ConstructForCache()
    assert capi.OH_NNCompilation_Destroy(c) is None
    assert capi.OH_NNCompilation_Destroy(c) is None
    assert c.destroyed
    assert capi.OH_NNCompilation_SetDevice(c, 0) == INVALID


def test_executors_outlive_the_compilation_and_the_model_is_then_released(rt, model) -> None:
    code, c = build(model)
    assert code == SUCCESS
    client, model_id = c.built.client, c.built.prepared_model_id
    executor = capi.OH_NNExecutor_Construct(c)
    capi.OH_NNCompilation_Destroy(c)
    assert client.get_input_dim_ranges(model_id).returnCode == 0  # still prepared
    capi.OH_NNExecutor_Destroy(executor)
    del executor
    assert client.get_input_dim_ranges(model_id).returnCode != 0  # released


def test_destroy_releases_the_prepared_model(rt, model) -> None:
    code, c = build(model)
    client, model_id = c.built.client, c.built.prepared_model_id
    capi.OH_NNCompilation_Destroy(c)
    assert client.get_input_dim_ranges(model_id).returnCode != 0


def test_a_forgotten_compilation_releases_its_model(rt, model) -> None:
    code, c = build(model)
    client, model_id = c.built.client, c.built.prepared_model_id
    del c
    gc.collect()
    assert client.get_input_dim_ranges(model_id).returnCode != 0


# -- threads -----------------------------------------------------------------------------------


def test_concurrent_builds_of_one_compilation(rt, model) -> None:
    c = capi.OH_NNCompilation_Construct(model)
    results = []
    threads = [threading.Thread(target=lambda: results.append(capi.OH_NNCompilation_Build(c)))
               for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert sorted(results) == [SUCCESS] + [FORBIDDEN] * 5


def test_destroy_during_build(rt, model) -> None:
    started = threading.Event()
    c = capi.OH_NNCompilation_Construct(model)
    result = []

    def builder() -> None:
        started.set()
        result.append(capi.OH_NNCompilation_Build(c))

    t = threading.Thread(target=builder)
    t.start()
    started.wait(5)
    capi.OH_NNCompilation_Destroy(c)  # returns at once, whatever Build is doing
    t.join(20)
    assert not t.is_alive()
    assert result[0] in (SUCCESS, INVALID)
    assert c.built is None
    assert capi.OH_NNExecutor_Construct(c) is None


def test_setters_and_destroy_race_without_errors(rt, model) -> None:
    c = capi.OH_NNCompilation_Construct(model)
    errors = []

    def hammer() -> None:
        try:
            for i in range(200):
                code = capi.OH_NNCompilation_SetPriority(c, i % 4)
                assert code in (SUCCESS, INVALID)
                code = capi.OH_NNCompilation_AddExtensionConfig(c, "k", b"v", 1)
                assert code in (SUCCESS, INVALID)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=hammer) for _ in range(4)]
    for t in threads:
        t.start()
    capi.OH_NNCompilation_Destroy(c)
    for t in threads:
        t.join(20)
    assert not errors
