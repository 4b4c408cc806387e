"""Partitioning one model across devices (decision 12): which device runs which node, and
the sub-models the partitions become. Pure: no driver is called here.

`partition(model, supports)` gives each node to the first device, in the caller's preference
order, whose GetSupportedOperation answer says yes, and groups the nodes into steps as
NNAPI's partitioner does (ExecutionPlan's `partitionTheWork`): nodes become *ready* when every
tensor they read is known (a model input, a constant, or the output of a node already
placed); each device has a FIFO queue of its ready nodes; a step takes the first device in
preference order with a ready node and drains that device's queue — nodes that become ready
meanwhile on the same device join the same step. A step therefore reads only model inputs,
constants and outputs of earlier steps: the steps run in order and the graph of partitions
has no cycle, where grouping "all GPU nodes" into one partition could make one (GPU → CPU →
GPU). Partitions are maximal under that rule.

`sub_model(lowered, plan, step)` is a partition as a model of its own: its nodes; its inputs
the model inputs and boundary tensors it reads, its outputs the model outputs and boundary
tensors it writes (a boundary tensor: one a later step reads); only the constants its nodes
use. Tensors keep the model's types, shapes (dynamic dimensions too), formats and
quantisation: a boundary tensor is the same tensor on both sides.

`relaxed_query(model)` is the model as a device asked about float16 mode sees it
(semantics.md "Float16 mode"): every float32 tensor float16, the attributes that name those
types following. GetSupportedOperation carries no ModelConfig, so a compilation in float16
mode asks this question of the devices that have the mode.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from nnrt.common.hdi_model import (HDI_TO_OH_DATA_TYPE, HdiModelBuilder, IODesc,
                                   LoweredModel)
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na

# HDI Format -> OH_NN_Format (NONE: OH_NN_FORMAT_NONE = 0).
_OH_FORMATS = {ht.FORMAT_NCHW: 1, ht.FORMAT_NHWC: 2}


class PartitionError(ValueError):
    """No device supports a node (the message names it, its type and each device's why)."""


@dataclass
class Support:
    """One device's answer for every node of the model, in the caller's preference order."""

    name: str  # the device's name, for messages
    ops: list[bool]  # per node
    reasons: list[str] = field(default_factory=list)  # per node, why not ("" when yes)
    refused: str = ""  # why the device takes no node at all (e.g. no float16 mode)

    def why(self, node: int) -> str:
        if self.refused:
            return self.refused
        if node < len(self.reasons) and self.reasons[node]:
            return self.reasons[node]
        return "not supported"


@dataclass
class Step:
    """One partition: nodes (model numbering, in an order that runs them) on one device."""

    device: int  # index into the preference list
    nodes: list[int]
    inputs: list[int]  # tensors read from outside: model inputs and boundary tensors
    outputs: list[int]  # tensors others need: model outputs and boundary tensors
    constants: list[int]  # constant tensors its nodes read


@dataclass
class Plan:
    """Steps in the order they run; `device_of[node]` is the device index of each node."""

    steps: list[Step]
    device_of: list[int]
    boundaries: list[int]  # tensors one step writes and another reads

    @property
    def devices(self) -> list[int]:
        """The device indices the plan uses, in preference order."""
        return sorted({s.device for s in self.steps})


def node_type_name(node: na.Node) -> str:
    name = na.NodeType.Name(node.nodeType) if node.nodeType in na.NodeType.values() else \
        str(node.nodeType)
    return name.removeprefix("NODE_TYPE_")


def partition(model: HdiModelBuilder, supports: Sequence[Support]) -> Plan:
    """The steps of `model` over devices in preference order (`supports[0]` first).

    PartitionError naming the first node no device supports, its type and each device's
    reason."""
    nodes = model.nodes
    device_of = []
    for index, node in enumerate(nodes):
        chosen = next((d for d, s in enumerate(supports)
                       if not s.refused and index < len(s.ops) and s.ops[index]), None)
        if chosen is None:
            whys = "; ".join(f"{s.name}: {s.why(index)}" for s in supports) or "no device"
            raise PartitionError(f"no device supports node {index} ({node.name or '-'}, "
                                 f"{node_type_name(node)}): {whys}")
        device_of.append(chosen)

    producer: dict[int, int] = {}
    for index, node in enumerate(nodes):
        for t in node.outputIndex:
            producer[t] = index
    readers: dict[int, list[int]] = {}
    waiting = []  # per node, how many of its inputs are not known yet
    for index, node in enumerate(nodes):
        pending = {t for t in node.inputIndex if t in producer}
        waiting.append(len(pending))
        for t in pending:
            readers.setdefault(t, []).append(index)

    queues: list[deque[int]] = [deque() for _ in supports]
    for index in range(len(nodes)):
        if waiting[index] == 0:
            queues[device_of[index]].append(index)

    step_of: dict[int, int] = {}
    grouped: list[tuple[int, list[int]]] = []
    while True:
        device = next((d for d, q in enumerate(queues) if q), None)
        if device is None:
            break
        members: list[int] = []
        queue = queues[device]
        while queue:
            index = queue.popleft()
            members.append(index)
            step_of[index] = len(grouped)
            for t in dict.fromkeys(nodes[index].outputIndex):
                for reader in readers.get(t, ()):
                    waiting[reader] -= 1
                    if waiting[reader] == 0:
                        queues[device_of[reader]].append(reader)
        grouped.append((device, members))
    if len(step_of) != len(nodes):
        stuck = sorted(set(range(len(nodes))) - set(step_of))
        raise PartitionError(f"nodes {stuck[:8]} are in a cycle or read a tensor no node "
                             "writes")

    model_inputs, model_outputs = set(model.inputs), set(model.outputs)
    for t in model.outputs:
        if t not in producer:
            raise PartitionError(f"model output tensor {t} is written by no node")
    steps = []
    boundaries: dict[int, None] = {}
    for number, (device, members) in enumerate(grouped):
        read: dict[int, None] = {}
        constants: dict[int, None] = {}
        for index in members:
            for t in nodes[index].inputIndex:
                if t in model.constants:
                    constants[t] = None
                elif t in model_inputs or step_of.get(producer.get(t, -1)) != number:
                    read[t] = None
        written: dict[int, None] = {}
        for index in members:
            for t in nodes[index].outputIndex:
                later = any(step_of[r] != number for r in readers.get(t, ()))
                if later or t in model_outputs:
                    written[t] = None
                if later:
                    boundaries[t] = None
        steps.append(Step(device, members, list(read), list(written), list(constants)))
    return Plan(steps, device_of, list(boundaries))


def _desc(tensor: ht.Tensor, index: int) -> IODesc:
    """A boundary tensor's descriptor: the model's type, shape and format."""
    return IODesc(tensor.name or f"t{index}", HDI_TO_OH_DATA_TYPE.get(tensor.dataType, 0),
                  list(tensor.dims), _OH_FORMATS.get(tensor.format, 0))


def sub_model(lowered: LoweredModel, plan: Plan, number: int) -> LoweredModel:
    """Step `number` of `plan` as a model of its own (module docstring)."""
    model = lowered.hdi
    step = plan.steps[number]
    used = [*step.inputs, *step.constants]
    for index in step.nodes:
        used += model.nodes[index].inputIndex
        used += model.nodes[index].outputIndex
    renumber = {t: k for k, t in enumerate(dict.fromkeys(used))}
    sub = HdiModelBuilder(f"{model.name}:{number}")
    for t in renumber:
        copy = ht.Tensor()
        copy.CopyFrom(model.tensors[t])
        copy.ClearField("data")
        sub.tensors.append(copy)
        if t in model.constants:
            sub.constants[renumber[t]] = model.constants[t]
    for index in step.nodes:
        node = na.Node()
        node.CopyFrom(model.nodes[index])
        node.inputIndex[:] = [renumber[t] for t in node.inputIndex]
        node.outputIndex[:] = [renumber[t] for t in node.outputIndex]
        sub.nodes.append(node)
    sub.inputs = [renumber[t] for t in step.inputs]
    sub.outputs = [renumber[t] for t in step.outputs]
    position_in = {t: k for k, t in enumerate(model.inputs)}
    position_out = {t: k for k, t in enumerate(model.outputs)}
    inputs = [lowered.inputs[position_in[t]] if t in position_in else
              _desc(model.tensors[t], t) for t in step.inputs]
    outputs = [lowered.outputs[position_out[t]] if t in position_out else
               _desc(model.tensors[t], t) for t in step.outputs]
    return LoweredModel(sub, [_copy(d) for d in inputs], [_copy(d) for d in outputs])


def _copy(desc: IODesc) -> IODesc:
    return IODesc(desc.name, desc.data_type, list(desc.shape), desc.format)


# Attributes that name the data type of one of a node's tensors: (field, side, position).
_TYPE_ATTRS = {
    na.NODE_TYPE_QUANT_DTYPE_CAST: (("srcT", "inputIndex", 0), ("dstT", "outputIndex", 0)),
    na.NODE_TYPE_QUANT_DTYPE_CAST_V2: (("srcT", "inputIndex", 0), ("dstT", "outputIndex", 0)),
    na.NODE_TYPE_CONSTANT_OF_SHAPE: (("dataType", "outputIndex", 0),),
    na.NODE_TYPE_RANGE: (("dataType", "outputIndex", 0),),
}


def relaxed_query(model: HdiModelBuilder) -> HdiModelBuilder:
    """The model in float16 mode's types, for GetSupportedOperation (module docstring)."""
    halved = HdiModelBuilder(model.name, inputs=list(model.inputs), outputs=list(model.outputs))
    for index, tensor in enumerate(model.tensors):
        copy = ht.Tensor()
        copy.CopyFrom(tensor)
        data = model.constants.get(index)
        if tensor.dataType == ht.DATA_TYPE_FLOAT32:
            copy.dataType = ht.DATA_TYPE_FLOAT16
            if data is not None:
                data = data.astype(np.float16)
        halved.tensors.append(copy)
        if data is not None:
            halved.constants[index] = data
    for node in model.nodes:
        copy = na.Node()
        copy.CopyFrom(node)
        member = copy.WhichOneof("nodeAttr")
        attrs = getattr(copy, member) if member else None
        for name, side, position in _TYPE_ATTRS.get(node.nodeType, ()):
            indices = getattr(node, side)
            if attrs is not None and position < len(indices) and \
                    getattr(attrs, name) == ht.DATA_TYPE_FLOAT32 and \
                    model.tensors[indices[position]].dataType == ht.DATA_TYPE_FLOAT32:
                setattr(attrs, name, ht.DATA_TYPE_FLOAT16)
        _half_cast_target(model, halved, copy)
        halved.nodes.append(copy)
    return halved


def _half_cast_target(model: HdiModelBuilder, halved: HdiModelBuilder, node: na.Node) -> None:
    """A Cast to float32 whose output became float16 reads a new constant target type
    FLOAT16 (the original constant, which others may read, stays)."""
    if node.nodeType != na.NODE_TYPE_CAST or len(node.inputIndex) != 2 or \
            model.tensors[node.outputIndex[0]].dataType != ht.DATA_TYPE_FLOAT32:
        return
    target = model.constants.get(node.inputIndex[1])
    if target is None or target.size != 1 or int(target.reshape(-1)[0]) != ht.DATA_TYPE_FLOAT32:
        return
    copy = ht.Tensor()
    copy.CopyFrom(model.tensors[node.inputIndex[1]])
    copy.name = f"{copy.name}:float16"
    halved.tensors.append(copy)
    halved.constants[len(halved.tensors) - 1] = np.full(target.shape, ht.DATA_TYPE_FLOAT16,
                                                         target.dtype)
    node.inputIndex[1] = len(halved.tensors) - 1
