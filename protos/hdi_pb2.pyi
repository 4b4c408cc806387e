from google.protobuf import empty_pb2 as _empty_pb2
from nnrt.protos import hdi_types_pb2 as _hdi_types_pb2
from nnrt.protos import model_types_pb2 as _model_types_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ReturnCodeReply(_message.Message):
    __slots__ = ("returnCode", "reason")
    RETURNCODE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    returnCode: int
    reason: str
    def __init__(self, returnCode: _Optional[int] = ..., reason: _Optional[str] = ...) -> None: ...

class VersionReply(_message.Message):
    __slots__ = ("returnCode", "major", "minor", "reason")
    RETURNCODE_FIELD_NUMBER: _ClassVar[int]
    MAJOR_FIELD_NUMBER: _ClassVar[int]
    MINOR_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    returnCode: int
    major: int
    minor: int
    reason: str
    def __init__(self, returnCode: _Optional[int] = ..., major: _Optional[int] = ..., minor: _Optional[int] = ..., reason: _Optional[str] = ...) -> None: ...

class NameReply(_message.Message):
    __slots__ = ("returnCode", "name", "reason")
    RETURNCODE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    returnCode: int
    name: str
    reason: str
    def __init__(self, returnCode: _Optional[int] = ..., name: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class DeviceTypeReply(_message.Message):
    __slots__ = ("returnCode", "deviceType", "reason")
    RETURNCODE_FIELD_NUMBER: _ClassVar[int]
    DEVICETYPE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    returnCode: int
    deviceType: _hdi_types_pb2.DeviceType
    reason: str
    def __init__(self, returnCode: _Optional[int] = ..., deviceType: _Optional[_Union[_hdi_types_pb2.DeviceType, str]] = ..., reason: _Optional[str] = ...) -> None: ...

class DeviceStatusReply(_message.Message):
    __slots__ = ("returnCode", "status", "reason")
    RETURNCODE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    returnCode: int
    status: _hdi_types_pb2.DeviceStatus
    reason: str
    def __init__(self, returnCode: _Optional[int] = ..., status: _Optional[_Union[_hdi_types_pb2.DeviceStatus, str]] = ..., reason: _Optional[str] = ...) -> None: ...

class IsSupportedReply(_message.Message):
    __slots__ = ("returnCode", "isSupported", "reason")
    RETURNCODE_FIELD_NUMBER: _ClassVar[int]
    ISSUPPORTED_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    returnCode: int
    isSupported: bool
    reason: str
    def __init__(self, returnCode: _Optional[int] = ..., isSupported: _Optional[bool] = ..., reason: _Optional[str] = ...) -> None: ...

class GetSupportedOperationRequest(_message.Message):
    __slots__ = ("model",)
    MODEL_FIELD_NUMBER: _ClassVar[int]
    model: _model_types_pb2.Model
    def __init__(self, model: _Optional[_Union[_model_types_pb2.Model, _Mapping]] = ...) -> None: ...

class GetSupportedOperationReply(_message.Message):
    __slots__ = ("returnCode", "ops", "reason", "reasons")
    RETURNCODE_FIELD_NUMBER: _ClassVar[int]
    OPS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    REASONS_FIELD_NUMBER: _ClassVar[int]
    returnCode: int
    ops: _containers.RepeatedScalarFieldContainer[bool]
    reason: str
    reasons: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, returnCode: _Optional[int] = ..., ops: _Optional[_Iterable[bool]] = ..., reason: _Optional[str] = ..., reasons: _Optional[_Iterable[str]] = ...) -> None: ...

class PrepareModelRequest(_message.Message):
    __slots__ = ("model", "config")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    model: _model_types_pb2.Model
    config: _hdi_types_pb2.ModelConfig
    def __init__(self, model: _Optional[_Union[_model_types_pb2.Model, _Mapping]] = ..., config: _Optional[_Union[_hdi_types_pb2.ModelConfig, _Mapping]] = ...) -> None: ...

class PrepareModelFromModelCacheRequest(_message.Message):
    __slots__ = ("modelCache", "config")
    MODELCACHE_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    modelCache: _containers.RepeatedCompositeFieldContainer[_hdi_types_pb2.SharedBuffer]
    config: _hdi_types_pb2.ModelConfig
    def __init__(self, modelCache: _Optional[_Iterable[_Union[_hdi_types_pb2.SharedBuffer, _Mapping]]] = ..., config: _Optional[_Union[_hdi_types_pb2.ModelConfig, _Mapping]] = ...) -> None: ...

class PrepareOfflineModelRequest(_message.Message):
    __slots__ = ("offlineModels", "config")
    OFFLINEMODELS_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    offlineModels: _containers.RepeatedCompositeFieldContainer[_hdi_types_pb2.SharedBuffer]
    config: _hdi_types_pb2.ModelConfig
    def __init__(self, offlineModels: _Optional[_Iterable[_Union[_hdi_types_pb2.SharedBuffer, _Mapping]]] = ..., config: _Optional[_Union[_hdi_types_pb2.ModelConfig, _Mapping]] = ...) -> None: ...

class PrepareModelReply(_message.Message):
    __slots__ = ("returnCode", "preparedModelId", "inputs", "outputs", "reason")
    RETURNCODE_FIELD_NUMBER: _ClassVar[int]
    PREPAREDMODELID_FIELD_NUMBER: _ClassVar[int]
    INPUTS_FIELD_NUMBER: _ClassVar[int]
    OUTPUTS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    returnCode: int
    preparedModelId: int
    inputs: _containers.RepeatedCompositeFieldContainer[_hdi_types_pb2.Tensor]
    outputs: _containers.RepeatedCompositeFieldContainer[_hdi_types_pb2.Tensor]
    reason: str
    def __init__(self, returnCode: _Optional[int] = ..., preparedModelId: _Optional[int] = ..., inputs: _Optional[_Iterable[_Union[_hdi_types_pb2.Tensor, _Mapping]]] = ..., outputs: _Optional[_Iterable[_Union[_hdi_types_pb2.Tensor, _Mapping]]] = ..., reason: _Optional[str] = ...) -> None: ...

class AllocateBufferRequest(_message.Message):
    __slots__ = ("length",)
    LENGTH_FIELD_NUMBER: _ClassVar[int]
    length: int
    def __init__(self, length: _Optional[int] = ...) -> None: ...

class AllocateBufferReply(_message.Message):
    __slots__ = ("returnCode", "buffer", "reason")
    RETURNCODE_FIELD_NUMBER: _ClassVar[int]
    BUFFER_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    returnCode: int
    buffer: _hdi_types_pb2.SharedBuffer
    reason: str
    def __init__(self, returnCode: _Optional[int] = ..., buffer: _Optional[_Union[_hdi_types_pb2.SharedBuffer, _Mapping]] = ..., reason: _Optional[str] = ...) -> None: ...

class ReleaseBufferRequest(_message.Message):
    __slots__ = ("buffer",)
    BUFFER_FIELD_NUMBER: _ClassVar[int]
    buffer: _hdi_types_pb2.SharedBuffer
    def __init__(self, buffer: _Optional[_Union[_hdi_types_pb2.SharedBuffer, _Mapping]] = ...) -> None: ...

class PreparedModelRef(_message.Message):
    __slots__ = ("preparedModelId",)
    PREPAREDMODELID_FIELD_NUMBER: _ClassVar[int]
    preparedModelId: int
    def __init__(self, preparedModelId: _Optional[int] = ...) -> None: ...

class ExportModelCacheReply(_message.Message):
    __slots__ = ("returnCode", "modelCache", "reason")
    RETURNCODE_FIELD_NUMBER: _ClassVar[int]
    MODELCACHE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    returnCode: int
    modelCache: _containers.RepeatedCompositeFieldContainer[_hdi_types_pb2.SharedBuffer]
    reason: str
    def __init__(self, returnCode: _Optional[int] = ..., modelCache: _Optional[_Iterable[_Union[_hdi_types_pb2.SharedBuffer, _Mapping]]] = ..., reason: _Optional[str] = ...) -> None: ...

class GetInputDimRangesReply(_message.Message):
    __slots__ = ("returnCode", "minInputDims", "maxInputDims", "reason")
    RETURNCODE_FIELD_NUMBER: _ClassVar[int]
    MININPUTDIMS_FIELD_NUMBER: _ClassVar[int]
    MAXINPUTDIMS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    returnCode: int
    minInputDims: _containers.RepeatedCompositeFieldContainer[_hdi_types_pb2.UInt32Array]
    maxInputDims: _containers.RepeatedCompositeFieldContainer[_hdi_types_pb2.UInt32Array]
    reason: str
    def __init__(self, returnCode: _Optional[int] = ..., minInputDims: _Optional[_Iterable[_Union[_hdi_types_pb2.UInt32Array, _Mapping]]] = ..., maxInputDims: _Optional[_Iterable[_Union[_hdi_types_pb2.UInt32Array, _Mapping]]] = ..., reason: _Optional[str] = ...) -> None: ...

class RunRequest(_message.Message):
    __slots__ = ("preparedModelId", "inputs", "outputs", "profile")
    PREPAREDMODELID_FIELD_NUMBER: _ClassVar[int]
    INPUTS_FIELD_NUMBER: _ClassVar[int]
    OUTPUTS_FIELD_NUMBER: _ClassVar[int]
    PROFILE_FIELD_NUMBER: _ClassVar[int]
    preparedModelId: int
    inputs: _containers.RepeatedCompositeFieldContainer[_hdi_types_pb2.IOTensor]
    outputs: _containers.RepeatedCompositeFieldContainer[_hdi_types_pb2.IOTensor]
    profile: bool
    def __init__(self, preparedModelId: _Optional[int] = ..., inputs: _Optional[_Iterable[_Union[_hdi_types_pb2.IOTensor, _Mapping]]] = ..., outputs: _Optional[_Iterable[_Union[_hdi_types_pb2.IOTensor, _Mapping]]] = ..., profile: _Optional[bool] = ...) -> None: ...

class ProfileSpan(_message.Message):
    __slots__ = ("name", "nodes", "startSeconds", "seconds", "simulatedSeconds", "hostSeconds", "deviceSeconds", "op")
    NAME_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    STARTSECONDS_FIELD_NUMBER: _ClassVar[int]
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    SIMULATEDSECONDS_FIELD_NUMBER: _ClassVar[int]
    HOSTSECONDS_FIELD_NUMBER: _ClassVar[int]
    DEVICESECONDS_FIELD_NUMBER: _ClassVar[int]
    OP_FIELD_NUMBER: _ClassVar[int]
    name: str
    nodes: _containers.RepeatedScalarFieldContainer[int]
    startSeconds: float
    seconds: float
    simulatedSeconds: float
    hostSeconds: float
    deviceSeconds: float
    op: str
    def __init__(self, name: _Optional[str] = ..., nodes: _Optional[_Iterable[int]] = ..., startSeconds: _Optional[float] = ..., seconds: _Optional[float] = ..., simulatedSeconds: _Optional[float] = ..., hostSeconds: _Optional[float] = ..., deviceSeconds: _Optional[float] = ..., op: _Optional[str] = ...) -> None: ...

class RunProfile(_message.Message):
    __slots__ = ("pid", "receivedSeconds", "computeStartSeconds", "computeEndSeconds", "repliedSeconds", "spans")
    PID_FIELD_NUMBER: _ClassVar[int]
    RECEIVEDSECONDS_FIELD_NUMBER: _ClassVar[int]
    COMPUTESTARTSECONDS_FIELD_NUMBER: _ClassVar[int]
    COMPUTEENDSECONDS_FIELD_NUMBER: _ClassVar[int]
    REPLIEDSECONDS_FIELD_NUMBER: _ClassVar[int]
    SPANS_FIELD_NUMBER: _ClassVar[int]
    pid: int
    receivedSeconds: float
    computeStartSeconds: float
    computeEndSeconds: float
    repliedSeconds: float
    spans: _containers.RepeatedCompositeFieldContainer[ProfileSpan]
    def __init__(self, pid: _Optional[int] = ..., receivedSeconds: _Optional[float] = ..., computeStartSeconds: _Optional[float] = ..., computeEndSeconds: _Optional[float] = ..., repliedSeconds: _Optional[float] = ..., spans: _Optional[_Iterable[_Union[ProfileSpan, _Mapping]]] = ...) -> None: ...

class RunReply(_message.Message):
    __slots__ = ("returnCode", "outputDims", "reason", "profile")
    RETURNCODE_FIELD_NUMBER: _ClassVar[int]
    OUTPUTDIMS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    PROFILE_FIELD_NUMBER: _ClassVar[int]
    returnCode: int
    outputDims: _containers.RepeatedCompositeFieldContainer[_hdi_types_pb2.Int32Array]
    reason: str
    profile: RunProfile
    def __init__(self, returnCode: _Optional[int] = ..., outputDims: _Optional[_Iterable[_Union[_hdi_types_pb2.Int32Array, _Mapping]]] = ..., reason: _Optional[str] = ..., profile: _Optional[_Union[RunProfile, _Mapping]] = ...) -> None: ...
