"""Validation of PrepareModel / GetSupportedOperation requests: protobuf Model → Graph.

Every check runs before any device work, in the order of hdi.md 3.10, and a failure raises
DriverError with the code of hdi.md section 11. What passes is consistent: every index in
range, every tensor's type, format and shape defined, every constant's bytes exactly
dtype × dims and inside its buffer, every node's attribute message the one of its
NodeType, each tensor produced at most once, every node input available, no cycle.

What a Model may make the driver hold is bounded before the driver holds it (issue 25): a
few bytes of descriptor become hundreds in the driver (measured: ~0.25 KiB per tensor and
~0.9 KiB per node in the Graph, ~3 KiB more per node in onnxruntime's session), and a
constant is a window that any number of tensors may name. So, before anything is built or
copied: the counts are capped (`MAX_MODEL_TENSORS`, `MAX_MODEL_NODES`,
`MAX_MODEL_NODE_INDICES`, `MAX_MODEL_QUANT_PARAMS`, `MAX_TENSOR_RANK`: NNRT_OUT_OF_MEMORY,
NNRT_INVALID_SHAPE for the rank), and `build_graph`'s `admit` is handed every constant
window and the descriptors' estimated bytes (`descriptor_bytes`), which the host charges
to the session's budget (server/servicers.py). Identical windows are copied once and
shared (read-only); each tensor still counts, since an engine may keep each one apart.
"""

from __future__ import annotations

import heapq
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import model_types_pb2 as mt
from nnrt.protos import node_attrs_pb2 as na
from nnrt.protos.generate import oneof_member
from nnrt.hdi.device import PrepareConfig
from nnrt.common.dtypes import VALID_FORMATS, numpy_dtype
from nnrt.common.errors import (
    NNRT_INVALID_DATATYPE,
    NNRT_INVALID_FORMAT,
    NNRT_INVALID_INPUT,
    NNRT_INVALID_MODEL,
    NNRT_INVALID_NODE,
    NNRT_INVALID_OUTPUT,
    NNRT_INVALID_PERFORMANCE_MODE,
    NNRT_INVALID_PRIORITY,
    NNRT_INVALID_SHAPE,
    NNRT_INVALID_TENSOR,
    NNRT_OUT_OF_MEMORY,
    NNRT_UNSUPPORTED_OP,
    DriverError,
)
from nnrt.hdi.graph import DYNAMIC, Graph, NodeSpec, QuantParam, TensorSpec

log = logging.getLogger(__name__)

# Reads the bytes of a constant: (SharedBuffer) -> bytes; raises DriverError(NNRT_MEMORY_ERROR).
ConstantReader = Callable[[ht.SharedBuffer], bytes]
# Called once every tensor is checked and before any constant is read, with every constant
# tensor's window (one per tensor, identical ones included) and `descriptor_bytes` of the
# model: raises DriverError (NNRT_OUT_OF_MEMORY, a bad window's code) to refuse the model.
Admission = Callable[[Sequence[ht.SharedBuffer], int], None]

# What one Model may describe. Far beyond real models (a large transformer has a few
# thousand nodes), and what they cost the driver stays within a few hundred MiB.
MAX_MODEL_TENSORS = 1 << 17
MAX_MODEL_NODES = 1 << 16
MAX_MODEL_NODE_INDICES = 1 << 20  # every node's inputIndex and outputIndex entries together
MAX_MODEL_QUANT_PARAMS = 1 << 18  # every tensor's quantParams together (per channel: many)
MAX_TENSOR_RANK = 32  # numpy's own limit in 1.x
# What a descriptor costs the driver, as `descriptor_bytes` counts it: measured on the CPU
# driver (Graph and onnxruntime session together), rounded up.
TENSOR_HOST_BYTES = 1024
NODE_HOST_BYTES = 4096
QUANT_PARAM_HOST_BYTES = 160
NODE_INDEX_HOST_BYTES = 16

# NodeType value -> the oneof member its attributes travel in.
_ATTR_MEMBER = {
    value.number: oneof_member(value.name)
    for value in na.NodeType.DESCRIPTOR.values
    if value.number != na.NODE_TYPE_NONE
}
# v2.1 framework quirk (hdi.md 5.3.1): QUANT_DTYPE_CAST nodes carry the V2 layout.
_ALSO_ACCEPTED = {na.NODE_TYPE_QUANT_DTYPE_CAST: {oneof_member("NODE_TYPE_QUANT_DTYPE_CAST_V2")}}
_VALID_PERFORMANCE = frozenset(v.number for v in ht.PerformanceMode.DESCRIPTOR.values)
_VALID_PRIORITY = frozenset(v.number for v in ht.Priority.DESCRIPTOR.values)
_VALID_QUANT_TYPES = frozenset(v.number for v in ht.QuantType.DESCRIPTOR.values)


def validate_config(config: ht.ModelConfig) -> PrepareConfig:
    if config.mode not in _VALID_PERFORMANCE:
        raise DriverError(NNRT_INVALID_PERFORMANCE_MODE, f"performance mode {config.mode} is not 0..4")
    if config.priority not in _VALID_PRIORITY:
        raise DriverError(NNRT_INVALID_PRIORITY, f"priority {config.priority} is not 0..3")
    return PrepareConfig(
        enable_float16=config.enableFloat16,
        mode=config.mode,
        priority=config.priority,
        extensions=dict(config.extensions),
    )


def _tensor(index: int, tensor: ht.Tensor) -> TensorSpec:
    """The tensor's spec without its constant (read later: `_read_constants`)."""
    where = f"tensor {index} ({tensor.name!r})"
    dtype = numpy_dtype(tensor.dataType)
    if dtype is None:
        raise DriverError(NNRT_INVALID_DATATYPE, f"{where}: dataType {tensor.dataType} is not defined")
    if tensor.format not in VALID_FORMATS:
        raise DriverError(NNRT_INVALID_FORMAT, f"{where}: format {tensor.format} is not defined")
    shape = tuple(tensor.dims)
    if any(d < 0 and d != DYNAMIC for d in shape):
        raise DriverError(NNRT_INVALID_SHAPE, f"{where}: invalid dimension in {list(shape)}")
    quant = []
    for q in tensor.quantParams:
        if not 1 <= q.numBits <= 32 or not math.isfinite(q.scale) or q.scale < 0:
            raise DriverError(NNRT_INVALID_TENSOR, f"{where}: invalid quantParam {q}".strip())
        quant.append(QuantParam(q.numBits, q.zeroPoint, q.scale))
    if tensor.data.bufferId != 0:
        if DYNAMIC in shape:
            raise DriverError(NNRT_INVALID_TENSOR, f"{where}: constant data with a dynamic shape")
        want = math.prod(shape) * dtype.itemsize
        if tensor.data.dataSize != want:
            raise DriverError(
                NNRT_INVALID_TENSOR,
                f"{where}: {tensor.data.dataSize} data bytes for {want} ({dtype} x {list(shape)})",
            )
    return TensorSpec(index, tensor.name, tensor.dataType, dtype, shape, tensor.format,
                      tuple(quant))


def _window_key(window: ht.SharedBuffer) -> tuple[int, int, int, int]:
    return window.bufferId, window.bufferSize, window.offset, window.dataSize


def _read_constants(model: mt.Model, tensors: list[TensorSpec],
                    read_constant: ConstantReader) -> None:
    """Give each constant tensor its (read-only) array; a window that several tensors name
    is read once and shared."""
    read: dict[tuple[int, int, int, int], bytes] = {}
    for i, tensor in enumerate(model.allTensors):
        if tensor.data.bufferId == 0:
            continue
        key = _window_key(tensor.data)
        raw = read.get(key)
        if raw is None:
            raw = read[key] = read_constant(tensor.data)
        spec = tensors[i]
        constant = np.frombuffer(raw, dtype=spec.dtype).reshape(spec.shape)  # read-only
        tensors[i] = replace(spec, constant=constant)


def check_model_size(model: mt.Model) -> None:
    """Refuse a Model that describes more than the driver takes (the MAX_MODEL_* limits),
    from the message's counts alone: nothing is built or copied before."""
    counts = (
        ("tensors", len(model.allTensors), MAX_MODEL_TENSORS),
        ("nodes", len(model.nodes), MAX_MODEL_NODES),
        ("node tensor indices (inputIndex and outputIndex of every node)",
         sum(len(n.inputIndex) + len(n.outputIndex) for n in model.nodes),
         MAX_MODEL_NODE_INDICES),
        ("quantParams", sum(len(t.quantParams) for t in model.allTensors),
         MAX_MODEL_QUANT_PARAMS),
    )
    for what, count, limit in counts:
        if count > limit:
            raise DriverError(NNRT_OUT_OF_MEMORY,
                              f"the model has {count} {what}; this driver takes at most {limit}")
    for i, tensor in enumerate(model.allTensors):
        if len(tensor.dims) > MAX_TENSOR_RANK:
            raise DriverError(NNRT_INVALID_SHAPE,
                              f"tensor {i} ({tensor.name!r}) has rank {len(tensor.dims)}; "
                              f"this driver takes at most {MAX_TENSOR_RANK}")


def descriptor_bytes(model: mt.Model) -> int:
    """What the driver is expected to hold for the Model's descriptors (constants apart)."""
    return (len(model.allTensors) * TENSOR_HOST_BYTES + len(model.nodes) * NODE_HOST_BYTES
            + sum(len(t.quantParams) for t in model.allTensors) * QUANT_PARAM_HOST_BYTES
            + sum(len(n.inputIndex) + len(n.outputIndex) for n in model.nodes)
            * NODE_INDEX_HOST_BYTES)


def _indices(indices, count: int, code: int, what: str) -> list[int]:
    if not indices:
        raise DriverError(code, f"{what} is empty")
    if len(indices) > count:  # before the copy: a longer list must repeat a tensor
        raise DriverError(code, f"{what} names {len(indices)} tensors, but the model has {count}")
    out = list(indices)
    for i in out:
        if i >= count:
            raise DriverError(code, f"{what} names tensor {i}, but the model has {count}")
    if len(set(out)) != len(out):
        raise DriverError(code, f"{what} repeats a tensor")
    return out


def _decode_attrs(index: int, node: na.Node):
    """The node's attribute message; DriverError when type or attributes are unusable."""
    where = f"node {index} ({node.name!r})"
    if node.nodeType == na.NODE_TYPE_NONE:
        raise DriverError(NNRT_INVALID_NODE, f"{where}: NODE_TYPE_NONE")
    member = _ATTR_MEMBER.get(node.nodeType)
    if member is None:
        raise DriverError(NNRT_UNSUPPORTED_OP, f"{where}: unknown NodeType {node.nodeType}")
    carried = node.WhichOneof("nodeAttr")
    if carried != member and carried not in _ALSO_ACCEPTED.get(node.nodeType, ()):
        raise DriverError(
            NNRT_INVALID_NODE,
            f"{where}: {na.NodeType.Name(node.nodeType)} needs attribute {member!r}, has {carried!r}",
        )
    if node.quantType not in _VALID_QUANT_TYPES:
        raise DriverError(NNRT_INVALID_NODE, f"{where}: quantType {node.quantType} is not defined")
    return getattr(node, carried)


def _node(index: int, node: na.Node, tensors: list[TensorSpec], attrs) -> NodeSpec:
    where = f"node {index} ({node.name!r})"
    for what, indices in (("inputIndex", node.inputIndex), ("outputIndex", node.outputIndex)):
        for i in indices:
            if i >= len(tensors):
                raise DriverError(
                    NNRT_INVALID_NODE, f"{where}: {what} names tensor {i} of {len(tensors)}"
                )
    if not node.outputIndex:
        raise DriverError(NNRT_INVALID_NODE, f"{where}: no outputs")
    return NodeSpec(
        index=index,
        name=node.name,
        node_type=node.nodeType,
        attrs=attrs,
        inputs=tuple(tensors[i] for i in node.inputIndex),
        outputs=tuple(tensors[i] for i in node.outputIndex),
        quant_type=node.quantType,
    )


def _execution_order(model: mt.Model, nodes: list[NodeSpec], inputs: list[int],
                     outputs: list[int], tensors: list[TensorSpec]) -> tuple[int, ...]:
    inputs = set(inputs)  # membership below is per tensor: a list made it quadratic
    producer: dict[int, int] = {}
    for node in nodes:
        for t in node.outputs:
            if t.index in producer or t.index in inputs or t.is_constant:
                raise DriverError(
                    NNRT_INVALID_MODEL,
                    f"tensor {t.index} ({t.name!r}) is written by node {node.index} but is "
                    "a model input, a constant or another node's output",
                )
            producer[t.index] = node.index
    for i in outputs:
        if i not in producer and i not in inputs:
            raise DriverError(NNRT_INVALID_OUTPUT, f"model output tensor {i} is never computed")
    # Kahn's algorithm, keeping Model.nodes order among ready nodes: a heap, since sorting
    # the ready list at every step was quadratic for wide graphs (16 000 nodes: 0.7 s).
    waiting = {}
    users: dict[int, list[int]] = {}
    for node in nodes:
        deps = {producer[t.index] for t in node.inputs if t.index in producer}
        for t in node.inputs:
            if t.index not in producer and t.index not in inputs and not t.is_constant:
                raise DriverError(
                    NNRT_INVALID_MODEL,
                    f"node {node.index} reads tensor {t.index} ({t.name!r}), which no node "
                    "computes and which is neither a model input nor a constant",
                )
        waiting[node.index] = len(deps)
        for d in deps:
            users.setdefault(d, []).append(node.index)
    ready = [n.index for n in nodes if waiting[n.index] == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        current = heapq.heappop(ready)
        order.append(current)
        for user in users.get(current, ()):
            waiting[user] -= 1
            if waiting[user] == 0:
                heapq.heappush(ready, user)
    if len(order) != len(nodes):
        raise DriverError(NNRT_INVALID_MODEL, "the graph has a cycle")
    return tuple(order)


def build_graph(model: mt.Model, read_constant: ConstantReader, *,
                lenient_nodes: bool = False, admit: Admission | None = None) -> Graph:
    """Validate a Model and turn it into a Graph (constant data copied out).

    With `lenient_nodes` (GetSupportedOperation), a node whose type or attributes cannot be
    decoded does not fail the call: it is listed in `Graph.undecodable` instead. `admit`
    (see Admission) may refuse the model before any constant is read.
    """
    check_model_size(model)
    if not model.allTensors:
        raise DriverError(NNRT_INVALID_TENSOR, "the model has no tensors")
    if not model.subGraph:
        raise DriverError(NNRT_INVALID_MODEL, "the model has no subgraph")
    if not model.nodes:
        raise DriverError(NNRT_INVALID_NODE, "the model has no nodes")
    count = len(model.allTensors)
    inputs = _indices(model.inputIndex, count, NNRT_INVALID_INPUT, "inputIndex")
    outputs = _indices(model.outputIndex, count, NNRT_INVALID_OUTPUT, "outputIndex")
    tensors = [_tensor(i, t) for i, t in enumerate(model.allTensors)]
    if admit is not None:
        admit([t.data for t in model.allTensors if t.data.bufferId != 0],
              descriptor_bytes(model))
    _read_constants(model, tensors, read_constant)
    for i in inputs:
        if tensors[i].is_constant:
            raise DriverError(NNRT_INVALID_INPUT, f"model input tensor {i} carries constant data")
    nodes, undecodable = [], set()
    for i, n in enumerate(model.nodes):
        try:
            attrs = _decode_attrs(i, n)
        except DriverError as exc:
            if not lenient_nodes:
                raise
            log.info("GetSupportedOperation: %s", exc.message)
            attrs = None
            undecodable.add(i)
        nodes.append(_node(i, n, tensors, attrs))
    for s, sub in enumerate(model.subGraph):
        for what, indices, limit in (
            ("inputIndices", sub.inputIndices, count),
            ("outputIndices", sub.outputIndices, count),
            ("nodeIndices", sub.nodeIndices, len(nodes)),
        ):
            if any(i >= limit for i in indices):
                raise DriverError(NNRT_INVALID_MODEL, f"subGraph {s} {what} out of range")
    order = _execution_order(model, nodes, inputs, outputs, tensors)
    return Graph(
        name=model.name,
        tensors=tuple(tensors),
        nodes=tuple(nodes),
        inputs=tuple(tensors[i] for i in inputs),
        outputs=tuple(tensors[i] for i in outputs),
        execution_order=order,
        undecodable=frozenset(undecodable),
    )
