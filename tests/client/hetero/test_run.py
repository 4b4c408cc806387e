"""One model over several devices, through real driver processes (client/core/hetero.py):
a float model split over the GPU (PoCL) and the CPU, the int8 CNN over the NPU and the CPU
without float16, a float model in float16 mode over the NPU and the CPU, dynamic batch
across boundaries, no byte copied between steps, async runs with a deadline and a cancel
across steps (exactly one OnRunDone), nothing supported."""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest

from nnrt.client import Model
from nnrt.client.core import execution
from nnrt.client.core.device import DeviceRegistry, find_device
from nnrt.client.core.errors import NNRtError, OH_NN_FAILED, OH_NN_SUCCESS, OH_NN_TIMEOUT
from nnrt.client.core.hetero import HeteroCompilation, auto_order
from nnrt.client.core.prepared_model import PreparedModel
from nnrt.common.hdi_model import IODesc, HdiModelBuilder, LoweredModel
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from tests.drivers.accel.int8_models import int8_cnn
from tests.client.capi.util_executor import use_runtime
from tests.conftest import start_driver

RNG = np.random.default_rng(26)
F32, INT8 = 11, 2  # OH_NN_DataType


@pytest.fixture(scope="module")
def drivers(tmp_path_factory):
    runtime = tmp_path_factory.mktemp("hetero") / "rt"
    running = [start_driver(runtime, "gpu", "--cl-device", "any"), start_driver(runtime, "cpu"),
               start_driver(runtime, "accel"),
               start_driver(runtime, "cpu", "--fault-run-delay-ms", "400", name="slowcpu")]
    yield runtime
    for driver in running:
        driver.stop()


@pytest.fixture
def runtime(drivers, monkeypatch):
    with use_runtime(monkeypatch, drivers):
        yield drivers


def cast_mlp() -> Model:
    """fc+relu → L2Normalize (no GPU kernel) → fc → softmax, dynamic batch."""
    m = Model()
    x = m.input([None, 8])
    h = m.fully_connected(x, RNG.standard_normal((16, 8)).astype(np.float32), activation="relu")
    h = m.op("L2_NORMALIZE", h)
    m.outputs(m.softmax(m.fully_connected(h, RNG.standard_normal((4, 16)).astype(np.float32))))
    return m


def test_a_model_split_over_gpu_and_cpu_runs_as_on_the_cpu(runtime):
    with cast_mlp() as model, model.compile(["gpu", "cpu"]) as split, \
            model.compile("cpu") as cpu, split.executor() as ex:
        plan = split.hetero.current
        assert [s.device.hdi_device_type for s in plan.steps] == [2, 1, 2]
        text = split.explain()
        assert "L2_NORMALIZE" in text and "has no GPU kernel" in text and "boundary tensor" in text
        for batch in (2, 5, 1, 5):  # dynamic batch across both boundaries
            x = RNG.standard_normal((batch, 8)).astype(np.float32)
            got, want = ex.run(x), cpu.run(x)
            assert got.shape == (batch, 4)
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        got = asyncio.run(ex.run_async(x, timeout=10))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        stats = ex.stats
        assert stats.copied_bytes == 0 and stats.boundary_bytes > 0
        assert stats.runs == 5 and stats.failovers == 0


def test_preference_order_and_auto(runtime):
    with cast_mlp() as model:
        with model.compile(["cpu", "gpu"]) as cpu_first:
            assert len(cpu_first.hetero.current.steps) == 1  # the CPU runs every node
        with model.compile("auto") as auto:
            kinds = [d.hdi_device_type for d in auto.hetero.devices]
            assert kinds[:2] == [3, 2] and set(kinds[2:]) == {1}
            # the NPU takes no float32 node without float16: GPU, CPU, GPU
            assert [s.device.hdi_device_type for s in auto.hetero.current.steps] == [2, 1, 2]
            x = RNG.standard_normal((3, 8)).astype(np.float32)
            assert auto.run(x).shape == (3, 4)


def test_no_device_supports_a_node(runtime):
    with cast_mlp() as model, pytest.raises(NNRtError) as info:
        model.compile(["gpu", "accelerator"])
    assert info.value.code == OH_NN_FAILED
    message = str(info.value)
    assert "node 1" in message and "L2_NORMALIZE" in message and "has no GPU kernel" in message
    assert "the NPU does not compute in float32" in message


def lowered(b: HdiModelBuilder, inputs: list[IODesc], outputs: list[IODesc]) -> LoweredModel:
    return LoweredModel(b, inputs, outputs)


def qdq_cnn() -> tuple[LoweredModel, np.ndarray]:
    """The int8 CNN with float32 edges: QuantDTypeCast in and out (the NPU runs none of
    them without float16)."""
    b, x8, _ = int8_cnn()
    x = b.inputs.pop()
    y = b.outputs.pop()
    xf = b.input("xf", np.float32, [2, 8, 8, 3], fmt=ht.FORMAT_NHWC)
    yf = b.tensor("yf", np.float32, [2, 5])
    b.node(na.NODE_TYPE_QUANT_DTYPE_CAST, [xf], [x],
           na.QuantDTypeCast(srcT=ht.DATA_TYPE_FLOAT32, dstT=ht.DATA_TYPE_INT8))
    b.node(na.NODE_TYPE_QUANT_DTYPE_CAST, [y], [yf],
           na.QuantDTypeCast(srcT=ht.DATA_TYPE_INT8, dstT=ht.DATA_TYPE_FLOAT32))
    b.mark_outputs(yf)
    model = lowered(b, [IODesc("xf", F32, [2, 8, 8, 3], 2)], [IODesc("yf", F32, [2, 5], 0)])
    return model, (x8.astype(np.float32) * 0.02)


def run_core(devices, model: LoweredModel, x: np.ndarray, config=None):
    """Build over `devices` and run once through the core (execution.Execution)."""
    hetero = HeteroCompilation(devices, model, config or ht.ModelConfig())
    built = hetero.build()
    prepared = PreparedModel(built, built.client)
    run = execution.Execution(prepared, [x])
    try:
        shapes = run.run(10.0)
        return hetero, prepared, run.results(shapes)
    finally:
        run.close()
        prepared.close()


def test_int8_cnn_over_npu_and_cpu_without_float16(runtime):
    devices = DeviceRegistry(runtime).devices()
    npu, cpu = find_device(devices, "accelerator"), find_device(devices, "nnrt-cpu")
    model, x = qdq_cnn()
    hetero, prepared, (got,) = run_core([npu, cpu], model, x)
    steps = hetero.current.steps
    assert [s.device for s in steps] == [cpu, npu, cpu]
    assert len(steps[1].step.nodes) == 5  # every int8 node on the NPU
    assert prepared.hetero.stats.copied_bytes == 0
    _, _, (want,) = run_core([cpu], model, x)
    np.testing.assert_array_equal(got, want)  # the NPU's int8 is the CPU's, bit for bit
    hetero.close()


def test_float_model_in_float16_mode_over_npu_and_cpu(runtime):
    """Float16 mode per partition: the NPU takes the float nodes (their float16 form), the
    CPU the float64 cast it does not compute; boundaries stay float32."""
    devices = DeviceRegistry(runtime).devices()
    npu, cpu = find_device(devices, "accelerator"), find_device(devices, "nnrt-cpu")
    b = HdiModelBuilder("f16")
    x = b.input("x", np.float32, [3, 8])
    w = b.constant("w", RNG.standard_normal((6, 8)).astype(np.float32))
    h, d, e, y = (b.tensor(n, t, [3, 6]) for n, t in
                  (("h", np.float32), ("d", np.float64), ("e", np.float32), ("y", np.float32)))
    b.node(na.NODE_TYPE_FULL_CONNECTION, [x, w], [h], na.FullConnection())
    b.node(na.NODE_TYPE_CAST, [h, b.constant("t64", np.array([ht.DATA_TYPE_FLOAT64],
                                                             np.int32))], [d])
    b.node(na.NODE_TYPE_CAST, [d, b.constant("t32", np.array([ht.DATA_TYPE_FLOAT32],
                                                             np.int32))], [e])
    b.node(na.NODE_TYPE_SOFTMAX, [e], [y], na.Softmax(axis=[-1]))
    b.mark_outputs(y)
    model = lowered(b, [IODesc("x", F32, [3, 8], 0)], [IODesc("y", F32, [3, 6], 0)])
    xs = RNG.standard_normal((3, 8)).astype(np.float32)
    config = ht.ModelConfig(enableFloat16=True)
    hetero, _, (got,) = run_core([npu, cpu], model, xs, config)
    assert [s.device for s in hetero.current.steps] == [npu, cpu, npu]
    assert all(model.hdi.tensors[t].dataType == ht.DATA_TYPE_FLOAT32
               for t in hetero.current.plan.boundaries)
    _, _, (want,) = run_core([cpu], model, xs)
    np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-3)
    hetero.close()


def test_async_across_steps_deadline_cancel_and_one_callback(runtime):
    """[gpu, slowcpu]: the middle step takes 400 ms. A 150 ms deadline over the steps gives
    OH_NN_TIMEOUT, a cancel gives OH_NN_FAILED, a long one the result: one OnRunDone each."""
    from nnrt.client import capi

    with cast_mlp() as model, model.compile(["gpu", "slowcpu"]) as split, \
            split.executor() as ex:
        handle = ex.handle
        x = RNG.standard_normal((2, 8)).astype(np.float32)
        want = ex.run(x)  # sizes the boundaries
        slot = ex._acquire(ex._arrays([x], {}))
        calls: list[int] = []
        done = threading.Event()

        def on_done(user_data, code, outputs, count):
            calls.append(int(code))
            done.set()

        def start(timeout_ms):
            done.clear()
            return execution.start(handle, slot.inputs, slot.outputs, timeout_ms, None, on_done,
                                   None, execution.describe_binding)

        start(150)
        assert done.wait(5)
        assert calls == [OH_NN_TIMEOUT]
        run = start(10_000)
        threading.Timer(0.1, run.cancel).start()
        assert done.wait(5)
        assert calls == [OH_NN_TIMEOUT, OH_NN_FAILED]
        start(10_000)
        assert done.wait(5)
        assert calls == [OH_NN_TIMEOUT, OH_NN_FAILED, OH_NN_SUCCESS]
        got = slot.outputs[0].memory.array(np.float32, (2, 4)).copy()
        np.testing.assert_array_equal(got, want)
        threading.Event().wait(0.6)  # no late second callback
        assert len(calls) == 3
        slot.busy = False
        assert capi.OH_NN_SUCCESS == 0


def test_auto_order_puts_accelerators_first(runtime):
    devices = DeviceRegistry(runtime).devices()
    ordered = auto_order(devices)
    assert [d.hdi_device_type for d in ordered][:2] == [3, 2]


def test_inference_session_falls_back_node_by_node_along_its_providers(runtime, tmp_path):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from nnrt.client import InferenceSession

    w = RNG.standard_normal((8, 6)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]),
         helper.make_node("Hardmax", ["h"], ["f"], axis=-1),  # ArgMax: no GPU kernel
         helper.make_node("Softmax", ["f"], ["y"], axis=-1)],
        "cast", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 6])],
        [numpy_helper.from_array(w, "w")])
    path = tmp_path / "cast.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    x = (RNG.standard_normal((3, 8)) * 3).astype(np.float32)
    with InferenceSession(path, providers=[("NnrtExecutionProvider", {"device": "gpu"}),
                                           "CPUExecutionProvider"]) as split, \
            InferenceSession(path, providers=["CPUExecutionProvider"]) as cpu:
        assert split.get_providers() == ["NnrtExecutionProvider", "CPUExecutionProvider"]
        np.testing.assert_allclose(split.run(None, {"x": x})[0], cpu.run(None, {"x": x})[0],
                                   rtol=1e-5, atol=1e-6)
    # a provider the plan does not use is not listed
    with InferenceSession(path, providers=["CPUExecutionProvider",
                                           ("NnrtExecutionProvider", {"device": "gpu"})]) as s:
        assert s.get_providers() == ["CPUExecutionProvider"]
