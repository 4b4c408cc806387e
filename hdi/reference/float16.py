"""Float16 precision mode (ModelConfig.enableFloat16): a float32 model computed in float16
(semantics.md "Float16 mode").

The graph is rewritten once at prepare time: every FLOAT32 tensor becomes FLOAT16 (constants
converted), so every kernel is planned and runs in float16; quantised (INT8/UINT8) and other
integer tensors keep their types. The model's inputs and outputs stay FLOAT32 on the wire:
inputs are converted on entry, outputs on exit.

What names a data type follows its tensor's new type, so that a model mixing float32 and
int8 tensors (QuantDTypeCast at its float edges) stays valid:

* QuantDTypeCast / QuantDTypeCastV2 `srcT` (the input's) and `dstT` (the output's),
  ConstantOfShape's and Range's `dataType` (the output's): a FLOAT32 code naming a tensor
  that became float16 becomes FLOAT16. Any other value is left for the kernel to judge.
* Cast's target-type input (input 1): where the output became float16 and the input is a
  constant holding FLOAT32, the node reads a new constant holding FLOAT16 instead (appended
  to the graph's tensors; the original, which other nodes may read, is unchanged). A
  run-time target-type input of such a Cast is replaced by that constant too: in float16
  mode the cast's target is the output tensor's (float16) type whatever the run sends.

How kernels compute in float16 is each operator's (drivers/cpu/ops): sums of products,
reductions and normalisation statistics accumulate in float32 and round to float16 once per
output value; element-wise operations compute in float16.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import DYNAMIC, Graph, NodeSpec, TensorSpec

_HALF = np.dtype(np.float16)

# Attributes that name the data type of one of the node's tensors: (field, side, position).
_TYPE_ATTRS: dict[int, tuple[tuple[str, str, int], ...]] = {
    na.NODE_TYPE_QUANT_DTYPE_CAST: (("srcT", "inputs", 0), ("dstT", "outputs", 0)),
    na.NODE_TYPE_QUANT_DTYPE_CAST_V2: (("srcT", "inputs", 0), ("dstT", "outputs", 0)),
    na.NODE_TYPE_CONSTANT_OF_SHAPE: (("dataType", "outputs", 0),),
    na.NODE_TYPE_RANGE: (("dataType", "outputs", 0),),
}


def _half(spec: TensorSpec) -> TensorSpec:
    if spec.dtype != np.float32:
        return spec
    constant = None if spec.constant is None else spec.constant.astype(_HALF)
    if constant is not None:
        constant.flags.writeable = False
    return replace(spec, dtype=_HALF, data_type=ht.DATA_TYPE_FLOAT16, constant=constant)


def _halved(before: TensorSpec, after: TensorSpec) -> bool:
    """Whether the rewrite turned `before` (a float32 tensor) into `after` (float16)."""
    return before.dtype != after.dtype


def _type_attrs(node: NodeSpec, tensors: tuple[TensorSpec, ...]) -> Any:
    """The node's attributes with every FLOAT32 code naming a now-float16 tensor made FLOAT16
    (the same message when nothing changes; never the original mutated)."""
    fields = _TYPE_ATTRS.get(node.node_type, ())
    changes = []
    for name, side, position in fields:
        specs = getattr(node, side)
        if position >= len(specs) or node.attrs is None:
            continue
        spec = specs[position]
        if getattr(node.attrs, name) == ht.DATA_TYPE_FLOAT32 and \
                _halved(spec, tensors[spec.index]):
            changes.append(name)
    if not changes:
        return node.attrs
    attrs = type(node.attrs)()
    attrs.CopyFrom(node.attrs)
    for name in changes:
        setattr(attrs, name, ht.DATA_TYPE_FLOAT16)
    return attrs


class _CastTargets:
    """New FLOAT16 target-type constants for Cast nodes, appended after the graph's tensors."""

    def __init__(self, tensors: tuple[TensorSpec, ...]) -> None:
        self.tensors = list(tensors)
        self.made: dict[int, TensorSpec] = {}  # original tensor index -> its replacement

    def target(self, node: NodeSpec) -> TensorSpec | None:
        """The replacement of the node's target-type input, None when it keeps its own."""
        if node.node_type != na.NODE_TYPE_CAST or len(node.inputs) != 2:
            return None
        out = node.outputs[0]
        if not _halved(out, self.tensors[out.index]):
            return None
        spec = node.inputs[1]
        if spec.dtype.kind not in "iu":
            return None  # the kernel refuses it either way
        if spec.is_constant:
            values = spec.constant.reshape(-1)
            if values.size != 1 or int(values[0]) != ht.DATA_TYPE_FLOAT32:
                return None
        made = self.made.get(spec.index)
        if made is None:
            shape = (1,) if DYNAMIC in spec.shape else spec.shape
            constant = np.full(shape, ht.DATA_TYPE_FLOAT16, dtype=spec.dtype)
            constant.flags.writeable = False
            made = replace(spec, index=len(self.tensors), name=f"{spec.name}:float16",
                           shape=shape, quant_params=(), constant=constant)
            self.tensors.append(made)
            self.made[spec.index] = made
        return made


def to_float16(graph: Graph) -> Graph:
    """The same graph with every float32 tensor in float16 and every data type code that
    names one of them saying FLOAT16 (module docstring)."""
    halves = tuple(_half(t) for t in graph.tensors)
    targets = _CastTargets(halves)
    nodes = []
    for node in graph.nodes:
        inputs = [halves[t.index] for t in node.inputs]
        target = targets.target(node)
        if target is not None:
            inputs[1] = target
        nodes.append(replace(node, attrs=_type_attrs(node, halves), inputs=tuple(inputs),
                             outputs=tuple(halves[t.index] for t in node.outputs)))
    tensors = tuple(targets.tensors)
    return replace(graph, tensors=tensors, nodes=tuple(nodes),
                   inputs=tuple(tensors[t.index] for t in graph.inputs),
                   outputs=tuple(tensors[t.index] for t in graph.outputs))
