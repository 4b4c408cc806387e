"""The CPU driver's speed work: per-run arenas (buffers reused from run to run, one arena per
concurrent run, model outputs never left in one), the kernels' arena-backed paths checked
against the same kernels run without an arena, and float32 GELU computed in float32."""

from __future__ import annotations

import math
import threading

import numpy as np
import pytest

from nnrt.hdi.reference import arena
from nnrt.hdi.reference.activations import apply_activation
from nnrt.hdi.reference.kernel import create_kernel
from nnrt.hdi.reference.plan import ExecutionPlan
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import DYNAMIC
from tests.conftest import in_threads
from tests.hdi.reference.util import Const, GraphBuilder, make_node, randn

NEVER = lambda: False  # noqa: E731  (a run nobody cancels)


def small_cnn(batch: int = 2):
    """conv (padded) -> max pool (padded) -> depthwise conv -> add -> fc -> reshape, with
    a second output that is an intermediate (the pool), and its numpy reference."""
    g = GraphBuilder()
    wc, bc = randn(8, 3, 3, 3, seed=1), randn(8, seed=2)
    wd, bd = randn(8, 3, 3, 1, seed=3), randn(8, seed=4)
    wf, bf = randn(5, 8 * 4 * 4, seed=5), randn(5, seed=6)
    x = g.tensor((batch if batch > 0 else DYNAMIC, 8, 8, 3))
    n = batch if batch > 0 else DYNAMIC
    c = g.node(na.NODE_TYPE_CONV2D_FUSION,
               na.Conv2DFusion(kernelSize=[3, 3], padMode=ht.PAD_MODE_PAD, padList=[1, 1, 1, 1],
                               activationType=ht.ACTIVATION_TYPE_RELU),
               [x, g.tensor(wc.shape, wc), g.tensor(bc.shape, bc)], (n, 8, 8, 8))
    p = g.node(na.NODE_TYPE_MAX_POOL_FUSION,
               na.MaxPoolFusion(kernelSize=[3, 3], strides=[2, 2], padMode=ht.PAD_MODE_PAD,
                                pad=[1, 1, 1, 1], format=ht.FORMAT_NHWC), [c],
               (n, 4, 4, 8))
    d = g.node(na.NODE_TYPE_CONV2D_FUSION,
               na.Conv2DFusion(kernelSize=[3, 3], padMode=ht.PAD_MODE_SAME, group=8),
               [p, g.tensor(wd.shape, wd), g.tensor(bd.shape, bd)], (n, 4, 4, 8))
    s = g.node(na.NODE_TYPE_ADD_FUSION, na.AddFusion(activationType=ht.ACTIVATION_TYPE_RELU),
               [d, p], (n, 4, 4, 8))
    f = g.node(na.NODE_TYPE_FULL_CONNECTION, na.FullConnection(hasBias=True),
               [s, g.tensor(wf.shape, wf), g.tensor(bf.shape, bf)], (n, 5))
    y = g.node(na.NODE_TYPE_RESHAPE, na.Reshape(),
               [f, g.tensor((2,), np.array([-1, 5], np.int64), np.int64)], (n, 5))
    return g.graph([x], [y, p])


def reference(plan: ExecutionPlan, x: np.ndarray) -> list[np.ndarray]:
    """The same steps, each kernel executed with no arena at all (fresh arrays)."""
    values = list(plan._slots)
    values[plan.input_ids[0]] = x
    for step in plan.steps:
        for index, value in zip(step.outputs,
                                step.unit.execute([values[i] for i in step.inputs])):
            values[index] = value
    return [values[i] for i in plan.output_ids]


def test_arena_reuses_buffers_and_gives_fresh_ones_outside_a_run() -> None:
    node = make_node(na.NODE_TYPE_ADD_FUSION, na.AddFusion(), [np.zeros(3, np.float32)] * 2)
    kernel = create_kernel(node)
    assert arena.current() is None
    a, b = (arena.output(kernel, 0, (3,), np.float32) for _ in range(2))
    assert a is not b  # no run: fresh memory each time
    pool = arena.ArenaPool(frozenset())
    with pool.use() as held:
        assert arena.current() is held
        first = arena.output(kernel, 0, (3,), np.float32)
        assert arena.output(kernel, 0, (3,), np.float32) is first
        assert held.holds(first[1:]) and not held.holds(np.zeros(3))
        assert arena.output(kernel, 0, (4,), np.float32) is not first  # shape changed
        assert not held.holds(first)  # replaced
        pad, fresh = arena.scratch(kernel, "pad", (2, 2), np.float32, fill=-1.0)
        assert fresh and np.all(pad == -1)
        pad[0, 0] = 5
        again, fresh = arena.scratch(kernel, "pad", (2, 2), np.float32, fill=-1.0)
        assert again is pad and not fresh and again[0, 0] == 5
    assert arena.current() is None
    with pool.use() as again_held:
        assert again_held is held  # an idle arena is lent again
    reserved = arena.ArenaPool(frozenset({node.outputs[0].index}))
    with reserved.use():  # a model output: never arena memory
        assert arena.output(kernel, 0, (3,), np.float32) is not \
            arena.output(kernel, 0, (3,), np.float32)


def test_plan_runs_match_arena_free_execution_and_reuse_buffers() -> None:
    plan = ExecutionPlan(small_cnn())
    x1, x2 = randn(2, 8, 8, 3, seed=10), randn(2, 8, 8, 3, seed=11)
    want1, want2 = reference(plan, x1), reference(plan, x2)
    got1 = plan.run([x1], NEVER)
    (held,) = plan.arenas._idle
    buffers = {key: id(b) for key, b in held._buffers.items()}
    assert len(buffers) >= 5  # the intermediates and the kernels' scratch
    shared = [k for k in buffers if isinstance(k, tuple) and k[0] == "workspace"]
    assert shared == [("workspace", "im2col", np.dtype(np.float32))]
    got2 = plan.run([x2], NEVER)
    assert plan.arenas._idle == [held]
    assert {key: id(b) for key, b in held._buffers.items()} == buffers  # reused
    for got, want in ((got1, want1), (got2, want2)):
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    # Outputs live outside the arena: the Reshape output (a view of the FullConnection's
    # buffer) was copied out, the pool output is a model output and never arena memory.
    for y in got1 + got2:
        assert not held.holds(y)
    np.testing.assert_allclose(got1[0], want1[0], rtol=1e-5, atol=1e-6)  # not overwritten


def test_padding_border_survives_reuse() -> None:
    # The padded input keeps its border from the first run; later inputs must not leak
    # into it (the max pool pads with -inf, the convolution with 0).
    plan = ExecutionPlan(small_cnn())
    for seed in range(4):
        x = randn(2, 8, 8, 3, seed=20 + seed) * (10.0 if seed % 2 else -10.0)
        for g, w in zip(plan.run([x], NEVER), reference(plan, x)):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_dynamic_batch_gets_buffers_of_each_shape() -> None:
    plan = ExecutionPlan(small_cnn(batch=0))
    for batch in (1, 3, 1, 2):
        x = randn(batch, 8, 8, 3, seed=batch)
        got = plan.run([x], NEVER)
        assert got[0].shape == (batch, 5)
        for g, w in zip(got, reference(plan, x)):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_concurrent_runs_each_have_their_own_arena() -> None:
    plan = ExecutionPlan(small_cnn())
    inputs = [randn(2, 8, 8, 3, seed=100 + i) for i in range(6)]
    wanted = [reference(plan, x) for x in inputs]
    errors: list[BaseException] = []
    start = threading.Barrier(len(inputs))

    def worker(x: np.ndarray, want: list[np.ndarray]) -> None:
        try:
            start.wait()
            for _ in range(20):
                for g, w in zip(plan.run([x], NEVER), want):
                    np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
        except BaseException as exc:  # reported below
            errors.append(exc)

    in_threads(worker, zip(inputs, wanted))
    assert not errors, errors[0]
    assert 1 <= len(plan.arenas._idle) <= arena.IDLE_ARENAS


@pytest.mark.parametrize("stride,dilation,multiplier", [
    ((1, 1), (1, 1), 1), ((1, 1), (2, 2), 1), ((2, 1), (1, 2), 2), ((2, 2), (1, 1), 1),
    ((1, 2), (1, 1), 3)])
def test_depthwise_paths_in_an_arena(stride, dilation, multiplier) -> None:
    # Stride 1 along W takes the contiguous-row einsum, any other the window view; both
    # must agree with the arena-free result, run after run.
    c = 4
    x = randn(2, 9, 8, c, seed=30)
    w, b = randn(c * multiplier, 3, 3, 1, seed=31), randn(c * multiplier, seed=32)
    node = make_node(na.NODE_TYPE_CONV2D_FUSION,
                     na.Conv2DFusion(kernelSize=[3, 3], stride=list(stride),
                                     dilation=list(dilation), padMode=ht.PAD_MODE_SAME,
                                     group=c), [x, Const(w), Const(b)])
    kernel = create_kernel(node)
    pool = arena.ArenaPool(frozenset())
    for seed in (40, 41):
        xs = randn(2, 9, 8, c, seed=seed)
        want = np.array(kernel.execute([xs, w, b])[0])
        with pool.use():
            got = kernel.execute([xs, w, b])[0]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        # against the direct sum over taps
        ref = _depthwise_reference(xs, w, b, stride, dilation, want.shape[1:3])
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


def _depthwise_reference(x, w, b, stride, dilation, out_hw):
    n, h, wd, c = x.shape
    m = w.shape[0] // c
    kh, kw = w.shape[1:3]
    eff = [(k - 1) * d + 1 for k, d in zip((kh, kw), dilation)]
    pads = [max((o - 1) * s + e - size, 0) // 2
            for o, s, e, size in zip(out_hw, stride, eff, (h, wd))]
    out = np.zeros((n, *out_hw, c * m))
    for oh in range(out_hw[0]):
        for ow in range(out_hw[1]):
            for i in range(kh):
                for j in range(kw):
                    r = oh * stride[0] - pads[0] + i * dilation[0]
                    q = ow * stride[1] - pads[1] + j * dilation[1]
                    if 0 <= r < h and 0 <= q < wd:
                        for k in range(m):
                            out[:, oh, ow, k::m] += x[:, r, q, :] * w[k::m, i, j, 0]
    return out + b


def test_gelu_float32_within_two_ulp_of_x() -> None:
    # float32 GELU is computed in float32 (a fitted tanh form, see activations.py): within
    # 2 ulp of |x| of x Phi(x), Phi from math.erfc in float64 (which keeps its accuracy where
    # 1 + erf cancels). Dense where the error peaks (|x| near 1.75), tiny and subnormal |x|.
    tiny = np.geomspace(1e-45, 1e-3, 2001)
    x = np.concatenate([np.linspace(-12, 12, 48001), np.linspace(1.6, 1.9, 20001),
                        np.linspace(-1.9, -1.6, 20001), tiny, -tiny]).astype(np.float32)
    exact = np.array([float(v) * 0.5 * math.erfc(-float(v) / math.sqrt(2)) for v in x])
    got = apply_activation(x, ht.ACTIVATION_TYPE_GELU)
    assert got.dtype == np.float32
    err = np.abs(got.astype(np.float64) - exact) / np.spacing(np.abs(x)).astype(np.float64)
    assert err.max() <= 2.0
    assert np.quantile(err[:48001], 0.99) < 1.0  # evenly spread x: the bound is the rare worst
