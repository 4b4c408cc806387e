"""Float16 mode on the GPU (semantics.md "Float16 mode"): float16 tensors stored as half
(vload_half / vstore_half_rte, no cl_khr_fp16), computed in float32 and rounded once.

Each kernel family runs a float16 node on the GPU and is compared with the CPU reference's
float32 result on the same (float16) values, rounded to float16 once: the tolerance of the
CPU's float16 tests (tests/hdi/reference/test_float16_mode.check: at most one float16 ulp,
and equal nearly everywhere). The LSTM feeds its rounded h back at every step (its outputs are float16
tensors; the CPU keeps its states in float32 from step to step), so it is held to float16's
resolution of its output range instead. Then the model families of `nnrt.client.zoo` run
in float16 mode through the device (the graph rewrite, float32 on the wire) against float32
mode, and the device says IsFloat16PrecisionSupported.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import pytest

from nnrt.client import zoo
from nnrt.drivers.gpu.device import GpuDevice
from nnrt.hdi.reference.graph_checks import reference_kernel
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.device import PrepareConfig
from tests.drivers.gpu.util import NEVER, graph_of, node_graph, run_cpu, run_gpu
from tests.hdi.reference.util import Const, make_node
from tests.hdi.reference.test_float16_mode import ulps

F16, F32 = np.dtype(np.float16), np.dtype(np.float32)
RELU = ht.ACTIVATION_TYPE_RELU


def rand(*shape: int, seed: int = 0, scale: float = 1.0) -> np.ndarray:
    """float16 values (as float32 arrays: the float32 side reads exactly these)."""
    values = np.random.default_rng(seed).standard_normal(shape) * scale
    return values.astype(F16).astype(F32)


def typed(items: Sequence, dtype: np.dtype) -> list:
    """The items' float32 arrays as `dtype`, holding float16 values on both sides."""
    def convert(a: np.ndarray) -> np.ndarray:
        return a.astype(F16).astype(dtype) if a.dtype == F32 else a

    return [Const(convert(i.array)) if isinstance(i, Const) else convert(i) for i in items]


def half_vs_float(node_type: int, attrs, items: Sequence, n_outputs: int = 1,
                  max_ulps: int = 1, min_equal: float = 0.95, steps: float | None = None,
                  **kw) -> None:
    """The float16 node on the GPU against the float32 reference rounded once."""
    results = {}
    for dtype in (F16, F32):
        node = make_node(node_type, attrs, typed(items, dtype), n_outputs=n_outputs,
                         out_dtype=dtype, **kw)
        arrays = [i.array if isinstance(i, Const) else i for i in typed(items, dtype)]
        shapes = reference_kernel(node).infer_shapes([a.shape for a in arrays])
        node = dataclasses.replace(node, outputs=tuple(
            dataclasses.replace(spec, shape=tuple(s)) for spec, s in zip(node.outputs, shapes)))
        run = [a for a, i in zip(arrays, items) if not isinstance(i, Const)]
        graph = node_graph(node)
        results[dtype] = run_gpu(graph, run) if dtype == F16 else run_cpu(graph, run)
    for got, want in zip(results[F16], results[F32]):
        assert got.dtype == F16, got.dtype
        expected = want.astype(F16)
        if steps is not None:  # within `steps` float16 steps of the output's largest value
            step = np.spacing(np.abs(expected).max().astype(F16)).astype(F32)
            np.testing.assert_allclose(got.astype(F32), want, rtol=0, atol=steps * step)
            continue
        distance = ulps(got, expected)
        assert distance.max() <= max_ulps, f"{distance.max()} ulps from float32 rounded once"
        assert (distance == 0).mean() >= min_equal, f"{(distance != 0).mean():.1%} differ"


# ----------------------------------------------------------------------------- kernels


@pytest.mark.parametrize("node_type,attrs", [
    (na.NODE_TYPE_ADD_FUSION, na.AddFusion()), (na.NODE_TYPE_MUL_FUSION, na.MulFusion()),
    (na.NODE_TYPE_DIV_FUSION, na.DivFusion()), (na.NODE_TYPE_SUB_FUSION,
                                               na.SubFusion(activationType=RELU)),
], ids=["add", "mul", "div", "sub_relu"])
def test_eltwise_binary_broadcast(node_type: int, attrs) -> None:
    half_vs_float(node_type, attrs, [rand(4, 7, 9, seed=1), rand(9, seed=2) + 3])


@pytest.mark.parametrize("node_type,attrs", [
    (na.NODE_TYPE_ERF, na.Erf()), (na.NODE_TYPE_SQRT, na.Sqrt()), (na.NODE_TYPE_SIN, na.Sin()),
    (na.NODE_TYPE_EXPFUSION, na.ExpFusion(base=-1.0, scale=1.0, shift=0.0)),
    (na.NODE_TYPE_ACTIVATION, na.Activation(activationType=ht.ACTIVATION_TYPE_GELU)),
    (na.NODE_TYPE_ACTIVATION, na.Activation(activationType=ht.ACTIVATION_TYPE_SIGMOID)),
], ids=["erf", "sqrt", "sin", "exp", "gelu", "sigmoid"])
def test_unary(node_type: int, attrs) -> None:
    x = rand(3, 333, seed=3)
    if node_type == na.NODE_TYPE_SQRT:
        x = np.abs(x)
    half_vs_float(node_type, attrs, [x])


def test_bias_add_and_power() -> None:
    half_vs_float(na.NODE_TYPE_BIAS_ADD, na.BiasAdd(), [rand(2, 5, 6, 8, seed=4),
                                                          Const(rand(8, seed=5))])
    half_vs_float(na.NODE_TYPE_POW_FUSION, na.PowFusion(scale=1.0, shift=0.0),
                  [np.abs(rand(4, 50, seed=6)) + 0.5, rand(50, seed=7)])


@pytest.mark.parametrize("m,k,n", [(64, 512, 48), (1, 700, 130), (3, 20, 5)])
def test_matmul_accumulates_in_float32(m: int, k: int, n: int) -> None:
    half_vs_float(na.NODE_TYPE_MATMUL_FUSION, na.MatMulFusion(),
                  [rand(2, m, k, seed=8), rand(2, k, n, seed=9)])


def test_full_connection_with_bias_and_activation() -> None:
    half_vs_float(na.NODE_TYPE_FULL_CONNECTION,
                  na.FullConnection(hasBias=True, activationType=RELU),
                  [rand(5, 300, seed=10), Const(rand(40, 300, seed=11)),
                   Const(rand(40, seed=12))])


@pytest.mark.parametrize("group,multiplier", [(1, 1), (2, 1), (8, 1), (4, 2)])
def test_conv2d(group: int, multiplier: int) -> None:
    c_in = 8
    c_out = c_in * multiplier if group > 1 and group == c_in // (1 if multiplier > 1 else 1) \
        else 16
    if group == 4:  # depthwise with channel multiplier 2 over 4 channels
        c_in, c_out = 4, 8
    attrs = na.Conv2DFusion(kernelSize=[3, 3], stride=[1, 1], dilation=[1, 1],
                            padMode=ht.PAD_MODE_SAME, group=group, inChannel=c_in,
                            outChannel=c_out, activationType=RELU)
    half_vs_float(na.NODE_TYPE_CONV2D_FUSION, attrs,
                  [rand(2, 9, 11, c_in, seed=13), Const(rand(c_out, 3, 3, c_in // group,
                                                             seed=14)),
                   Const(rand(c_out, seed=15))])


@pytest.mark.parametrize("node_type", [na.NODE_TYPE_MAX_POOL_FUSION,
                                       na.NODE_TYPE_AVGPOOL_FUSION], ids=["max", "avg"])
@pytest.mark.parametrize("global_", [False, True], ids=["window", "global"])
def test_pooling(node_type: int, global_: bool) -> None:
    cls = na.MaxPoolFusion if node_type == na.NODE_TYPE_MAX_POOL_FUSION else na.AvgPoolFusion
    attrs = cls(kernelSize=[3, 3], strides=[2, 2], padMode=ht.PAD_MODE_VALID,
                format=ht.FORMAT_NHWC, **({"global": True} if global_ else {}))
    half_vs_float(node_type, attrs, [rand(2, 13, 11, 20, seed=16)])


@pytest.mark.parametrize("shape,axis", [((6, 40), 1), ((3, 20000), 1), ((2, 3000, 5), 1)],
                         ids=["thread", "two-pass", "strided"])
def test_reduce_mean(shape, axis: int) -> None:
    half_vs_float(na.NODE_TYPE_REDUCE_FUSION,
                  na.ReduceFusion(keepDims=False, mode=ht.REDUCE_MODE_MEAN),
                  [rand(*shape, seed=17) + 1, Const(np.array([axis], np.int32))])


def test_softmax_and_log_softmax() -> None:
    half_vs_float(na.NODE_TYPE_SOFTMAX, na.Softmax(axis=[-1]), [rand(7, 384, seed=18)])
    half_vs_float(na.NODE_TYPE_LOG_SOFTMAX, na.LogSoftmax(axis=1), [rand(5, 9, 6, seed=19)])


def test_layer_norm_and_batch_norm() -> None:
    half_vs_float(na.NODE_TYPE_LAYER_NORM_FUSION,
                  na.LayerNormFusion(beginNormAxis=-1, beginParamsAxis=-1, epsilon=1e-5),
                  [rand(8, 384, seed=20) * 3 + 1, Const(rand(384, seed=21)),
                   Const(rand(384, seed=22))])
    half_vs_float(na.NODE_TYPE_FUSED_BATCH_NORM, na.FusedBatchNorm(epsilon=1e-3),
                  [rand(2, 5, 5, 6, seed=23), Const(rand(6, seed=24)), Const(rand(6, seed=25)),
                   Const(rand(6, seed=26)), Const(np.abs(rand(6, seed=27)) + 0.5)])


def test_lstm() -> None:
    seq, batch, inp, hidden = 6, 2, 12, 16
    items = [rand(seq, batch, inp, seed=28), Const(rand(1, 4 * hidden, inp, seed=29) * 0.3),
             Const(rand(1, 4 * hidden, hidden, seed=30) * 0.3),
             Const(rand(1, 8 * hidden, seed=31) * 0.3), rand(1, batch, hidden, seed=32),
             rand(1, batch, hidden, seed=33)]
    half_vs_float(na.NODE_TYPE_LSTM, na.LSTM(bidirectional=False, hasBias=True,
                                             inputSize=inp, hiddenSize=hidden, numLayers=1,
                                             numDirections=1),
                  items, n_outputs=3, steps=2)


# ----------------------------------------------------------------------------- models


@pytest.fixture(scope="module")
def device():
    gpu = GpuDevice("any")
    yield gpu
    gpu.close()


def test_the_device_offers_float16_mode(device) -> None:
    assert device.capabilities.float16


@pytest.mark.parametrize("family", zoo.FAMILIES)
def test_zoo_families_in_float16_mode(device, family: str) -> None:
    model, x = zoo.build(family, batch=2)
    graph = graph_of(model.handle._lowered.hdi)
    models = {mode: device.prepare(graph, PrepareConfig(enable_float16=mode))
              for mode in (False, True)}
    try:
        wants, gots = (models[mode].run([x], NEVER) for mode in (False, True))
        for want, got in zip(wants, gots):
            assert got.dtype == want.dtype == F32 and got.shape == want.shape
            # float16 storage: every tensor of the model rounded; the output within a few
            # float16 steps of the float32 run
            np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2 * np.abs(want).max())
        assert not all(np.array_equal(g, w) for g, w in zip(gots, wants))  # from half tensors
        outs = [np.empty_like(w) for w in wants]
        models[True].run_into([x], outs, NEVER)  # straight into float32 windows
        for out, got in zip(outs, gots):
            np.testing.assert_array_equal(out, got)
    finally:
        for prepared in models.values():
            prepared.close()
