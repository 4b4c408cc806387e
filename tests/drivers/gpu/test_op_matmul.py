"""MatMulFusion and FullConnection on the GPU (cl/gemm.cl) against the CPU reference: odd
sizes that are not multiples of the tiles, transposes, batch broadcasting, attention-style
products of two run-time tensors, 1-D operands, bias, fused activations, useAxis, the
plan's fused epilogues, the gemv path for few rows, and the refused dtypes."""

from __future__ import annotations

import numpy as np
import pytest
from nnrt.common.hdi_model import HdiModelBuilder
from nnrt.hdi.reference.kernel import create_kernel
from nnrt.drivers.gpu.kernel import create_op
from nnrt.drivers.gpu.plan import GpuPlan
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import Graph

from tests.drivers.gpu.util import (
    NEVER,
    assert_close,
    graph_of,
    node_graph,
    run_cpu,
    run_gpu,
    runtime,
)
from tests.hdi.reference.util import (
    NNRT_UNSUPPORTED_OP,
    Const,
    expect_error,
    make_node,
    randn,
)

MATMUL = na.NODE_TYPE_MATMUL_FUSION
FC = na.NODE_TYPE_FULL_CONNECTION


def check(graph: Graph, inputs: list[np.ndarray], kernels: set[str] | None = None,
          fused: int = 0) -> None:
    """GPU == CPU on `inputs`; the launches' kernels and the fused epilogues as expected."""
    plan = GpuPlan(graph, runtime(), f"test {graph.name}")
    try:
        gpu = plan.run(inputs, NEVER)
        if kernels is not None:
            (spec,) = plan._specialisations.values()
            assert {launch.label for launch in spec.launches} == kernels
        assert sum(e.absorbed is not None for e in plan.schedule) == fused
    finally:
        plan.close()
    assert_close(gpu, run_cpu(graph, inputs))


def check_node(node_type: int, attrs, inputs: list, kernels: set[str] | None = None) -> None:
    probe = make_node(node_type, attrs, inputs)
    (shape,) = create_kernel(probe).infer_shapes([t.shape for t in probe.inputs])
    node = make_node(node_type, attrs, inputs, out_shape=shape)
    arrays = [x for x in inputs if not isinstance(x, Const)]
    check(node_graph(node), arrays, kernels)


# --- MatMulFusion -----------------------------------------------------------------------------

@pytest.mark.parametrize("m,k,n,kernel", [(1, 64, 96, "gemv"), (3, 29, 70, "gemv"),
                                          (37, 53, 29, "gemm"), (128, 128, 128, "gemm"),
                                          (65, 17, 1, "gemm")])
def test_matmul_sizes(m: int, k: int, n: int, kernel: str) -> None:
    a, b = randn(m, k, seed=1), randn(k, n, seed=2)
    check_node(MATMUL, na.MatMulFusion(), [a, b], {kernel})


@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
def test_matmul_transposes(ta: bool, tb: bool) -> None:
    m, k, n = 37, 53, 29
    a = randn(*((k, m) if ta else (m, k)), seed=3)
    b = randn(*((n, k) if tb else (k, n)), seed=4)
    check_node(MATMUL, na.MatMulFusion(transposeA=ta, transposeB=tb), [a, b])


@pytest.mark.parametrize("batch_a,batch_b,ta,tb", [
    ((3,), (3,), False, False), ((2, 1), (4,), True, False), ((), (2, 3), False, True),
    ((2, 3), (), True, True), ((1, 3), (2, 1), False, False)])
def test_matmul_batch_broadcast(batch_a, batch_b, ta: bool, tb: bool) -> None:
    m, k, n = 5, 19, 7
    a = randn(*batch_a, *((k, m) if ta else (m, k)), seed=5)
    b = randn(*batch_b, *((n, k) if tb else (k, n)), seed=6)
    check_node(MATMUL, na.MatMulFusion(transposeA=ta, transposeB=tb), [a, b])


def test_attention_products() -> None:
    """[heads, seq, hd] · [heads, seq, hd]ᵀ, then the scores · V, both run-time tensors."""
    heads, seq, hd = 4, 70, 16
    q, k, v = randn(heads, seq, hd, seed=7), randn(heads, seq, hd, seed=8), \
        randn(heads, seq, hd, seed=9)
    check_node(MATMUL, na.MatMulFusion(transposeB=True), [q, k], {"gemm"})
    check_node(MATMUL, na.MatMulFusion(), [q, np.ascontiguousarray(k.transpose(0, 2, 1))])
    scores = randn(heads, seq, seq, seed=10)
    check_node(MATMUL, na.MatMulFusion(), [scores, v])
    # one decoding step: a single query row per head
    check_node(MATMUL, na.MatMulFusion(transposeB=True), [q[:, :1], k], {"gemm"})
    check_node(MATMUL, na.MatMulFusion(), [scores[:, :1], v], {"gemv"})


def test_matmul_one_dimensional_operands() -> None:
    v, m, mt = randn(37, seed=11), randn(37, 21, seed=12), randn(21, 37, seed=13)
    check_node(MATMUL, na.MatMulFusion(), [v, m])
    check_node(MATMUL, na.MatMulFusion(), [mt, v])
    check_node(MATMUL, na.MatMulFusion(transposeA=True, transposeB=True), [v, v])
    check_node(MATMUL, na.MatMulFusion(), [randn(3, 21, 37, seed=14), v])
    check_node(MATMUL, na.MatMulFusion(transposeB=True), [v, randn(2, 21, 37, seed=15)])


def test_matmul_constant_operand_and_empty_inner() -> None:
    a = randn(2, 33, 12, seed=16)
    check_node(MATMUL, na.MatMulFusion(transposeB=True), [a, Const(randn(9, 12, seed=17))])
    check_node(MATMUL, na.MatMulFusion(activationType=ht.ACTIVATION_TYPE_SIGMOID),
               [np.zeros((3, 0), np.float32), np.zeros((0, 4), np.float32)])


@pytest.mark.parametrize("act", [ht.ACTIVATION_TYPE_RELU, ht.ACTIVATION_TYPE_RELU6,
                                 ht.ACTIVATION_TYPE_GELU, ht.ACTIVATION_TYPE_TANH])
def test_matmul_fused_activation(act: int) -> None:
    a, b = 3 * randn(2, 20, 24, seed=18), randn(24, 30, seed=19)
    check_node(MATMUL, na.MatMulFusion(activationType=act), [a, b])


# --- FullConnection ---------------------------------------------------------------------------

@pytest.mark.parametrize("m,kernel", [(1, "gemv"), (37, "gemm")])
@pytest.mark.parametrize("has_bias", [False, True])
def test_full_connection(m: int, kernel: str, has_bias: bool) -> None:
    x, w, bias = randn(m, 45, seed=20), randn(67, 45, seed=21), randn(67, seed=22)
    inputs = [x, Const(w)] + [Const(bias)] * has_bias
    check_node(FC, na.FullConnection(hasBias=has_bias), inputs, {kernel})


def test_full_connection_runtime_weight_and_bias() -> None:
    x, w, bias = randn(37, 45, seed=23), randn(67, 45, seed=24), randn(67, seed=25)
    check_node(FC, na.FullConnection(hasBias=True), [x, w, bias], {"gemm"})
    check_node(FC, na.FullConnection(hasBias=True), [x[:2], w, Const(bias)], {"gemm"})
    check_node(FC, na.FullConnection(hasBias=True), [x[:2], Const(w), bias], {"gemv"})


@pytest.mark.parametrize("axis", [1, 2, -1])
def test_full_connection_use_axis(axis: int) -> None:
    x = randn(3, 4, 5, 6, seed=26)
    n_in = int(np.prod(x.shape[axis % 4:]))
    w, bias = randn(11, n_in, seed=27), randn(11, seed=28)
    check_node(FC, na.FullConnection(hasBias=True, useAxis=True, axis=axis),
               [x, Const(w), Const(bias)])


def test_full_connection_flattens_without_use_axis() -> None:
    x, w = randn(2, 3, 10, seed=29), randn(13, 30, seed=30)
    check_node(FC, na.FullConnection(), [x, Const(w)])
    check_node(FC, na.FullConnection(), [randn(30, seed=31), Const(w)])


@pytest.mark.parametrize("act", [ht.ACTIVATION_TYPE_RELU, ht.ACTIVATION_TYPE_RELU6,
                                 ht.ACTIVATION_TYPE_GELU])
def test_full_connection_fused_activation(act: int) -> None:
    x, w, bias = 3 * randn(9, 16, seed=32), randn(20, 16, seed=33), randn(20, seed=34)
    check_node(FC, na.FullConnection(hasBias=True, activationType=act), [x, Const(w), Const(bias)])


# --- epilogues fused by the plan ----------------------------------------------------------------

def _fc_graph(m: int, tail: str) -> tuple[Graph, list[np.ndarray]]:
    k, n = 24, 40
    b = HdiModelBuilder(f"fc_{tail}")
    x = b.input("x", np.float32, [m, k])
    w = b.constant("w", randn(n, k, seed=35))
    bias = b.constant("b", randn(n, seed=36))
    y = b.tensor("y", np.float32, [m, n])
    b.node(FC, [x, w, bias], [y], na.FullConnection(hasBias=True,
                                                    activationType=ht.ACTIVATION_TYPE_RELU6))
    z = b.tensor("z", np.float32, [m, n])
    inputs = [randn(m, k, seed=37)]
    if tail == "gelu":
        b.node(na.NODE_TYPE_ACTIVATION, [y], [z],
               na.Activation(activationType=ht.ACTIVATION_TYPE_GELU))
    else:
        r = b.input("r", np.float32, [m, n])
        b.node(na.NODE_TYPE_ADD_FUSION, [r, y], [z],
               na.AddFusion(activationType=ht.ACTIVATION_TYPE_RELU))
        inputs.append(randn(m, n, seed=38))
    b.mark_outputs(z)
    return graph_of(b), inputs


@pytest.mark.parametrize("m,kernel", [(2, "gemv"), (45, "gemm")])
@pytest.mark.parametrize("tail", ["gelu", "residual"])
def test_fused_epilogue(m: int, kernel: str, tail: str) -> None:
    graph, inputs = _fc_graph(m, tail)
    check(graph, inputs, {kernel}, fused=1)


def test_matmul_residual_epilogue() -> None:
    b = HdiModelBuilder("attention_out")
    s = b.input("s", np.float32, [2, 33, 33])
    v = b.input("v", np.float32, [2, 33, 8])
    r = b.input("r", np.float32, [2, 33, 8])
    y = b.tensor("y", np.float32, [2, 33, 8])
    z = b.tensor("z", np.float32, [2, 33, 8])
    b.node(MATMUL, [s, v], [y])
    b.node(na.NODE_TYPE_ADD_FUSION, [y, r], [z])
    b.mark_outputs(z)
    check(graph_of(b), [randn(2, 33, 33, seed=39), randn(2, 33, 8, seed=40),
                        randn(2, 33, 8, seed=41)], {"gemm"}, fused=1)


# --- refusals ---------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.int8])
def test_matmul_refuses_other_dtypes(dtype) -> None:
    a, b = np.ones((3, 4), dtype), np.ones((4, 5), dtype)
    node = make_node(MATMUL, na.MatMulFusion(), [a, b])
    expect_error(NNRT_UNSUPPORTED_OP, lambda: create_op(node))


def test_full_connection_refuses_mixed_float_dtypes() -> None:
    x, w = np.ones((3, 4), np.float16), np.ones((5, 4), np.float32)
    node = make_node(FC, na.FullConnection(), [x, Const(w)])
    expect_error(NNRT_UNSUPPORTED_OP, lambda: create_op(node))


def test_reference_refusals_stay_refused() -> None:
    a, b = randn(3, 4, seed=42), randn(4, 5, seed=43)
    node = make_node(MATMUL, na.MatMulFusion(activationType=ht.ACTIVATION_TYPE_LEAKY_RELU), [a, b])
    expect_error(NNRT_UNSUPPORTED_OP, lambda: create_op(node))


def test_run_gpu_helper_agrees() -> None:
    """The plain helpers (as other GPU tests use them) on one GEMM."""
    node = make_node(FC, na.FullConnection(), [randn(5, 7, seed=44), Const(randn(3, 7, seed=45))],
                     out_shape=(5, 3))
    graph = node_graph(node)
    x = [randn(5, 7, seed=44)]
    assert_close(run_gpu(graph, x), run_cpu(graph, x))
