"""The model cache of a compilation over several devices (client/capi/compilation.py
`_partition_cache`), through real drivers (GPU on PoCL, CPU): one cache per partition in the
cache directory, named by device and partition; a later compilation of the same model over
the same devices prepares every partition from its cache, with the same results; the
cache-directory table of capi.md 1.9 per partition (a corrupt partition cache refused with
OH_NN_INVALID_FILE, a newer version OH_NN_INVALID_PARAMETER, a missing directory
OH_NN_INVALID_PATH); the fallback plan's partitions cached too."""

from __future__ import annotations

import numpy as np
import pytest

from nnrt.client import Model
from nnrt.client.core.errors import (NNRtError, OH_NN_INVALID_FILE, OH_NN_INVALID_PARAMETER,
                                     OH_NN_INVALID_PATH)
from tests.client.capi.util_executor import use_runtime
from tests.conftest import start_driver, wait_until
from tests.helpers.patched_driver import start_patched_driver

pytestmark = pytest.mark.multiprocess

RNG = np.random.default_rng(2613)
F32 = 11  # OH_NN_FLOAT32
W1 = RNG.standard_normal((16, 8)).astype(np.float32)
W2 = RNG.standard_normal((4, 16)).astype(np.float32)
INDEX = "cache_info.nncache"


@pytest.fixture(scope="module")
def drivers(tmp_path_factory):
    runtime = tmp_path_factory.mktemp("hetero-cache") / "rt"
    running = [start_driver(runtime, "gpu", "--cl-device", "any"), start_driver(runtime, "cpu")]
    yield runtime
    for driver in running:
        driver.stop()


@pytest.fixture
def runtime(drivers, monkeypatch):
    with use_runtime(monkeypatch, drivers):
        yield drivers


def cast_mlp() -> Model:
    """fc+relu → L2Normalize (no GPU kernel) → fc → softmax: steps gpu, cpu, gpu."""
    m = Model()
    x = m.input([None, 8])
    h = m.op("L2_NORMALIZE", m.fully_connected(x, W1, activation="relu"))
    m.outputs(m.softmax(m.fully_connected(h, W2)))
    return m


def sources(compiled) -> list[str]:
    return [s.model.built.source for s in compiled.hetero.preferred.steps]


def indexes(directory) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(INDEX))


def test_every_partition_is_prepared_from_its_cache_the_second_time(runtime, tmp_path):
    x = RNG.standard_normal((3, 8)).astype(np.float32)
    with cast_mlp() as model:
        with model.compile(["gpu", "cpu"], cache_dir=tmp_path, failover=False) as first, \
                first.executor() as ex:
            assert sources(first) == ["model", "model", "model"]
            want = ex.run(x).copy()
            devices = [s.device for s in first.hetero.preferred.steps]
        names = indexes(tmp_path)
        assert len(names) == 3  # one cache per partition, named by device and partition
        assert all(n.startswith("part-") for n in names)
        assert sorted(n.split("-")[1] for n in names) == sorted(str(d.id) for d in devices)
        with model.compile(["gpu", "cpu"], cache_dir=tmp_path, failover=False) as second, \
                second.executor() as ex:
            assert sources(second) == ["cache", "cache", "cache"]
            np.testing.assert_allclose(ex.run(x), want, rtol=1e-5, atol=1e-7)
        assert indexes(tmp_path) == names  # nothing written again


def test_the_fallback_plans_partitions_are_cached_too(runtime, tmp_path):
    with cast_mlp() as model, model.compile(["gpu", "cpu"], cache_dir=tmp_path) as compiled:
        hetero = compiled.hetero
        assert wait_until(lambda: len(hetero._plans) == 2, 20)  # [cpu] alone, prepared
        assert len(indexes(tmp_path)) == 4  # the CPU-only plan: one partition, all nodes
        with model.compile(["gpu", "cpu"], cache_dir=tmp_path) as again:
            assert wait_until(lambda: len(again.hetero._plans) == 2, 20)
            fallback = again.hetero._plans[(1,)]
            assert [s.model.built.source for s in fallback.steps] == ["cache"]


def test_the_model_name_prefixes_every_partition(runtime, tmp_path):
    with cast_mlp() as model, model.compile(["gpu", "cpu"], cache_dir=tmp_path,
                                            extensions={"ModelName": b"mlp"},
                                            failover=False):
        pass
    names = indexes(tmp_path)
    assert len(names) == 3 and all(n.startswith("mlppart-") for n in names)


def test_a_corrupt_partition_cache_is_refused(runtime, tmp_path):
    with cast_mlp() as model:
        with model.compile(["gpu", "cpu"], cache_dir=tmp_path, failover=False):
            pass
        blob = next(p for p in tmp_path.iterdir() if p.name.endswith("-0.nncache"))
        data = bytearray(blob.read_bytes())
        data[len(data) // 2] ^= 0x40
        blob.write_bytes(bytes(data))
        with pytest.raises(NNRtError) as caught:
            model.compile(["gpu", "cpu"], cache_dir=tmp_path, failover=False)
        assert caught.value.code == OH_NN_INVALID_FILE
        assert "checksum mismatch" in caught.value.message


def test_versions_and_paths(runtime, tmp_path):
    with cast_mlp() as model:
        with model.compile(["gpu", "cpu"], cache_dir=tmp_path, cache_version=2,
                           failover=False):
            pass
        with pytest.raises(NNRtError) as caught:  # the cache is newer than asked
            model.compile(["gpu", "cpu"], cache_dir=tmp_path, cache_version=1, failover=False)
        assert caught.value.code == OH_NN_INVALID_PARAMETER
        with model.compile(["gpu", "cpu"], cache_dir=tmp_path, cache_version=3,
                           failover=False) as newer:  # older cache: compiled, overwritten
            assert sources(newer) == ["model", "model", "model"]
        with model.compile(["gpu", "cpu"], cache_dir=tmp_path, cache_version=3,
                           failover=False) as same:
            assert sources(same) == ["cache", "cache", "cache"]
        with pytest.raises(NNRtError) as caught:
            model.compile(["gpu", "cpu"], cache_dir=tmp_path / "missing")
        assert caught.value.code == OH_NN_INVALID_PATH
        with pytest.raises(NNRtError) as caught:
            model.compile(["gpu", "cpu"], cache_dir=tmp_path, cache_version=2**32 - 1)
        assert caught.value.code == OH_NN_INVALID_PARAMETER


# A CPU driver that says it has no model cache (IsModelCacheSupported: false).
NO_CACHE = """
from nnrt.protos import hdi_pb2
from nnrt.server import servicers
servicers.DeviceServicer.IsModelCacheSupported = \\
    lambda self, request, context: hdi_pb2.IsSupportedReply(isSupported=False)
"""


def test_a_device_without_a_model_cache_prepares_its_partitions_without(tmp_path,
                                                                      monkeypatch):
    """Its partitions are prepared from the model each time, nothing written for them; the
    other device's partitions keep their caches (a single device would answer
    OH_NN_OPERATION_FORBIDDEN: here the compilation goes on)."""
    runtime = tmp_path / "rt"
    cache = tmp_path / "cache"
    cache.mkdir()
    plain = start_patched_driver(runtime, "plain", NO_CACHE, "cpu")
    try:
        gpu = start_driver(runtime, "gpu", "--cl-device", "any")
        try:
            with use_runtime(monkeypatch, runtime), cast_mlp() as model:
                for expected in (["model", "model", "model"], ["cache", "model", "cache"]):
                    with model.compile(["gpu", "plain"], cache_dir=cache,
                                       failover=False) as compiled:
                        assert [s.device.driver for s in compiled.hetero.preferred.steps] == \
                            ["gpu", "plain", "gpu"]
                        assert sources(compiled) == expected
                    assert len(indexes(cache)) == 2  # the GPU's two partitions
        finally:
            gpu.stop()
    finally:
        plain.stop()
