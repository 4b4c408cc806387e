"""The onnxruntime engine as a whole: partitioning, QDQ, the optimised-model cache, run_into,
failures inside onnxruntime, the device's engine choice and what it reports, and the driver
process's options. Operator by operator it is checked by the differential suite
(tests/drivers/cpu/ort/differential.py, over every kernel test case)."""

from __future__ import annotations

import logging
import subprocess
import sys

import numpy as np
import pytest

from nnrt.drivers.cpu import device as cpu_device
from nnrt.drivers.cpu.device import CpuDevice
from nnrt.drivers.cpu.ort import engine
from nnrt.hdi.reference.plan import ExecutionPlan
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.device import PrepareConfig
from nnrt.common.errors import NNRT_FAILED, NNRT_INVALID_MODEL_CACHE, DriverError
from nnrt.hdi.graph import QuantParam
from nnrt.common.dtypes import hdi_data_type
from tests.conftest import admin_details, start_driver
from tests.hdi.reference.util import GraphBuilder, randn
from tests.drivers.cpu.ort.differential import assert_agree

NEVER = lambda: False  # noqa: E731
IDENTITY = CpuDevice.name + " test"
RELU = ht.ACTIVATION_TYPE_RELU


def numpy_outputs(graph, inputs):
    return ExecutionPlan(graph).run(inputs, NEVER)


def ort_plan(graph, part=None):
    holder = {}

    def partitioner(g, kernels):
        holder["part"] = part or engine.partition(g, kernels)
        return engine.units_with_tensors(holder["part"], g)

    plan = ExecutionPlan(graph, partitioner=partitioner)
    return plan, holder["part"]


def mlp_with_elu(batch: int = 3):
    """fc+relu -> ELU activation (stays on numpy: ONNX's Elu loses expm1's precision) ->
    fc -> add: two onnxruntime segments around one numpy node."""
    g = GraphBuilder()
    x = g.tensor((batch, 6))
    h = g.node(na.NODE_TYPE_FULL_CONNECTION,
               na.FullConnection(hasBias=True, activationType=RELU),
               [x, g.tensor((8, 6), randn(8, 6, seed=1)), g.tensor((8,), randn(8, seed=2))],
               (batch, 8))
    e = g.node(na.NODE_TYPE_ACTIVATION, na.Activation(activationType=ht.ACTIVATION_TYPE_ELU,
                                                      alpha=1.0), [h], (batch, 8))
    f = g.node(na.NODE_TYPE_FULL_CONNECTION, na.FullConnection(),
               [e, g.tensor((4, 8), randn(4, 8, seed=3))], (batch, 4))
    y = g.node(na.NODE_TYPE_ADD_FUSION, na.AddFusion(), [f, g.tensor((4,), randn(4, seed=4))],
               (batch, 4))
    return g.graph([x], [y])


def test_a_node_that_cannot_be_lowered_splits_the_graph_and_says_why():
    graph = mlp_with_elu()
    plan, part = ort_plan(graph)
    kinds = [type(u).__name__ for u in part.units]
    assert kinds == ["OrtSegment", "Activation", "OrtSegment"], kinds
    assert part.ort_nodes == 3 and part.numpy_nodes == 1
    assert "ACTIVATION_TYPE_ELU" in part.reasons[1]
    assert "node 1: " in part.describe()
    x = randn(3, 6, seed=9)
    assert_agree(plan.run([x], NEVER), numpy_outputs(graph, [x]))


def test_an_entirely_lowerable_graph_is_one_session():
    g = GraphBuilder()
    x = g.tensor((2, 6))
    h = g.node(na.NODE_TYPE_FULL_CONNECTION, na.FullConnection(activationType=RELU),
               [x, g.tensor((5, 6), randn(5, 6, seed=1))], (2, 5))
    y = g.node(na.NODE_TYPE_MUL_FUSION, na.MulFusion(), [h, h], (2, 5))
    graph = g.graph([x], [y, h])  # an intermediate that is also a model output
    plan, part = ort_plan(graph)
    assert part.single_segment is not None and not part.reasons
    x = randn(2, 6, seed=3)
    assert_agree(plan.run([x], NEVER), numpy_outputs(graph, [x]))


def quantised_cnn():
    """int8: conv (per-channel weights, int32 bias, fused ReLU) -> fc, QUANT_TYPE_ALL."""
    rng = np.random.default_rng(5)
    g = GraphBuilder()
    sx = 1 / 127
    x = g.tensor((2, 6, 6, 3), dtype=np.int8, quant=[QuantParam(8, 0, sx)])
    w = rng.integers(-127, 128, (4, 3, 3, 3)).astype(np.int8)
    w_scales = rng.uniform(0.002, 0.004, 4)
    wq = g.tensor(w.shape, w, np.int8, quant=[QuantParam(8, 0, float(s)) for s in w_scales])
    bias = g.tensor((4,), rng.integers(-200, 200, 4).astype(np.int32), np.int32)
    c = g.node(na.NODE_TYPE_CONV2D_FUSION,
               na.Conv2DFusion(kernelSize=[3, 3], padMode=ht.PAD_MODE_SAME,
                               activationType=RELU),
               [x, wq, bias], (2, 6, 6, 4), dtype=np.int8, quant=[QuantParam(8, -128, 0.02)],
               quant_type=ht.QUANT_TYPE_ALL)
    fw = rng.integers(-127, 128, (5, 144)).astype(np.int8)
    y = g.node(na.NODE_TYPE_FULL_CONNECTION, na.FullConnection(),
               [c, g.tensor(fw.shape, fw, np.int8, quant=[QuantParam(8, 0, 0.003)])], (2, 5),
               dtype=np.int8, quant=[QuantParam(8, 0, 0.05)], quant_type=ht.QUANT_TYPE_ALL)
    return g.graph([x], [y]), rng.integers(-127, 128, (2, 6, 6, 3)).astype(np.int8)


def test_quantised_nodes_run_as_qdq_within_one_step():
    graph, x = quantised_cnn()
    plan, part = ort_plan(graph)
    assert part.single_segment is not None, part.describe()
    got, = plan.run([x], NEVER)
    want, = numpy_outputs(graph, [x])
    assert got.dtype == np.int8
    assert np.abs(got.astype(int) - want.astype(int)).max() <= 1
    assert np.count_nonzero(want) > 0  # not a vacuous agreement on zeros


def quantising_cnn(keep_quantised_input: bool):
    """float input -> QuantDTypeCast (our exact quantisation: a Cast of a clipped float64)
    -> int8 conv; with `keep_quantised_input` the int8 tensor is a model output too."""
    rng = np.random.default_rng(6)
    g = GraphBuilder()
    x = g.tensor((2, 6, 6, 3))
    xq = g.node(na.NODE_TYPE_QUANT_DTYPE_CAST,
                na.QuantDTypeCast(srcT=hdi_data_type(np.float32), dstT=hdi_data_type(np.int8)),
                [x], (2, 6, 6, 3), dtype=np.int8, quant=[QuantParam(8, 5, 1 / 100)])
    w = rng.integers(-127, 128, (4, 3, 3, 3)).astype(np.int8)
    wq = g.tensor(w.shape, w, np.int8, quant=[QuantParam(8, 0, 0.003)] * 4)
    y = g.node(na.NODE_TYPE_CONV2D_FUSION,
               na.Conv2DFusion(kernelSize=[3, 3], padMode=ht.PAD_MODE_SAME),
               [xq, wq], (2, 6, 6, 4), dtype=np.int8, quant=[QuantParam(8, -3, 0.02)],
               quant_type=ht.QUANT_TYPE_ALL)
    outputs = [y, xq] if keep_quantised_input else [y]
    return g.graph([x], outputs), rng.uniform(-1.2, 1.2, (2, 6, 6, 3)).astype(np.float32)


@pytest.mark.parametrize("keep_quantised_input", [False, True])
def test_a_quantised_input_reaches_onnxruntime_as_uint8_activations(keep_quantised_input,
                                                                     monkeypatch):
    """In the u8s8 form (int8_kernels.py), the int8 our quantisation makes inside a segment
    becomes uint8 + 128 when only DequantizeLinear reads it (quantized.unsigned_activations):
    onnxruntime then fuses the convolution into QLinearConv (with an int8 tensor it left the
    convolution in float); an int8 tensor the segment gives out stays int8. Exact where u8s8
    is (VNNI); the s8s8 form on every CPU: tests/drivers/cpu/ort/test_int8_kernels.py."""
    import onnx

    from nnrt.drivers.cpu.ort import int8_kernels
    from nnrt.drivers.cpu.ort.int8_kernels import Int8Form, Int8Kernels

    monkeypatch.setattr(int8_kernels, "_in_force", Int8Kernels(Int8Form.U8S8, "test", True))
    exact = int8_kernels.detect().form is Int8Form.U8S8
    graph, x = quantising_cnn(keep_quantised_input)
    plan, part = ort_plan(graph)
    segment = part.single_segment
    assert segment is not None, part.describe()
    ops = [n.op_type for n in onnx.load_from_string(segment.optimized_model).graph.node]
    if keep_quantised_input:
        assert "Conv" in ops and "QLinearConv" not in ops  # read by a float Conv
    else:
        assert "QLinearConv" in ops and "Conv" not in ops, ops
    got = plan.run([x], NEVER)
    want = numpy_outputs(graph, [x])
    if exact or keep_quantised_input:  # read by a float Conv: exact in either form
        assert np.abs(got[0].astype(int) - want[0].astype(int)).max() <= 1  # one step
    assert np.count_nonzero(want[0]) > 0 and len(np.unique(want[0])) > 5
    if keep_quantised_input:
        assert got[1].dtype == np.int8
        np.testing.assert_array_equal(got[1], want[1])  # the quantisation itself: exact


def test_unsigned_activations_leave_other_int8_readers_alone():
    """An int8 tensor also read by something other than a DequantizeLinear keeps its type."""
    from onnx import TensorProto, helper, numpy_helper

    from nnrt.drivers.cpu.ort.lowering import SegmentGraph
    from nnrt.drivers.cpu.ort.quantized import unsigned_activations

    def segment(second_reader: str) -> SegmentGraph:
        seg = SegmentGraph()
        seg.initializers += [numpy_helper.from_array(np.array(v, t), n) for n, v, t in
                             (("lo", -128, np.float64), ("hi", 127, np.float64),
                              ("s", 0.5, np.float32), ("z", 3, np.int8))]
        seg.nodes += [helper.make_node("Clip", ["x", "lo", "hi"], ["c"]),
                      helper.make_node("Cast", ["c"], ["q"], to=TensorProto.INT8),
                      helper.make_node("Transpose", ["q"], ["qt"], perm=[1, 0]),
                      helper.make_node("DequantizeLinear", ["qt", "s", "z"], ["d"]),
                      helper.make_node(second_reader, ["q"], ["other"])]
        return seg

    seg = segment("Identity")  # data movement to no DequantizeLinear: left alone
    unsigned_activations(seg, {"d"})
    assert [n.op_type for n in seg.nodes][:2] == ["Clip", "Cast"]
    seg = segment("Abs")
    unsigned_activations(seg, {"d", "other"})
    assert seg.nodes[1].attribute[0].i == TensorProto.INT8
    seg = segment("Identity")
    seg.nodes.pop()  # only the DequantizeLinear reads it (through the Transpose)
    unsigned_activations(seg, {"d"})
    cast = next(n for n in seg.nodes if n.op_type == "Cast")
    assert [n.op_type for n in seg.nodes][:3] == ["Clip", "Add", "Cast"]
    assert cast.attribute[0].i == TensorProto.UINT8
    zero = {t.name: t for t in seg.initializers}[seg.nodes[-1].input[2]]
    assert numpy_helper.to_array(zero) == 131 and zero.data_type == TensorProto.UINT8


def _measure(width: engine.ThreadWidth, wide_s: float, narrow_s: float) -> list[bool]:
    """Runs through `width` with these durations until it chooses; the sessions used."""
    used = []
    while width.narrow is None and len(used) < 50:
        narrow, timed = width.pick()
        used.append(narrow)
        if timed:
            width.record(narrow, narrow_s if narrow else wide_s)
    return used


@pytest.mark.parametrize("wide_s, narrow_s, chosen", [
    (200e-6, 150e-6, True),  # one thread faster: a small graph
    (150e-6, 200e-6, False),
    (2e-3, 1e-3, False),  # too long to try: the narrow session is never made
])
def test_runs_alone_compute_on_one_thread_where_that_is_faster(wide_s, narrow_s, chosen):
    width = engine.ThreadWidth(threads=2)
    used = _measure(width, wide_s, narrow_s)
    assert width.narrow is chosen
    if wide_s >= engine.TRY_NARROW_BELOW_S:
        assert used == [False, False]  # decided by the first timed wide run
    else:
        assert used[:3] == [False, False, True]  # warm-ups: wide, then narrow (made)
        assert used[3:].count(True) == used[3:].count(False) == engine.ThreadWidth.SAMPLES
    assert width.pick() == (chosen, False)  # decided: no more timing
    assert engine.ThreadWidth(threads=1).pick() == (True, False)


def test_a_segment_runs_on_the_session_its_width_chose(monkeypatch):
    graph = mlp_with_elu()
    x = randn(3, 6, seed=7)
    plan, part = ort_plan(graph)
    segment = part.segments[0]
    if segment.threads == 1:
        pytest.skip("one core: a single session")
    want, = numpy_outputs(graph, [x])
    for s in part.segments:
        s.width.narrow = s is segment
    narrow = segment._narrow_session()
    calls = []
    real = narrow.run
    monkeypatch.setattr(narrow, "run", lambda *a: calls.append(1) or real(*a))
    got, = plan.run([x], NEVER)
    assert calls and np.allclose(got, want, rtol=1e-5, atol=1e-6)


# -- the optimised-model cache -------------------------------------------------------------


def _restored(graph, blob, float16=False):
    kernels = ExecutionPlan(graph).kernels
    return engine.restore(blob, IDENTITY, graph, kernels, float16)


def test_the_optimised_models_round_trip_without_lowering_again(monkeypatch):
    graph = mlp_with_elu()
    plan, part = ort_plan(graph)
    blob = engine.export(part, IDENTITY, float16=False)
    monkeypatch.setattr(engine, "lower_node", lambda *a: pytest.fail("lowered again"))
    restored = _restored(graph, blob)
    assert [type(u).__name__ for u in restored.units] == ["OrtSegment", "Activation",
                                                          "OrtSegment"]
    plan2, _ = ort_plan(graph, restored)
    x = randn(3, 6, seed=11)
    np.testing.assert_array_equal(plan2.run([x], NEVER)[0], plan.run([x], NEVER)[0])


def test_a_cache_of_the_other_precision_mode_is_lowered_again():
    graph = mlp_with_elu()
    _, part = ort_plan(graph)
    assert _restored(graph, engine.export(part, IDENTITY, float16=True)) is None


def _flip(blob: bytes, position: int) -> bytes:
    data = bytearray(blob)
    data[position] ^= 0x01
    return bytes(data)


@pytest.mark.parametrize("damage", [
    pytest.param(lambda b: _flip(b, len(b) - 3), id="bit-flip-in-a-model"),
    pytest.param(lambda b: b[:-1], id="truncated"),
    pytest.param(lambda b: b + b"\0", id="trailing-byte"),
    pytest.param(lambda b: b.replace(b"onnxruntime", b"onnxruntimX"), id="other-onnxruntime"),
    pytest.param(lambda b: b"NNRTGRPH" + b[8:], id="another-kind"),
])
def test_a_damaged_or_foreign_optimised_model_cache_is_refused(damage):
    graph = mlp_with_elu()
    _, part = ort_plan(graph)
    blob = engine.export(part, IDENTITY, float16=False)
    with pytest.raises(DriverError) as info:
        _restored(graph, damage(blob))
    assert info.value.code == NNRT_INVALID_MODEL_CACHE


def test_a_cache_whose_segments_do_not_fit_the_model_is_refused():
    graph = mlp_with_elu()
    _, part = ort_plan(graph)
    blob = engine.export(part, IDENTITY, float16=False)
    g = GraphBuilder()  # another model: two nodes only
    x = g.tensor((3, 6))
    h = g.node(na.NODE_TYPE_ACTIVATION, na.Activation(activationType=RELU), [x], (3, 6))
    y = g.node(na.NODE_TYPE_ACTIVATION, na.Activation(activationType=RELU), [h], (3, 6))
    with pytest.raises(DriverError) as info:
        _restored(g.graph([x], [y]), blob)
    assert info.value.code == NNRT_INVALID_MODEL_CACHE


# -- runs -------------------------------------------------------------------------------------


def test_a_failure_inside_onnxruntime_fails_that_run_only(caplog):
    graph = mlp_with_elu()
    plan, part = ort_plan(graph)
    segment = part.segments[0]
    with caplog.at_level(logging.ERROR), pytest.raises(DriverError) as info:
        segment.execute([np.zeros((3, 6), np.float64)])  # a dtype the session does not take
    assert info.value.code == NNRT_FAILED and "onnxruntime segment" in str(info.value)
    assert "failed" in caplog.text
    x = randn(3, 6, seed=2)
    assert_agree(plan.run([x], NEVER), numpy_outputs(graph, [x]))


@pytest.mark.parametrize("width", [4, 40_000], ids=["copied", "bound"])
def test_run_into_writes_the_outputs_into_the_targets(width):
    g = GraphBuilder()
    x = g.tensor((2, width))
    y = g.node(na.NODE_TYPE_ACTIVATION, na.Activation(activationType=RELU), [x], (2, width))
    graph = g.graph([x], [y])
    model = CpuDevice().prepare(graph, PrepareConfig())
    assert model.writes_into_outputs  # one session, static shapes
    x = randn(2, width, seed=4)
    target = np.full((2, width), np.nan, np.float32)
    model.run_into([x], [target], NEVER)
    np.testing.assert_array_equal(target, np.maximum(x, 0))
    model.close()


def test_a_model_with_numpy_nodes_does_not_write_into_outputs():
    model = CpuDevice().prepare(mlp_with_elu(), PrepareConfig())
    assert not model.writes_into_outputs
    model.close()


# -- the device -------------------------------------------------------------------------------


def test_the_device_reports_its_engine_and_nodes_per_engine():
    device = CpuDevice()
    assert device.details()["engine"] == "ort"
    before = int(device.details()["nodes_onnxruntime"])
    model = device.prepare(mlp_with_elu(), PrepareConfig())
    details = device.details()
    assert int(details["nodes_onnxruntime"]) == before + 3
    assert int(details["threads"]) >= 1
    model.close()
    assert int(device.details()["nodes_onnxruntime"]) == before


def test_the_numpy_engine_runs_every_node_on_numpy():
    device = CpuDevice(engine="numpy")
    model = device.prepare(mlp_with_elu(), PrepareConfig())
    assert model.partition is None and not model.writes_into_outputs
    assert device.details() == {"engine": "numpy", "nodes_numpy": "4"}
    assert model.export_cache()[1:] == []  # the graph alone
    model.close()


def test_without_onnxruntime_the_device_falls_back_to_numpy_and_says_so(monkeypatch, caplog):
    monkeypatch.setattr(cpu_device, "onnxruntime_importable", lambda: False)
    with caplog.at_level(logging.WARNING):
        device = CpuDevice(engine="ort")
    assert device.engine == "numpy"
    assert "onnxruntime cannot be imported" in caplog.text


def test_an_unknown_engine_is_refused():
    with pytest.raises(ValueError, match="tensorrt"):
        CpuDevice(engine="tensorrt")


# -- the driver process -----------------------------------------------------------------------


@pytest.mark.multiprocess
def test_the_driver_serves_either_engine_and_reports_it(tmp_path):
    ort = start_driver(tmp_path / "a", "cpu", "--engine", "ort", "--threads", "1")
    numpy_driver = start_driver(tmp_path / "b", "cpu", "--engine", "numpy")
    try:
        details = admin_details(ort)
        assert details["engine"] == "ort" and details["threads"] == "1"
        assert admin_details(numpy_driver)["engine"] == "numpy"
    finally:
        assert ort.stop() == 0 and numpy_driver.stop() == 0
    assert "CPU engine: ort (1 intra-op threads)" in ort.log()


@pytest.mark.multiprocess
@pytest.mark.parametrize("args, message", [
    (["gpu", "--engine", "ort"], "--engine, --threads, --int8-kernels and --ort-spin are options of the cpu driver"),
    (["cpu", "--threads", "0"], "--threads must be > 0"),
    (["cpu", "--engine", "tensorrt"], "invalid choice"),
])
def test_bad_engine_options_are_refused_at_start(args, message, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "nnrt.server", *args, "--runtime-dir",
                           str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and message in proc.stderr


def test_run_into_maps_inputs_and_outputs_by_tensor_not_by_position():
    # The session reads y before x and writes its outputs in its own order; the model
    # lists them otherwise, and one output twice is not bound.
    g = GraphBuilder()
    x, y = g.tensor((2, 3)), g.tensor((2, 3))
    d = g.node(na.NODE_TYPE_SUB_FUSION, na.SubFusion(), [y, x], (2, 3))
    s = g.node(na.NODE_TYPE_ADD_FUSION, na.AddFusion(), [d, x], (2, 3))
    graph = g.graph([x, y], [s, d])
    model = CpuDevice().prepare(graph, PrepareConfig())
    assert model.writes_into_outputs
    xv, yv = randn(2, 3, seed=1), randn(2, 3, seed=2)
    targets = [np.empty((2, 3), np.float32) for _ in range(2)]
    model.run_into([xv, yv], targets, NEVER)
    np.testing.assert_allclose(targets[1], yv - xv, rtol=1e-6)
    np.testing.assert_allclose(targets[0], yv - xv + xv, rtol=1e-6)
    model.close()
    twice = CpuDevice().prepare(g.graph([x, y], [s, s]), PrepareConfig())
    assert not twice.writes_into_outputs  # the plan path copies the same result twice
    twice.close()


def test_the_engine_inside_another_program_leaves_its_onnxruntime_sessions_alone():
    # Only the driver process takes onnxruntime's process-wide pool: once made, onnxruntime
    # refuses every session with threads of its own, which would break the host program.
    import onnxruntime as ort
    from onnx import TensorProto, helper

    model = CpuDevice().prepare(mlp_with_elu(), PrepareConfig())
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    onnx_model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx_model.ir_version = 8
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(onnx_model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    (y,) = session.run(None, {"x": np.array([-1.0, 2.0], np.float32)})
    np.testing.assert_array_equal(y, [0.0, 2.0])
    model.close()
