"""The Pythonic API (nnrt.client: Model, Compiled, Executor, NNRtError) on a real CPU driver,
checked against numpy computed independently here."""

from __future__ import annotations

import asyncio
import gc
import mmap

import numpy as np
import pytest

from nnrt.client import Compiled, DeviceInfo, Executor, Model, NNRtError, list_devices
from nnrt.client.capi import (
    OH_NN_CPU,
    OH_NN_FAILED,
    OH_NN_INVALID_PARAMETER,
    OH_NN_OPERATION_FORBIDDEN,
    OH_NN_TIMEOUT,
    OH_NNExecutor_GetInputCount,
)
from tests.client.capi.util_executor import use_runtime
from tests.conftest import in_threads, start_driver
from tests.helpers.api_models import mlp_model

RNG = np.random.default_rng(5)


def f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.fixture
def rt(shared_driver, monkeypatch):
    with use_runtime(monkeypatch, shared_driver.runtime_dir):
        yield shared_driver


def mlp_reference(x, w1, b1, w2):
    h = np.maximum(x.astype(np.float64) @ w1.T.astype(np.float64) + b1, 0)
    z = h @ w2.T.astype(np.float64)
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_devices(rt):
    (device,) = list_devices()
    assert isinstance(device, DeviceInfo)
    assert device.type == OH_NN_CPU and device.name.endswith("_v2_1") and device.id != 0


def test_mlp_in_a_few_lines(rt):
    w1, b1, w2 = f32(16, 4), f32(16), f32(3, 16)
    with mlp_model(w1, b1, w2) as m, m.compile("cpu") as compiled, compiled.executor() as ex:
        for batch in (1, 7):
            x = f32(batch, 4)
            probs = ex.run(x)
            assert probs.shape == (batch, 3) and probs.dtype == np.float32
            np.testing.assert_allclose(probs, mlp_reference(x, w1, b1, w2), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("device", [None, "cpu", OH_NN_CPU, "by-id", "by-info", "by-name"])
def test_compile_for_a_device_by_name_or_type(rt, device):
    info = list_devices()[0]
    device = {"by-id": info.id, "by-info": info, "by-name": info.name}.get(device, device)
    with Model() as m:
        a = m.input([3])
        m.outputs(a * 2.0)
        with m.compile(device) as compiled:
            np.testing.assert_allclose(compiled.run(np.array([1, 2, 3], np.float32)), [2, 4, 6])


def test_unknown_device(rt):
    with Model() as m:
        m.outputs(m.relu(m.input([3])))
        with pytest.raises(NNRtError) as err:
            m.compile("tpu")
        assert err.value.code == OH_NN_FAILED
        with pytest.raises(NNRtError) as err:
            m.compile(12345)
        assert err.value.code == OH_NN_FAILED


def test_operators_and_several_outputs(rt):
    a_val, b_val = f32(2, 3), f32(2, 3) + 3.0
    with Model() as m:
        a, b = m.input([2, 3], name="a"), m.input([2, 3], name="b")
        m.outputs(a + b, a - b, a * b, a / b, a @ m.transpose(b, [1, 0]), m.maximum(a, b))
        with m.compile() as compiled:
            s, d, p, q, mm, mx = compiled.run(a_val, b_val)
            s2, *_ = compiled.run(b=b_val, a=a_val)  # by input name
    a64, b64 = a_val.astype(np.float64), b_val.astype(np.float64)
    np.testing.assert_allclose(s, a64 + b64, rtol=1e-6)
    np.testing.assert_allclose(s2, a64 + b64, rtol=1e-6)
    np.testing.assert_allclose(d, a64 - b64, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(p, a64 * b64, rtol=1e-6)
    np.testing.assert_allclose(q, a64 / b64, rtol=1e-5)
    np.testing.assert_allclose(mm, [[sum(a64[i, k] * b64[j, k] for k in range(3)) for j in range(2)]
                                    for i in range(2)], rtol=1e-5)
    np.testing.assert_allclose(mx, np.where(a64 > b64, a64, b64))


def test_conv_and_pool_match_loops(rt):
    x, w, bias = f32(1, 5, 5, 2), f32(3, 3, 3, 2), f32(3)
    with Model() as m:
        inp = m.input([1, 5, 5, 2])
        conv = m.conv2d(inp, w, bias, padding=[1, 1, 1, 1], activation="relu")
        pooled = m.max_pool(conv, 2, 1)
        assert conv.shape == (1, 5, 5, 3) and pooled.shape == (1, 4, 4, 3)
        m.outputs(pooled)
        with m.compile() as compiled:
            out = compiled.run(x)
    xp = np.zeros((7, 7, 2))
    xp[1:6, 1:6] = x[0]
    conv_ref = np.zeros((5, 5, 3))
    for i in range(5):
        for j in range(5):
            for o in range(3):
                conv_ref[i, j, o] = max(0.0, float((xp[i:i + 3, j:j + 3] * w[o]).sum()) + bias[o])
    pool_ref = np.array([[[conv_ref[i:i + 2, j:j + 2, c].max() for c in range(3)]
                          for j in range(4)] for i in range(4)])
    np.testing.assert_allclose(out[0], pool_ref, rtol=1e-4, atol=1e-5)


def test_generic_op_with_parameters(rt):
    x_val = f32(2, 3)
    with Model() as m:
        x = m.input([2, 3])
        y = m.op("ADD", x, np.ones((2, 3), np.float32), activationType=1)  # fused ReLU
        z = m.op("OH_NN_OPS_RESHAPE", y, np.array([3, 2], np.int64), shape=[3, 2])
        m.outputs(z)
        with m.compile() as compiled:
            out = compiled.run(x_val)
    np.testing.assert_allclose(out, np.maximum(x_val.astype(np.float64) + 1, 0).reshape(3, 2))
    with Model() as m, pytest.raises(TypeError):
        m.op("ADD", m.input([1]), m.input([1]), nonsense=3)


def test_errors_carry_the_return_code(rt):
    with Model() as m:
        x = m.input([2, 3])
        with pytest.raises(NNRtError) as err:
            m.compile()  # not finished
        assert err.value.code == OH_NN_INVALID_PARAMETER
        with pytest.raises(NNRtError) as err:
            m.op("ADD", x)  # one operand
        assert err.value.code == OH_NN_INVALID_PARAMETER and "OH_NN_OPS_ADD" in str(err.value)
        m.outputs(m.relu(x))
        with pytest.raises(NNRtError) as err:
            m.outputs(x)
        assert err.value.code == OH_NN_OPERATION_FORBIDDEN
        with m.compile() as compiled, compiled.executor() as ex:
            with pytest.raises(NNRtError) as err:
                ex.run(np.zeros((2, 4), np.float32))
            assert err.value.code == OH_NN_INVALID_PARAMETER
            with pytest.raises(NNRtError) as err:
                ex.run()
            assert err.value.code == OH_NN_INVALID_PARAMETER
        with pytest.raises(NNRtError) as err:
            ex.run(np.zeros((2, 3), np.float32))  # closed
        assert err.value.code == OH_NN_INVALID_PARAMETER
    assert isinstance(err.value, Exception) and err.value.message


def test_shapes_and_dtypes_change_between_runs(rt):
    """A run with the input shapes and dtypes of the last one reuses what that one worked
    out (checks, output shapes, sized tensors); any change is checked and sized again."""
    w1, b1, w2 = f32(16, 4), f32(16), f32(3, 16)
    with mlp_model(w1, b1, w2) as m, m.compile() as compiled, compiled.executor() as ex:
        for batch in (1, 7, 7, 1, 3, 3, 9, 1):
            x = f32(batch, 4)
            probs = ex.run(x)
            assert probs.shape == (batch, 3)
            np.testing.assert_allclose(probs, mlp_reference(x, w1, b1, w2), rtol=1e-5, atol=1e-6)
            del probs  # the same tensors again next time
        assert len(ex._slots) == 1
        x = f32(2, 4)
        ex.run(x)
        for bad in (f32(2, 5), f32(2, 4, 1), (x + 1j).astype(np.complex64)):
            with pytest.raises(NNRtError) as err:
                ex.run(bad)
            assert err.value.code == OH_NN_INVALID_PARAMETER
        wide = x.astype(np.float64)  # same_kind: cast on the way in
        np.testing.assert_allclose(ex.run(wide), mlp_reference(x, w1, b1, w2), rtol=1e-5,
                                   atol=1e-6)


def test_inputs_copied_once_outputs_are_shared_memory(rt):
    with Model() as m:
        x = m.input([4])
        m.outputs(x + 1.0)
        with m.compile() as compiled, compiled.executor() as ex:
            first = ex.run(np.arange(4, dtype=np.float32))
            # the result is a view of the mapped shared memory the driver wrote, not a copy
            base = first
            while isinstance(base, np.ndarray):
                base = base.base
            assert isinstance(base, memoryview) and isinstance(base.obj, mmap.mmap)
            second = ex.run(np.full(4, 10, np.float32))
            np.testing.assert_array_equal(first, [1, 2, 3, 4])  # never overwritten while held
            np.testing.assert_array_equal(second, [11, 11, 11, 11])
            del first, second
            gc.collect()
            for i in range(20):  # results dropped each time: tensors are reused
                out = ex.run(np.full(4, i, np.float32))
                np.testing.assert_array_equal(out, np.full(4, i + 1))
            assert len(ex._slots) <= 3
            kept = out
    np.testing.assert_array_equal(kept, np.full(4, 20))  # still readable after close


def test_context_managers_release_everything(rt):
    m = Model()
    x = m.input([2])
    m.outputs(m.relu(x))
    with m:
        compiled = m.compile()
    assert m._handle is None
    with compiled:
        ex = compiled.executor()
        handle = ex.handle
        assert OH_NNExecutor_GetInputCount(handle) == (0, 1)
        ex.run(np.ones(2, np.float32))
    assert compiled._handle is None and ex._handle is None and ex._slots == []
    assert OH_NNExecutor_GetInputCount(handle) == (OH_NN_INVALID_PARAMETER, None)


def test_runs_from_several_threads(rt):
    w1, b1, w2 = f32(8, 4), f32(8), f32(3, 8)
    failures = []
    with mlp_model(w1, b1, w2) as m, m.compile() as compiled, compiled.executor() as ex:
        def worker(seed):
            rng = np.random.default_rng(seed)
            for _ in range(10):
                x = rng.standard_normal((3, 4)).astype(np.float32)
                if not np.allclose(ex.run(x), mlp_reference(x, w1, b1, w2), rtol=1e-5,
                                   atol=1e-6):
                    failures.append(seed)

        in_threads(worker, [(s,) for s in range(4)], timeout=30)
    assert failures == []


async def test_await_runs_from_asyncio(rt):
    w1, b1, w2 = f32(8, 4), f32(8), f32(3, 8)
    with mlp_model(w1, b1, w2) as m, m.compile() as compiled, compiled.executor() as ex:
        xs = [f32(i + 1, 4) for i in range(20)]
        results = await asyncio.wait_for(asyncio.gather(*(ex.run_async(x) for x in xs)), 20)
        for x, probs in zip(xs, results):
            np.testing.assert_allclose(probs, mlp_reference(x, w1, b1, w2), rtol=1e-5, atol=1e-6)
        single = await compiled.run_async(xs[0], timeout=5)
        np.testing.assert_allclose(single, results[0])


@pytest.fixture
def slow_rt(runtime_dir, monkeypatch):
    driver = start_driver(runtime_dir, "cpu", "--fault-run-delay-ms", "2000")
    with use_runtime(monkeypatch, runtime_dir):
        yield driver
    driver.stop()


async def test_timeouts_raise_timeout(slow_rt):
    with Model() as m:
        m.outputs(m.relu(m.input([2])))
        with m.compile() as compiled, compiled.executor() as ex:
            with pytest.raises(NNRtError) as err:
                await asyncio.wait_for(ex.run_async(np.ones(2, np.float32), timeout=0.1), 5)
            assert err.value.code == OH_NN_TIMEOUT
            with pytest.raises(NNRtError) as err:
                ex.run(np.ones(2, np.float32), timeout=0.1)
            assert err.value.code == OH_NN_TIMEOUT


def test_export_and_restore_a_compiled_model(rt):
    w = f32(2, 3)
    with Model() as m:
        x = m.input([None, 3])
        m.outputs(m.fully_connected(x, w))
        with m.compile() as compiled:
            blob = compiled.export_cache()
    assert isinstance(blob, bytes) and blob
    x_val = f32(4, 3)
    with Compiled.from_cache(blob) as restored:
        out = restored.run(x_val)
    expected = [[sum(float(x_val[n, k]) * float(w[o, k]) for k in range(3)) for o in range(2)]
                for n in range(4)]
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)


def test_public_names():
    import nnrt.client as client

    for name in ("Model", "Compiled", "Executor", "NNRtError", "list_devices", "DeviceInfo"):
        assert getattr(client, name) is not None
    assert issubclass(NNRtError, Exception)
    assert Compiled and Executor


# -- arguments in the caller's terms --------------------------------------------------------


def _conv_reference(x, w, b, pad):
    """NHWC convolution, stride 1, padding [top, bottom, left, right], by loops over taps."""
    t, bo, le, r = pad
    xp = np.pad(x, ((0, 0), (t, bo), (le, r), (0, 0)))
    kh, kw = w.shape[1:3]
    oh, ow = xp.shape[1] - kh + 1, xp.shape[2] - kw + 1
    y = np.zeros((x.shape[0], oh, ow, w.shape[0]), np.float64)
    for i in range(kh):
        for j in range(kw):
            y += np.einsum("nhwc,oc->nhwo", xp[:, i:i + oh, j:j + ow, :], w[:, i, j, :])
    return (y + b).astype(np.float32)


@pytest.mark.parametrize("padding, explicit", [
    (1, [1, 1, 1, 1]), ((1, 2), [1, 1, 2, 2]), ([0, 1, 2, 0], [0, 1, 2, 0]),
    (np.int64(1), [1, 1, 1, 1]),
])
def test_conv2d_takes_padding_as_pytorch_and_onnx_users_write_it(rt, padding, explicit):
    x, w, b = f32(1, 5, 6, 3), f32(4, 3, 3, 3), f32(4)
    m = Model()
    m.outputs(m.conv2d(m.input(x.shape), w, b, padding=padding, stride=1, dilation=(1, 1)))
    y = m.compile().executor().run(x)
    np.testing.assert_allclose(y, _conv_reference(x, w, b, explicit), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("call, message", [
    (lambda m, x: m.conv2d(x, f32(4, 3, 3, 3), padding="full"), "padding 'full'"),
    (lambda m, x: m.conv2d(x, f32(4, 3, 3, 3), padding=-1), "none negative"),
    (lambda m, x: m.conv2d(x, f32(4, 3, 3, 3), padding=(1, 2, 3)), "(top, bottom, left, right)"),
    (lambda m, x: m.conv2d(x, f32(4, 3, 3, 3), stride=0), "stride must be a positive int"),
    (lambda m, x: m.conv2d(x, f32(4, 3, 3, 3), stride=1.5), "stride must be an int"),
    (lambda m, x: m.conv2d(x, f32(4, 3, 3, 3), dilation=(1, 1, 1)), "dilation must be"),
    (lambda m, x: m.max_pool(x, kernel="3"), "kernel must be an int"),
    (lambda m, x: m.add(x, x, activation="gelu"), "activation 'gelu' cannot be fused"),
])
def test_bad_arguments_are_named_in_the_callers_terms(call, message):
    m = Model()
    with pytest.raises(NNRtError) as info:
        call(m, m.input([1, 5, 6, 3]))
    assert message in str(info.value)
    assert info.value.code == OH_NN_INVALID_PARAMETER


def test_fused_activation_names_are_case_insensitive(rt):
    x = np.array([[-1.0, 2.0, 7.0]], np.float32)
    m = Model()
    m.outputs(m.add(m.input(x.shape), x, activation="ReLU6"))
    np.testing.assert_array_equal(m.compile().executor().run(x), [[0.0, 4.0, 6.0]])


# -- errors as exceptions of their kind, output shapes from the driver -------------------------


def test_errors_are_exceptions_of_their_kind_with_the_drivers_reason(rt):
    from nnrt.client import DeviceUnavailable, Failed, InvalidParameter, RunTimeout

    assert issubclass(InvalidParameter, ValueError) and issubclass(RunTimeout, TimeoutError)
    with Model() as m:
        m.outputs(m.add(m.input([2, 3]), m.input([4])))
        with pytest.raises(Failed) as err:  # Build: the driver says which node and why
            m.compile("cpu")
    assert err.value.code == OH_NN_FAILED and isinstance(err.value, NNRtError)
    assert "do not broadcast" in str(err.value)
    error = NNRtError(9, "late")  # the base class builds the subclass of the code
    assert type(error) is RunTimeout and error.code == OH_NN_TIMEOUT
    assert type(NNRtError(14, "x")) is DeviceUnavailable


def test_a_batch_outside_the_devices_range_is_named(rt):
    from nnrt.client import InvalidParameter

    with Model() as m:
        x = m.input([None, 3])
        m.outputs(m.relu(x))
        with m.compile("cpu") as compiled, compiled.executor() as ex:
            with pytest.raises(InvalidParameter) as err:
                ex.run(np.zeros((100000, 3), np.float32))
    assert "dimension 0 is 100000, outside the device's range [1, 65536]" in str(err.value)


def test_outputs_take_the_shapes_the_driver_reports(rt, tmp_path):
    """A loaded model has no shape inference of its own: its dynamic output dimensions are
    sized small, the driver answers NNRT_INSUFFICIENT_BUFFER with the true shapes, and the
    run is made again with outputs of those shapes (no guess reaches the caller)."""
    from nnrt.common import model_file

    with Model() as m:
        x = m.input([None, 4])
        m.outputs(m.transpose(x, [1, 0]))  # the batch becomes the last dimension
        path = model_file.save_model(m, tmp_path / "t.nnrt")
    with Model.load(path) as loaded, loaded.compile("cpu") as compiled, \
            compiled.executor() as ex:
        for batch in (8, 3, 8, 20):
            a = f32(batch, 4)
            y = ex.run(a)
            assert y.shape == (4, batch)
            np.testing.assert_array_equal(y, np.ascontiguousarray(a.T))

            async def awaited(batch=batch):
                b = f32(batch + 1, 4)  # new input shapes: sized small again, then resized
                return b, await ex.run_async(b)

            b, z = asyncio.run(awaited())
            assert z.shape == (4, batch + 1)
            np.testing.assert_array_equal(z, np.ascontiguousarray(b.T))


@pytest.mark.multiprocess
def test_a_python_caller_sees_no_stray_stderr_lines(tmp_path):
    """Failures reach a Python caller as exceptions; the library prints nothing itself
    (a NullHandler on nnrt.client) unless the application configures logging."""
    import subprocess
    import sys

    code = ("import numpy as np\n"
            "from nnrt.client import Model, NNRtError, capi\n"
            "assert capi.OH_NNExecutor_RunSync(None, [], 0, [], 0) == capi.OH_NN_INVALID_PARAMETER\n"
            "try:\n"
            "    Model().compile()\n"
            "except NNRtError as e:\n"
            "    print('raised', type(e).__name__)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, env={"NNRT_NO_EMBEDDED": "1", "NNRT_RUNTIME_DIR":
                                           str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "raised InvalidParameter\n" and proc.stderr == ""
