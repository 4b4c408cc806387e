"""Building HDI Models on the client: tensors, typed nodes, constants packed in shared memory.

The framework's way (hdi.md 7.2): the bytes of all constant tensors go back to back into one
AllocateBuffer region, each tensor naming its window; the region is released as soon as
GetSupportedOperation / PrepareModel returns, since the driver copies what it needs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import model_types_pb2 as mt
from nnrt.protos import node_attrs_pb2 as na
from nnrt.protos.generate import oneof_member

from .dtypes import hdi_data_type
from .errors import NNRT_SUCCESS, code_name


class DriverSession(Protocol):
    """What packing and preparing need of a driver session (the client's DriverClient)."""

    @property
    def alive(self) -> bool: ...

    def allocate_buffer(self, length: int) -> tuple[int, Any]: ...

    def release_buffer(self, buffer: ht.SharedBuffer) -> Any: ...

    def prepare_model(self, model: mt.Model, config: ht.ModelConfig | None = None) -> Any: ...


class PrepareError(RuntimeError):
    def __init__(self, what: str, code: int) -> None:
        super().__init__(f"{what} failed: {code_name(code)}")
        self.code = code


@dataclass
class HdiModelBuilder:
    name: str = "model"
    tensors: list[ht.Tensor] = field(default_factory=list)
    constants: dict[int, np.ndarray] = field(default_factory=dict)
    nodes: list[na.Node] = field(default_factory=list)
    inputs: list[int] = field(default_factory=list)
    outputs: list[int] = field(default_factory=list)

    def tensor(self, name: str, dtype: Any, dims: Sequence[int], *,
               data: np.ndarray | None = None, fmt: int = ht.FORMAT_NONE,
               quant: Sequence[tuple[int, int, float]] = ()) -> int:
        """Add a tensor (constant if `data` is given); returns its index."""
        index = len(self.tensors)
        self.tensors.append(ht.Tensor(
            name=name, dataType=hdi_data_type(np.dtype(dtype)), dims=list(dims), format=fmt,
            quantParams=[ht.QuantParam(numBits=b, zeroPoint=z, scale=s) for b, z, s in quant],
        ))
        if data is not None:
            self.constants[index] = np.ascontiguousarray(data, dtype=dtype)
        return index

    def constant(self, name: str, data: np.ndarray, fmt: int = ht.FORMAT_NONE) -> int:
        data = np.asarray(data)
        return self.tensor(name, data.dtype, data.shape, data=data, fmt=fmt)

    def input(self, name: str, dtype: Any, dims: Sequence[int], fmt: int = ht.FORMAT_NONE) -> int:
        index = self.tensor(name, dtype, dims, fmt=fmt)
        self.inputs.append(index)
        return index

    def node(self, node_type: int, inputs: Sequence[int], outputs: Sequence[int],
             attrs: Any = None, *, quant_type: int = ht.QUANT_TYPE_NONE) -> int:
        """Add a node; `attrs` is its attribute message (default: an empty one of its type)."""
        member = oneof_member(na.NodeType.Name(node_type))
        node = na.Node(name=f"{na.NodeType.Name(node_type)[10:].lower()}:{len(self.nodes)}",
                       nodeType=node_type, inputIndex=list(inputs), outputIndex=list(outputs),
                       quantType=quant_type)
        if attrs is None:
            getattr(node, member).SetInParent()
        else:
            getattr(node, member).CopyFrom(attrs)
        self.nodes.append(node)
        return len(self.nodes) - 1

    def mark_outputs(self, *indices: int) -> None:
        self.outputs.extend(indices)

    def model(self, constant_buffer: ht.SharedBuffer | None = None) -> mt.Model:
        """The Model message, constant windows laid out back to back in `constant_buffer`."""
        tensors = []
        offset = 0
        for index, tensor in enumerate(self.tensors):
            t = ht.Tensor()
            t.CopyFrom(tensor)
            data = self.constants.get(index)
            if data is not None and constant_buffer is not None:
                t.data.CopyFrom(ht.SharedBuffer(bufferId=constant_buffer.bufferId,
                                                bufferSize=constant_buffer.bufferSize,
                                                offset=offset, dataSize=data.nbytes))
                offset += data.nbytes
            tensors.append(t)
        return mt.Model(
            name=self.name, inputIndex=self.inputs, outputIndex=self.outputs, nodes=self.nodes,
            allTensors=tensors,
            subGraph=[mt.SubGraph(name="NNRt_SubGraph", inputIndices=self.inputs,
                                  outputIndices=self.outputs,
                                  nodeIndices=range(len(self.nodes)))],
        )

    def constant_bytes(self) -> int:
        return sum(a.nbytes for a in self.constants.values())

    @contextlib.contextmanager
    def packed(self, client: DriverSession) -> Iterator[mt.Model]:
        """The Model with its constants in a fresh driver buffer, released afterwards."""
        total = self.constant_bytes()
        if total == 0:
            yield self.model()
            return
        code, memory = client.allocate_buffer(total)
        if code != NNRT_SUCCESS:
            raise PrepareError("AllocateBuffer for constants", code)
        try:
            offset = 0
            for index in sorted(self.constants):
                data = self.constants[index]
                memory.view(offset, data.nbytes)[:] = data.reshape(-1).view(np.uint8)
                offset += data.nbytes
            yield self.model(memory.descriptor())
        finally:
            memory.close()
            if client.alive:
                client.release_buffer(memory.descriptor())

    def prepare(self, client: DriverSession, config: ht.ModelConfig | None = None) -> int:
        """PrepareModel; returns the prepared model id or raises PrepareError."""
        with self.packed(client) as model:
            reply = client.prepare_model(model, config)
        if reply.returnCode != NNRT_SUCCESS:
            raise PrepareError("PrepareModel", reply.returnCode)
        return reply.preparedModelId


# -- OH_NN_DataType / OH_NN_Format ↔ HDI (capi.md 3.7, 3.9) --------------------------------

# OH_NN_DataType value -> (HDI DataType code, numpy dtype or None for UNKNOWN)
DATA_TYPES: dict[int, tuple[int, np.dtype | None]] = {
    0: (ht.DATA_TYPE_UNKNOWN, None),
    1: (ht.DATA_TYPE_BOOL, np.dtype(np.bool_)),
    2: (ht.DATA_TYPE_INT8, np.dtype(np.int8)),
    3: (ht.DATA_TYPE_INT16, np.dtype(np.int16)),
    4: (ht.DATA_TYPE_INT32, np.dtype(np.int32)),
    5: (ht.DATA_TYPE_INT64, np.dtype(np.int64)),
    6: (ht.DATA_TYPE_UINT8, np.dtype(np.uint8)),
    7: (ht.DATA_TYPE_UINT16, np.dtype(np.uint16)),
    8: (ht.DATA_TYPE_UINT32, np.dtype(np.uint32)),
    9: (ht.DATA_TYPE_UINT64, np.dtype(np.uint64)),
    10: (ht.DATA_TYPE_FLOAT16, np.dtype(np.float16)),
    11: (ht.DATA_TYPE_FLOAT32, np.dtype(np.float32)),
    12: (ht.DATA_TYPE_FLOAT64, np.dtype(np.float64)),
}
HDI_TO_OH_DATA_TYPE = {hdi: oh for oh, (hdi, _) in DATA_TYPES.items()}


def element_size(data_type: int) -> int:
    """Bytes per element of an OH_NN_DataType; 0 for UNKNOWN or an undefined value."""
    entry = DATA_TYPES.get(data_type)
    return 0 if entry is None or entry[1] is None else entry[1].itemsize


def hdi_format(oh_format: int) -> int:
    """OH_NN_Format → HDI Format, the same for graph and run-time tensors in nnrt.

    NCHW→FORMAT_NCHW, NHWC→FORMAT_NHWC, NONE and ND→FORMAT_NONE. (Upstream tags graph
    tensors NONE/ND as NHWC but run-time ones as FORMAT_NONE; ours keeps both untagged,
    and drivers compute untagged spatial inputs as NHWC — semantics.md.)
    """
    return {1: ht.FORMAT_NCHW, 2: ht.FORMAT_NHWC}.get(oh_format, ht.FORMAT_NONE)


# -- a front end's model as a compilation gets it ------------------------------------------


@dataclass
class IODesc:
    """A model input or output as the front end describes it (OH_NN numbering)."""

    name: str
    data_type: int  # OH_NN_DataType
    shape: list[int]  # -1 = dynamic
    format: int  # OH_NN_Format


@dataclass
class LoweredModel:
    """What a finished OH_NNModel gives a compilation (model.py → compilation.py).

    `hdi` holds the HDI graph with parameter tensors folded into node attributes and the
    remaining tensors renumbered; `hdi.prepare(client)` packs the constants into one shared
    buffer and calls PrepareModel.
    """

    hdi: HdiModelBuilder
    inputs: list[IODesc]
    outputs: list[IODesc]
