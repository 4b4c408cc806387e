"""OH_NNDevice_* (capi.md 1.48–1.50): the drivers of NNRT_RUNTIME_DIR as devices, their IDs
stable across driver restarts, and every row of the three condition tables.
"""

from __future__ import annotations

import signal

import pytest

import nnrt.client.core.device as devices_module
from nnrt.client import capi
from nnrt.client.core.device import DeviceRegistry, device_id_of
from tests.client.capi.util_capi import use_runtime
from tests.client.capi.util_compilation import feature_id, start_feature_drivers
from tests.conftest import start_driver, wait_until

SUCCESS = capi.OH_NN_SUCCESS
FAILED = capi.OH_NN_FAILED
INVALID = capi.OH_NN_INVALID_PARAMETER
UNAVAILABLE = capi.OH_NN_UNAVAILABLE_DEVICE
CPU_NAME = "nnrt-cpu_nnrt_v2_1"
CPU_ID = device_id_of(CPU_NAME, "cpu")  # the shared driver's socket name is its kind
BAD_IDS = [12345, -1, 1 << 64, "0", None, 1.5]

# socket name → (what it reports, the OH_NN_DeviceType expected)
KINDS = {
    "t-accel": ("devtype=3", capi.OH_NN_ACCELERATOR),
    "t-cpu": ("devtype=1", capi.OH_NN_CPU),
    "t-gpu": ("devtype=2", capi.OH_NN_GPU),
    "t-other": ("devtype=0", capi.OH_NN_OTHERS),
    "t-unknown": ("devtype=77", capi.OH_NN_OTHERS),
    "t-z-broken": ("type_query", None),
}


@pytest.fixture(scope="module")
def kinds(tmp_path_factory):
    """Feature drivers reporting every HDI DeviceType (and one whose query fails)."""
    directory = tmp_path_factory.mktemp("kinds") / "rt"
    drivers = start_feature_drivers(directory,
                                    {name: [quirk] for name, (quirk, _) in KINDS.items()})
    registry = DeviceRegistry(directory)
    yield registry
    registry.close()
    for driver in drivers.values():
        driver.stop()


@pytest.fixture
def kinds_rt(kinds, monkeypatch):
    monkeypatch.setattr(devices_module, "_registry", kinds)


# -- no device -------------------------------------------------------------------------------------


def test_no_device(capi_no_device) -> None:
    assert capi.OH_NNDevice_GetAllDevicesID() == (SUCCESS, [])
    assert capi.OH_NNDevice_GetName(0) == (FAILED, None)
    assert capi.OH_NNDevice_GetType(0) == (INVALID, None)


def test_runtime_dir_that_does_not_exist(tmp_path, monkeypatch) -> None:
    with use_runtime(monkeypatch, tmp_path / "missing"):
        assert capi.OH_NNDevice_GetAllDevicesID() == (SUCCESS, [])


def test_stale_sockets_are_no_device(runtime_dir, monkeypatch) -> None:
    (runtime_dir / "ghost.sock").touch()
    (runtime_dir / "ghost.session").touch()
    with use_runtime(monkeypatch, runtime_dir):
        assert capi.OH_NNDevice_GetAllDevicesID() == (SUCCESS, [])


# -- one CPU driver ----------------------------------------------------------------------------


def test_all_devices(capi_runtime) -> None:
    code, ids = capi.OH_NNDevice_GetAllDevicesID()
    assert code == SUCCESS and ids == [CPU_ID] and ids[0] != 0


def test_get_name(capi_runtime) -> None:
    assert capi.OH_NNDevice_GetName(0) == (SUCCESS, CPU_NAME)  # 0: the first device
    assert capi.OH_NNDevice_GetName(CPU_ID) == (SUCCESS, CPU_NAME)


@pytest.mark.parametrize("device_id", BAD_IDS)
def test_get_name_of_an_unknown_device(capi_runtime, device_id) -> None:
    assert capi.OH_NNDevice_GetName(device_id) == (FAILED, None)


def test_get_type(capi_runtime) -> None:
    assert capi.OH_NNDevice_GetType(0) == (SUCCESS, capi.OH_NN_CPU)
    code, kind = capi.OH_NNDevice_GetType(CPU_ID)
    assert code == SUCCESS and kind is capi.OH_NN_DeviceType.OH_NN_CPU


@pytest.mark.parametrize("device_id", BAD_IDS)
def test_get_type_of_an_unknown_device(capi_runtime, device_id) -> None:
    assert capi.OH_NNDevice_GetType(device_id) == (INVALID, None)


# -- several drivers ---------------------------------------------------------------------------


def test_every_device_type(kinds_rt) -> None:
    code, ids = capi.OH_NNDevice_GetAllDevicesID()
    assert code == SUCCESS and ids == [feature_id(name) for name in sorted(KINDS)]
    assert len(set(ids)) == len(ids)
    for name, (_, expected) in KINDS.items():
        assert capi.OH_NNDevice_GetName(feature_id(name)) == (SUCCESS, f"nnrt-{name}_nnrt_v2_1")
        if expected is not None:
            assert capi.OH_NNDevice_GetType(feature_id(name)) == (SUCCESS, expected)
    assert capi.OH_NNDevice_GetName(0) == (SUCCESS, "nnrt-t-accel_nnrt_v2_1")  # first in order


def test_a_failing_type_query_is_unavailable_device(kinds_rt) -> None:
    assert capi.OH_NNDevice_GetType(feature_id("t-z-broken")) == (UNAVAILABLE, None)
    assert capi.OH_NNDevice_GetName(feature_id("t-z-broken"))[0] == SUCCESS


# -- IDs across restarts -----------------------------------------------------------------------


@pytest.mark.multiprocess
def test_ids_are_stable_across_a_driver_crash(runtime_dir, monkeypatch) -> None:
    driver = start_driver(runtime_dir)
    try:
        with use_runtime(monkeypatch, runtime_dir):
            code, before = capi.OH_NNDevice_GetAllDevicesID()
            assert code == SUCCESS and before == [CPU_ID]
            client = devices_module.registry().get(CPU_ID).client()
            driver.stop(signal.SIGKILL)
            assert wait_until(lambda: not client.alive, 5)
            assert capi.OH_NNDevice_GetAllDevicesID() == (SUCCESS, [])  # dead: not listed
            assert capi.OH_NNDevice_GetName(CPU_ID) == (FAILED, None)
            driver = start_driver(runtime_dir)  # replaces the stale sockets
            assert capi.OH_NNDevice_GetAllDevicesID() == (SUCCESS, before)
            assert capi.OH_NNDevice_GetName(before[0]) == (SUCCESS, CPU_NAME)
            assert capi.OH_NNDevice_GetType(before[0]) == (SUCCESS, capi.OH_NN_CPU)
    finally:
        driver.stop()


@pytest.mark.multiprocess
def test_ids_depend_on_the_socket_name(runtime_dir, monkeypatch) -> None:
    """The same device served under another socket name is another driver instance."""
    driver = start_driver(runtime_dir, name="another-name")
    try:
        with use_runtime(monkeypatch, runtime_dir):
            assert capi.OH_NNDevice_GetAllDevicesID() == \
                (SUCCESS, [device_id_of(CPU_NAME, "another-name")])
            assert device_id_of(CPU_NAME, "another-name") != CPU_ID
    finally:
        driver.stop()
