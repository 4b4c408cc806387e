"""The simulated NPU's cost model: how long each node of a run takes on the chip of a spec.

A node costs

    seconds = (launches · launch + max(MAC time, vector time, DMA time)) / clock_scale(mode)

with MAC time = macs / (the MAC array's rate at the node's precision · mac_utilisation),
vector time =
vector_ops / the vector unit's rate and DMA time = bytes_moved / the DMA bandwidth: the
three units overlap (double buffering), the slowest one sets the pace, and every node pays
a fixed launch (`launches` is 1 but for LSTM, whose time steps are launched one by one).
The whole chip — MAC array, vector unit, DMA engine and the command processor that
launches nodes — runs on one clock, so a performance mode scales the whole duration,
launch included, by nominal / clock(mode): HIGH against LOW changes every run's latency by
exactly the clock ratio. PERFORMANCE_NONE runs as MEDIUM.

What a node counts (`node_cost`), from the concrete shapes of one run:

* MACs (the MAC array), for the sums of products:
  - Conv2DFusion (ordinary, grouped, depthwise; NHWC or NCHW): N·OH·OW·outC·kH·kW·C/group,
    i.e. (output elements / outC) · weight elements, the weight being [outC, kH, kW, C/group].
  - Conv2dTransposeFusion: every input pixel meets every weight tap of its group:
    N·H·W·C·kH·kW·outC/group = (input elements / C) · weight elements.
  - FullConnection: M·out·in = output elements · in (weight [out, in]).
  - MatMulFusion (batched, broadcast, transposes): output elements · K, K the inner
    dimension (the last of x1, its second to last with transposeA; a 1-D x1's only one).
  - LSTM: for each layer and direction, seqLen·batch·4H·(inputSize + H) (the input and the
    recurrent products of the four gates), plus 13·seqLen·batch·H vector operations for the
    gate biases, the three sigmoids and two tanh, and the cell and hidden updates. Its time
    steps depend on each other, so the chip launches each step of each layer and direction
    separately: `launches` = layers·directions·seqLen (every other node: 1).
  Bias, requantisation and a fused activation happen in the MAC array's output stage: free.
  The MAC array reduces MAC_DEPTH (16) products at a time; a sum of fewer products per
  output (the C/group channels of a grouped or depthwise convolution, a first layer's 3
  colour channels, an FC or matmul with K < 16) leaves lanes idle: `mac_utilisation` =
  d / (16 · ceil(d / 16)) for a reduction depth d (C/group, K, inputSize + H), so a
  depthwise convolution runs at 1/16 of the array's rate, as on real NPUs.
* Vector operations (the vector unit), for everything else:
  - element-wise operators, casts, (de)quantisation and data movement (transpose, concat,
    slice, gather, pad, tile, split, ...): one per output element (all outputs);
  - reductions (ReduceFusion, ArgMax, All, TopK, DetectionPostProcess): one per input
    element (the largest input);
  - pooling: output elements · kH·kW (global pooling: one per input element);
  - Softmax / LogSoftmax: 3 per element (max, exponent and sum, normalise); LayerNorm and
    InstanceNorm: 4 (mean, variance, normalise, affine); L2Normalize: 2; FusedBatchNorm:
    2 (inference: scale and shift); LRN: 2·depthRadius + 3 per element;
  - Resize: one per output element per tap (nearest 1, linear 4, cubic 16);
  - reshape-like views (Reshape, Flatten, Squeeze, Unsqueeze, ExpandDims) and Shape / Rank:
    nothing at all and no bytes — the device relabels the buffer — so they cost one launch.
  A vector op is one element operation, whatever the function (transcendentals come from
  the vector unit's lookup tables at the same rate). A quantised (int8) node on the vector
  unit whose quantised (int8 / uint8) run-time inputs and outputs do not all share one
  scale and zero point also rescales: one more op per element of each of them (dequantise,
  then requantise with ties to even), so such an int8 Add costs 4 ops per element where a
  float16 one costs 1; with one shared quantisation (a transpose, a max pool) it costs 1.
* Precision: "int8" for a quantised node (quant_type QUANT_TYPE_ALL or an int8 / uint8
  input), "fp16" for a float16 one, otherwise "other". The MAC array takes int8 and fp16
  only; an "other" node's MACs (an int32 matrix product, a float32 node costed before the
  float16 rewrite) are emulated on the vector unit: its vector time is (macs + vector_ops)
  / vector rate and it has no MAC time.
* bytes_moved (DMA): the node's non-constant input and output bytes at their dtype sizes
  (intermediate tensors live in device memory between nodes), plus its constant inputs'
  bytes when the model's weights are not resident. `graph_costs` decides residency once
  per model: when the sum of all the graph's constant bytes fits in onchip_memory_bytes the
  weights are loaded on chip once, at prepare time, and not fetched again by runs;
  otherwise every node fetches its own constants at every run. `node_cost` alone assumes
  resident weights unless told otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .spec import AccelSpec
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import DYNAMIC, Graph, NodeSpec, Shape, TensorSpec

__all__ = ["MAC_DEPTH", "PRECISIONS", "NodeCost", "graph_constant_bytes", "graph_costs",
           "node_cost", "precision_of", "total_seconds", "utilisation", "weights_resident"]

PRECISIONS = ("int8", "fp16", "other")
MAC_DEPTH = 16  # products the MAC array sums at a time for one output

_INT8 = (np.dtype(np.int8), np.dtype(np.uint8))
_FP16 = np.dtype(np.float16)

# Nodes of the MAC array (their output stage requantises for free).
_MAC_NODES = frozenset({na.NODE_TYPE_CONV2D_FUSION, na.NODE_TYPE_CONV2D_TRANSPOSE_FUSION,
                        na.NODE_TYPE_FULL_CONNECTION, na.NODE_TYPE_MATMUL_FUSION,
                        na.NODE_TYPE_LSTM})
# Nodes the device executes by relabelling a buffer: no computation, no data moved.
_VIEWS = frozenset({na.NODE_TYPE_RESHAPE, na.NODE_TYPE_FLATTEN, na.NODE_TYPE_SQUEEZE,
                    na.NODE_TYPE_UNSQUEEZE, na.NODE_TYPE_EXPAND_DIMS, na.NODE_TYPE_SHAPE,
                    na.NODE_TYPE_RANK})
# One vector op per element of the largest input.
_REDUCTIONS = frozenset({na.NODE_TYPE_REDUCE_FUSION, na.NODE_TYPE_ARGMAX_FUSION,
                         na.NODE_TYPE_ALL, na.NODE_TYPE_TOPK_FUSION,
                         na.NODE_TYPE_DETECTION_POST_PROCESS})
# Vector ops per input element of multi-pass operators.
_PASSES = {na.NODE_TYPE_SOFTMAX: 3, na.NODE_TYPE_LOG_SOFTMAX: 3,
           na.NODE_TYPE_LAYER_NORM_FUSION: 4, na.NODE_TYPE_INSTANCE_NORM: 4,
           na.NODE_TYPE_L2_NORMALIZE_FUSION: 2, na.NODE_TYPE_FUSED_BATCH_NORM: 2}
_POOLS = frozenset({na.NODE_TYPE_MAX_POOL_FUSION, na.NODE_TYPE_AVGPOOL_FUSION})
# QuantDTypeCast is the (de)quantisation itself: its one op per element is all it does.
_SELF_QUANTIZING = frozenset({na.NODE_TYPE_QUANT_DTYPE_CAST, na.NODE_TYPE_QUANT_DTYPE_CAST_V2})
_RESIZE_TAPS = {ht.RESIZE_METHOD_NEAREST: 1, ht.RESIZE_METHOD_LINEAR: 4,
                ht.RESIZE_METHOD_CUBIC: 16}
_LSTM_GATE_OPS = 13  # per hidden unit and step: 4 bias adds, 3 sigmoid, 2 tanh, 3 mul, 1 add


@dataclass(frozen=True)
class NodeCost:
    """What one node does on the chip in one run."""

    macs: int  # multiply-accumulates of the node (conv, FC, matmul, LSTM, ...)
    vector_ops: int  # element operations on the vector unit (everything else)
    bytes_moved: int  # DMA traffic of the node
    precision: str  # "int8" or "fp16" (what the MAC array runs at) or "other"
    launches: int = 1  # launches the node needs (LSTM: one per dependent time step)
    mac_utilisation: float = 1.0  # share of the MAC array's lanes the node keeps busy

    def unit_seconds(self, spec: AccelSpec) -> tuple[float, float, float]:
        """(MAC time, vector time, DMA time) at the nominal clock, launch excluded."""
        if self.precision in ("int8", "fp16"):
            rate = spec.int8_macs_per_second if self.precision == "int8" else \
                spec.fp16_macs_per_second
            mac = self.macs / (rate * self.mac_utilisation)
            vector = self.vector_ops / spec.vector_ops_per_second
        else:  # the MAC array does not take it: emulated on the vector unit
            mac = 0.0
            vector = (self.macs + self.vector_ops) / spec.vector_ops_per_second
        return mac, vector, self.bytes_moved / spec.dma_bytes_per_second

    def seconds(self, spec: AccelSpec, mode: int) -> float:
        """(launches · launch + max(MAC, vector, DMA time)) / clock_scale(mode): the node's
        simulated duration in performance `mode` (PERFORMANCE_NONE = MEDIUM)."""
        busy = self.launches * spec.launch_seconds + max(self.unit_seconds(spec))
        return busy / spec.clock_scale(mode)


def total_seconds(costs: Sequence[NodeCost], spec: AccelSpec, mode: int) -> float:
    """The simulated duration of a run: its nodes one after the other."""
    return sum(c.seconds(spec, mode) for c in costs)


# ------------------------------------------------------------------------------ per node


def _shape(tensor: TensorSpec, shapes: Mapping[int, Shape]) -> Shape:
    shape = tuple(shapes.get(tensor.index, tensor.shape))
    if DYNAMIC in shape:
        raise ValueError(f"tensor {tensor.index} ({tensor.name!r}) has no concrete shape: "
                         f"{list(shape)}")
    return shape


def _elements(tensor: TensorSpec, shapes: Mapping[int, Shape]) -> int:
    return math.prod(_shape(tensor, shapes))


def precision_of(node: NodeSpec) -> str:
    """"int8", "fp16" or "other" (see the module's docstring)."""
    if node.quant_type == ht.QUANT_TYPE_ALL or any(t.dtype in _INT8 for t in node.inputs):
        return "int8"
    if any(t.dtype == _FP16 for t in (*node.inputs, *node.outputs)):
        return "fp16"
    return "other"


def utilisation(depth: int) -> float:
    """The share of the MAC array's lanes busy for sums of `depth` products."""
    if depth <= 0:
        return 1.0
    return depth / (MAC_DEPTH * math.ceil(depth / MAC_DEPTH))


def _conv_macs(node: NodeSpec, shapes: Mapping[int, Shape]) -> tuple[int, int]:
    """(MACs, reduction depth C/group)."""
    weight = _shape(node.inputs[1], shapes)  # [outC, kH, kW, C/group]
    out_c = weight[0]
    return (_elements(node.outputs[0], shapes) // max(out_c, 1)) * math.prod(weight), weight[3]


def _deconv_macs(node: NodeSpec, shapes: Mapping[int, Shape]) -> tuple[int, int]:
    weight = _shape(node.inputs[1], shapes)  # [outC, kH, kW, C/group]
    group = int(node.attrs.group) or 1
    in_c = group * weight[3]
    return (_elements(node.inputs[0], shapes) // max(in_c, 1)) * math.prod(weight), weight[3]


def _fc_macs(node: NodeSpec, shapes: Mapping[int, Shape]) -> tuple[int, int]:
    n_in = _shape(node.inputs[1], shapes)[1]  # weight [out, in]
    return _elements(node.outputs[0], shapes) * n_in, n_in


def _matmul_macs(node: NodeSpec, shapes: Mapping[int, Shape]) -> tuple[int, int]:
    a = _shape(node.inputs[0], shapes)
    if len(a) == 1:
        k = a[0]
    else:
        k = a[-2] if node.attrs.transposeA else a[-1]
    return _elements(node.outputs[0], shapes) * k, k


def _lstm(node: NodeSpec, shapes: Mapping[int, Shape]) -> tuple[int, int, int, int]:
    """(MACs, reduction depth, vector ops, launches)."""
    seq, batch, _ = _shape(node.inputs[0], shapes)
    k, gates, input_size = _shape(node.inputs[1], shapes)  # [D*L, 4H, inputSize]
    hidden = gates // 4
    rows = k * seq * batch  # every layer and direction walks the whole sequence
    return (rows * gates * (input_size + hidden), input_size + hidden,
            rows * hidden * _LSTM_GATE_OPS, max(k * seq, 1))


def _pool_ops(node: NodeSpec, shapes: Mapping[int, Shape]) -> int:
    inputs = _elements(node.inputs[0], shapes)
    if getattr(node.attrs, "global") or not list(node.attrs.kernelSize):
        return inputs
    window = math.prod(int(k) for k in node.attrs.kernelSize)
    return max(_elements(node.outputs[0], shapes) * window, inputs)


def _rescale_ops(node: NodeSpec, shapes: Mapping[int, Shape]) -> int:
    """A quantised node on the vector unit: one op per element of each quantised run-time
    input (dequantise) and of each quantised output (requantise) — none when they all share
    one scale and zero point (the node then computes on the integers as they are)."""
    tensors = [t for t in (*node.inputs, *node.outputs)
               if not t.is_constant and t.dtype in _INT8 and t.quant_params]
    if len({t.quant_params for t in tensors}) <= 1:
        return 0
    return sum(_elements(t, shapes) for t in tensors)


def node_cost(node: NodeSpec, shapes: Mapping[int, Shape], *,
              weights_resident: bool = True) -> NodeCost:
    """The cost of `node` in a run where tensor index -> concrete shape is `shapes` (a
    tensor missing from it has its declared shape); ValueError for a shape still dynamic.
    With `weights_resident` False the node's constant inputs count in bytes_moved."""
    kind = node.node_type
    precision = precision_of(node)
    if kind in _VIEWS:
        return NodeCost(0, 0, 0, precision)
    macs = vector = depth = 0
    launches = 1
    outputs = sum(_elements(t, shapes) for t in node.outputs)
    if kind == na.NODE_TYPE_CONV2D_FUSION:
        macs, depth = _conv_macs(node, shapes)
    elif kind == na.NODE_TYPE_CONV2D_TRANSPOSE_FUSION:
        macs, depth = _deconv_macs(node, shapes)
    elif kind == na.NODE_TYPE_FULL_CONNECTION:
        macs, depth = _fc_macs(node, shapes)
    elif kind == na.NODE_TYPE_MATMUL_FUSION:
        macs, depth = _matmul_macs(node, shapes)
    elif kind == na.NODE_TYPE_LSTM:
        macs, depth, vector, launches = _lstm(node, shapes)
    elif kind in _REDUCTIONS:
        vector = max((_elements(t, shapes) for t in node.inputs if not t.is_constant),
                     default=0)
    elif kind in _PASSES:
        vector = _PASSES[kind] * _elements(node.inputs[0], shapes)
    elif kind in _POOLS:
        vector = _pool_ops(node, shapes)
    elif kind == na.NODE_TYPE_LRN:
        vector = (2 * max(int(node.attrs.depthRadius), 0) + 3) * _elements(node.inputs[0],
                                                                            shapes)
    elif kind == na.NODE_TYPE_RESIZE:
        vector = _RESIZE_TAPS.get(int(node.attrs.method), 4) * outputs
    else:
        vector = outputs
    if precision == "int8" and kind not in _MAC_NODES and kind not in _SELF_QUANTIZING:
        vector += _rescale_ops(node, shapes)
    moved = sum(_elements(t, shapes) * t.dtype.itemsize for t in node.outputs)
    for t in node.inputs:
        if not t.is_constant or not weights_resident:
            moved += _elements(t, shapes) * t.dtype.itemsize
    return NodeCost(int(macs), int(vector), int(moved), precision, launches,
                    utilisation(depth))


# ---------------------------------------------------------------------------- per graph


def graph_constant_bytes(graph: Graph) -> int:
    """Bytes of every constant tensor of the graph (its weights)."""
    return sum(t.constant.nbytes for t in graph.tensors if t.is_constant)


def weights_resident(graph: Graph, spec: AccelSpec) -> bool:
    """True when all the graph's weights fit in on-chip memory (loaded once, at prepare)."""
    return graph_constant_bytes(graph) <= spec.onchip_memory_bytes


def graph_costs(graph: Graph, shapes: Mapping[int, Shape], spec: AccelSpec) -> list[NodeCost]:
    """The cost of each node of graph.execution_order, in that order, for one run with
    the concrete `shapes` (tensor index -> shape; declared shapes for those missing)."""
    resident = weights_resident(graph, spec)
    return [node_cost(graph.nodes[i], shapes, weights_resident=resident)
            for i in graph.execution_order]
