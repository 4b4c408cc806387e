"""The GPU driver as a process (on PoCL's CPU device: `--cl-device any`): device choice,
identity and details, the model cache with program binaries, device memory as a limit,
truthful GetSupportedOperation."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pyopencl as cl
import pyopencl._cl as _cl
import pytest

from nnrt.common.hdi_model import HdiModelBuilder
from nnrt.drivers.gpu import opencl
from nnrt.drivers.gpu.opencl import choose_device, cl_error, found_devices
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from nnrt.common.errors import (NNRT_DEVICE_ERROR, NNRT_FAILED, NNRT_INVALID_MODEL_CACHE, NNRT_OUT_OF_MEMORY,
                                NNRT_SUCCESS, NNRT_UNSUPPORTED_OP)
from tests.conftest import admin_details, start_driver
from tests.helpers.hdi_models import f32, mlp, run
from tests.helpers.model_cache import exported_blobs, flip, prepare_from, run_prepared

ANY = ("--cl-device", "any")
BATCH, SIZES = 3, (12, 24, 6)


@pytest.fixture(scope="module")
def gpu_driver(tmp_path_factory):
    running = start_driver(tmp_path_factory.mktemp("gpu") / "rt", "gpu", *ANY)
    yield running
    running.stop()


@pytest.fixture
def gpu(gpu_driver):
    with gpu_driver.client() as session:
        yield session


def driver_exit(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nnrt.server", "gpu", *args],
                          capture_output=True, text=True, timeout=60)


# -- device choice ---------------------------------------------------------------------------


@pytest.mark.multiprocess
def test_an_unknown_device_index_exits_1_listing_the_devices(tmp_path):
    done = driver_exit("--cl-device", "7:7", "--runtime-dir", str(tmp_path))
    assert done.returncode == 1
    assert "no OpenCL device 7:7" in done.stderr
    assert "OpenCL devices found: 0:0" in done.stderr and "--cl-device P:D" in done.stderr


@pytest.mark.multiprocess
def test_the_default_needs_a_gpu_and_says_how_to_pick_another(tmp_path):
    if any(f.is_gpu for f in found_devices()):
        pytest.skip("this machine has an OpenCL GPU: the default choice would serve it")
    done = driver_exit("--runtime-dir", str(tmp_path))
    assert done.returncode == 1
    assert "no OpenCL device of type GPU" in done.stderr and "--cl-device any" in done.stderr


@pytest.mark.multiprocess
def test_devices_that_cannot_build_a_kernel_are_not_served(tmp_path, monkeypatch):
    """A compiler that fails on every kernel (here: PoCL given a build flag it refuses; in
    the field: pyopencl's PoCL on a CPU newer than its LLVM) is said at start, exit 1."""
    monkeypatch.setenv("POCL_EXTRA_BUILD_FLAGS", "-fno-such-flag")
    done = driver_exit("--cl-device", "any", "--runtime-dir", str(tmp_path))
    assert done.returncode == 1
    assert "can build a kernel" in done.stderr and "-fno-such-flag" in done.stderr
    done = driver_exit("--cl-device", "0:0", "--runtime-dir", str(tmp_path))
    assert done.returncode == 1 and "0:0" in done.stderr and "cannot build a kernel" in done.stderr


def test_any_passes_over_a_device_that_cannot_build(monkeypatch, caplog):
    found = found_devices()
    first = found[0]
    monkeypatch.setitem(opencl._build_errors._results,
                        (first.platform_index, first.device_index), "error: refused")
    working = [f for f in found[1:] if f.build_error() is None]
    if not working:
        with pytest.raises(opencl.DeviceChoiceError, match="error: refused"):
            choose_device("any")
        return
    assert choose_device("any") == working[0]
    assert "skipped: it cannot build a kernel (error: refused)" in caplog.text


@pytest.mark.multiprocess
@pytest.mark.parametrize("args", [("--cl-device", "gpu0"), ("--cl-device", "1:"),
                                  ("--cl-device", ":1")])
def test_a_malformed_choice_exits_1(tmp_path, args):
    done = driver_exit(*args, "--runtime-dir", str(tmp_path))
    assert done.returncode == 1 and "is not gpu, any or P:D" in done.stderr


@pytest.mark.multiprocess
def test_gpu_options_belong_to_the_gpu_driver(tmp_path):
    done = subprocess.run([sys.executable, "-m", "nnrt.server", "cpu", "--cl-device", "any",
                           "--runtime-dir", str(tmp_path)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2 and "options of the gpu driver" in done.stderr
    assert driver_exit("--gpu-memory-mb", "0", "--runtime-dir", str(tmp_path)).returncode == 2


def test_identity_comes_from_the_opencl_device(gpu, gpu_driver):
    device = choose_device("any")
    assert gpu.get_device_type().deviceType == ht.GPU
    assert gpu.get_device_name().name == device.device.name.strip()
    assert gpu.get_vendor_name().name == device.device.vendor.strip()
    assert gpu.is_model_cache_supported().isSupported
    assert gpu.is_dynamic_input_supported().isSupported
    assert gpu.is_float16_precision_supported().isSupported  # half storage: core OpenCL
    details = admin_details(gpu_driver)
    assert details["opencl_device"] == device.device.name.strip()
    assert details["opencl_device_index"] == f"{device.platform_index}:{device.device_index}"
    assert int(details["global_memory_mib"]) == device.device.global_mem_size >> 20
    assert details["opencl_driver_version"] == device.device.driver_version.strip()


def test_float16_mode_runs_with_float32_on_the_wire(gpu):
    builder, reference = mlp(BATCH, SIZES)
    x = f32(BATCH, SIZES[0])
    config = ht.ModelConfig(enableFloat16=True)
    builder.prepare = lambda client: HdiModelBuilder.prepare(builder, client, config)
    (probs,) = run(gpu, builder, [x], [(BATCH, SIZES[2])])
    want = reference(x)
    np.testing.assert_allclose(probs, want, rtol=1e-2, atol=1e-3)
    assert not np.array_equal(probs, want)  # computed from half tensors


# -- running and the model cache ---------------------------------------------------------------


def test_mlp_matches_numpy(gpu):
    builder, reference = mlp(BATCH, SIZES)
    x = f32(BATCH, SIZES[0])
    (probs,) = run(gpu, builder, [x], [(BATCH, SIZES[2])])
    np.testing.assert_allclose(probs, reference(x), rtol=1e-4, atol=1e-6)


@pytest.mark.multiprocess
def test_cache_round_trip_through_a_new_driver_builds_no_program(tmp_path):
    runtime = tmp_path / "rt"
    first = start_driver(runtime, "gpu", *ANY)
    try:
        with first.client() as session:
            builder, reference = mlp(BATCH, SIZES)
            model_id = builder.prepare(session)
            reply = session.export_model_cache(model_id)
            assert reply.returnCode == NNRT_SUCCESS and len(reply.modelCache) == 2
            blobs = []
            for buffer in reply.modelCache:
                _, memory = session.map_buffer(buffer)
                blobs.append(bytes(memory.view()))
                memory.close()
    finally:
        first.stop()
    second = start_driver(runtime, "gpu", *ANY)
    try:
        assert admin_details(second)["programs_built"] == "0"
        with second.client() as session:
            reply = prepare_from(session, blobs)
            assert reply.returnCode == NNRT_SUCCESS
            details = admin_details(second)
            assert details["programs_built"] == "0"
            assert int(details["programs_loaded_from_binary"]) >= 1
            x = f32(BATCH, SIZES[0])
            probs = run_prepared(session, reply.preparedModelId, x)
            np.testing.assert_allclose(probs, reference(x), rtol=1e-4, atol=1e-6)
    finally:
        second.stop()


@pytest.fixture
def gpu_blobs(gpu):
    builder, _ = mlp(BATCH, SIZES)
    model_id = builder.prepare(gpu)
    reply = gpu.export_model_cache(model_id)
    blobs = []
    for buffer in reply.modelCache:
        _, memory = gpu.map_buffer(buffer)
        blobs.append(bytes(memory.view()))
        memory.close()
    return blobs


def _platform() -> bytes:
    """The name of the OpenCL platform --cl-device any picks (part of a cache's identity)."""
    return choose_device("any").platform.name.strip().encode()


@pytest.mark.parametrize("damage", [
    pytest.param(lambda g, p: [g, flip(p, len(p) - 3)], id="program-bit-flip"),
    pytest.param(lambda g, p: [g, p[:len(p) // 2]], id="program-truncated"),
    pytest.param(lambda g, p: [g, p + b"\0"], id="program-trailing-byte"),
    pytest.param(lambda g, p: [flip(g, len(g) - 3), p], id="graph-bit-flip"),
    pytest.param(lambda g, p: [g], id="graph-only"),
    pytest.param(lambda g, p: [p, g], id="swapped"),
    pytest.param(lambda g, p: [g, p.replace(b"nnrt-gpu 0.1.0", b"nnrt-gpu 9.9.9")],
                 id="program-of-another-driver-version"),
    pytest.param(lambda g, p: [g.replace(b"nnrt-gpu 0.1.0", b"nnrt-gpu 9.9.9"), p],
                 id="graph-of-another-driver-version"),
    pytest.param(lambda g, p: [g.replace(_platform(), b"Another OpenCL"), p],
                 id="graph-of-another-opencl-platform"),
    pytest.param(lambda g, p: [g, p.replace(_platform(), b"Another OpenCL")],
                 id="program-of-another-opencl-platform"),
])
def test_a_damaged_or_foreign_cache_is_refused(gpu, gpu_blobs, damage):
    assert prepare_from(gpu, damage(*gpu_blobs)).returnCode == NNRT_INVALID_MODEL_CACHE
    assert prepare_from(gpu, gpu_blobs).returnCode == NNRT_SUCCESS  # still serving


def test_a_cpu_drivers_cache_is_refused(gpu, client):
    builder, _ = mlp(BATCH, SIZES)
    cpu_blob = exported_blobs(client, builder.prepare(client))[0]  # the graph blob
    assert prepare_from(gpu, [cpu_blob]).returnCode == NNRT_INVALID_MODEL_CACHE
    assert prepare_from(gpu, [cpu_blob, cpu_blob]).returnCode == NNRT_INVALID_MODEL_CACHE


# -- device memory -----------------------------------------------------------------------------


@pytest.mark.multiprocess
def test_a_model_beyond_device_memory_is_refused_and_the_rest_keeps_working(tmp_path):
    driver = start_driver(tmp_path / "rt", "gpu", *ANY, "--gpu-memory-mb", "1")
    try:
        with driver.client() as session:
            small, small_ref = mlp(BATCH, SIZES)
            small_id = small.prepare(session)
            used = int(admin_details(driver)["memory_used_bytes"])
            big, _ = mlp(BATCH, (512, 1024, 6))  # 2 MiB of weights
            with big.packed(session) as model:
                reply = session.prepare_model(model)
            assert reply.returnCode == NNRT_OUT_OF_MEMORY
            assert int(admin_details(driver)["memory_used_bytes"]) == used  # all freed
            x = f32(BATCH, SIZES[0])
            probs = run_prepared(session, small_id, x)
            np.testing.assert_allclose(probs, small_ref(x), rtol=1e-4, atol=1e-6)
        assert "NNRT_OUT_OF_MEMORY" in driver.log() and "bytes of device memory needed" in \
            driver.log()
    finally:
        driver.stop()


def test_released_models_give_their_memory_back(gpu, gpu_driver):
    before = int(admin_details(gpu_driver)["memory_used_bytes"])
    builder, _ = mlp(BATCH, SIZES)
    model_id = builder.prepare(gpu)
    assert int(admin_details(gpu_driver)["memory_used_bytes"]) > before
    assert gpu.release_prepared_model(model_id).returnCode == NNRT_SUCCESS
    assert int(admin_details(gpu_driver)["memory_used_bytes"]) == before


# -- what the GPU does not run -----------------------------------------------------------------


def _with_topk() -> HdiModelBuilder:
    b = HdiModelBuilder("topk")
    x = b.input("x", np.float32, [2, 8])
    y = b.tensor("y", np.float32, [2, 8])
    values = b.tensor("values", np.float32, [2, 3])
    indices = b.tensor("indices", np.int32, [2, 3])
    b.node(na.NODE_TYPE_ADD_FUSION, [x, x], [y], na.AddFusion())
    b.node(na.NODE_TYPE_TOPK_FUSION, [y, b.constant("k", np.int32([3]))], [values, indices],
           na.TopKFusion(sorted=True, axis=-1))
    b.mark_outputs(values, indices)
    return b


def test_unsupported_operations_are_reported_and_refused_by_name(gpu, gpu_driver):
    builder = _with_topk()
    with builder.packed(gpu) as model:
        assert list(gpu.get_supported_operation(model).ops) == [True, False]
        reply = gpu.prepare_model(model)
    assert reply.returnCode == NNRT_UNSUPPORTED_OP
    assert "NODE_TYPE_TOPK_FUSION has no GPU kernel" in gpu_driver.log()


# -- dynamic shapes and failures at run time ---------------------------------------------------


def _dynamic_fc(n_in: int = 64, n_out: int = 64) -> tuple[HdiModelBuilder, np.ndarray]:
    w = f32(n_out, n_in)
    b = HdiModelBuilder("dynamic")
    x = b.input("x", np.float32, [-1, n_in])
    y = b.tensor("y", np.float32, [-1, n_out])
    b.node(na.NODE_TYPE_FULL_CONNECTION, [x, b.constant("w", w)], [y],
           na.FullConnection(activationType=ht.ACTIVATION_TYPE_RELU))
    b.mark_outputs(y)
    return b, w


def _run_dynamic(session, model_id, x, n_out):
    _, xin = session.allocate_buffer(x.nbytes)
    _, yout = session.allocate_buffer(x.shape[0] * n_out * 4)
    xin.array(np.float32, x.shape)[:] = x
    io = lambda m, s: ht.IOTensor(dataType=ht.DATA_TYPE_FLOAT32, dimensions=s,  # noqa: E731
                                  format=ht.FORMAT_NONE, data=m.descriptor())
    reply = session.run(model_id, [io(xin, x.shape)], [io(yout, [x.shape[0], n_out])])
    result = yout.array(np.float32, [x.shape[0], n_out]).copy()
    xin.close(), yout.close()
    return reply, result


def test_dynamic_batches_are_specialised_and_the_oldest_dropped(gpu, gpu_driver):
    builder, w = _dynamic_fc()
    model_id = builder.prepare(gpu)
    used = []
    for batch in (1, 5, 2, 7, 3, 9, 1, 5):  # more distinct shapes than are kept (4)
        x = f32(batch, 64)
        reply, y = _run_dynamic(gpu, model_id, x, 64)
        assert reply.returnCode == NNRT_SUCCESS
        assert [list(d.values) for d in reply.outputDims] == [[batch, 64]]
        np.testing.assert_allclose(y, np.maximum(x.astype(np.float64) @ w.T, 0), rtol=1e-4,
                                   atol=1e-4)
        used.append(int(admin_details(gpu_driver)["memory_used_bytes"]))
    assert max(used[4:]) <= max(used[:4]) * 2  # bounded: old specialisations freed
    assert gpu.release_prepared_model(model_id).returnCode == NNRT_SUCCESS


@pytest.mark.multiprocess
def test_a_run_whose_shape_does_not_fit_fails_and_smaller_ones_keep_working(tmp_path):
    driver = start_driver(tmp_path / "rt", "gpu", *ANY, "--gpu-memory-mb", "1")
    try:
        with driver.client() as session:
            builder, w = _dynamic_fc()
            model_id = builder.prepare(session)
            reply, _ = _run_dynamic(session, model_id, f32(4096, 64), 64)  # 2 MiB in + out
            assert reply.returnCode == NNRT_OUT_OF_MEMORY
            x = f32(3, 64)
            reply, y = _run_dynamic(session, model_id, x, 64)
            assert reply.returnCode == NNRT_SUCCESS
            np.testing.assert_allclose(y, np.maximum(x.astype(np.float64) @ w.T, 0),
                                       rtol=1e-4, atol=1e-4)
    finally:
        driver.stop()


@pytest.mark.parametrize("error,code", [
    (cl.MemoryError, NNRT_OUT_OF_MEMORY),  # CL_MEM_OBJECT_ALLOCATION_FAILURE
])
def test_opencl_errors_map_to_precise_codes(error, code):
    assert cl_error(error(_cl._ErrorRecord("create_buffer", -4, "")), "test").code == code


@pytest.mark.parametrize("status,code", [(-4, NNRT_OUT_OF_MEMORY), (-5, NNRT_OUT_OF_MEMORY),
                                         (-6, NNRT_OUT_OF_MEMORY), (-2, NNRT_DEVICE_ERROR),
                                         (-9999, NNRT_DEVICE_ERROR), (-30, NNRT_FAILED),
                                         (-48, NNRT_FAILED)])
def test_opencl_status_codes_map_to_hdi_codes(status, code):
    exc = cl.RuntimeError(_cl._ErrorRecord("enqueue_nd_range_kernel", status, "test"))
    assert cl_error(exc, "run").code == code
