"""LayerNormFusion and FusedBatchNorm on the GPU against the CPU reference: beginNormAxis /
beginParamsAxis combinations, odd and long rows, with and without gamma/beta (constant and
run-time), BatchNorm with constant (folded at load) and run-time parameters, NHWC and
NCHW, a fused Activation epilogue; refusals."""

from __future__ import annotations

import numpy as np
import pytest
from nnrt.common.hdi_model import HdiModelBuilder
from nnrt.drivers.gpu.kernel import create_op
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na

from tests.drivers.gpu.util import assert_close, graph_of, node_graph, run_cpu, run_gpu
from tests.hdi.reference.util import (
    NNRT_UNSUPPORTED_OP,
    Const,
    expect_error,
    make_node,
    randn,
)

LN, BN = na.NODE_TYPE_LAYER_NORM_FUSION, na.NODE_TYPE_FUSED_BATCH_NORM


def check(node_type: int, attrs, inputs, shape, fmt: int = ht.FORMAT_NHWC) -> None:
    graph = node_graph(make_node(node_type, attrs, inputs, out_shape=shape, fmt=fmt))
    arrays = [a for a in inputs if not isinstance(a, Const)]
    assert_close(run_gpu(graph, arrays), run_cpu(graph, arrays))


@pytest.mark.parametrize("shape,norm,params", [
    ((4, 37), -1, -1), ((3, 1000), 1, 1), ((2, 5, 6, 7), 1, 1), ((2, 5, 6, 7), 2, 1),
    ((2, 5, 6, 7), 1, 3), ((2, 5, 6, 7), -3, -2), ((5, 300), 0, 1), ((1, 1, 1), -1, -1),
])
def test_layer_norm_affine(shape, norm: int, params: int) -> None:
    x = randn(*shape, seed=1) * 2 + 3
    pshape = shape[params % len(shape):]
    gamma, beta = randn(*pshape, seed=2), randn(*pshape, seed=3)
    a = na.LayerNormFusion(beginNormAxis=norm, beginParamsAxis=params, epsilon=1e-5,
                           elementwiseAffine=True)
    check(LN, a, [x, Const(gamma), Const(beta)], shape)
    check(LN, a, [x, gamma, beta], shape)  # run-time parameters


@pytest.mark.parametrize("shape,norm", [((6, 513), 1), ((2, 3, 4), 0), ((3, 4, 5), -2)])
def test_layer_norm_plain(shape, norm: int) -> None:
    a = na.LayerNormFusion(beginNormAxis=norm, epsilon=1e-3)
    check(LN, a, [randn(*shape, seed=4) * 5 - 1], shape)


def test_layer_norm_constant_rows() -> None:
    """Rows of one value: variance 0, y = 0 (* gamma + beta); epsilon 0 gives NaN."""
    x = np.full((3, 40), 2.5, np.float32)
    check(LN, na.LayerNormFusion(beginNormAxis=1, epsilon=1e-5), [x], x.shape)
    check(LN, na.LayerNormFusion(beginNormAxis=1, epsilon=0.0), [x], x.shape)


def _bn_params(c: int, seed: int) -> list[np.ndarray]:
    scale, offset, mean = (randn(c, seed=seed + k) for k in range(3))
    variance = np.abs(randn(c, seed=seed + 3)) + 0.1
    return [scale, offset, mean, variance]


@pytest.mark.parametrize("shape,fmt", [
    ((2, 5, 7, 13), ht.FORMAT_NHWC), ((2, 13, 5, 7), ht.FORMAT_NCHW), ((9, 3), ht.FORMAT_NHWC),
    ((17,), ht.FORMAT_NHWC),
])
def test_batch_norm(shape, fmt: int) -> None:
    c = shape[1] if fmt == ht.FORMAT_NCHW else shape[-1]
    x = randn(*shape, seed=5)
    params = _bn_params(c, 6)
    a = na.FusedBatchNorm(epsilon=1e-3)
    check(BN, a, [x, *(Const(p) for p in params)], shape, fmt)
    check(BN, a, [x, *params], shape, fmt)  # run-time parameters: folded on the device


def test_batch_norm_relu_epilogue() -> None:
    mb = HdiModelBuilder("bn_relu")
    x = mb.input("x", np.float32, [1, 4, 5, 6], fmt=ht.FORMAT_NHWC)
    ps = [mb.constant(f"p{k}", p) for k, p in enumerate(_bn_params(6, 7))]
    t = mb.tensor("t", np.float32, [1, 4, 5, 6], fmt=ht.FORMAT_NHWC)
    y = mb.tensor("y", np.float32, [1, 4, 5, 6], fmt=ht.FORMAT_NHWC)
    mb.node(BN, [x, *ps], [t], na.FusedBatchNorm(epsilon=1e-4))
    mb.node(na.NODE_TYPE_ACTIVATION, [t], [y],
            na.Activation(activationType=ht.ACTIVATION_TYPE_RELU))
    mb.mark_outputs(y)
    graph = graph_of(mb)
    data = randn(1, 4, 5, 6, seed=8)
    assert_close(run_gpu(graph, [data]), run_cpu(graph, [data]))


def test_refused() -> None:
    x = randn(3, 8).astype(np.float64)
    node = make_node(LN, na.LayerNormFusion(beginNormAxis=1, epsilon=1e-5), [x],
                     out_shape=x.shape)
    expect_error(NNRT_UNSUPPORTED_OP, lambda: create_op(node))
    params = [Const(p.astype(np.float64)) for p in _bn_params(8, 1)]
    node = make_node(BN, na.FusedBatchNorm(epsilon=1e-3), [x, *params], out_shape=x.shape)
    expect_error(NNRT_UNSUPPORTED_OP, lambda: create_op(node))
