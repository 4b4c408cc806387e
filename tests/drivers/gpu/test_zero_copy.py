"""Zero-copy on a host-unified device (PoCL's CPU device): aligned client windows are wrapped
with CL_MEM_USE_HOST_PTR instead of copied (drivers/gpu/opencl.py `HostWindows`), unaligned
ones and a device without host-unified memory copy; the counts in the admin status; no
stale wrapping after a region is released, no wrapping kept beyond the region or the bound."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from nnrt.common.errors import NNRT_SUCCESS
from nnrt.common.hdi_model import HdiModelBuilder
from nnrt.drivers.gpu import opencl
from nnrt.drivers.gpu.opencl import ClRuntime, choose_device
from nnrt.drivers.gpu.plan import GpuPlan
from nnrt.hdi.reference.float16 import to_float16
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from nnrt.server.buffers import SharedRegion
from tests.conftest import admin_details, start_driver
from tests.drivers.gpu.util import NEVER, graph_of, runtime
from tests.helpers.hdi_models import f32, mlp

BATCH, SIZES = 4, (64, 32, 8)
PAGE = 4096


_REGION_LOCK = threading.Lock()


@pytest.fixture(autouse=True)
def _regions():
    """The regions `aligned` made in a test, unmapped at its end as the host does."""
    made: list[SharedRegion] = []
    _made.append(made)
    yield
    _made.pop()
    for region in made:
        region.release(_REGION_LOCK)


_made: list[list[SharedRegion]] = []


def aligned(shape, offset: int = 0, dtype=np.float32) -> np.ndarray:
    """A window of a shared-memory region (as the host maps them), `offset` bytes in."""
    count = int(np.prod(shape))
    region = SharedRegion.allocate(count * np.dtype(dtype).itemsize + offset)
    _made[-1].append(region)
    return region.array(offset, np.dtype(dtype), count).reshape(shape)


def counts(rt: ClRuntime) -> dict[str, int]:
    return {k: int(v) for k, v in rt.windows.status().items() if k != "zero_copy"}


def delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {k: after[k] - before[k] for k in after if k != "zero_copy_windows"}


def _mlp_plan(rt: ClRuntime, float16: bool = False) -> tuple[GpuPlan, callable]:
    builder, reference = mlp(BATCH, SIZES)
    graph = graph_of(builder)
    if float16:
        return GpuPlan(to_float16(graph), rt, "zero-copy f16",
                       [t.dtype for t in graph.outputs]), reference
    return GpuPlan(graph, rt, "zero-copy"), reference


def _reshape_model() -> HdiModelBuilder:
    """y = Reshape(x): the output's buffer is the input's (so both must be copied)."""
    b = HdiModelBuilder("reshape")
    x = b.input("x", np.float32, [BATCH, SIZES[0]])
    y = b.tensor("y", np.float32, [SIZES[0], BATCH])
    b.node(na.NODE_TYPE_RESHAPE, [x, b.constant("shape", np.array([SIZES[0], BATCH], np.int64))],
           [y], na.Reshape())
    b.mark_outputs(y)
    return b


def test_the_device_reports_its_alignment_and_zero_copy():
    rt = runtime()
    assert rt.unified_memory and rt.windows.enabled  # PoCL's CPU device
    assert rt.windows.align == int(rt.device.mem_base_addr_align) // 8
    assert rt.details()["host_unified_memory"] == "yes"
    assert rt.status()["zero_copy"] == "yes"


def test_aligned_windows_are_used_in_place_and_give_the_copied_result():
    rt = runtime()
    plan, reference = _mlp_plan(rt)
    try:
        x = aligned((BATCH, SIZES[0]))
        x[:] = f32(BATCH, SIZES[0])
        out = aligned((BATCH, SIZES[2]))
        before = counts(rt)
        plan.run([x], NEVER, [out])
        moved = delta(before, counts(rt))
        assert moved["copied_bytes"] == 0
        assert moved["zero_copy_bytes"] == x.nbytes + out.nbytes
        np.testing.assert_allclose(out, reference(x), rtol=1e-4, atol=1e-6)
        zero_copied = out.copy()
        # The same model, the same values, copied (an unaligned window each way).
        x_off, out_off = aligned(x.shape, 4), aligned(out.shape, 4)
        x_off[:] = x
        before = counts(rt)
        plan.run([x_off], NEVER, [out_off])
        moved = delta(before, counts(rt))
        assert moved == {"copied_bytes": x.nbytes + out.nbytes, "copied_in_bytes": x.nbytes,
                         "copied_out_bytes": out.nbytes, "zero_copy_bytes": 0}
        np.testing.assert_array_equal(out_off, zero_copied)
        # run() without windows for the outputs: those are copied into fresh arrays.
        (fresh,) = plan.run([x], NEVER)
        np.testing.assert_array_equal(fresh, zero_copied)
    finally:
        plan.close()


def test_new_input_values_in_the_same_window_are_read():
    rt = runtime()
    plan, reference = _mlp_plan(rt)
    try:
        x, out = aligned((BATCH, SIZES[0])), aligned((BATCH, SIZES[2]))
        for seed in range(3):
            x[:] = np.random.default_rng(seed).standard_normal(x.shape, np.float32)
            plan.run([x], NEVER, [out])
            np.testing.assert_allclose(out, reference(x), rtol=1e-4, atol=1e-6)
    finally:
        plan.close()


def test_a_device_without_host_unified_memory_copies():
    rt = ClRuntime(choose_device("any"), zero_copy=False)  # as on a discrete GPU
    try:
        assert rt.status()["zero_copy"] == "no"
        plan, reference = _mlp_plan(rt)
        x, out = aligned((BATCH, SIZES[0])), aligned((BATCH, SIZES[2]))
        x[:] = f32(BATCH, SIZES[0])
        plan.run([x], NEVER, [out])
        plan.close()
        assert counts(rt) == {"copied_bytes": x.nbytes + out.nbytes,
                              "copied_in_bytes": x.nbytes, "copied_out_bytes": out.nbytes,
                              "zero_copy_bytes": 0, "zero_copy_windows": 0}
        np.testing.assert_allclose(out, reference(x), rtol=1e-4, atol=1e-6)
    finally:
        rt.close()


def test_float16_mode_converts_so_it_copies():
    rt = runtime()
    plan, reference = _mlp_plan(rt, float16=True)
    try:
        x, out = aligned((BATCH, SIZES[0])), aligned((BATCH, SIZES[2]))
        x[:] = f32(BATCH, SIZES[0])
        before = counts(rt)
        plan.run([x], NEVER, [out])
        moved = delta(before, counts(rt))
        assert moved["zero_copy_bytes"] == 0
        assert moved["copied_bytes"] == (x.nbytes + out.nbytes) // 2  # half on the device
        np.testing.assert_allclose(out, reference(x), rtol=1e-2, atol=1e-3)
    finally:
        plan.close()


def test_an_output_sharing_the_inputs_buffer_is_copied_both_ways():
    rt = runtime()
    plan = GpuPlan(graph_of(_reshape_model()), rt, "reshape")
    try:
        x, out = aligned((BATCH, SIZES[0])), aligned((SIZES[0], BATCH))
        x[:] = f32(BATCH, SIZES[0])
        before = counts(rt)
        plan.run([x], NEVER, [out])
        assert delta(before, counts(rt))["zero_copy_bytes"] == 0
        np.testing.assert_array_equal(out, x.reshape(out.shape))
    finally:
        plan.close()


def test_a_released_region_drops_its_wrappings_and_a_new_one_is_read_afresh():
    rt = runtime()
    plan, reference = _mlp_plan(rt)
    try:
        seen, reused = set(), False
        for seed in range(16):  # mmap gives the same address again, usually at once
            if reused:
                break
            region = SharedRegion.allocate(PAGE)
            x = region.array(0, np.float32, BATCH * SIZES[0]).reshape(BATCH, SIZES[0])
            out = region.array(2048, np.float32, BATCH * SIZES[2]).reshape(BATCH, SIZES[2])
            x[:] = np.random.default_rng(seed).standard_normal(x.shape, np.float32)
            reused = region.address in seen
            seen.add(region.address)
            live = rt.windows.live
            plan.run([x], NEVER, [out])
            assert rt.windows.live == live + 2
            np.testing.assert_allclose(out, reference(x), rtol=1e-4, atol=1e-6)
            del x, out
            region.release(_REGION_LOCK)  # the host's unmap: the wrappings go first
            assert rt.windows.live == live
        assert reused  # an address was reused, and its new contents were read
    finally:
        plan.close()


def test_memory_outside_a_mapping_is_copied():
    """A plain numpy array: nobody announces when it goes, so it is never wrapped."""
    rt = runtime()
    plan, reference = _mlp_plan(rt)
    try:
        x = f32(BATCH, SIZES[0])
        before = counts(rt)
        (out,) = plan.run([x], NEVER)
        assert delta(before, counts(rt))["zero_copy_bytes"] == 0
        np.testing.assert_allclose(out, reference(x), rtol=1e-4, atol=1e-6)
    finally:
        plan.close()


def test_wrappings_are_bounded(monkeypatch):
    monkeypatch.setattr(opencl, "MAX_WINDOWS", 8)
    rt = runtime()
    plan, reference = _mlp_plan(rt)
    try:
        x = aligned((BATCH, SIZES[0]))
        x[:] = f32(BATCH, SIZES[0])
        for _ in range(20):  # a fresh output window each run
            out = aligned((BATCH, SIZES[2]))
            plan.run([x], NEVER, [out])
            np.testing.assert_allclose(out, reference(x), rtol=1e-4, atol=1e-6)
            assert rt.windows.live <= 8
    finally:
        plan.close()


# -- through a real GPU driver ----------------------------------------------------------------


@pytest.fixture(scope="module")
def gpu_driver(tmp_path_factory):
    running = start_driver(tmp_path_factory.mktemp("gpu-zero-copy") / "rt", "gpu",
                           "--cl-device", "any")
    yield running
    running.stop()


def _io(memory, shape, offset=0) -> ht.IOTensor:
    nbytes = int(np.prod(shape)) * 4
    return ht.IOTensor(dataType=ht.DATA_TYPE_FLOAT32, dimensions=shape, format=ht.FORMAT_NONE,
                       data=memory.descriptor(offset, nbytes))


def _run(session, model_id, x, offset=0):
    """One run with fresh windows at `offset` bytes into their buffers, released after."""
    _, xin = session.allocate_buffer(x.nbytes + offset)
    _, yout = session.allocate_buffer(BATCH * SIZES[2] * 4 + offset)
    xin.array(np.float32, x.shape, offset)[:] = x
    reply = session.run(model_id, [_io(xin, x.shape, offset)],
                        [_io(yout, [BATCH, SIZES[2]], offset)], timeout=30)
    assert reply.returnCode == NNRT_SUCCESS
    y = yout.array(np.float32, [BATCH, SIZES[2]], offset).copy()
    assert session.release_buffer(xin.descriptor()).returnCode == NNRT_SUCCESS
    assert session.release_buffer(yout.descriptor()).returnCode == NNRT_SUCCESS
    xin.close(), yout.close()
    return y


def _details(driver) -> dict[str, int]:
    return {k: int(v) for k, v in admin_details(driver).items()
            if k in ("copied_bytes", "zero_copy_bytes", "zero_copy_windows",
                     "memory_used_bytes")}


@pytest.mark.multiprocess
def test_the_driver_serves_aligned_windows_in_place_and_counts_it(gpu_driver):
    with gpu_driver.client() as session:
        builder, reference = mlp(BATCH, SIZES)
        model_id = builder.prepare(session)
        x = f32(BATCH, SIZES[0])
        before = _details(gpu_driver)
        np.testing.assert_allclose(_run(session, model_id, x), reference(x), rtol=1e-4,
                                   atol=1e-6)
        after = _details(gpu_driver)
        assert after["copied_bytes"] == before["copied_bytes"]
        assert after["zero_copy_bytes"] - before["zero_copy_bytes"] == (x.nbytes
                                                                        + BATCH * SIZES[2] * 4)
        # Unaligned windows (4 bytes in): copied, same answer.
        np.testing.assert_allclose(_run(session, model_id, x, offset=4), reference(x),
                                   rtol=1e-4, atol=1e-6)
        moved = _details(gpu_driver)["copied_bytes"] - after["copied_bytes"]
        assert moved == x.nbytes + BATCH * SIZES[2] * 4
        assert session.release_prepared_model(model_id).returnCode == NNRT_SUCCESS


@pytest.mark.multiprocess
def test_many_runs_on_fresh_buffers_leak_no_wrapping_and_no_device_memory(gpu_driver):
    with gpu_driver.client() as session:
        start = _details(gpu_driver)
        builder, reference = mlp(BATCH, SIZES)
        model_id = builder.prepare(session)
        for seed in range(100):
            x = np.random.default_rng(seed).standard_normal((BATCH, SIZES[0]), np.float32)
            np.testing.assert_allclose(_run(session, model_id, x), reference(x), rtol=1e-4,
                                       atol=1e-6)
            assert _details(gpu_driver)["zero_copy_windows"] == 0  # its buffers released
        assert session.release_prepared_model(model_id).returnCode == NNRT_SUCCESS
        end = _details(gpu_driver)
        assert end["memory_used_bytes"] == start["memory_used_bytes"]
        assert end["zero_copy_windows"] == 0
        assert end["copied_bytes"] == start["copied_bytes"]
