"""Value-dependent shapes and the model memory limit (issue 25, item 2.4).

A tensor whose size depends on values (Tile's run-time multiples, Range's bounds, a
run-time shape of Fill / ConstantOfShape / BroadcastTo) counts as 0 when a prepared model's
run memory is checked; before this fix a run built a 256 MiB intermediate under
`--max-model-memory-mb 8`. Each run now sizes such a tensor from its values before the
node that writes it computes (hdi/reference/graph_checks.py, `unsized_outputs` / `RunAllowance`):
beyond the limit the run gets NNRT_OUT_OF_MEMORY, nothing is allocated, the driver keeps
serving and the same prepared model runs smaller values correctly.

The attacks run against real driver processes — the CPU driver with both engines and the
accelerator simulator — each model reducing its value-dependent intermediate to one number,
so that no output window has to be large; the driver's peak RSS (VmHWM) is read around the
refused run. The sizing itself (other operators, a segment whose sizes depend on values it
computes) is tested on the execution plan in this process.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pytest

from nnrt.common.errors import NNRT_INVALID_SHAPE, NNRT_OUT_OF_MEMORY, NNRT_SUCCESS, DriverError
from nnrt.common.hdi_model import HdiModelBuilder
from nnrt.drivers.cpu.device import CpuDevice
from nnrt.hdi.reference.plan import ExecutionPlan
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.device import PrepareConfig
from nnrt.hdi.graph import DYNAMIC
from tests.conftest import start_driver, wait_until
from tests.server.test_budgets import local_graph

MIB = 1 << 20
LIMIT_MB = 8
BIG = 256 * MIB  # what the refused runs ask for
PEAK_GROWTH_MAX = 32 * MIB  # what the driver's peak RSS may grow by across a refused run
TIMEOUT = 30.0
NEVER: Callable[[], bool] = lambda: False

# The driver under test: (kind, extra arguments, the dtype its models compute in).
DRIVERS = {
    "cpu-ort": ("cpu", ("--engine", "ort"), np.float32),
    "cpu-numpy": ("cpu", ("--engine", "numpy"), np.float32),
    "accel": ("accel", (), np.float16),  # the NPU computes float16 natively
}


@pytest.fixture(scope="module", params=sorted(DRIVERS))
def limited(request, tmp_path_factory):
    kind, args, dtype = DRIVERS[request.param]
    running = start_driver(tmp_path_factory.mktemp("runmem") / "rt", kind, *args,
                           "--max-model-memory-mb", str(LIMIT_MB), name=request.param)
    yield running, np.dtype(dtype)
    running.stop()


def peak_rss(pid: int) -> int:
    """The process's peak resident set (VmHWM), bytes."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def reduce_sum(b: HdiModelBuilder, x: int, axes: Sequence[int], dtype: np.dtype) -> int:
    """sum(x) over `axes` (keepDims off), marked as the model's output."""
    ax = b.constant("axes", np.array(axes, np.int32))
    y = b.tensor("sum", dtype, [])
    b.node(na.NODE_TYPE_REDUCE_FUSION, [x, ax], [y],
           na.ReduceFusion(mode=ht.REDUCE_MODE_SUM, keepDims=False))
    b.mark_outputs(y)
    return y


# Each case: a model whose value-dependent intermediate is summed to one number, the inputs
# of a run asking BIG bytes for it, the inputs of a small run and numpy's answer for them.
Case = tuple[HdiModelBuilder, list[np.ndarray], list[np.ndarray], float]


def tile_case(dtype: np.dtype) -> Case:
    b = HdiModelBuilder("tile")
    x = b.input("x", dtype, [1, 1024])
    m = b.input("multiples", np.int32, [2])
    y = b.tensor("tiled", dtype, [DYNAMIC, 1024])
    b.node(na.NODE_TYPE_TILE_FUSION, [x, m], [y])
    reduce_sum(b, y, [0, 1], dtype)
    xs = (np.arange(1024) % 7).astype(dtype).reshape(1, 1024)
    big = [xs, np.array([BIG // (1024 * dtype.itemsize), 1], np.int32)]
    small = [xs, np.array([3, 1], np.int32)]
    return b, big, small, float(np.tile(xs.astype(np.float64), (3, 1)).sum())


def range_case(dtype: np.dtype) -> Case:
    b = HdiModelBuilder("range")
    bounds = [b.input(n, np.int32, []) for n in ("start", "limit", "delta")]
    y = b.tensor("range", np.int32, [DYNAMIC])
    b.node(na.NODE_TYPE_RANGE, bounds, [y])
    reduce_sum(b, y, [0], np.dtype(np.int32))
    scalar = lambda v: np.array(v, np.int32)  # noqa: E731
    big = [scalar(0), scalar(BIG // 4), scalar(1)]
    small = [scalar(2), scalar(20), scalar(3)]
    return b, big, small, float(np.arange(2, 20, 3).sum())


def fill_case(dtype: np.dtype) -> Case:
    b = HdiModelBuilder("fill")
    value = b.input("value", dtype, [1])
    shape = b.input("shape", np.int32, [2])
    y = b.tensor("filled", dtype, [DYNAMIC, DYNAMIC])
    b.node(na.NODE_TYPE_FILL, [value, shape], [y])
    reduce_sum(b, y, [0, 1], dtype)
    v = np.array([2.5], dtype)
    big = [v, np.array([BIG // (1024 * dtype.itemsize), 1024], np.int32)]
    small = [v, np.array([3, 4], np.int32)]
    return b, big, small, float(np.full((3, 4), 2.5).sum())


def constant_of_shape_case(dtype: np.dtype) -> Case:
    b = HdiModelBuilder("constant_of_shape")
    shape = b.input("shape", np.int32, [2])
    y = b.tensor("constant", dtype, [DYNAMIC, DYNAMIC])
    b.node(na.NODE_TYPE_CONSTANT_OF_SHAPE, [shape], [y], na.ConstantOfShape(value=[1.5]))
    reduce_sum(b, y, [0, 1], dtype)
    big = [np.array([1024, BIG // (1024 * dtype.itemsize)], np.int32)]
    small = [np.array([5, 2], np.int32)]
    return b, big, small, float(np.full((5, 2), 1.5).sum())


def broadcast_to_case(dtype: np.dtype) -> Case:
    b = HdiModelBuilder("broadcast_to")
    x = b.input("x", dtype, [1, 1024])
    shape = b.input("shape", np.int32, [2])
    y = b.tensor("broadcast", dtype, [DYNAMIC, DYNAMIC])
    b.node(na.NODE_TYPE_BROADCAST_TO, [x, shape], [y])
    reduce_sum(b, y, [0, 1], dtype)
    xs = (np.arange(1024) % 5).astype(dtype).reshape(1, 1024)
    big = [xs, np.array([BIG // (1024 * dtype.itemsize), 1024], np.int32)]
    small = [xs, np.array([4, 1024], np.int32)]
    return b, big, small, float(np.broadcast_to(xs.astype(np.float64), (4, 1024)).sum())


CASES = {"tile": tile_case, "range": range_case, "fill": fill_case,
         "constant_of_shape": constant_of_shape_case, "broadcast_to": broadcast_to_case}


class Runner:
    """Runs a prepared model of one output from numpy inputs through shared buffers."""

    def __init__(self, client, model_id: int, builder: HdiModelBuilder) -> None:
        self.client = client
        self.model_id = model_id
        self.input_types = [builder.tensors[i].dataType for i in builder.inputs]
        self.output_type = builder.tensors[builder.outputs[0]].dataType
        self.buffers = []
        code, self.out = client.allocate_buffer(64)
        assert code == NNRT_SUCCESS
        self.buffers.append(self.out)

    def buffer(self, array: np.ndarray):
        code, memory = self.client.allocate_buffer(max(array.nbytes, 8))
        assert code == NNRT_SUCCESS
        memory.array(array.dtype, [array.size])[:] = array.reshape(-1)
        self.buffers.append(memory)
        return memory

    def run(self, inputs: Sequence[np.ndarray], dtype: np.dtype):
        ios = [ht.IOTensor(name=f"in{k}", dataType=t, dimensions=list(a.shape),
                           format=ht.FORMAT_NONE,
                           data=self.buffer(a).descriptor(0, max(a.nbytes, 1)))
               for k, (a, t) in enumerate(zip(inputs, self.input_types))]
        out = ht.IOTensor(name="out", dataType=self.output_type, dimensions=[],
                          format=ht.FORMAT_NONE, data=self.out.descriptor(0, dtype.itemsize))
        reply = self.client.run(self.model_id, ios, [out], timeout=TIMEOUT)
        return reply, self.out.array(dtype, [1])[0]

    def close(self) -> None:
        for memory in self.buffers:
            memory.close()
            self.client.release_buffer(memory.descriptor())
        self.client.release_prepared_model(self.model_id)


@pytest.mark.multiprocess
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_value_sized_intermediate_beyond_the_limit_is_refused_before_it_is_made(
        limited, case):
    """A run whose values size an intermediate at 256 MiB (limit 8 MiB): NNRT_OUT_OF_MEMORY
    with the tensor and sizes in the log, the driver's peak RSS grown by far less than
    256 MiB; then a small run of the same prepared model gives numpy's answer."""
    driver, dtype = limited
    builder, big, small, want = CASES[case](dtype)
    out_dtype = np.dtype(np.int32) if case == "range" else dtype
    with driver.client() as client:
        runner = Runner(client, builder.prepare(client), builder)
        try:
            reply, got = runner.run(small, out_dtype)  # warm: the engines' own first-run costs
            assert reply.returnCode == NNRT_SUCCESS
            start = len(driver.log())
            before = peak_rss(driver.pid)
            reply, _ = runner.run(big, out_dtype)
            grown = peak_rss(driver.pid) - before
            assert reply.returnCode == NNRT_OUT_OF_MEMORY
            assert grown < PEAK_GROWTH_MAX, f"peak RSS grew by {grown / MIB:.1f} MiB"
            assert wait_until(lambda: "sized by this run's values" in driver.log()[start:],
                              TIMEOUT)
            line = driver.log()[start:]
            assert f"would need {BIG} bytes" in line and "--max-model-memory-mb" in line
            assert f"limit of {LIMIT_MB * MIB} bytes" in line
            reply, got = runner.run(small, out_dtype)
            assert reply.returnCode == NNRT_SUCCESS
            np.testing.assert_allclose(float(got), want, rtol=1e-3)
        finally:
            runner.close()


# ------------------------------------------------------------------ the plan, in process


def plan_of(builder: HdiModelBuilder, limit: int) -> ExecutionPlan:
    return ExecutionPlan(local_graph(builder), memory_limit=limit)


def one_hot_model() -> HdiModelBuilder:
    b = HdiModelBuilder("one_hot")
    indices = b.input("indices", np.int32, [4])
    depth = b.input("depth", np.int32, [])
    on = b.constant("on", np.array(1.0, np.float32))
    off = b.constant("off", np.array(0.0, np.float32))
    y = b.tensor("y", np.float32, [4, DYNAMIC])
    b.node(na.NODE_TYPE_ONE_HOT, [indices, depth, on, off], [y], na.OneHot(axis=-1))
    b.mark_outputs(y)
    return b


def test_one_hot_depth_is_charged_at_each_run():
    """OneHot's run-time depth: [4, depth] float32 charged before it is made; a depth of
    2^20 (16 MiB) refused under 1 MiB, 3 computed, on the same plan."""
    plan = plan_of(one_hot_model(), MIB)
    indices = np.array([0, 2, 1, 2], np.int32)
    with pytest.raises(DriverError) as refused:
        plan.run([indices, np.array(1 << 20, np.int32)], NEVER)
    assert refused.value.code == NNRT_OUT_OF_MEMORY
    assert f"would need {4 * 4 << 20} bytes" in refused.value.message
    (y,) = plan.run([indices, np.array(3, np.int32)], NEVER)
    np.testing.assert_array_equal(y, np.eye(3, dtype=np.float32)[indices])


def test_a_chain_after_the_value_sized_node_is_charged_too():
    """Tile by run-time multiples, then an Add of the result: both intermediates count, so a
    run whose tile alone fits the limit but not with the Add is refused."""
    b = HdiModelBuilder("chain")
    x = b.input("x", np.float32, [1, 256])
    m = b.input("m", np.int32, [2])
    y = b.tensor("y", np.float32, [DYNAMIC, 256])
    b.node(na.NODE_TYPE_TILE_FUSION, [x, m], [y])
    z = b.tensor("z", np.float32, [DYNAMIC, 256])
    b.node(na.NODE_TYPE_ADD_FUSION, [y, y], [z])
    b.mark_outputs(z)
    plan = plan_of(b, MIB)
    xs = np.ones((1, 256), np.float32)
    rows = 3 * MIB // 4 // (256 * 4)  # 0.75 MiB each: the tile fits, the sum does not
    with pytest.raises(DriverError) as refused:
        plan.run([xs, np.array([rows, 1], np.int32)], NEVER)
    assert refused.value.code == NNRT_OUT_OF_MEMORY
    assert "'z'" in refused.value.message
    (z,) = plan.run([xs, np.array([2, 1], np.int32)], NEVER)
    np.testing.assert_array_equal(z, np.full((2, 256), 2.0, np.float32))


def test_bad_values_keep_their_own_code():
    """Values the node refuses (a negative multiple) fail the run with the kernel's own
    NNRT_INVALID_SHAPE, not with a sizing error."""
    builder = tile_case(np.dtype(np.float32))[0]
    plan = plan_of(builder, MIB)
    with pytest.raises(DriverError) as refused:
        plan.run([np.ones((1, 1024), np.float32), np.array([-1, 1], np.int32)], NEVER)
    assert refused.value.code == NNRT_INVALID_SHAPE


def where_of_computed_mask() -> HdiModelBuilder:
    """coordinates of (x > 0): the count depends on a mask computed inside the model."""
    b = HdiModelBuilder("nonzero")
    x = b.input("x", np.float32, [64, 1024])
    zero = b.constant("zero", np.array(0.0, np.float32))
    mask = b.tensor("mask", np.bool_, [64, 1024])
    b.node(na.NODE_TYPE_GREATER, [x, zero], [mask])
    y = b.tensor("where", np.int64, [DYNAMIC, 2])
    b.node(na.NODE_TYPE_WHERE, [mask], [y])
    b.mark_outputs(y)
    return b


@pytest.mark.parametrize("engine", ["ort", "numpy"])
def test_a_size_decided_inside_an_engine_segment_is_charged_before_it_is_made(engine):
    """The count of a one-input Where over a mask the model computes: onnxruntime would
    compute mask and coordinates in one session, so that run computes them one by one on
    numpy, the coordinates charged before they are made: all 64 x 1024 true (1 MiB of
    coordinates) refused under 1 MiB, a few true computed, on both engines."""
    graph = local_graph(where_of_computed_mask())
    device = CpuDevice(engine)
    model = device.prepare(graph, PrepareConfig())
    model.plan.memory_limit = MIB - 1  # the mask (64 KiB) fits, the coordinates do not
    if engine == "ort":
        assert model.partition.ort_nodes == 2  # one session holds both nodes
    with pytest.raises(DriverError) as refused:
        model.run([np.ones((64, 1024), np.float32)], NEVER)
    assert refused.value.code == NNRT_OUT_OF_MEMORY
    assert f"would need {64 * 1024 * 2 * 8} bytes" in refused.value.message
    x = np.zeros((64, 1024), np.float32)
    x[3, 7] = x[60, 1000] = 1.0
    (y,) = model.run([x], NEVER)
    np.testing.assert_array_equal(y, [[3, 7], [60, 1000]])
    model.close()


def test_a_static_model_without_value_sized_tensors_charges_nothing_at_run():
    """The plan marks no step to size at run when every shape is known at prepare (the run
    pays nothing for this check)."""
    b = HdiModelBuilder("static")
    x = b.input("x", np.float32, [2, 3])
    y = b.tensor("y", np.float32, [2, 3])
    b.node(na.NODE_TYPE_ADD_FUSION, [x, x], [y])
    b.mark_outputs(y)
    assert plan_of(b, MIB).unsized == frozenset()
    assert plan_of(tile_case(np.dtype(np.float32))[0], MIB).unsized == frozenset({0})  # the Tile


def test_case_sizes_are_what_the_attack_says():
    """The refused runs ask exactly BIG bytes for their intermediate, in every dtype."""
    for make in CASES.values():
        for dtype in (np.dtype(np.float32), np.dtype(np.float16)):
            builder, big, _, _ = make(dtype)
            plan = plan_of(builder, LIMIT_MB * MIB)
            with pytest.raises(DriverError) as refused:
                plan.run(big, NEVER)
            assert f"would need {BIG} bytes" in refused.value.message, builder.name


def test_a_node_that_computes_values_it_gave_no_sizes_for_is_charged_after(monkeypatch):
    """Should a kernel compute values for which it gave no sizes before (its reference
    inference disagreeing with its run), what it made is still charged: the run is refused
    over the limit and the plan keeps serving."""
    from nnrt.hdi.reference import graph_checks as reference

    def no_sizes(node, arrays):
        raise DriverError(NNRT_INVALID_SHAPE, "no sizes")

    monkeypatch.setattr(reference, "infer_with_values", no_sizes)
    plan = plan_of(tile_case(np.dtype(np.float32))[0], MIB)
    xs = np.ones((1, 1024), np.float32)
    with pytest.raises(DriverError) as refused:
        plan.run([xs, np.array([512, 1], np.int32)], NEVER)  # 2 MiB
    assert refused.value.code == NNRT_OUT_OF_MEMORY
    (y,) = plan.run([xs, np.array([2, 1], np.int32)], NEVER)
    assert float(y) == 2048.0
