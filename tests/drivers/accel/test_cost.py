"""The NPU simulator's cost model (drivers/accel/cost.py): closed-form MAC and vector-op
counts per operator, precision, bytes moved and weight residency, seconds() and the clock,
and the default spec's calibration on the zoo models."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from nnrt.client import zoo
from nnrt.common.hdi_model import HdiModelBuilder
from nnrt.drivers.accel.cost import (
    MAC_DEPTH,
    NodeCost,
    graph_constant_bytes,
    graph_costs,
    node_cost,
    precision_of,
    total_seconds,
    utilisation,
    weights_resident,
)
from nnrt.drivers.accel.spec import load_spec
from nnrt.drivers.accel.support import device_graph
from nnrt.hdi.reference.kernel import create_kernel
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import DYNAMIC, QuantParam
from tests.drivers.gpu.util import graph_of, node_graph
from tests.hdi.reference.util import Const, make_node, tensor_spec

SPEC = load_spec(None)
F16 = np.float16
Q1 = (QuantParam(8, 0, 0.05),)
Q2 = (QuantParam(8, 3, 0.1),)


def zeros(*shape: int, dtype=F16) -> np.ndarray:
    return np.zeros(shape, dtype)


def conv_node(x_shape, w_shape, *, group=1, stride=1, pad=ht.PAD_MODE_SAME,
              fmt=ht.FORMAT_NHWC, dtype=F16, node_type=na.NODE_TYPE_CONV2D_FUSION):
    """A conv node whose output shape is the CPU reference's inference."""
    cls = na.Conv2DFusion if node_type == na.NODE_TYPE_CONV2D_FUSION else \
        na.Conv2dTransposeFusion
    attrs = cls(kernelSize=list(w_shape[1:3]), stride=[stride, stride], dilation=[1, 1],
                padMode=pad, group=group)
    inputs = [zeros(*x_shape, dtype=dtype), Const(zeros(*w_shape, dtype=dtype))]
    probe = make_node(node_type, attrs, inputs, out_shape=(DYNAMIC,) * 4, fmt=fmt)
    (out_shape,) = create_kernel(probe).infer_shapes([x_shape, w_shape])
    return make_node(node_type, attrs, inputs, out_shape=out_shape, fmt=fmt)


# ----------------------------------------------------------------------------- MAC counts


def test_conv_ordinary_nhwc():
    node = conv_node((2, 8, 8, 3), (16, 3, 3, 3))
    assert node.outputs[0].shape == (2, 8, 8, 16)
    cost = node_cost(node, {})
    assert cost.macs == 2 * 8 * 8 * 16 * 3 * 3 * 3
    assert cost.vector_ops == 0 and cost.precision == "fp16" and cost.launches == 1
    assert cost.mac_utilisation == pytest.approx(3 / 16)  # 3 of 16 lanes


def test_conv_strided_valid():
    node = conv_node((1, 9, 9, 32), (8, 3, 3, 32), stride=2, pad=ht.PAD_MODE_VALID)
    assert node.outputs[0].shape == (1, 4, 4, 8)
    cost = node_cost(node, {})
    assert cost.macs == 1 * 4 * 4 * 8 * 3 * 3 * 32
    assert cost.mac_utilisation == 1.0


def test_conv_nchw_counts_like_nhwc():
    nchw = conv_node((2, 3, 8, 8), (16, 3, 3, 3), fmt=ht.FORMAT_NCHW)
    assert nchw.outputs[0].shape == (2, 16, 8, 8)
    nhwc = conv_node((2, 8, 8, 3), (16, 3, 3, 3))
    assert node_cost(nchw, {}) == node_cost(nhwc, {})


def test_conv_grouped():
    node = conv_node((1, 6, 6, 8), (12, 3, 3, 4), group=2)
    cost = node_cost(node, {})
    assert cost.macs == 1 * 6 * 6 * 12 * 3 * 3 * (8 // 2)
    assert cost.mac_utilisation == pytest.approx(4 / 16)


def test_conv_depthwise():
    node = conv_node((1, 10, 10, 32), (32, 3, 3, 1), group=32)
    cost = node_cost(node, {})
    assert cost.macs == 10 * 10 * 32 * 9
    assert cost.mac_utilisation == pytest.approx(1 / MAC_DEPTH)
    dense = NodeCost(cost.macs, 0, cost.bytes_moved, "fp16")
    assert cost.seconds(SPEC, ht.PERFORMANCE_HIGH) > dense.seconds(SPEC, ht.PERFORMANCE_HIGH)


def test_conv_transpose():
    node = conv_node((1, 4, 5, 8), (6, 3, 3, 4), group=2, stride=2,
                     node_type=na.NODE_TYPE_CONV2D_TRANSPOSE_FUSION)
    cost = node_cost(node, {})
    # every input pixel of each of the C channels meets kH·kW·outC/group weights
    assert cost.macs == 1 * 4 * 5 * 8 * 3 * 3 * (6 // 2)
    assert cost.mac_utilisation == pytest.approx(4 / 16)


def test_full_connection():
    attrs = na.FullConnection(hasBias=True)
    node = make_node(na.NODE_TYPE_FULL_CONNECTION, attrs,
                     [zeros(5, 32), Const(zeros(10, 32)), Const(zeros(10))], out_shape=(5, 10))
    cost = node_cost(node, {})
    assert cost.macs == 5 * 10 * 32
    assert cost.bytes_moved == (5 * 32 + 5 * 10) * 2  # resident weight and bias not moved


def test_full_connection_use_axis():
    attrs = na.FullConnection(useAxis=True, axis=2)
    node = make_node(na.NODE_TYPE_FULL_CONNECTION, attrs,
                     [zeros(2, 3, 4, 5), Const(zeros(7, 20))], out_shape=(2, 3, 7))
    assert node_cost(node, {}).macs == 2 * 3 * 7 * 20


@pytest.mark.parametrize("ta,tb,a,b,out,k", [
    (False, False, (3, 5, 8), (3, 8, 6), (3, 5, 6), 8),
    (True, False, (3, 8, 5), (1, 8, 6), (3, 5, 6), 8),
    (False, True, (2, 1, 5, 8), (4, 6, 8), (2, 4, 5, 6), 8),
    (True, True, (4, 7, 5), (6, 7), (4, 5, 6), 7),
    (False, False, (8,), (8, 6), (6,), 8),
    (False, False, (2, 5, 8), (8,), (2, 5), 8),
])
def test_matmul_batched_with_transposes(ta, tb, a, b, out, k):
    attrs = na.MatMulFusion(transposeA=ta, transposeB=tb)
    node = make_node(na.NODE_TYPE_MATMUL_FUSION, attrs, [zeros(*a), zeros(*b)], out_shape=out)
    (inferred,) = create_kernel(node).infer_shapes([a, b])
    assert tuple(inferred) == out
    cost = node_cost(node, {})
    assert cost.macs == math.prod(out) * k
    assert cost.bytes_moved == (math.prod(a) + math.prod(b) + math.prod(out)) * 2


@pytest.mark.parametrize("bidirectional,layers", [(False, 1), (True, 1), (True, 2),
                                                  (False, 3)])
def test_lstm(bidirectional, layers):
    seq, batch, hidden = 5, 3, 4
    dirs = 2 if bidirectional else 1
    n_in = dirs * hidden if layers > 1 else 6
    k = dirs * layers
    attrs = na.LSTM(bidirectional=bidirectional, hasBias=True, inputSize=n_in,
                    hiddenSize=hidden, numLayers=layers, numDirections=dirs)
    inputs = [zeros(seq, batch, n_in), Const(zeros(k, 4 * hidden, n_in)),
              Const(zeros(k, 4 * hidden, hidden)), Const(zeros(k, 8 * hidden)),
              zeros(k, batch, hidden), zeros(k, batch, hidden)]
    node = make_node(na.NODE_TYPE_LSTM, attrs, inputs, out_shape=(seq, batch, dirs * hidden),
                     n_outputs=3)
    create_kernel(node)  # a valid LSTM for the reference
    shapes = {node.outputs[1].index: (k, batch, hidden), node.outputs[2].index: (k, batch, hidden)}
    cost = node_cost(node, shapes)
    assert cost.macs == k * seq * batch * 4 * hidden * (n_in + hidden)
    assert cost.vector_ops == k * seq * batch * hidden * 13
    assert cost.launches == k * seq  # one launch per dependent time step
    assert cost.mac_utilisation == utilisation(n_in + hidden)
    one = cost.seconds(SPEC, ht.PERFORMANCE_HIGH)
    assert one >= k * seq * SPEC.launch_seconds


# ----------------------------------------------------------------------------- vector ops


def test_elementwise_add_fp16():
    node = make_node(na.NODE_TYPE_ADD_FUSION, na.AddFusion(), [zeros(4, 5), zeros(4, 5)],
                     out_shape=(4, 5))
    assert node_cost(node, {}) == NodeCost(0, 20, 3 * 20 * 2, "fp16")


def test_elementwise_broadcast_counts_output_elements():
    node = make_node(na.NODE_TYPE_MUL_FUSION, na.MulFusion(), [zeros(4, 5), Const(zeros(5))],
                     out_shape=(4, 5))
    assert node_cost(node, {}) == NodeCost(0, 20, 2 * 20 * 2, "fp16")


def test_int8_elementwise_rescales_unless_one_quantisation():
    x = [tensor_spec(0, np.int8, (4, 5), quant=Q1), tensor_spec(1, np.int8, (4, 5), quant=Q2)]
    node = make_node(na.NODE_TYPE_ADD_FUSION, na.AddFusion(), x, out_shape=(4, 5),
                     quant_type=ht.QUANT_TYPE_ALL, out_quant=Q1)
    assert node_cost(node, {}) == NodeCost(0, 20 + 3 * 20, 3 * 20, "int8")
    same = [tensor_spec(0, np.int8, (4, 5), quant=Q1), tensor_spec(1, np.int8, (4, 5), quant=Q1)]
    node = make_node(na.NODE_TYPE_ADD_FUSION, na.AddFusion(), same, out_shape=(4, 5),
                     quant_type=ht.QUANT_TYPE_ALL, out_quant=Q1)
    assert node_cost(node, {}) == NodeCost(0, 20, 3 * 20, "int8")


def test_data_movement():
    node = make_node(na.NODE_TYPE_TRANSPOSE, na.Transpose(),
                     [zeros(2, 3, 4), Const(np.array([2, 0, 1], np.int32))], out_shape=(4, 2, 3))
    assert node_cost(node, {}) == NodeCost(0, 24, 2 * 24 * 2, "fp16")
    split = make_node(na.NODE_TYPE_SPLIT, na.Split(outputNum=2, axis=0), [zeros(4, 6)],
                      out_shape=(2, 6), n_outputs=2)
    assert node_cost(split, {}).vector_ops == 24


def test_views_cost_one_launch():
    node = make_node(na.NODE_TYPE_RESHAPE, na.Reshape(),
                     [zeros(2, 12), Const(np.array([4, 6], np.int32))], out_shape=(4, 6))
    cost = node_cost(node, {})
    assert cost == NodeCost(0, 0, 0, "fp16")
    assert cost.seconds(SPEC, ht.PERFORMANCE_HIGH) == pytest.approx(SPEC.launch_seconds)


def test_reduction_counts_input_elements():
    node = make_node(na.NODE_TYPE_REDUCE_FUSION, na.ReduceFusion(keepDims=False),
                     [zeros(6, 7), Const(np.array([1], np.int32))], out_shape=(6,))
    cost = node_cost(node, {})
    assert cost.vector_ops == 42 and cost.macs == 0


def test_softmax_and_layer_norm():
    node = make_node(na.NODE_TYPE_SOFTMAX, na.Softmax(axis=[-1]), [zeros(3, 10)],
                     out_shape=(3, 10))
    assert node_cost(node, {}).vector_ops == 3 * 30
    attrs = na.LayerNormFusion(beginNormAxis=1, epsilon=1e-5, beginParamsAxis=1)
    node = make_node(na.NODE_TYPE_LAYER_NORM_FUSION, attrs,
                     [zeros(3, 10), Const(zeros(10)), Const(zeros(10))], out_shape=(3, 10))
    assert node_cost(node, {}).vector_ops == 4 * 30


def test_pooling():
    attrs = na.MaxPoolFusion(kernelSize=[3, 3], strides=[2, 2], padMode=ht.PAD_MODE_VALID,
                             format=ht.FORMAT_NHWC)
    node = make_node(na.NODE_TYPE_MAX_POOL_FUSION, attrs, [zeros(1, 9, 9, 4)],
                     out_shape=(1, 4, 4, 4))
    assert node_cost(node, {}).vector_ops == 4 * 4 * 4 * 9
    attrs = na.AvgPoolFusion(kernelSize=[1, 1], format=ht.FORMAT_NHWC)
    setattr(attrs, "global", True)
    node = make_node(na.NODE_TYPE_AVGPOOL_FUSION, attrs, [zeros(2, 5, 5, 8)],
                     out_shape=(2, 1, 1, 8))
    assert node_cost(node, {}).vector_ops == 2 * 5 * 5 * 8


# ----------------------------------------------------------------------------- precision


def test_precision():
    f32 = make_node(na.NODE_TYPE_ADD_FUSION, na.AddFusion(),
                    [zeros(2, dtype=np.float32)] * 2, out_shape=(2,))
    assert precision_of(f32) == "other"
    i32 = make_node(na.NODE_TYPE_MATMUL_FUSION, na.MatMulFusion(),
                    [zeros(2, 3, dtype=np.int32), zeros(3, 4, dtype=np.int32)], out_shape=(2, 4))
    assert precision_of(i32) == "other"
    u8 = make_node(na.NODE_TYPE_ADD_FUSION, na.AddFusion(),
                   [tensor_spec(0, np.uint8, (2,), quant=Q1)] * 2, out_shape=(2,))
    assert precision_of(u8) == "int8"
    fp16 = make_node(na.NODE_TYPE_ADD_FUSION, na.AddFusion(), [zeros(2)] * 2, out_shape=(2,))
    assert precision_of(fp16) == "fp16"


def test_int8_conv_runs_at_the_int8_rate():
    x = tensor_spec(0, np.int8, (1, 8, 8, 32), quant=Q1)
    w = tensor_spec(1, np.int8, (32, 3, 3, 32), constant=np.zeros((32, 3, 3, 32)), quant=Q1)
    b = tensor_spec(2, np.int32, (32,), constant=np.zeros(32))
    attrs = na.Conv2DFusion(kernelSize=[3, 3], stride=[1, 1], dilation=[1, 1],
                            padMode=ht.PAD_MODE_SAME, group=1)
    node = make_node(na.NODE_TYPE_CONV2D_FUSION, attrs, [x, w, b], out_dtype=np.int8,
                     out_shape=(1, 8, 8, 32), quant_type=ht.QUANT_TYPE_ALL, out_quant=Q1)
    cost = node_cost(node, {})
    assert cost.precision == "int8"
    assert cost.macs == 8 * 8 * 32 * 9 * 32 and cost.vector_ops == 0  # requantised for free
    mac, vector, dma = cost.unit_seconds(SPEC)
    assert mac == pytest.approx(cost.macs / SPEC.int8_macs_per_second) and vector == 0.0
    assert dma == pytest.approx(2 * 8 * 8 * 32 / SPEC.dma_bytes_per_second)


def test_other_precision_macs_run_on_the_vector_unit():
    cost = NodeCost(macs=1000, vector_ops=500, bytes_moved=0, precision="other")
    mac, vector, _ = cost.unit_seconds(SPEC)
    assert mac == 0.0 and vector == pytest.approx(1500 / SPEC.vector_ops_per_second)


# ----------------------------------------------------------------------------- shapes


def test_run_shapes_override_declared_dynamic_ones():
    x = tensor_spec(0, F16, (DYNAMIC, 32))
    node = make_node(na.NODE_TYPE_FULL_CONNECTION, na.FullConnection(),
                     [x, Const(zeros(10, 32))], out_shape=(DYNAMIC, 10))
    with pytest.raises(ValueError, match="no concrete shape"):
        node_cost(node, {})
    cost = node_cost(node, {0: (7, 32), node.outputs[0].index: (7, 10)})
    assert cost.macs == 7 * 10 * 32 and cost.bytes_moved == (7 * 32 + 7 * 10) * 2


# ----------------------------------------------------------------------------- residency


def fc_graph(n_in: int, n_out: int):
    b = HdiModelBuilder("fc")
    x = b.input("x", F16, [2, n_in])
    w = b.constant("w", zeros(n_out, n_in))
    bias = b.constant("b", zeros(n_out))
    y = b.tensor("y", F16, [2, n_out])
    b.node(na.NODE_TYPE_FULL_CONNECTION, [x, w, bias], [y], na.FullConnection(hasBias=True))
    r = b.tensor("r", F16, [2, n_out])
    b.node(na.NODE_TYPE_ACTIVATION, [y], [r],
           na.Activation(activationType=ht.ACTIVATION_TYPE_RELU))
    b.mark_outputs(r)
    return graph_of(b)


def test_weights_resident_when_they_all_fit():
    graph = fc_graph(64, 32)
    weights = (32 * 64 + 32) * 2
    assert graph_constant_bytes(graph) == weights
    assert weights_resident(graph, SPEC)
    fc, relu = graph_costs(graph, {}, SPEC)
    assert fc.bytes_moved == (2 * 64 + 2 * 32) * 2
    assert relu.bytes_moved == 2 * 2 * 32 * 2

    small = dataclasses.replace(SPEC, onchip_memory_bytes=weights - 1)
    assert not weights_resident(graph, small)
    fc2, relu2 = graph_costs(graph, {}, small)
    assert fc2.bytes_moved == fc.bytes_moved + weights
    assert relu2 == relu
    exact = dataclasses.replace(SPEC, onchip_memory_bytes=weights)
    assert graph_costs(graph, {}, exact)[0] == fc
    assert node_cost(graph.nodes[0], {}, weights_resident=False) == fc2


# ----------------------------------------------------------------------------- seconds


def test_seconds_closed_form_and_the_clock():
    cost = NodeCost(macs=4_000_000, vector_ops=100_000, bytes_moved=1_000_000, precision="fp16")
    compute = 4e6 / SPEC.fp16_macs_per_second
    dma = 1e6 / SPEC.dma_bytes_per_second
    vector = 1e5 / SPEC.vector_ops_per_second
    busy = SPEC.launch_seconds + max(compute, dma, vector)
    assert cost.seconds(SPEC, ht.PERFORMANCE_HIGH) == pytest.approx(busy)  # nominal clock
    for mode in (ht.PERFORMANCE_LOW, ht.PERFORMANCE_MEDIUM, ht.PERFORMANCE_EXTREME):
        assert cost.seconds(SPEC, mode) == pytest.approx(busy / SPEC.clock_scale(mode))
    assert cost.seconds(SPEC, ht.PERFORMANCE_LOW) / cost.seconds(SPEC, ht.PERFORMANCE_HIGH) \
        == pytest.approx(1000 / 400)
    assert cost.seconds(SPEC, ht.PERFORMANCE_NONE) == cost.seconds(SPEC, ht.PERFORMANCE_MEDIUM)


def test_the_slowest_unit_sets_the_pace():
    dma_bound = NodeCost(0, 0, 5_000_000, "int8")
    assert dma_bound.seconds(SPEC, ht.PERFORMANCE_HIGH) == pytest.approx(
        SPEC.launch_seconds + 5e6 / SPEC.dma_bytes_per_second)
    vector_bound = NodeCost(10, 1_000_000, 10, "int8")
    assert vector_bound.seconds(SPEC, ht.PERFORMANCE_HIGH) == pytest.approx(
        SPEC.launch_seconds + 1e6 / SPEC.vector_ops_per_second)


def test_utilisation():
    assert [utilisation(d) for d in (1, 3, 16, 17, 32, 0)] == \
        [pytest.approx(1 / 16), pytest.approx(3 / 16), 1.0, pytest.approx(17 / 32), 1.0, 1.0]


# ----------------------------------------------------------------------------- calibration


@pytest.mark.parametrize("family", zoo.FAMILIES)
def test_zoo_models_take_milliseconds(family):
    """The default spec's promise (deploy/npu-sim.toml): 0.5 to 6 ms per run at batch 1."""
    model, _ = zoo.build(family, batch=1)
    graph = device_graph(graph_of(model.handle.lowered().hdi), enable_float16=True)
    costs = graph_costs(graph, {}, SPEC)
    assert len(costs) == len(graph.execution_order)
    seconds = total_seconds(costs, SPEC, ht.PERFORMANCE_HIGH)
    assert 0.4e-3 <= seconds <= 7e-3, seconds
    assert total_seconds(costs, SPEC, ht.PERFORMANCE_LOW) == pytest.approx(seconds * 2.5)


def test_one_node_graph_takes_about_one_launch():
    node = make_node(na.NODE_TYPE_ADD_FUSION, na.AddFusion(), [zeros(1, 16), zeros(1, 16)],
                     out_shape=(1, 16))
    (cost,) = graph_costs(node_graph(node), {}, SPEC)
    assert cost.seconds(SPEC, ht.PERFORMANCE_HIGH) == pytest.approx(SPEC.launch_seconds,
                                                                     rel=0.01)
