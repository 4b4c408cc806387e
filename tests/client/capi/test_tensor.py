"""NN_Tensor (capi.md 1.27–1.35): one test per row of every condition table, the shared-memory
semantics (GetDataBuffer is the driver's pages; CreateWithFd's [offset, size) layout; the
caller's fd is not owned), and runs across processes with a real CPU driver.
"""

from __future__ import annotations

import gc
import os
import signal
import tempfile
import threading

import numpy as np
import pytest

import nnrt.client.core.device as devices_module
from nnrt.client import capi
from nnrt.client.capi.tensor import NN_Tensor, io_tensor
from nnrt.client.core.device import DeviceRegistry, device_id_of
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.common.errors import NNRT_SUCCESS
from tests.client.capi.util_capi import W, add_model, desc, use_runtime
from tests.client.capi.util_compilation import build
from tests.conftest import start_driver, wait_until

SUCCESS = capi.OH_NN_SUCCESS
INVALID = capi.OH_NN_INVALID_PARAMETER
NULL_PTR = capi.OH_NN_NULL_PTR
CPU_ID = device_id_of("nnrt-cpu_nnrt_v2_1", "cpu")
GIB = 1 << 30


@pytest.fixture(scope="module")
def registry(shared_driver):
    reg = DeviceRegistry(shared_driver.runtime_dir)
    yield reg
    reg.close()


@pytest.fixture
def rt(registry, shared_driver, monkeypatch):
    """The module's CPU driver as the only device (one registry, sessions reused)."""
    monkeypatch.setattr(devices_module, "_registry", registry)
    return shared_driver


def memfd(size: int, sealing: bool = True) -> int:
    fd = os.memfd_create("caller", os.MFD_CLOEXEC | (os.MFD_ALLOW_SEALING if sealing else 0))
    os.ftruncate(fd, size)
    return fd


def f32(shape=(2, 3)) -> capi.NN_TensorDesc:
    return desc(list(shape))


def destroyed_tensor(rt) -> NN_Tensor:
    t = capi.OH_NNTensor_Create(0, f32())
    assert capi.OH_NNTensor_Destroy(t) == SUCCESS
    return t


def _no_desc(kind: str):
    if kind == "destroyed":
        d = f32()
        capi.OH_NNTensorDesc_Destroy(d)
        return d
    return {"NULL": None, "object": object(),
            "wrong-type": capi.OH_NNCompilation_ConstructForCache()}[kind]


NO_DESC = pytest.mark.parametrize("kind", ["NULL", "object", "wrong-type", "destroyed"])


# -- 1.27 Create -------------------------------------------------------------------------------


def test_create(rt) -> None:
    d = f32()
    t = capi.OH_NNTensor_Create(0, d)
    assert isinstance(t, NN_Tensor)
    assert capi.OH_NNTensor_GetSize(t) == (SUCCESS, 24)
    assert capi.OH_NNTensor_GetOffset(t) == (SUCCESS, 0)
    code, fd = capi.OH_NNTensor_GetFd(t)
    assert code == SUCCESS and "memfd:" in os.readlink(f"/proc/self/fd/{fd}")
    assert os.fstat(fd).st_size == 24
    assert t.owns_buffer and t.device.id == CPU_ID
    assert capi.OH_NNTensor_Create(CPU_ID, d) is not None  # by ID as well as 0


@NO_DESC
def test_create_without_a_descriptor(rt, kind) -> None:
    assert capi.OH_NNTensor_Create(0, _no_desc(kind)) is None


@pytest.mark.parametrize("device_id", [12345, -1, "0", None, 1.0])
def test_create_on_an_unknown_device(rt, device_id) -> None:
    assert capi.OH_NNTensor_Create(device_id, f32()) is None


def test_create_without_any_device(capi_no_device) -> None:
    assert capi.OH_NNTensor_Create(0, f32()) is None


@pytest.mark.parametrize("case", ["no-shape", "unknown-type", "overflow", "over-1GiB", "dynamic",
                                  "zero-dim"])
def test_create_with_an_unusable_size(rt, case) -> None:
    d = {"no-shape": desc(None), "unknown-type": desc([2, 3], capi.OH_NN_UNKNOWN),
         "overflow": desc([(1 << 31) - 1] * 10), "over-1GiB": desc([GIB // 4 + 1]),
         "dynamic": desc([-1, 3]), "zero-dim": desc([0, 3])}[case]
    assert capi.OH_NNTensor_Create(0, d) is None


def test_create_exactly_1GiB_is_allowed_by_the_size_check(rt) -> None:
    """1 GiB is the limit itself (the allocation is real, so a small dtype keeps it cheap)."""
    d = desc([GIB], capi.OH_NN_INT8)
    t = capi.OH_NNTensor_Create(0, d)
    if t is not None:  # the machine may refuse a 1 GiB memfd; the check itself passed
        assert capi.OH_NNTensor_GetSize(t) == (SUCCESS, GIB)
        assert capi.OH_NNTensor_Destroy(t) == SUCCESS


def test_the_descriptor_is_copied(rt) -> None:
    d = desc([2, 3], name="x", fmt=capi.OH_NN_FORMAT_NCHW)
    t = capi.OH_NNTensor_Create(0, d)
    assert capi.OH_NNTensorDesc_SetShape(d, [7], 1) == SUCCESS
    assert capi.OH_NNTensorDesc_Destroy(d) == SUCCESS
    inner = capi.OH_NNTensor_GetTensorDesc(t)
    assert inner is not d
    assert capi.OH_NNTensorDesc_GetShape(inner) == (SUCCESS, [2, 3])
    assert capi.OH_NNTensorDesc_GetName(inner) == (SUCCESS, "x")
    assert capi.OH_NNTensorDesc_GetFormat(inner) == (SUCCESS, capi.OH_NN_FORMAT_NCHW)
    assert capi.OH_NNTensorDesc_Destroy(inner) == INVALID  # owned by the tensor
    assert capi.OH_NNTensor_GetTensorDesc(t) is inner


# -- 1.28 CreateWithSize -----------------------------------------------------------------------


def test_create_with_size(rt) -> None:
    t = capi.OH_NNTensor_CreateWithSize(0, f32(), 100)
    assert capi.OH_NNTensor_GetSize(t) == (SUCCESS, 100)
    assert capi.OH_NNTensor_GetOffset(t) == (SUCCESS, 0)
    assert len(capi.OH_NNTensor_GetDataBuffer(t)) == 100
    exact = capi.OH_NNTensor_CreateWithSize(0, f32(), 24)
    assert capi.OH_NNTensor_GetSize(exact) == (SUCCESS, 24)


def test_create_with_size_for_a_dynamic_shape(rt) -> None:
    t = capi.OH_NNTensor_CreateWithSize(0, desc([-1, 3]), 48)
    assert t is not None and capi.OH_NNTensor_GetSize(t) == (SUCCESS, 48)
    assert capi.OH_NNTensorDesc_GetShape(capi.OH_NNTensor_GetTensorDesc(t)) == (SUCCESS, [-1, 3])


@NO_DESC
def test_create_with_size_without_a_descriptor(rt, kind) -> None:
    assert capi.OH_NNTensor_CreateWithSize(0, _no_desc(kind), 24) is None


@pytest.mark.parametrize("case, size", [
    ("unknown-device", 24), ("over-1GiB", GIB + 1), ("no-shape", 24), ("unknown-type", 24),
    ("too-small", 23), ("zero", 0), ("dynamic-zero", 0), ("negative", -1), ("not-int", "24"),
])
def test_create_with_size_rows(rt, case, size) -> None:
    device = 999 if case == "unknown-device" else 0
    d = {"no-shape": desc(None), "unknown-type": desc([2, 3], capi.OH_NN_UNKNOWN),
         "dynamic-zero": desc([-1])}.get(case, f32())
    assert capi.OH_NNTensor_CreateWithSize(device, d, size) is None


# -- 1.29 CreateWithFd -------------------------------------------------------------------------


def test_create_with_fd_layout(rt) -> None:
    fd = memfd(64)
    try:
        t = capi.OH_NNTensor_CreateWithFd(0, desc([4]), fd, 64, 12)  # offset need not be aligned
        assert t is not None and not t.owns_buffer
        assert capi.OH_NNTensor_GetFd(t) == (SUCCESS, fd)
        assert capi.OH_NNTensor_GetSize(t) == (SUCCESS, 64)
        assert capi.OH_NNTensor_GetOffset(t) == (SUCCESS, 12)
        view = capi.OH_NNTensor_GetDataBuffer(t)
        assert len(view) == 52 and not view.readonly  # [offset, size)
        view[:4] = b"\x01\x02\x03\x04"
        assert os.pread(fd, 4, 12) == b"\x01\x02\x03\x04"  # the caller's own pages
        os.pwrite(fd, b"\xaa", 63)
        assert view[-1] == 0xAA
        del view
        data = io_tensor(t).data
        assert (data.offset, data.dataSize, data.bufferSize) == (12, 52, 64)
        assert capi.OH_NNTensor_Destroy(t) == SUCCESS
        assert os.fstat(fd).st_size == 64  # the caller's fd stays open
        assert os.pread(fd, 4, 12) == b"\x01\x02\x03\x04"
    finally:
        os.close(fd)


def test_create_with_fd_of_a_larger_region(rt) -> None:
    fd = memfd(4096)
    try:
        t = capi.OH_NNTensor_CreateWithFd(0, desc([4]), fd, 32, 16)
        assert capi.OH_NNTensor_GetSize(t) == (SUCCESS, 32)
        assert len(capi.OH_NNTensor_GetDataBuffer(t)) == 16
    finally:
        os.close(fd)


def test_create_with_the_fd_of_another_tensor_shares_memory(rt) -> None:
    a = capi.OH_NNTensor_Create(0, f32())
    _, fd = capi.OH_NNTensor_GetFd(a)
    b = capi.OH_NNTensor_CreateWithFd(0, desc([3]), fd, 24, 12)
    np.frombuffer(capi.OH_NNTensor_GetDataBuffer(b), np.float32)[:] = [7, 8, 9]
    np.testing.assert_array_equal(np.frombuffer(capi.OH_NNTensor_GetDataBuffer(a), np.float32),
                                  [0, 0, 0, 7, 8, 9])
    assert capi.OH_NNTensor_Destroy(b) == SUCCESS
    assert np.frombuffer(capi.OH_NNTensor_GetDataBuffer(a), np.float32)[5] == 9
    assert capi.OH_NNTensor_Destroy(a) == SUCCESS


@NO_DESC
def test_create_with_fd_without_a_descriptor(rt, kind) -> None:
    fd = memfd(64)
    try:
        assert capi.OH_NNTensor_CreateWithFd(0, _no_desc(kind), fd, 64, 0) is None
    finally:
        os.close(fd)


@pytest.mark.parametrize("case", ["fd-negative", "fd-not-int", "size-0", "size<offset",
                                  "no-shape", "unknown-type", "region-too-small", "unknown-device",
                                  "not-a-memfd", "pipe", "unsealable-memfd", "memfd-too-small",
                                  "closed-fd"])
def test_create_with_fd_rows(rt, case) -> None:
    fd = memfd(64)
    extra = []
    try:
        args = dict(device=0, d=desc([4]), fd=fd, size=64, offset=0)
        if case == "fd-negative":
            args["fd"] = -1
        elif case == "fd-not-int":
            args["fd"] = "3"
        elif case == "size-0":
            args["size"] = 0
        elif case == "size<offset":
            args["offset"] = 65
        elif case == "no-shape":
            args["d"] = desc(None)
        elif case == "unknown-type":
            args["d"] = desc([4], capi.OH_NN_UNKNOWN)
        elif case == "region-too-small":
            args["offset"] = 49  # 15 bytes left for 16
        elif case == "unknown-device":
            args["device"] = 4242
        elif case == "not-a-memfd":
            f = tempfile.TemporaryFile()
            f.truncate(64)
            extra.append(f)
            args["fd"] = f.fileno()
        elif case == "pipe":
            r, w = os.pipe()
            extra += [r, w]
            args["fd"] = r
        elif case == "unsealable-memfd":
            extra.append(memfd(64, sealing=False))
            args["fd"] = extra[-1]
        elif case == "memfd-too-small":
            args["size"] = 128
        else:
            extra.append(memfd(64))
            os.close(extra.pop())
            args["fd"] = 1000  # nothing open there (and not ours)
            if os.path.exists("/proc/self/fd/1000"):
                pytest.skip("fd 1000 is open")
        assert capi.OH_NNTensor_CreateWithFd(args["device"], args["d"], args["fd"], args["size"],
                                             args["offset"]) is None
    finally:
        os.close(fd)
        for item in extra:
            item.close() if hasattr(item, "close") else os.close(item)


def test_create_with_fd_dynamic_shape_skips_the_size_check(rt) -> None:
    fd = memfd(8)
    try:
        t = capi.OH_NNTensor_CreateWithFd(0, desc([-1]), fd, 8, 4)
        assert t is not None and len(capi.OH_NNTensor_GetDataBuffer(t)) == 4
        empty = capi.OH_NNTensor_CreateWithFd(0, desc([-1]), fd, 8, 8)  # no row refuses it
        assert empty is not None and len(capi.OH_NNTensor_GetDataBuffer(empty)) == 0
    finally:
        os.close(fd)


# -- 1.30 Destroy ------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["NULL", "object", "desc"])
def test_destroy_bad_handles(rt, bad) -> None:
    obj = {"NULL": None, "object": object(), "desc": f32()}[bad]
    assert capi.OH_NNTensor_Destroy(obj) == INVALID


def test_destroy_twice(rt) -> None:
    t = capi.OH_NNTensor_Create(0, f32())
    assert capi.OH_NNTensor_Destroy(t) == SUCCESS
    assert capi.OH_NNTensor_Destroy(t) == INVALID


def test_destroy_gives_the_buffer_back_and_frees_the_descriptor(rt) -> None:
    t = capi.OH_NNTensor_Create(0, f32())
    inner = capi.OH_NNTensor_GetTensorDesc(t)
    descriptor = t.memory.descriptor()
    assert capi.OH_NNTensor_Destroy(t) == SUCCESS
    assert inner.destroyed and t.memory.closed
    client = devices_module.registry().get(0).client()
    assert client.release_buffer(descriptor).returnCode != NNRT_SUCCESS  # already released


def test_a_forgotten_tensor_gives_its_buffer_back(rt) -> None:
    t = capi.OH_NNTensor_Create(0, f32())
    descriptor = t.memory.descriptor()
    del t
    gc.collect()
    client = devices_module.registry().get(0).client()
    assert client.release_buffer(descriptor).returnCode != NNRT_SUCCESS  # already released


def test_destroy_while_a_view_is_alive(rt) -> None:
    t = capi.OH_NNTensor_Create(0, f32())
    view = capi.OH_NNTensor_GetDataBuffer(t)
    array = np.frombuffer(view, np.float32)
    assert capi.OH_NNTensor_Destroy(t) == SUCCESS  # no crash; the mapping goes with the view
    array[:] = 1.0
    del array, view


@pytest.mark.multiprocess
def test_destroy_when_the_device_is_gone(runtime_dir, monkeypatch) -> None:
    driver = start_driver(runtime_dir)
    try:
        with use_runtime(monkeypatch, runtime_dir):
            t = capi.OH_NNTensor_Create(0, f32())
            t2 = capi.OH_NNTensor_Create(0, f32())
            client = t.client
            driver.stop(signal.SIGKILL)
            assert wait_until(lambda: not client.alive, 5)
            assert capi.OH_NNTensor_Destroy(t) == NULL_PTR  # freed here all the same
            assert t.destroyed and t.memory.closed
            assert capi.OH_NNTensor_Destroy(t) == INVALID
            driver = start_driver(runtime_dir)  # the same device is registered again
            assert capi.OH_NNTensor_Destroy(t2) == SUCCESS
    finally:
        driver.stop()


# -- 1.31 – 1.35 getters -----------------------------------------------------------------------

GETTERS = {
    "GetFd": capi.OH_NNTensor_GetFd,
    "GetSize": capi.OH_NNTensor_GetSize,
    "GetOffset": capi.OH_NNTensor_GetOffset,
}


@pytest.mark.parametrize("getter", GETTERS)
@pytest.mark.parametrize("bad", ["NULL", "object", "destroyed"])
def test_getters_reject_bad_handles(rt, getter, bad) -> None:
    obj = {"NULL": None, "object": f32(), "destroyed": None}[bad]
    if bad == "destroyed":
        obj = destroyed_tensor(rt)
    assert GETTERS[getter](obj) == (INVALID, None)


@pytest.mark.parametrize("bad", ["NULL", "object", "destroyed"])
def test_get_desc_and_buffer_of_no_tensor(rt, bad) -> None:
    obj = destroyed_tensor(rt) if bad == "destroyed" else {"NULL": None, "object": object()}[bad]
    assert capi.OH_NNTensor_GetTensorDesc(obj) is None
    assert capi.OH_NNTensor_GetDataBuffer(obj) is None


def test_data_buffer_is_the_shared_memory(rt) -> None:
    t = capi.OH_NNTensor_Create(0, desc([2, 3]))
    view = capi.OH_NNTensor_GetDataBuffer(t)
    assert isinstance(view, memoryview) and len(view) == 24 and not view.readonly
    np.frombuffer(view, np.float32)[:] = np.arange(6)
    _, fd = capi.OH_NNTensor_GetFd(t)
    assert np.frombuffer(os.pread(fd, 24, 0), np.float32).tolist() == list(range(6))
    again = np.frombuffer(capi.OH_NNTensor_GetDataBuffer(t), np.float32)
    assert again.tolist() == list(range(6))


def test_io_tensor(rt) -> None:
    t = capi.OH_NNTensor_CreateWithSize(0, desc([1, 2, 3], capi.OH_NN_INT16, "in",
                                                capi.OH_NN_FORMAT_NCHW), 40)
    io = io_tensor(t)
    assert (io.name, io.dataType, list(io.dimensions), io.format) == \
        ("in", ht.DATA_TYPE_INT16, [1, 2, 3], ht.FORMAT_NCHW)
    assert (io.data.bufferId, io.data.bufferSize, io.data.offset, io.data.dataSize) == \
        (t.memory.buffer_id, 40, 0, 40)


# -- across processes --------------------------------------------------------------------------


def test_the_driver_reads_and_writes_tensor_memory(rt) -> None:
    model = add_model()
    code, c = build(model)
    assert code == SUCCESS
    ex = capi.OH_NNExecutor_Construct(c)
    fd = memfd(4096)
    try:
        x = capi.OH_NNTensor_CreateWithFd(0, desc([2, 3]), fd, 4096, 1000)
        y = capi.OH_NNTensor_CreateWithSize(0, desc([2, 3]), 64)
        values = np.array([[1, 2, 3], [4, 5, 6]], np.float32)
        os.pwrite(fd, values.tobytes(), 1000)  # written through the caller's own fd
        assert capi.OH_NNExecutor_RunSync(ex, [x], 1, [y], 1) == SUCCESS
        out = np.frombuffer(capi.OH_NNTensor_GetDataBuffer(y), np.float32, count=6)
        np.testing.assert_allclose(out.reshape(2, 3), values + W)
        assert capi.OH_NNTensor_Destroy(x) == SUCCESS and capi.OH_NNTensor_Destroy(y) == SUCCESS
    finally:
        os.close(fd)
        capi.OH_NNExecutor_Destroy(ex)
        capi.OH_NNCompilation_Destroy(c)
        capi.OH_NNModel_Destroy(model)


def test_destroy_racing_readers(rt) -> None:
    tensors = [capi.OH_NNTensor_Create(0, f32()) for _ in range(8)]
    errors = []

    def reader() -> None:
        try:
            for _ in range(200):
                for t in tensors:
                    assert capi.OH_NNTensor_GetSize(t)[0] in (SUCCESS, INVALID)
                    view = capi.OH_NNTensor_GetDataBuffer(t)
                    assert view is None or len(view) == 24
                    assert capi.OH_NNTensor_GetFd(t)[0] in (SUCCESS, INVALID)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=reader) for _ in range(3)]
    for th in threads:
        th.start()
    results = [capi.OH_NNTensor_Destroy(t) for t in tensors]
    results += [capi.OH_NNTensor_Destroy(t) for t in tensors]
    for th in threads:
        th.join(20)
    assert not errors
    assert results == [SUCCESS] * 8 + [INVALID] * 8
