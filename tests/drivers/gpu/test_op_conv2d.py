"""Conv2DFusion on the GPU against the CPU reference: the implicit GEMM (ordinary and grouped
convolution: padding modes, stride, dilation, 1x1, odd sizes, several tiles, batch, NCHW),
the depthwise kernels (float4 and scalar, multiplier), bias, fused activations, a ResNet
block whose residual AddFusion the plan fuses, and the refused cases."""

from __future__ import annotations

import numpy as np
import pytest
from nnrt.common.hdi_model import HdiModelBuilder
from nnrt.hdi.reference.kernel import create_kernel
from nnrt.drivers.gpu.kernel import create_op
from nnrt.drivers.gpu.plan import GpuPlan
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import DYNAMIC

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
    Declared,
    expect_error,
    make_node,
    randn,
)

CONV = na.NODE_TYPE_CONV2D_FUSION
PAD, SAME, VALID = ht.PAD_MODE_PAD, ht.PAD_MODE_SAME, ht.PAD_MODE_VALID
RELU, RELU6 = ht.ACTIVATION_TYPE_RELU, ht.ACTIVATION_TYPE_RELU6


def conv_node(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None, *,
              bias_input: bool = False, fmt: int = ht.FORMAT_NHWC,
              declared: tuple[int, ...] | None = None, **attrs):
    """A Conv2DFusion node (output shape inferred by the reference) and its run inputs."""
    spec = na.Conv2DFusion(kernelSize=list(w.shape[1:3]), **attrs)
    xin = x if declared is None else Declared(x, declared)
    inputs = [xin, Const(w)]
    run = [x]
    if b is not None:
        inputs.append(b if bias_input else Const(b))
        if bias_input:
            run.append(b)
    probe = make_node(CONV, spec, inputs, fmt=fmt)
    shapes = [declared or x.shape, w.shape] + ([b.shape] if b is not None else [])
    (out_shape,) = create_kernel(probe).infer_shapes(shapes)
    return make_node(CONV, spec, inputs, fmt=fmt, out_shape=out_shape), run


def check(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None, **kw) -> np.ndarray:
    node, run = conv_node(x, w, b, **kw)
    graph = node_graph(node)
    gpu = run_gpu(graph, run)
    assert_close(gpu, run_cpu(graph, run))
    return gpu[0]


# ------------------------------------------------------------------ implicit GEMM


@pytest.mark.parametrize("stride,pads", [((1, 1), (1, 1, 1, 1)), ((2, 2), (1, 1, 1, 1)),
                                         ((2, 1), (2, 0, 1, 3))])
def test_3x3_pad_mode_pad(stride, pads) -> None:
    x, w, b = randn(2, 7, 9, 5, seed=1), randn(13, 3, 3, 5, seed=2), randn(13, seed=3)
    check(x, w, b, stride=list(stride), padMode=PAD, padList=list(pads))


@pytest.mark.parametrize("stride", [(1, 1), (2, 2)])
def test_1x1(stride) -> None:
    x, w = randn(2, 7, 9, 3, seed=4), randn(13, 1, 1, 3, seed=5)
    check(x, w, stride=list(stride))


def test_5x5_dilation_2_same() -> None:
    x, w, b = randn(1, 9, 7, 3, seed=6), randn(5, 5, 5, 3, seed=7), randn(5, seed=8)
    out = check(x, w, b, dilation=[2, 2], padMode=SAME, activationType=RELU)
    assert out.shape == (1, 9, 7, 5)


@pytest.mark.parametrize("stride", [(1, 1), (2, 2), (3, 2)])
def test_same(stride) -> None:
    x, w = randn(1, 7, 9, 5, seed=9), randn(3, 4, 3, 5, seed=10)  # even kernel: odd split
    check(x, w, stride=list(stride), padMode=SAME)


def test_valid_with_stride_and_dilation() -> None:
    x, w, b = randn(2, 9, 8, 3, seed=11), randn(5, 3, 2, 3, seed=12), randn(5, seed=13)
    out = check(x, w, b, dilation=[2, 3], stride=[1, 2], padMode=VALID)
    assert out.shape == (2, 5, 3, 5)


def test_several_tiles_deep_k() -> None:
    """K = 3*3*20 = 180 (23 slices), 40 channels (2 tiles), 2*9*7 = 126 pixels (4 tiles)."""
    x, w, b = randn(2, 9, 7, 20, seed=14), randn(40, 3, 3, 20, seed=15), randn(40, seed=16)
    check(x, w, b, padMode=PAD, padList=[1, 1, 1, 1], activationType=ht.ACTIVATION_TYPE_HSWISH)


@pytest.mark.parametrize("group,in_c,out_c,stride", [(2, 6, 10, 1), (4, 8, 12, 2),
                                                     (4, 12, 4, 1)])
def test_grouped(group: int, in_c: int, out_c: int, stride: int) -> None:
    x = randn(2, 7, 9, in_c, seed=17)
    w, b = randn(out_c, 3, 3, in_c // group, seed=18), randn(out_c, seed=19)
    check(x, w, b, group=group, stride=[stride, stride], padMode=PAD, padList=[1, 1, 1, 1])


def test_nchw() -> None:
    x, w, b = randn(2, 5, 7, 9, seed=20), randn(6, 3, 3, 5, seed=21), randn(6, seed=22)
    out = check(x, w, b, fmt=ht.FORMAT_NCHW, stride=[2, 1], padMode=SAME, activationType=RELU)
    assert out.shape == (2, 6, 4, 9)


def test_bias_as_run_input_and_dynamic_batch() -> None:
    x, w, b = randn(2, 7, 9, 3, seed=23), randn(5, 3, 3, 3, seed=24), randn(5, seed=25)
    check(x, w, b, bias_input=True, padMode=SAME)
    check(x, w, b, declared=(DYNAMIC, 7, 9, 3), padMode=SAME)


# ------------------------------------------------------------------ depthwise


@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("c", [8, 5])  # float4 kernel / scalar kernel
def test_depthwise_relu6(stride: int, c: int) -> None:
    x, w, b = randn(2, 7, 9, c, seed=26), randn(c, 3, 3, 1, seed=27), randn(c, seed=28)
    check(x, w, b, group=c, stride=[stride, stride], padMode=SAME, activationType=RELU6)


def test_depthwise_no_bias_dilation_pad() -> None:
    x, w = randn(1, 9, 7, 12, seed=29), randn(12, 3, 3, 1, seed=30)
    check(x, w, group=12, dilation=[2, 1], padMode=PAD, padList=[2, 1, 0, 2])


def test_depthwise_multiplier_and_nchw() -> None:
    x, w, b = randn(1, 7, 9, 4, seed=31), randn(8, 3, 3, 1, seed=32), randn(8, seed=33)
    check(x, w, b, group=4, padMode=SAME)  # multiplier 2: output channel c*2 + k
    xn = randn(2, 8, 7, 9, seed=34)
    wn, bn = randn(8, 3, 3, 1, seed=35), randn(8, seed=36)
    check(xn, wn, bn, fmt=ht.FORMAT_NCHW, group=8, stride=[2, 2], padMode=SAME,
          activationType=RELU6)


# ------------------------------------------------------------------ fused residual block


def test_resnet_block_fuses_the_residual_add() -> None:
    """x -> conv3x3(relu) -> conv3x3 -> AddFusion(x, relu): the add is the second conv's
    epilogue."""
    c = 8
    w1, b1 = randn(c, 3, 3, c, seed=37), randn(c, seed=38)
    w2, b2 = randn(c, 3, 3, c, seed=39), randn(c, seed=40)
    m = HdiModelBuilder("block")
    x = m.input("x", np.float32, [2, 7, 9, c])
    attrs = {"kernelSize": [3, 3], "padMode": PAD, "padList": [1, 1, 1, 1]}
    h = m.tensor("h", np.float32, [2, 7, 9, c])
    m.node(CONV, [x, m.constant("w1", w1), m.constant("b1", b1)], [h],
           na.Conv2DFusion(activationType=RELU, **attrs))
    y = m.tensor("y", np.float32, [2, 7, 9, c])
    m.node(CONV, [h, m.constant("w2", w2), m.constant("b2", b2)], [y], na.Conv2DFusion(**attrs))
    z = m.tensor("z", np.float32, [2, 7, 9, c])
    m.node(na.NODE_TYPE_ADD_FUSION, [y, x], [z], na.AddFusion(activationType=RELU))
    m.mark_outputs(z)
    graph = graph_of(m)
    plan = GpuPlan(graph, runtime(), "block")
    try:
        assert [e.absorbed for e in plan.schedule] == [None, 2]
        assert len(plan._specialise(((2, 7, 9, c),)).launches) == 2
        xv = randn(2, 7, 9, c, seed=41)
        assert_close(plan.run([xv], NEVER), run_cpu(graph, [xv]))
    finally:
        plan.close()


# ------------------------------------------------------------------ refusals


def test_refusals() -> None:
    x, w = randn(1, 5, 5, 3, seed=42), randn(4, 3, 3, 3, seed=43)
    node = make_node(CONV, na.Conv2DFusion(kernelSize=[3, 3]), [x, w], out_shape=(1, 3, 3, 4))
    expect_error(NNRT_UNSUPPORTED_OP, lambda: create_op(node))  # weight not a constant
    mixed = make_node(CONV, na.Conv2DFusion(kernelSize=[3, 3]),  # float16 x, float32 weight
                      [x.astype(np.float16), Const(w)], out_shape=(1, 3, 3, 4))
    expect_error(NNRT_UNSUPPORTED_OP, lambda: create_op(mixed))
