from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class DeviceType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OTHER: _ClassVar[DeviceType]
    CPU: _ClassVar[DeviceType]
    GPU: _ClassVar[DeviceType]
    ACCELERATOR: _ClassVar[DeviceType]

class DeviceStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    AVAILABLE: _ClassVar[DeviceStatus]
    BUSY: _ClassVar[DeviceStatus]
    OFFLINE: _ClassVar[DeviceStatus]
    UNKNOWN: _ClassVar[DeviceStatus]

class PerformanceMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PERFORMANCE_NONE: _ClassVar[PerformanceMode]
    PERFORMANCE_LOW: _ClassVar[PerformanceMode]
    PERFORMANCE_MEDIUM: _ClassVar[PerformanceMode]
    PERFORMANCE_HIGH: _ClassVar[PerformanceMode]
    PERFORMANCE_EXTREME: _ClassVar[PerformanceMode]

class Priority(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PRIORITY_NONE: _ClassVar[Priority]
    PRIORITY_LOW: _ClassVar[Priority]
    PRIORITY_MEDIUM: _ClassVar[Priority]
    PRIORITY_HIGH: _ClassVar[Priority]

class Format(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FORMAT_NCHW: _ClassVar[Format]
    FORMAT_NONE: _ClassVar[Format]
    FORMAT_NHWC: _ClassVar[Format]

class DataType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DATA_TYPE_UNKNOWN: _ClassVar[DataType]
    DATA_TYPE_BOOL: _ClassVar[DataType]
    DATA_TYPE_INT8: _ClassVar[DataType]
    DATA_TYPE_INT16: _ClassVar[DataType]
    DATA_TYPE_INT32: _ClassVar[DataType]
    DATA_TYPE_INT64: _ClassVar[DataType]
    DATA_TYPE_UINT8: _ClassVar[DataType]
    DATA_TYPE_UINT16: _ClassVar[DataType]
    DATA_TYPE_UINT32: _ClassVar[DataType]
    DATA_TYPE_UINT64: _ClassVar[DataType]
    DATA_TYPE_FLOAT16: _ClassVar[DataType]
    DATA_TYPE_FLOAT32: _ClassVar[DataType]
    DATA_TYPE_FLOAT64: _ClassVar[DataType]

class QuantType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    QUANT_TYPE_NONE: _ClassVar[QuantType]
    QUANT_TYPE_ALL: _ClassVar[QuantType]

class ResizeMethod(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RESIZE_METHOD_LINEAR: _ClassVar[ResizeMethod]
    RESIZE_METHOD_UNKNOWN: _ClassVar[ResizeMethod]
    RESIZE_METHOD_NEAREST: _ClassVar[ResizeMethod]
    RESIZE_METHOD_CUBIC: _ClassVar[ResizeMethod]

class CoordinateTransformMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    COORDINATE_TRANSFORM_MODE_ASYMMETRIC: _ClassVar[CoordinateTransformMode]
    COORDINATE_TRANSFORM_MODE_ALIGN_CORNERS: _ClassVar[CoordinateTransformMode]
    COORDINATE_TRANSFORM_MODE_HALF_PIXEL: _ClassVar[CoordinateTransformMode]

class NearestMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NEAREST_MODE_NORMAL: _ClassVar[NearestMode]
    NEAREST_MODE_ROUND_HALF_DOWN: _ClassVar[NearestMode]
    NEAREST_MODE_ROUND_HALF_UP: _ClassVar[NearestMode]
    NEAREST_MODE_FLOOR: _ClassVar[NearestMode]
    NEAREST_MODE_CEIL: _ClassVar[NearestMode]

class ActivationType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ACTIVATION_TYPE_NO_ACTIVATION: _ClassVar[ActivationType]
    ACTIVATION_TYPE_RELU: _ClassVar[ActivationType]
    ACTIVATION_TYPE_SIGMOID: _ClassVar[ActivationType]
    ACTIVATION_TYPE_RELU6: _ClassVar[ActivationType]
    ACTIVATION_TYPE_ELU: _ClassVar[ActivationType]
    ACTIVATION_TYPE_LEAKY_RELU: _ClassVar[ActivationType]
    ACTIVATION_TYPE_ABS: _ClassVar[ActivationType]
    ACTIVATION_TYPE_RELU1: _ClassVar[ActivationType]
    ACTIVATION_TYPE_SOFTSIGN: _ClassVar[ActivationType]
    ACTIVATION_TYPE_SOFTPLUS: _ClassVar[ActivationType]
    ACTIVATION_TYPE_TANH: _ClassVar[ActivationType]
    ACTIVATION_TYPE_SELU: _ClassVar[ActivationType]
    ACTIVATION_TYPE_HSWISH: _ClassVar[ActivationType]
    ACTIVATION_TYPE_HSIGMOID: _ClassVar[ActivationType]
    ACTIVATION_TYPE_THRESHOLDRELU: _ClassVar[ActivationType]
    ACTIVATION_TYPE_LINEAR: _ClassVar[ActivationType]
    ACTIVATION_TYPE_HARD_TANH: _ClassVar[ActivationType]
    ACTIVATION_TYPE_SIGN: _ClassVar[ActivationType]
    ACTIVATION_TYPE_SWISH: _ClassVar[ActivationType]
    ACTIVATION_TYPE_GELU: _ClassVar[ActivationType]
    ACTIVATION_TYPE_UNKNOWN: _ClassVar[ActivationType]

class ReduceMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    REDUCE_MODE_MEAN: _ClassVar[ReduceMode]
    REDUCE_MODE_MAX: _ClassVar[ReduceMode]
    REDUCE_MODE_MIN: _ClassVar[ReduceMode]
    REDUCE_MODE_PROD: _ClassVar[ReduceMode]
    REDUCE_MODE_SUM: _ClassVar[ReduceMode]
    REDUCE_MODE_SUM_SQUARE: _ClassVar[ReduceMode]
    REDUCE_MODE_ASUM: _ClassVar[ReduceMode]
    REDUCE_MODE_ALL: _ClassVar[ReduceMode]
    REDUCE_MODE_L2: _ClassVar[ReduceMode]

class EltwiseMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ELTWISE_MODE_PROD: _ClassVar[EltwiseMode]
    ELTWISE_MODE_SUM: _ClassVar[EltwiseMode]
    ELTWISE_MODE_MAXIMUM: _ClassVar[EltwiseMode]
    ELTWISE_MODE_UNKNOWN: _ClassVar[EltwiseMode]

class PadMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PAD_MODE_PAD: _ClassVar[PadMode]
    PAD_MODE_SAME: _ClassVar[PadMode]
    PAD_MODE_VALID: _ClassVar[PadMode]

class RoundMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ROUND_MODE_FLOOR: _ClassVar[RoundMode]
    ROUND_MODE_CEIL: _ClassVar[RoundMode]

class PaddingMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PADDING_MODE_CONSTANT: _ClassVar[PaddingMode]
    PADDING_MODE_REFLECT: _ClassVar[PaddingMode]
    PADDING_MODE_SYMMETRIC: _ClassVar[PaddingMode]
    PADDING_MODE_RESERVED: _ClassVar[PaddingMode]

class NNRT_ReturnCode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NNRT_SUCCESS: _ClassVar[NNRT_ReturnCode]
    NNRT_FAILED: _ClassVar[NNRT_ReturnCode]
    NNRT_NULL_PTR: _ClassVar[NNRT_ReturnCode]
    NNRT_INVALID_PARAMETER: _ClassVar[NNRT_ReturnCode]
    NNRT_MEMORY_ERROR: _ClassVar[NNRT_ReturnCode]
    NNRT_OUT_OF_MEMORY: _ClassVar[NNRT_ReturnCode]
    NNRT_OPERATION_FORBIDDEN: _ClassVar[NNRT_ReturnCode]
    NNRT_INVALID_FILE: _ClassVar[NNRT_ReturnCode]
    NNRT_INVALID_PATH: _ClassVar[NNRT_ReturnCode]
    NNRT_INSUFFICIENT_BUFFER: _ClassVar[NNRT_ReturnCode]
    NNRT_NO_CHANGE: _ClassVar[NNRT_ReturnCode]
    NNRT_NOT_SUPPORT: _ClassVar[NNRT_ReturnCode]
    NNRT_SERVICE_ERROR: _ClassVar[NNRT_ReturnCode]
    NNRT_DEVICE_ERROR: _ClassVar[NNRT_ReturnCode]
    NNRT_DEVICE_BUSY: _ClassVar[NNRT_ReturnCode]
    NNRT_CANCELLED: _ClassVar[NNRT_ReturnCode]
    NNRT_PERMISSION_DENIED: _ClassVar[NNRT_ReturnCode]
    NNRT_TIME_OUT: _ClassVar[NNRT_ReturnCode]
    NNRT_INVALID_TENSOR: _ClassVar[NNRT_ReturnCode]
    NNRT_INVALID_NODE: _ClassVar[NNRT_ReturnCode]
    NNRT_INVALID_INPUT: _ClassVar[NNRT_ReturnCode]
    NNRT_INVALID_OUTPUT: _ClassVar[NNRT_ReturnCode]
    NNRT_INVALID_DATATYPE: _ClassVar[NNRT_ReturnCode]
    NNRT_INVALID_FORMAT: _ClassVar[NNRT_ReturnCode]
    NNRT_INVALID_TENSOR_NAME: _ClassVar[NNRT_ReturnCode]
    NNRT_INVALID_SHAPE: _ClassVar[NNRT_ReturnCode]
    NNRT_OUT_OF_DIMENTION_RANGES: _ClassVar[NNRT_ReturnCode]
    NNRT_INVALID_BUFFER: _ClassVar[NNRT_ReturnCode]
    NNRT_INVALID_BUFFER_SIZE: _ClassVar[NNRT_ReturnCode]
    NNRT_INVALID_PERFORMANCE_MODE: _ClassVar[NNRT_ReturnCode]
    NNRT_INVALID_PRIORITY: _ClassVar[NNRT_ReturnCode]
    NNRT_INVALID_MODEL: _ClassVar[NNRT_ReturnCode]
    NNRT_INVALID_MODEL_CACHE: _ClassVar[NNRT_ReturnCode]
    NNRT_UNSUPPORTED_OP: _ClassVar[NNRT_ReturnCode]
OTHER: DeviceType
CPU: DeviceType
GPU: DeviceType
ACCELERATOR: DeviceType
AVAILABLE: DeviceStatus
BUSY: DeviceStatus
OFFLINE: DeviceStatus
UNKNOWN: DeviceStatus
PERFORMANCE_NONE: PerformanceMode
PERFORMANCE_LOW: PerformanceMode
PERFORMANCE_MEDIUM: PerformanceMode
PERFORMANCE_HIGH: PerformanceMode
PERFORMANCE_EXTREME: PerformanceMode
PRIORITY_NONE: Priority
PRIORITY_LOW: Priority
PRIORITY_MEDIUM: Priority
PRIORITY_HIGH: Priority
FORMAT_NCHW: Format
FORMAT_NONE: Format
FORMAT_NHWC: Format
DATA_TYPE_UNKNOWN: DataType
DATA_TYPE_BOOL: DataType
DATA_TYPE_INT8: DataType
DATA_TYPE_INT16: DataType
DATA_TYPE_INT32: DataType
DATA_TYPE_INT64: DataType
DATA_TYPE_UINT8: DataType
DATA_TYPE_UINT16: DataType
DATA_TYPE_UINT32: DataType
DATA_TYPE_UINT64: DataType
DATA_TYPE_FLOAT16: DataType
DATA_TYPE_FLOAT32: DataType
DATA_TYPE_FLOAT64: DataType
QUANT_TYPE_NONE: QuantType
QUANT_TYPE_ALL: QuantType
RESIZE_METHOD_LINEAR: ResizeMethod
RESIZE_METHOD_UNKNOWN: ResizeMethod
RESIZE_METHOD_NEAREST: ResizeMethod
RESIZE_METHOD_CUBIC: ResizeMethod
COORDINATE_TRANSFORM_MODE_ASYMMETRIC: CoordinateTransformMode
COORDINATE_TRANSFORM_MODE_ALIGN_CORNERS: CoordinateTransformMode
COORDINATE_TRANSFORM_MODE_HALF_PIXEL: CoordinateTransformMode
NEAREST_MODE_NORMAL: NearestMode
NEAREST_MODE_ROUND_HALF_DOWN: NearestMode
NEAREST_MODE_ROUND_HALF_UP: NearestMode
NEAREST_MODE_FLOOR: NearestMode
NEAREST_MODE_CEIL: NearestMode
ACTIVATION_TYPE_NO_ACTIVATION: ActivationType
ACTIVATION_TYPE_RELU: ActivationType
ACTIVATION_TYPE_SIGMOID: ActivationType
ACTIVATION_TYPE_RELU6: ActivationType
ACTIVATION_TYPE_ELU: ActivationType
ACTIVATION_TYPE_LEAKY_RELU: ActivationType
ACTIVATION_TYPE_ABS: ActivationType
ACTIVATION_TYPE_RELU1: ActivationType
ACTIVATION_TYPE_SOFTSIGN: ActivationType
ACTIVATION_TYPE_SOFTPLUS: ActivationType
ACTIVATION_TYPE_TANH: ActivationType
ACTIVATION_TYPE_SELU: ActivationType
ACTIVATION_TYPE_HSWISH: ActivationType
ACTIVATION_TYPE_HSIGMOID: ActivationType
ACTIVATION_TYPE_THRESHOLDRELU: ActivationType
ACTIVATION_TYPE_LINEAR: ActivationType
ACTIVATION_TYPE_HARD_TANH: ActivationType
ACTIVATION_TYPE_SIGN: ActivationType
ACTIVATION_TYPE_SWISH: ActivationType
ACTIVATION_TYPE_GELU: ActivationType
ACTIVATION_TYPE_UNKNOWN: ActivationType
REDUCE_MODE_MEAN: ReduceMode
REDUCE_MODE_MAX: ReduceMode
REDUCE_MODE_MIN: ReduceMode
REDUCE_MODE_PROD: ReduceMode
REDUCE_MODE_SUM: ReduceMode
REDUCE_MODE_SUM_SQUARE: ReduceMode
REDUCE_MODE_ASUM: ReduceMode
REDUCE_MODE_ALL: ReduceMode
REDUCE_MODE_L2: ReduceMode
ELTWISE_MODE_PROD: EltwiseMode
ELTWISE_MODE_SUM: EltwiseMode
ELTWISE_MODE_MAXIMUM: EltwiseMode
ELTWISE_MODE_UNKNOWN: EltwiseMode
PAD_MODE_PAD: PadMode
PAD_MODE_SAME: PadMode
PAD_MODE_VALID: PadMode
ROUND_MODE_FLOOR: RoundMode
ROUND_MODE_CEIL: RoundMode
PADDING_MODE_CONSTANT: PaddingMode
PADDING_MODE_REFLECT: PaddingMode
PADDING_MODE_SYMMETRIC: PaddingMode
PADDING_MODE_RESERVED: PaddingMode
NNRT_SUCCESS: NNRT_ReturnCode
NNRT_FAILED: NNRT_ReturnCode
NNRT_NULL_PTR: NNRT_ReturnCode
NNRT_INVALID_PARAMETER: NNRT_ReturnCode
NNRT_MEMORY_ERROR: NNRT_ReturnCode
NNRT_OUT_OF_MEMORY: NNRT_ReturnCode
NNRT_OPERATION_FORBIDDEN: NNRT_ReturnCode
NNRT_INVALID_FILE: NNRT_ReturnCode
NNRT_INVALID_PATH: NNRT_ReturnCode
NNRT_INSUFFICIENT_BUFFER: NNRT_ReturnCode
NNRT_NO_CHANGE: NNRT_ReturnCode
NNRT_NOT_SUPPORT: NNRT_ReturnCode
NNRT_SERVICE_ERROR: NNRT_ReturnCode
NNRT_DEVICE_ERROR: NNRT_ReturnCode
NNRT_DEVICE_BUSY: NNRT_ReturnCode
NNRT_CANCELLED: NNRT_ReturnCode
NNRT_PERMISSION_DENIED: NNRT_ReturnCode
NNRT_TIME_OUT: NNRT_ReturnCode
NNRT_INVALID_TENSOR: NNRT_ReturnCode
NNRT_INVALID_NODE: NNRT_ReturnCode
NNRT_INVALID_INPUT: NNRT_ReturnCode
NNRT_INVALID_OUTPUT: NNRT_ReturnCode
NNRT_INVALID_DATATYPE: NNRT_ReturnCode
NNRT_INVALID_FORMAT: NNRT_ReturnCode
NNRT_INVALID_TENSOR_NAME: NNRT_ReturnCode
NNRT_INVALID_SHAPE: NNRT_ReturnCode
NNRT_OUT_OF_DIMENTION_RANGES: NNRT_ReturnCode
NNRT_INVALID_BUFFER: NNRT_ReturnCode
NNRT_INVALID_BUFFER_SIZE: NNRT_ReturnCode
NNRT_INVALID_PERFORMANCE_MODE: NNRT_ReturnCode
NNRT_INVALID_PRIORITY: NNRT_ReturnCode
NNRT_INVALID_MODEL: NNRT_ReturnCode
NNRT_INVALID_MODEL_CACHE: NNRT_ReturnCode
NNRT_UNSUPPORTED_OP: NNRT_ReturnCode

class SharedBuffer(_message.Message):
    __slots__ = ("bufferId", "bufferSize", "offset", "dataSize")
    BUFFERID_FIELD_NUMBER: _ClassVar[int]
    BUFFERSIZE_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    DATASIZE_FIELD_NUMBER: _ClassVar[int]
    bufferId: int
    bufferSize: int
    offset: int
    dataSize: int
    def __init__(self, bufferId: _Optional[int] = ..., bufferSize: _Optional[int] = ..., offset: _Optional[int] = ..., dataSize: _Optional[int] = ...) -> None: ...

class QuantParam(_message.Message):
    __slots__ = ("numBits", "zeroPoint", "scale")
    NUMBITS_FIELD_NUMBER: _ClassVar[int]
    ZEROPOINT_FIELD_NUMBER: _ClassVar[int]
    SCALE_FIELD_NUMBER: _ClassVar[int]
    numBits: int
    zeroPoint: int
    scale: float
    def __init__(self, numBits: _Optional[int] = ..., zeroPoint: _Optional[int] = ..., scale: _Optional[float] = ...) -> None: ...

class Tensor(_message.Message):
    __slots__ = ("name", "dataType", "dims", "format", "data", "quantParams")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DATATYPE_FIELD_NUMBER: _ClassVar[int]
    DIMS_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    QUANTPARAMS_FIELD_NUMBER: _ClassVar[int]
    name: str
    dataType: DataType
    dims: _containers.RepeatedScalarFieldContainer[int]
    format: Format
    data: SharedBuffer
    quantParams: _containers.RepeatedCompositeFieldContainer[QuantParam]
    def __init__(self, name: _Optional[str] = ..., dataType: _Optional[_Union[DataType, str]] = ..., dims: _Optional[_Iterable[int]] = ..., format: _Optional[_Union[Format, str]] = ..., data: _Optional[_Union[SharedBuffer, _Mapping]] = ..., quantParams: _Optional[_Iterable[_Union[QuantParam, _Mapping]]] = ...) -> None: ...

class ModelConfig(_message.Message):
    __slots__ = ("enableFloat16", "mode", "priority", "extensions")
    class ExtensionsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: bytes
        def __init__(self, key: _Optional[str] = ..., value: _Optional[bytes] = ...) -> None: ...
    ENABLEFLOAT16_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    EXTENSIONS_FIELD_NUMBER: _ClassVar[int]
    enableFloat16: bool
    mode: PerformanceMode
    priority: Priority
    extensions: _containers.ScalarMap[str, bytes]
    def __init__(self, enableFloat16: _Optional[bool] = ..., mode: _Optional[_Union[PerformanceMode, str]] = ..., priority: _Optional[_Union[Priority, str]] = ..., extensions: _Optional[_Mapping[str, bytes]] = ...) -> None: ...

class IOTensor(_message.Message):
    __slots__ = ("name", "dataType", "dimensions", "format", "data")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DATATYPE_FIELD_NUMBER: _ClassVar[int]
    DIMENSIONS_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    name: str
    dataType: DataType
    dimensions: _containers.RepeatedScalarFieldContainer[int]
    format: Format
    data: SharedBuffer
    def __init__(self, name: _Optional[str] = ..., dataType: _Optional[_Union[DataType, str]] = ..., dimensions: _Optional[_Iterable[int]] = ..., format: _Optional[_Union[Format, str]] = ..., data: _Optional[_Union[SharedBuffer, _Mapping]] = ...) -> None: ...

class Int64Array(_message.Message):
    __slots__ = ("values",)
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, values: _Optional[_Iterable[int]] = ...) -> None: ...

class Int32Array(_message.Message):
    __slots__ = ("values",)
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, values: _Optional[_Iterable[int]] = ...) -> None: ...

class UInt32Array(_message.Message):
    __slots__ = ("values",)
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, values: _Optional[_Iterable[int]] = ...) -> None: ...
