"""One onnxruntime session per model and width, shared by every prepared model of that
graph (drivers/cpu/ort/shared_sessions.py): many clients compiling one model hold one copy
of its weights, the answers stay each run's own, and the last holder frees it."""

from __future__ import annotations

import gc
import threading

import numpy as np
import pytest

from nnrt.drivers.cpu.device import CpuDevice
from nnrt.drivers.cpu.ort import engine, pool_spinning, shared_sessions
from nnrt.hdi.device import PrepareConfig
from nnrt.hdi.graph import Graph
from nnrt.hdi.reference.kernel import create_kernel
from nnrt.protos import node_attrs_pb2 as na
from tests.conftest import admin_details, start_driver
from tests.drivers.cpu.ort.test_spinning import one_segment
from tests.hdi.reference.util import GraphBuilder, randn


def dense(seed: int = 1) -> tuple[Graph, np.ndarray]:
    """x @ W (weights from `seed`), and an input."""
    g = GraphBuilder()
    x = g.tensor((8, 32))
    y = g.node(na.NODE_TYPE_FULL_CONNECTION, na.FullConnection(),
               [x, g.tensor((16, 32), randn(16, 32, seed=seed))], (8, 16))
    return g.graph([x], [y]), randn(8, 32, seed=9)


def expected(graph: Graph, x: np.ndarray) -> np.ndarray:
    weights = graph.nodes[0].inputs[1].constant  # (out, in): the product written out here
    return np.einsum("bi,oi->bo", x.astype(np.float64), weights.astype(np.float64))


def test_the_same_graph_prepared_twice_runs_on_one_session():
    graph, x = dense()
    first, second = one_segment(graph), one_segment(dense()[0])
    assert first.session is second.session
    assert first.optimized_model == second.optimized_model
    assert first._narrow_session() is second._narrow_session()
    for segment in (first, second):
        np.testing.assert_allclose(segment.execute([x], narrow=False)[0], expected(graph, x),
                                   rtol=1e-5, atol=1e-5)


def test_another_graph_or_other_settings_get_their_own(monkeypatch):
    monkeypatch.setattr(pool_spinning, "_mode", "off")  # pools that sleep after a run
    graph, _ = dense(seed=1)
    one = one_segment(graph)
    assert one_segment(dense(seed=2)[0]).session is not one.session  # other weights
    monkeypatch.setattr(pool_spinning, "_mode", "on")  # sessions that spin on after a run
    assert one_segment(graph).session is not one.session


def test_a_model_restored_from_its_cache_meets_the_one_prepared_afresh():
    device = CpuDevice(engine="ort")
    graph, x = dense(seed=3)
    fresh = device.prepare(graph, PrepareConfig())
    restored = device.prepare_from_cache(fresh.export_cache(), PrepareConfig())
    sessions = [[step.unit.session for step in p.plan.steps
                 if isinstance(step.unit, engine.OrtSegment)] for p in (fresh, restored)]
    assert sessions[0] and sessions[0][0] is sessions[1][0]


def test_the_last_holder_frees_it():
    gc.collect()
    before = shared_sessions.sessions_held()
    graph, _ = dense(seed=4)
    first, second = one_segment(graph), one_segment(graph)
    first._narrow_session(), second._narrow_session()
    held = shared_sessions.sessions_held()
    assert held > before
    del first
    gc.collect()
    assert shared_sessions.sessions_held() == held  # the second still runs on them
    del second
    gc.collect()
    assert shared_sessions.sessions_held() == before


def test_prepared_models_sharing_a_session_run_at_once_each_with_its_own_answer():
    """Runs of two prepared models on one session from many threads, each with its own
    inputs bound: every answer is its own input's (no binding crosses over)."""
    graph, _ = dense(seed=5)
    segments = [one_segment(graph) for _ in range(2)]
    assert segments[0].session is segments[1].session
    want_of = {}
    failures = []

    def work(k: int) -> None:
        segment = segments[k % 2]
        x = randn(8, 32, seed=100 + k)
        out = np.empty((8, 16), np.float32)
        binding = segment.bind([x], [out])
        want = expected(graph, x)
        want_of[k] = want
        for _ in range(50):
            out[:] = np.nan
            binding.run(narrow=k % 3 == 0)
            if not np.allclose(out, want, rtol=1e-5, atol=1e-5):
                failures.append(k)
                return

    threads = [threading.Thread(target=work, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads)
    assert not failures and len(want_of) == 6


def test_one_session_is_made_when_two_prepare_the_same_model_at_once(monkeypatch):
    made = []
    real = engine._session
    barrier = threading.Barrier(4)
    monkeypatch.setattr(engine, "_session", lambda *a, **k: made.append(1) or real(*a, **k))
    graph, _ = dense(seed=6)
    segments = []

    def prepare() -> None:
        barrier.wait(timeout=10)
        segments.append(one_segment(graph))

    threads = [threading.Thread(target=prepare) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert len(segments) == 4 and len({id(s.session) for s in segments}) == 1
    assert len(made) == 1


@pytest.mark.multiprocess
def test_compilations_of_one_model_share_its_session_in_the_driver(tmp_path, monkeypatch):
    """Three compilations of the same model in the driver: its admin details count one
    onnxruntime session for them, and each gives its own inputs' right answers."""
    from nnrt.client.api import Model
    from tests.client.capi.util_capi import use_runtime

    runtime = tmp_path / "rt"
    driver = start_driver(runtime, "cpu", "--engine", "ort")
    try:
        with use_runtime(monkeypatch, runtime):
            w = randn(16, 32, seed=7)
            compiled = []
            for _ in range(3):
                model = Model()
                x = model.input((8, 32))
                model.outputs(model.fully_connected(x, model.constant(w)))
                compiled.append(model.compile("cpu"))
            assert admin_details(driver)["ort_sessions"] == "1"
            for k, c in enumerate(compiled):
                x = randn(8, 32, seed=20 + k)
                got = c.executor().run(x)
                np.testing.assert_allclose(got, x.astype(np.float64) @ w.T.astype(np.float64),
                                           rtol=1e-5, atol=1e-5)
    finally:
        assert driver.stop() == 0


def test_a_session_that_fails_to_be_made_leaves_nothing_behind(monkeypatch):
    """onnxruntime refusing the model leaves that prepare's nodes on numpy (the partition's
    own rule) and nothing on the shelf; the next prepare makes the session afresh."""
    real = engine._session
    calls = []

    def refuse_once(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("refused")
        return real(*args, **kwargs)

    monkeypatch.setattr(engine, "_session", refuse_once)
    graph, x = dense(seed=8)
    kernels = {i: create_kernel(node) for i, node in enumerate(graph.nodes)}
    assert engine.partition(graph, kernels).single_segment is None  # numpy computes it
    assert calls == [1] and not shared_sessions._making
    segment = one_segment(graph)
    assert calls == [1, 1]
    np.testing.assert_allclose(segment.execute([x], narrow=False)[0], expected(graph, x),
                               rtol=1e-5, atol=1e-5)
