"""MaxPoolFusion / AvgPoolFusion on the GPU against the CPU reference: pad modes, round
modes, strides, odd sizes, NHWC and NCHW, global pooling and a whole-plane window (the
MobileNet head), fused activations, a fused Activation epilogue; refusals."""

from __future__ import annotations

import numpy as np
import pytest
from nnrt.common.hdi_model import HdiModelBuilder
from nnrt.hdi.reference.kernel import create_kernel
from nnrt.drivers.gpu.kernel import create_op
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na

from tests.drivers.gpu.util import assert_close, graph_of, node_graph, run_cpu, run_gpu
from tests.hdi.reference.util import NNRT_UNSUPPORTED_OP, expect_error, make_node, randn

MAX, AVG = na.NODE_TYPE_MAX_POOL_FUSION, na.NODE_TYPE_AVGPOOL_FUSION
ATTRS = {MAX: na.MaxPoolFusion, AVG: na.AvgPoolFusion}


def attrs(kind: int, kernel=(2, 2), strides=(2, 2), pad=(), mode=ht.PAD_MODE_VALID,
          ceil=False, nchw=False, **kw):
    return ATTRS[kind](kernelSize=list(kernel), strides=list(strides), pad=list(pad),
                       padMode=mode, format=ht.FORMAT_NCHW if nchw else ht.FORMAT_NHWC,
                       roundMode=ht.ROUND_MODE_CEIL if ceil else ht.ROUND_MODE_FLOOR, **kw)


def check(kind: int, a, x: np.ndarray, nchw: bool = False) -> None:
    fmt = ht.FORMAT_NCHW if nchw else ht.FORMAT_NHWC
    probe = make_node(kind, a, [x], fmt=fmt)
    (shape,) = create_kernel(probe).infer_shapes([x.shape])
    graph = node_graph(make_node(kind, a, [x], fmt=fmt, out_shape=shape))
    assert_close(run_gpu(graph, [x]), run_cpu(graph, [x]))


WINDOWS = [  # kernel, strides, padMode, pad, ceil
    ((2, 2), (2, 2), ht.PAD_MODE_VALID, (), False),
    ((2, 2), (2, 2), ht.PAD_MODE_VALID, (), True),
    ((3, 3), (1, 1), ht.PAD_MODE_PAD, (1, 1, 1, 1), False),
    ((3, 3), (2, 2), ht.PAD_MODE_PAD, (1, 0, 2, 1), False),
    ((3, 3), (2, 2), ht.PAD_MODE_PAD, (1, 0, 2, 1), True),
    ((3, 2), (2, 3), ht.PAD_MODE_SAME, (), False),
    ((4, 3), (3, 1), ht.PAD_MODE_SAME, (), True),
    ((1, 3), (1, 2), ht.PAD_MODE_VALID, (), False),
]


@pytest.mark.parametrize("kind", [MAX, AVG], ids=["max", "avg"])
@pytest.mark.parametrize("window", WINDOWS, ids=[str(i) for i in range(len(WINDOWS))])
def test_windows_nhwc(kind: int, window) -> None:
    kernel, strides, mode, pad, ceil = window
    check(kind, attrs(kind, kernel, strides, pad, mode, ceil), randn(2, 7, 9, 5, seed=1))


@pytest.mark.parametrize("kind", [MAX, AVG], ids=["max", "avg"])
def test_windows_nchw(kind: int) -> None:
    a = attrs(kind, (3, 3), (2, 2), (1, 0, 2, 1), ht.PAD_MODE_PAD, True, nchw=True)
    check(kind, a, randn(2, 5, 7, 9, seed=2), nchw=True)
    check(kind, attrs(kind, (2, 3), (1, 2), mode=ht.PAD_MODE_SAME, nchw=True),
          randn(1, 3, 6, 5, seed=3), nchw=True)


@pytest.mark.parametrize("kind", [MAX, AVG], ids=["max", "avg"])
@pytest.mark.parametrize("nchw", [False, True], ids=["nhwc", "nchw"])
def test_global(kind: int, nchw: bool) -> None:
    a = ATTRS[kind](format=ht.FORMAT_NCHW if nchw else ht.FORMAT_NHWC, **{"global": True})
    shape = (2, 37, 5, 7) if nchw else (2, 5, 7, 37)
    check(kind, a, randn(*shape, seed=4), nchw=nchw)


def test_mobilenet_head() -> None:
    """AvgPool 7x7 VALID over a 7x7 plane: one window holding every cell."""
    x = randn(2, 7, 7, 96, seed=5)
    check(AVG, attrs(AVG, (7, 7), (1, 1)), x)
    check(MAX, attrs(MAX, (7, 7), (2, 2)), x)
    # whole plane through a padded window too (SAME on a 3x3 plane with a 5x5 kernel)
    check(AVG, attrs(AVG, (5, 5), (5, 5), mode=ht.PAD_MODE_SAME), randn(1, 3, 3, 4, seed=6))


@pytest.mark.parametrize("kind", [MAX, AVG], ids=["max", "avg"])
def test_fused_activation(kind: int) -> None:
    x = randn(1, 6, 5, 3, seed=7)
    check(kind, attrs(kind, (3, 3), (1, 1), activationType=ht.ACTIVATION_TYPE_RELU), x)
    check(kind, ATTRS[kind](activationType=ht.ACTIVATION_TYPE_TANH, format=ht.FORMAT_NHWC,
                             **{"global": True}), x)


def test_max_nan_and_inf() -> None:
    x = randn(1, 4, 4, 2, seed=8)
    x[0, 0, 0, 0] = np.nan
    x[0, 3, 3, 1] = np.inf
    check(MAX, attrs(MAX), x)
    check(MAX, ATTRS[MAX](format=ht.FORMAT_NHWC, **{"global": True}), x)


def test_epilogue() -> None:
    """AvgPool → Activation(RELU6): the activation fused into the pooling kernel."""
    mb = HdiModelBuilder("pool_relu6")
    x = mb.input("x", np.float32, [1, 8, 8, 6], fmt=ht.FORMAT_NHWC)
    p = mb.tensor("p", np.float32, [1, 4, 4, 6], fmt=ht.FORMAT_NHWC)
    y = mb.tensor("y", np.float32, [1, 4, 4, 6], fmt=ht.FORMAT_NHWC)
    mb.node(AVG, [x], [p], attrs(AVG))
    mb.node(na.NODE_TYPE_ACTIVATION, [p], [y],
            na.Activation(activationType=ht.ACTIVATION_TYPE_RELU6))
    mb.mark_outputs(y)
    graph = graph_of(mb)
    data = randn(1, 8, 8, 6, seed=9) * 8
    assert_close(run_gpu(graph, [data]), run_cpu(graph, [data]))


def test_refused() -> None:
    x = np.arange(2 * 4 * 4 * 3, dtype=np.int32).reshape(2, 4, 4, 3)
    node = make_node(MAX, attrs(MAX), [x], out_shape=(2, 2, 2, 3))
    expect_error(NNRT_UNSUPPORTED_OP, lambda: create_op(node))
    node = make_node(AVG, attrs(AVG), [randn(1, 4, 4, 2).astype(np.float64)],
                     out_shape=(1, 2, 2, 2))
    expect_error(NNRT_UNSUPPORTED_OP, lambda: create_op(node))
