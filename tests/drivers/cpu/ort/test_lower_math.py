"""Graph-level checks of the onnxruntime engine's lowerings of pooling, normalisation,
reduction and element-wise math (drivers/cpu/ort/ops): whole small networks partitioned by
`engine.partition`, run on onnxruntime and on the numpy kernels, and the cases that stay
on numpy with the reason recorded in Partition.reasons."""

from __future__ import annotations

import numpy as np
import pytest

from nnrt.hdi.reference.kernel import create_kernel
from nnrt.drivers.cpu.ort import engine
from nnrt.hdi.reference.plan import ExecutionPlan
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import DYNAMIC, Graph, NodeSpec, TensorSpec
from tests.hdi.reference.util import randn, tensor_spec
from tests.drivers.cpu.ort.differential import assert_agree, never, node_graph, run_on_ort


class Builder:
    """A chain of nodes over fresh tensor indices."""

    def __init__(self) -> None:
        self.tensors: list[TensorSpec] = []
        self.nodes: list[NodeSpec] = []

    def tensor(self, dtype, shape, constant=None) -> TensorSpec:
        spec = tensor_spec(len(self.tensors), dtype, shape, constant=constant)
        self.tensors.append(spec)
        return spec

    def node(self, node_type: int, attrs, inputs, out_shape, dtype=np.float32) -> TensorSpec:
        out = self.tensor(dtype, out_shape)
        self.nodes.append(NodeSpec(index=len(self.nodes), name=f"n{len(self.nodes)}",
                                   node_type=node_type, attrs=attrs, inputs=tuple(inputs),
                                   outputs=(out,)))
        return out

    def graph(self, inputs, outputs) -> Graph:
        return Graph(name="g", tensors=tuple(self.tensors), nodes=tuple(self.nodes),
                     inputs=tuple(inputs), outputs=tuple(outputs),
                     execution_order=tuple(range(len(self.nodes))))


def run_both(graph: Graph, arrays) -> tuple[engine.Partition, list[np.ndarray], list[np.ndarray]]:
    """(the ort partition, its outputs, the numpy engine's outputs)."""
    kernels = {i: create_kernel(n) for i, n in enumerate(graph.nodes)}
    part = engine.partition(graph, kernels)
    ort_plan = ExecutionPlan(graph, partitioner=lambda g, k: engine.units_with_tensors(part, g))
    numpy_plan = ExecutionPlan(graph)
    return part, ort_plan.run(arrays, never), numpy_plan.run(arrays, never)


def conv(b: Builder, x: TensorSpec, c_in: int, c_out: int, hw: int, seed: int) -> TensorSpec:
    w = b.tensor(np.float32, (c_out, 3, 3, c_in), randn(c_out, 3, 3, c_in, seed=seed) * 0.2)
    bias = b.tensor(np.float32, (c_out,), randn(c_out, seed=seed + 1))
    attrs = na.Conv2DFusion(kernelSize=[3, 3], stride=[1, 1], dilation=[1, 1],
                            padMode=ht.PAD_MODE_SAME, group=1,
                            activationType=ht.ACTIVATION_TYPE_RELU)
    return b.node(na.NODE_TYPE_CONV2D_FUSION, attrs, [x, w, bias], (1, hw, hw, c_out))


def test_cnn_lowers_into_one_segment_and_matches_numpy() -> None:
    """Conv → MaxPool (CEIL) → Conv → AvgPool (padded) → global AvgPool → Softmax: one
    onnxruntime session, the numpy engine's result."""
    b = Builder()
    x = b.tensor(np.float32, (1, 15, 15, 3))
    y = conv(b, x, 3, 8, 15, seed=1)
    y = b.node(na.NODE_TYPE_MAX_POOL_FUSION,
               na.MaxPoolFusion(kernelSize=[2, 2], strides=[2, 2], padMode=ht.PAD_MODE_VALID,
                                roundMode=ht.ROUND_MODE_CEIL, format=ht.FORMAT_NHWC), [y], (1, 8, 8, 8))
    y = conv(b, y, 8, 16, 8, seed=3)
    y = b.node(na.NODE_TYPE_AVGPOOL_FUSION,
               na.AvgPoolFusion(kernelSize=[3, 3], strides=[2, 2], pad=[1, 1, 1, 1],
                                padMode=ht.PAD_MODE_PAD, format=ht.FORMAT_NHWC), [y], (1, 4, 4, 16))
    y = b.node(na.NODE_TYPE_AVGPOOL_FUSION, na.AvgPoolFusion(format=ht.FORMAT_NHWC, **{"global": True}), [y],
               (1, 1, 1, 16))
    y = b.node(na.NODE_TYPE_SOFTMAX, na.Softmax(axis=[-1]), [y], (1, 1, 1, 16))
    graph = b.graph([x], [y])
    part, got, want = run_both(graph, [randn(1, 15, 15, 3, seed=7)])
    assert part.single_segment is not None, part.describe()
    assert part.ort_nodes == 6 and not part.reasons
    assert_agree(got, want)


@pytest.mark.parametrize("shape, norm_axis, params_axis, epsilon", [
    ((2, 3, 8), -1, -1, 1e-5),  # gamma and beta inside LayerNormalization
    ((2, 3, 8), 1, 2, 1e-5),  # rows of two axes, parameters of the last: applied after
    ((2, DYNAMIC, 8), 1, 1, 1e-5),  # a dynamic row length: identity parameters from its shape
    ((2, 3, 8), -1, -1, 0.0),  # no epsilon: written out
])
def test_layer_norm_lowerings_match_numpy(shape, norm_axis, params_axis, epsilon) -> None:
    """LayerNormalization of the centred rows, its parameters inside or after it, or the
    written-out form for epsilon 0; rows far from 0 against their spread."""
    b = Builder()
    x = b.tensor(np.float32, shape)
    static = (2, 3, 8)
    params = static[params_axis:] if params_axis != -1 else static[-1:]
    affine = DYNAMIC not in shape
    inputs = [x]
    if affine:
        inputs += [b.tensor(np.float32, params, randn(*params, seed=s)) for s in (2, 3)]
    y = b.node(na.NODE_TYPE_LAYER_NORM_FUSION,
               na.LayerNormFusion(beginNormAxis=norm_axis, beginParamsAxis=params_axis,
                                  epsilon=epsilon, elementwiseAffine=affine), inputs, shape)
    graph = b.graph([x], [y])
    data = randn(*static, seed=9) * np.float32(2) + np.float32(50)
    part, got, want = run_both(graph, [data])
    assert part.single_segment is not None, part.describe()
    assert_agree(got, want)


def test_transformer_block_pieces_match_numpy() -> None:
    """LayerNorm (rows far from 0 against their spread) → element-wise math: Sqrt / Mul / ReduceFusion MEAN with
    coeff, in one segment."""
    b = Builder()
    x = b.tensor(np.float32, (2, 5, 64))
    g = b.tensor(np.float32, (64,), randn(64, seed=2))
    beta = b.tensor(np.float32, (64,), randn(64, seed=3))
    y = b.node(na.NODE_TYPE_LAYER_NORM_FUSION,
               na.LayerNormFusion(beginNormAxis=-1, beginParamsAxis=-1, epsilon=1e-5,
                                  elementwiseAffine=True), [x, g, beta], (2, 5, 64))
    y = b.node(na.NODE_TYPE_SQUARE, na.Square(), [y], (2, 5, 64))
    axes = b.tensor(np.int32, (1,), np.array([1], np.int32))
    y = b.node(na.NODE_TYPE_REDUCE_FUSION,
               na.ReduceFusion(mode=ht.REDUCE_MODE_MEAN, keepDims=False, coeff=0.5),
               [y, axes], (2, 64))
    y = b.node(na.NODE_TYPE_SQRT, na.Sqrt(), [y], (2, 64))
    graph = b.graph([x], [y])
    data = randn(2, 5, 64, seed=9) * np.float32(2) + np.float32(50)
    part, got, want = run_both(graph, [data])
    assert part.single_segment is not None, part.describe()
    assert_agree(got, want)


def test_nan_reaches_max_pool_and_max_reduction_as_on_numpy() -> None:
    """onnxruntime's MaxPool / ReduceMax may drop NaN; the lowerings put it back."""
    x = randn(1, 6, 6, 2, seed=4)
    x[0, 2, 3, 1] = np.nan
    node = NodeSpec(0, "pool", na.NODE_TYPE_MAX_POOL_FUSION,
                    na.MaxPoolFusion(kernelSize=[3, 3], strides=[1, 1],
                                     padMode=ht.PAD_MODE_VALID, format=ht.FORMAT_NHWC),
                    (tensor_spec(0, np.float32, x.shape),),
                    (tensor_spec(1, np.float32, (1, 4, 4, 2)),))
    (want,) = create_kernel(node).execute([x])
    got, on_ort = run_on_ort(node, [x])
    assert on_ort
    assert np.isnan(want).sum() == 9  # the 3 x 3 windows holding the NaN
    assert_agree(got, [want])
    node = NodeSpec(0, "max", na.NODE_TYPE_REDUCE_FUSION,
                    na.ReduceFusion(mode=ht.REDUCE_MODE_MAX),
                    (tensor_spec(0, np.float32, x.shape),
                     tensor_spec(1, np.int32, (2,), constant=np.array([1, 2], np.int32))),
                    (tensor_spec(2, np.float32, (1, 2)),))
    (want,) = create_kernel(node).execute([x, node.inputs[1].constant])
    got, on_ort = run_on_ort(node, [x, node.inputs[1].constant])
    assert on_ort and np.isnan(want[0, 1]) and not np.isnan(want[0, 0])
    assert_agree(got, [want])


@pytest.mark.parametrize("pad_mode, channels, kernel", [
    (ht.PAD_MODE_SAME, 3, 3), (ht.PAD_MODE_VALID, 3, 3),
    (ht.PAD_MODE_SAME, 64, 3),  # 64: onnxruntime's blocked NCHWc layout
    (ht.PAD_MODE_VALID, 3, 9),  # one window over the whole plane: the IsNaN mask
])
def test_max_pool_nan_next_to_infinities_and_huge_values(pad_mode, channels, kernel) -> None:
    """The NaN of a window comes from a zero-weight convolution of Tanh(x): NaN exactly
    where a window holds one, whatever infinities or values near float32's largest sit
    beside it (ours: +inf stays +inf, a window of -inf and numbers gives the number)."""
    x = randn(1, 9, 9, channels, seed=5)
    x[0, 0, 0, 0] = np.nan
    if channels > 3:  # the last channel of onnxruntime's blocks too
        x[0, 3, 1, channels - 1] = np.nan
    x[0, 4, 4, 0] = np.inf
    x[0, 4, 5, 1] = -np.inf
    x[0, 8, 8, 2] = 3.4e38
    x[0, 7, 8, 2] = -3.4e38
    x[0, 2, 6, 1] = np.nan
    x[0, 2, 7, 1] = np.inf
    out_hw = 5 if pad_mode == ht.PAD_MODE_SAME else (9 - kernel) // 2 + 1
    node = NodeSpec(0, "pool", na.NODE_TYPE_MAX_POOL_FUSION,
                    na.MaxPoolFusion(kernelSize=[kernel, kernel], strides=[2, 2],
                                     padMode=pad_mode,
                                     format=ht.FORMAT_NHWC),
                    (tensor_spec(0, np.float32, x.shape),),
                    (tensor_spec(1, np.float32, (1, out_hw, out_hw, channels)),))
    (want,) = create_kernel(node).execute([x])
    got, on_ort = run_on_ort(node, [x])
    assert on_ort
    assert np.isnan(want).any()
    if kernel < 9:
        assert np.isinf(want).any()
    else:  # one window: NaN in channels 0 and 1, the largest finite value in channel 2
        assert want[0, 0, 0, 2] == np.float32(3.4e38)
    assert_agree(got, [want])
    np.testing.assert_array_equal(np.isnan(got[0]), np.isnan(want))


def test_cases_that_stay_on_numpy_say_why() -> None:
    """A float16 pool, a reduction over run-time axes and integer max pooling of the whole
    plane stay on numpy, each with its reason; the float32 node between them still lowers."""
    b = Builder()
    x = b.tensor(np.float32, (1, 4, 4, 2))
    axes = b.tensor(np.int32, (1,))
    y = b.node(na.NODE_TYPE_REDUCE_FUSION, na.ReduceFusion(mode=ht.REDUCE_MODE_SUM,
                                                           keepDims=True),
               [x, axes], (-1, -1, -1, -1))
    y = b.node(na.NODE_TYPE_ABS, na.Abs(), [y], (-1, -1, -1, -1))
    graph = b.graph([x, axes], [y])
    kernels = {i: create_kernel(n) for i, n in enumerate(graph.nodes)}
    part = engine.partition(graph, kernels)
    assert part.reasons == {0: "run-time axes"}
    assert part.ort_nodes == 1 and part.numpy_nodes == 1

    for node, why in (
            (NodeSpec(0, "p16", na.NODE_TYPE_AVGPOOL_FUSION,
                      na.AvgPoolFusion(kernelSize=[2, 2], padMode=ht.PAD_MODE_VALID,
                                       format=ht.FORMAT_NHWC),
                      (tensor_spec(0, np.float16, (1, 4, 4, 2)),),
                      (tensor_spec(1, np.float16, (1, 3, 3, 2)),)), "float16"),
            (NodeSpec(0, "gi8", na.NODE_TYPE_MAX_POOL_FUSION,
                      na.MaxPoolFusion(format=ht.FORMAT_NHWC, **{"global": True}),
                      (tensor_spec(0, np.int8, (1, 4, 4, 2)),),
                      (tensor_spec(1, np.int8, (1, 1, 1, 2)),)), "whole-plane")):
        part = engine.partition(node_graph(node), {0: create_kernel(node)})
        assert not part.segments and why in part.reasons[0], part.reasons


def lstm_graph(seq, batch, hidden, dirs=1, layers=1, seed=0, zoneout=0.0,
               dynamic=False) -> tuple[Graph, list[np.ndarray]]:
    """x → LSTM (constant weights) → Tanh of y; outputs tanh(y), hN, cN. Inputs x, h0, c0."""
    b = Builder()
    width, k = dirs * hidden, dirs * layers
    x = b.tensor(np.float32, (-1, -1, width) if dynamic else (seq, batch, width))
    weights = [b.tensor(np.float32, shape, randn(*shape, seed=seed + i) * np.float32(0.5))
               for i, shape in enumerate([(k, 4 * hidden, width), (k, 4 * hidden, hidden),
                                          (k, 8 * hidden)], 1)]
    states = [b.tensor(np.float32, (k, -1 if dynamic else batch, hidden)) for _ in range(2)]
    outs = [b.tensor(np.float32, (-1 if dynamic else seq, -1 if dynamic else batch, width))] + [
        b.tensor(np.float32, (k, -1 if dynamic else batch, hidden)) for _ in range(2)]
    b.nodes.append(NodeSpec(index=0, name="lstm", node_type=na.NODE_TYPE_LSTM,
                            attrs=na.LSTM(bidirectional=dirs == 2, hasBias=True,
                                          numLayers=layers, zoneoutCell=zoneout),
                            inputs=(x, *weights, *states), outputs=tuple(outs)))
    y = b.node(na.NODE_TYPE_ACTIVATION, na.Activation(activationType=ht.ACTIVATION_TYPE_TANH),
               [outs[0]], outs[0].shape)
    graph = b.graph([x, *states], [y, outs[1], outs[2]])
    arrays = [randn(seq, batch, width, seed=seed + 10), randn(k, batch, hidden, seed=seed + 11),
              randn(k, batch, hidden, seed=seed + 12)]
    return graph, arrays


def test_lstm_lowers_into_one_segment_and_matches_numpy() -> None:
    """A two-layer bidirectional LSTM and the activation after it: one onnxruntime session
    (the gate blocks re-ordered to ONNX's i, o, f, c), the numpy engine's y, hN and cN."""
    for dirs, layers in ((1, 1), (2, 2), (1, 3)):
        graph, arrays = lstm_graph(6, 3, 4, dirs, layers, seed=dirs + layers)
        part, got, want = run_both(graph, arrays)
        assert part.single_segment is not None, part.describe()
        assert part.ort_nodes == 2 and not part.reasons
        assert_agree(got, want)


def test_lstm_dynamic_sequence_and_batch_and_nan_as_on_numpy() -> None:
    """DYNAMIC seq and batch (also 0 of either at run time), and a NaN in x or c0: ours
    propagates it along the sequence (onnxruntime's LSTM alone would not)."""
    graph, arrays = lstm_graph(5, 2, 3, dirs=2, layers=2, seed=3, dynamic=True)
    kernels = {i: create_kernel(n) for i, n in enumerate(graph.nodes)}
    part = engine.partition(graph, kernels)
    assert part.single_segment is not None, part.describe()
    ort_plan = ExecutionPlan(graph, partitioner=lambda g, k: engine.units_with_tensors(part, g))
    numpy_plan = ExecutionPlan(graph)
    x, h0, c0 = arrays
    x_nan = x.copy()
    x_nan[2, 1, 0] = np.nan
    c0_nan = c0.copy()
    c0_nan[1, 0, 2] = np.nan
    x_inf, x_huge, h0_nan = x.copy(), x.copy(), h0.copy()
    x_inf[1, 0, 1] = -np.inf
    x_huge[3, 1, 2] = 3e38  # finite, but x·Wᵀ overflows
    h0_nan[2, 1, 0] = np.nan
    cases = [arrays, [x[:0], h0, c0], [x[:, :0], h0[:, :0], c0[:, :0]], [x_nan, h0, c0],
             [x, h0, c0_nan], [x_inf, h0, c0], [x_huge, h0, c0], [x, h0_nan, c0]]
    for case in cases:
        got, want = ort_plan.run(case, never), numpy_plan.run(case, never)
        assert_agree(got, want)
    assert np.isnan(want[0]).any() and not np.isnan(want[0]).all()  # the h0 NaN: one row


def test_lstm_writes_its_nan_bookkeeping_out_only_for_inputs_that_could_need_it() -> None:
    """An If on the inputs: finite and small x and h0, c0 without NaN take the plain
    LSTM (no NaN can arise in ours); anything else the branch that writes ours' NaNs."""
    import onnx

    graph, arrays = lstm_graph(5, 2, 3, seed=4)
    part, got, want = run_both(graph, arrays)
    model = onnx.load_from_string(part.single_segment.optimized_model)
    (branch,) = [n for n in model.graph.node if n.op_type == "If"]
    plain, masked = (onnx.helper.get_attribute_value(a) for a in branch.attribute)
    ops = lambda g: [n.op_type for n in g.node]  # noqa: E731
    assert "LSTM" in ops(plain) and "IsNaN" not in ops(plain) and "CumSum" not in ops(plain)
    assert "CumSum" in ops(masked)
    assert_agree(got, want)
    x, h0, c0 = arrays
    for bad in (np.nan, np.inf, 1e36):
        x_bad = x.copy()
        x_bad[0, 0, 0] = bad
        part, got, want = run_both(graph, [x_bad, h0, c0])
        assert_agree(got, want)
        if np.isnan(bad):
            assert np.isnan(want[0]).any()  # the masked branch wrote ours' NaNs


def test_lstm_cases_that_stay_on_numpy_say_why() -> None:
    graph, _ = lstm_graph(4, 2, 3, zoneout=0.25)
    part = engine.partition(graph, {i: create_kernel(n) for i, n in enumerate(graph.nodes)})
    assert "zoneout" in part.reasons[0] and part.ort_nodes == 1
