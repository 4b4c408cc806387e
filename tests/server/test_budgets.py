"""Budgets (issue 14, item 3): shared memory per session and per driver, the memory a
prepared model's run will write, and prepare linear in the graph.

The budget tests run a real driver process started with small budgets
(`--max-driver-memory-mb 6 --max-session-memory-mb 4 --max-model-memory-mb 2`): what goes
beyond a budget is refused with NNRT_OUT_OF_MEMORY and the sizes in the driver's log, the
driver keeps serving, what a session holds keeps working, and the bytes charged come back
when buffers are released or sessions end. The estimate and the linearity of prepare are
pure computation and are measured in this process.
"""

from __future__ import annotations

import gc
import math
import os
import time

import numpy as np
import pytest

from nnrt.common.hdi_model import HdiModelBuilder, PrepareError
from nnrt.hdi.reference import graph_checks as reference
from nnrt.drivers.cpu.device import CpuDevice
from nnrt.hdi.reference.plan import ExecutionPlan
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from nnrt.server import main as driver_main
from nnrt.hdi.device import PrepareConfig
from nnrt.common.errors import NNRT_OUT_OF_MEMORY, NNRT_SUCCESS, DriverError
from nnrt.hdi.graph import DYNAMIC
from nnrt.hdi.model_validation import build_graph
from tests.conftest import memfd_mappings, open_fds, start_driver, wait_until

MIB = 1 << 20
TIMEOUT = 10.0
# One uid may take the whole driver here: these tests are about the session's and the
# driver's budgets; the uid's share (half by default) is
# tests/server/security/test_crafted_packets_and_user_shares.py's.
BUDGETS = ("--max-driver-memory-mb", "6", "--max-session-memory-mb", "4",
           "--max-uid-memory-mb", "6", "--max-model-memory-mb", "2")
F32 = ht.DATA_TYPE_FLOAT32


@pytest.fixture(scope="module")
def small_driver(tmp_path_factory):
    running = start_driver(tmp_path_factory.mktemp("budgets") / "rt", "cpu", *BUDGETS)
    yield running
    running.stop()


def alloc(client, nbytes: int):
    code, memory = client.allocate_buffer(nbytes)
    assert code == NNRT_SUCCESS
    return memory


def free(client, memory) -> None:
    memory.close()
    assert client.release_buffer(memory.descriptor()).returnCode == NNRT_SUCCESS


def tile_builder(in_dims, multiples, out_dims) -> HdiModelBuilder:
    """y = tile(x, multiples): x float32 `in_dims` (DYNAMIC allowed)."""
    b = HdiModelBuilder("tile")
    x = b.input("x", np.float32, in_dims)
    m = b.constant("multiples", np.array(multiples, np.int32))
    y = b.tensor("y", np.float32, out_dims)
    b.node(na.NODE_TYPE_TILE_FUSION, [x, m], [y])
    b.mark_outputs(y)
    return b


def io(memory, dims) -> ht.IOTensor:
    return ht.IOTensor(name="t", dataType=F32, dimensions=list(dims), format=ht.FORMAT_NONE,
                       data=memory.descriptor(0, math.prod(dims) * 4))


def memfds(pid: int) -> set[str]:
    """The driver's fds on memfds (sockets and gRPC's own fds come and go by themselves)."""
    return {fd for fd in open_fds(pid) if "memfd:" in fd}


def log_since(driver, start: int) -> str:
    return driver.log()[start:]


# ------------------------------------------------------------ shared memory per session


def test_session_budget_refuses_beyond_and_what_is_held_keeps_working(small_driver):
    """4 MiB per session: 3 MiB held, 2 MiB more refused (AllocateBuffer and import alike),
    with the sizes in the log; the 3 MiB buffer still serves a run; after its release the
    2 MiB fit, and the driver holds no leftover mapping or fd."""
    pid = small_driver.pid
    with small_driver.client() as client:
        baseline_maps, baseline_fds = len(memfd_mappings(pid)), memfds(pid)
        held = alloc(client, 3 * MIB)
        start = len(small_driver.log())
        code, memory = client.allocate_buffer(2 * MIB)
        assert (code, memory) == (NNRT_OUT_OF_MEMORY, None)
        # The same budget at the session channel's import (OH_NNTensor_CreateWithFd).
        fd = os.memfd_create("budget-test", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        try:
            os.ftruncate(fd, 2 * MIB)
            code, _, _ = client.import_fd(fd)
            assert code == NNRT_OUT_OF_MEMORY
        finally:
            os.close(fd)
        assert wait_until(lambda: log_since(small_driver, start).count(
            "exceeds the session's shared-memory budget") == 2, TIMEOUT)
        line = log_since(small_driver, start)
        assert "NNRT_OUT_OF_MEMORY" in line and "2097152 bytes" in line
        assert "3145728 bytes" in line and "4194304 bytes" in line  # held, and the limit

        # What is held keeps working: the 3 MiB buffer is a run's output.
        model_id = tile_builder([DYNAMIC], [4], [DYNAMIC]).prepare(client)
        inp = alloc(client, 64)
        inp.array(np.float32, [2])[:] = [1.5, -2.0]
        reply = client.run(model_id, [io(inp, [2])], [io(held, [8])], timeout=TIMEOUT)
        assert reply.returnCode == NNRT_SUCCESS
        np.testing.assert_array_equal(held.array(np.float32, [8]), np.tile([1.5, -2.0], 4))

        free(client, held)
        again = alloc(client, 2 * MIB)  # the 3 MiB were given back
        free(client, again)
        free(client, inp)
        assert client.release_prepared_model(model_id).returnCode == NNRT_SUCCESS
        assert wait_until(lambda: len(memfd_mappings(pid)) == baseline_maps, TIMEOUT)
        assert wait_until(lambda: memfds(pid) == baseline_fds, TIMEOUT), open_fds(pid)


def test_driver_budget_is_shared_by_sessions_and_freed_when_one_ends(small_driver):
    """6 MiB per driver: two sessions of 3 MiB each fill it; a third MiB is refused with the
    driver's budget named; when one session ends (its buffers freed) it fits."""
    first = small_driver.client()
    try:
        with small_driver.client() as second:
            a = alloc(first, 3 * MIB)
            b = alloc(second, 3 * MIB)
            start = len(small_driver.log())
            assert second.allocate_buffer(MIB)[0] == NNRT_OUT_OF_MEMORY
            assert wait_until(lambda: "exceeds the driver's shared-memory budget"
                              in log_since(small_driver, start), TIMEOUT)
            assert "6291456 bytes" in log_since(small_driver, start)  # the driver's limit
            a.close()
            first.close()  # the session ends: the driver frees its 3 MiB

            def fits() -> bool:
                code, memory = second.allocate_buffer(MIB)
                if memory is not None:
                    free(second, memory)
                return code == NNRT_SUCCESS

            assert wait_until(fits, TIMEOUT, interval=0.1)
            free(second, b)
    finally:
        first.close()


# ------------------------------------------------------------ memory a run will write


def test_tile_amplification_refused_at_prepare_with_the_sizes(small_driver):
    """A 4-byte input and a Tile to 256 MiB, and multiples of 2^31-1 (8 GiB per run): both
    refused at PrepareModel over the 2 MiB model limit, the sizes in the log; the session
    then prepares and runs a model that fits."""
    with small_driver.client() as client:
        start = len(small_driver.log())
        for multiples in ([64 * MIB], [2**31 - 1]):
            with pytest.raises(PrepareError) as refused:
                tile_builder([1], multiples, [DYNAMIC]).prepare(client)
            assert refused.value.code == NNRT_OUT_OF_MEMORY
        assert wait_until(lambda: log_since(small_driver, start).count(
            "--max-model-memory-mb") >= 2, TIMEOUT)
        text = log_since(small_driver, start)
        assert f"need {256 * MIB} bytes" in text and f"need {(2**31 - 1) * 4} bytes" in text
        assert f"limit of {2 * MIB} bytes" in text
        model_id = tile_builder([1], [4], [4]).prepare(client)  # 16 bytes: fine
        inp, out = alloc(client, 64), alloc(client, 64)
        inp.array(np.float32, [1])[:] = 3.0
        reply = client.run(model_id, [io(inp, [1])], [io(out, [4])], timeout=TIMEOUT)
        assert reply.returnCode == NNRT_SUCCESS
        np.testing.assert_array_equal(out.array(np.float32, [4]), [3.0] * 4)
        free(client, inp)
        free(client, out)


def test_dynamic_input_checked_per_run_at_its_concrete_shape(small_driver):
    """x [-1] tiled 2^16 times (256 KiB per element of x): prepared fine (no bound at
    GetInputDimRanges' maximum); a run with 16 elements (4 MiB) is refused over the 2 MiB
    limit, runs with 2 elements before and after it succeed."""
    reps = 1 << 16
    with small_driver.client() as client:
        model_id = tile_builder([DYNAMIC], [reps], [DYNAMIC]).prepare(client)
        inp, out = alloc(client, 64), alloc(client, 3 * MIB)

        def run(n: int):
            x = np.arange(1, n + 1, dtype=np.float32)
            inp.array(np.float32, [n])[:] = x
            whole = ht.IOTensor(name="y", dataType=F32, dimensions=[DYNAMIC],
                                format=ht.FORMAT_NONE, data=out.descriptor())
            return client.run(model_id, [io(inp, [n])], [whole], timeout=TIMEOUT), x

        reply, x = run(2)
        assert reply.returnCode == NNRT_SUCCESS
        np.testing.assert_array_equal(out.array(np.float32, [2 * reps]), np.tile(x, reps))
        start = len(small_driver.log())
        reply, _ = run(16)
        assert reply.returnCode == NNRT_OUT_OF_MEMORY
        assert wait_until(lambda: f"run: a run would need {16 * 4 * reps} bytes"
                          in log_since(small_driver, start), TIMEOUT)
        out.array(np.float32, [2 * reps])[:] = 0
        reply, x = run(2)
        assert reply.returnCode == NNRT_SUCCESS
        np.testing.assert_array_equal(out.array(np.float32, [2 * reps]), np.tile(x, reps))
        free(client, inp)
        free(client, out)


def local_graph(builder: HdiModelBuilder):
    """The validated Graph of a builder's model, its constants read from local bytes."""
    blob = b"".join(builder.constants[i].tobytes() for i in sorted(builder.constants))
    model = builder.model(ht.SharedBuffer(bufferId=1, bufferSize=len(blob), offset=0,
                                          dataSize=len(blob)))
    return build_graph(model, lambda d: blob[d.offset:d.offset + d.dataSize])


def test_run_memory_counts_every_written_tensor():
    """The estimate: every node output at its inferred shape, summed (the CPU arena keeps
    them all during a run); the plan refuses beyond its limit and accepts at it."""
    b = HdiModelBuilder("two")
    x = b.input("x", np.float32, [1, 2])
    m = b.constant("multiples", np.array([3, 5], np.int32))
    y = b.tensor("y", np.float32, [DYNAMIC, DYNAMIC])
    b.node(na.NODE_TYPE_TILE_FUSION, [x, m], [y])
    z = b.tensor("z", np.float32, [3, 10])
    b.node(na.NODE_TYPE_ADD_FUSION, [y, y], [z])
    b.mark_outputs(z)
    graph = local_graph(b)
    need = 2 * 3 * 10 * 4
    plan = ExecutionPlan(graph, memory_limit=need)
    assert reference.run_memory(graph, plan.shapes).total_bytes == need
    with pytest.raises(DriverError) as refused:
        ExecutionPlan(graph, memory_limit=need - 1)
    assert refused.value.code == NNRT_OUT_OF_MEMORY
    assert f"need {need} bytes" in refused.value.message


def test_default_limit_refuses_an_absurd_tile():
    """Under the default limit (a quarter of the default driver budget, i.e. 1/8 of RAM), a
    Tile of [1, 1] by 2^31-1 twice (2^64 bytes) is refused when the plan is made."""
    graph = local_graph(tile_builder([1, 1], [2**31 - 1] * 2, [DYNAMIC, DYNAMIC]))
    assert reference.model_memory_limit() == reference.default_model_memory_limit()
    with pytest.raises(DriverError) as refused:
        ExecutionPlan(graph)
    assert refused.value.code == NNRT_OUT_OF_MEMORY


def test_budget_options_must_be_positive():
    for option in ("--max-driver-memory-mb", "--max-session-memory-mb",
                   "--max-model-memory-mb"):
        with pytest.raises(SystemExit) as exited:
            driver_main.parse_args(["cpu", option, "0"])
        assert exited.value.code == 2


# ------------------------------------------------------------ prepare linear in the graph


def chain(n: int):
    """x -> n ReLU-free activations in a chain, each [1, 4]."""
    b = HdiModelBuilder("chain")
    t = b.input("x", np.float32, (1, 4))
    for i in range(n):
        y = b.tensor(f"t{i}", np.float32, (1, 4))
        b.node(na.NODE_TYPE_ACTIVATION, [t], [y])
        t = y
    b.mark_outputs(t)
    return b.model()


def wide(n: int):
    """n nodes that all read x (all ready at once: the topological sort's worst case)."""
    b = HdiModelBuilder("wide")
    x = b.input("x", np.float32, (1, 4))
    y = x
    for i in range(n):
        y = b.tensor(f"t{i}", np.float32, (1, 4))
        b.node(na.NODE_TYPE_ACTIVATION, [x], [y])
    b.mark_outputs(y)
    return b.model()


def prepare_seconds(models, rounds: int = 3) -> list[float]:
    """Per model, the best of `rounds` of validation (build_graph) plus the CPU driver's
    plan; rounds interleave the models and the collector is off, so that load from other
    processes and GC pauses hit both sizes alike instead of skewing the ratio."""
    device = CpuDevice()
    best = [math.inf] * len(models)
    enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(rounds):
            for i, model in enumerate(models):
                started = time.perf_counter()
                device.prepare(build_graph(model, lambda _: b""), PrepareConfig())
                best[i] = min(best[i], time.perf_counter() - started)
    finally:
        if enabled:
            gc.enable()
    return best


@pytest.mark.parametrize("shape", [chain, wide])
def test_prepare_is_linear_in_the_graph(shape):
    """16 000 nodes take about 4x the time of 4 000 (were 15x: the plan's drop lists and the
    topological sort's ready list were quadratic); a ratio, not an absolute time."""
    small, big = prepare_seconds([shape(4000), shape(16000)])
    assert big / small < 6, f"4 000 nodes {small:.3f} s, 16 000 nodes {big:.3f} s"
