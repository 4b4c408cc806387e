from nnrt.protos import node_attrs_pb2 as _node_attrs_pb2
from nnrt.protos import hdi_types_pb2 as _hdi_types_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SubGraph(_message.Message):
    __slots__ = ("name", "inputIndices", "outputIndices", "nodeIndices")
    NAME_FIELD_NUMBER: _ClassVar[int]
    INPUTINDICES_FIELD_NUMBER: _ClassVar[int]
    OUTPUTINDICES_FIELD_NUMBER: _ClassVar[int]
    NODEINDICES_FIELD_NUMBER: _ClassVar[int]
    name: str
    inputIndices: _containers.RepeatedScalarFieldContainer[int]
    outputIndices: _containers.RepeatedScalarFieldContainer[int]
    nodeIndices: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, name: _Optional[str] = ..., inputIndices: _Optional[_Iterable[int]] = ..., outputIndices: _Optional[_Iterable[int]] = ..., nodeIndices: _Optional[_Iterable[int]] = ...) -> None: ...

class Model(_message.Message):
    __slots__ = ("name", "inputIndex", "outputIndex", "nodes", "allTensors", "subGraph")
    NAME_FIELD_NUMBER: _ClassVar[int]
    INPUTINDEX_FIELD_NUMBER: _ClassVar[int]
    OUTPUTINDEX_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    ALLTENSORS_FIELD_NUMBER: _ClassVar[int]
    SUBGRAPH_FIELD_NUMBER: _ClassVar[int]
    name: str
    inputIndex: _containers.RepeatedScalarFieldContainer[int]
    outputIndex: _containers.RepeatedScalarFieldContainer[int]
    nodes: _containers.RepeatedCompositeFieldContainer[_node_attrs_pb2.Node]
    allTensors: _containers.RepeatedCompositeFieldContainer[_hdi_types_pb2.Tensor]
    subGraph: _containers.RepeatedCompositeFieldContainer[SubGraph]
    def __init__(self, name: _Optional[str] = ..., inputIndex: _Optional[_Iterable[int]] = ..., outputIndex: _Optional[_Iterable[int]] = ..., nodes: _Optional[_Iterable[_Union[_node_attrs_pb2.Node, _Mapping]]] = ..., allTensors: _Optional[_Iterable[_Union[_hdi_types_pb2.Tensor, _Mapping]]] = ..., subGraph: _Optional[_Iterable[_Union[SubGraph, _Mapping]]] = ...) -> None: ...
