from nnrt.protos import hdi_types_pb2 as _hdi_types_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class NodeType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NODE_TYPE_NONE: _ClassVar[NodeType]
    NODE_TYPE_ABS: _ClassVar[NodeType]
    NODE_TYPE_ACTIVATION: _ClassVar[NodeType]
    NODE_TYPE_ADD_FUSION: _ClassVar[NodeType]
    NODE_TYPE_ALL: _ClassVar[NodeType]
    NODE_TYPE_ARGMAX_FUSION: _ClassVar[NodeType]
    NODE_TYPE_ASSERT: _ClassVar[NodeType]
    NODE_TYPE_AVGPOOL_FUSION: _ClassVar[NodeType]
    NODE_TYPE_BATCH_TO_SPACE_ND: _ClassVar[NodeType]
    NODE_TYPE_BIAS_ADD: _ClassVar[NodeType]
    NODE_TYPE_BROADCAST_TO: _ClassVar[NodeType]
    NODE_TYPE_CAST: _ClassVar[NodeType]
    NODE_TYPE_CEIL: _ClassVar[NodeType]
    NODE_TYPE_CLIP: _ClassVar[NodeType]
    NODE_TYPE_CONCAT: _ClassVar[NodeType]
    NODE_TYPE_CONV2D_FUSION: _ClassVar[NodeType]
    NODE_TYPE_CONV2D_TRANSPOSE_FUSION: _ClassVar[NodeType]
    NODE_TYPE_COS: _ClassVar[NodeType]
    NODE_TYPE_CONSTANT_OF_SHAPE: _ClassVar[NodeType]
    NODE_TYPE_CROP: _ClassVar[NodeType]
    NODE_TYPE_DEPTH_TO_SPACE: _ClassVar[NodeType]
    NODE_TYPE_DETECTION_POST_PROCESS: _ClassVar[NodeType]
    NODE_TYPE_DIV_FUSION: _ClassVar[NodeType]
    NODE_TYPE_ELTWISE: _ClassVar[NodeType]
    NODE_TYPE_EQUAL: _ClassVar[NodeType]
    NODE_TYPE_EXPFUSION: _ClassVar[NodeType]
    NODE_TYPE_EXPAND_DIMS: _ClassVar[NodeType]
    NODE_TYPE_FLATTEN: _ClassVar[NodeType]
    NODE_TYPE_FLOOR: _ClassVar[NodeType]
    NODE_TYPE_FILL: _ClassVar[NodeType]
    NODE_TYPE_FULL_CONNECTION: _ClassVar[NodeType]
    NODE_TYPE_FUSED_BATCH_NORM: _ClassVar[NodeType]
    NODE_TYPE_GATHER: _ClassVar[NodeType]
    NODE_TYPE_GATHER_ND: _ClassVar[NodeType]
    NODE_TYPE_GREATER: _ClassVar[NodeType]
    NODE_TYPE_GREATER_EQUAL: _ClassVar[NodeType]
    NODE_TYPE_INSTANCE_NORM: _ClassVar[NodeType]
    NODE_TYPE_LAYER_NORM_FUSION: _ClassVar[NodeType]
    NODE_TYPE_LEAKY_RELU: _ClassVar[NodeType]
    NODE_TYPE_LESS: _ClassVar[NodeType]
    NODE_TYPE_LESS_EQUAL: _ClassVar[NodeType]
    NODE_TYPE_LOG: _ClassVar[NodeType]
    NODE_TYPE_LOGICAL_AND: _ClassVar[NodeType]
    NODE_TYPE_LOGICAL_NOT: _ClassVar[NodeType]
    NODE_TYPE_LOGICAL_OR: _ClassVar[NodeType]
    NODE_TYPE_LRN: _ClassVar[NodeType]
    NODE_TYPE_LSTM: _ClassVar[NodeType]
    NODE_TYPE_L2_NORMALIZE_FUSION: _ClassVar[NodeType]
    NODE_TYPE_MATMUL_FUSION: _ClassVar[NodeType]
    NODE_TYPE_MAXIMUM: _ClassVar[NodeType]
    NODE_TYPE_MAX_POOL_FUSION: _ClassVar[NodeType]
    NODE_TYPE_MINIMUM: _ClassVar[NodeType]
    NODE_TYPE_MOD: _ClassVar[NodeType]
    NODE_TYPE_MUL_FUSION: _ClassVar[NodeType]
    NODE_TYPE_NEG: _ClassVar[NodeType]
    NODE_TYPE_NOT_EQUAL: _ClassVar[NodeType]
    NODE_TYPE_ONE_HOT: _ClassVar[NodeType]
    NODE_TYPE_PAD_FUSION: _ClassVar[NodeType]
    NODE_TYPE_POW_FUSION: _ClassVar[NodeType]
    NODE_TYPE_PRELU_FUSION: _ClassVar[NodeType]
    NODE_TYPE_QUANT_DTYPE_CAST: _ClassVar[NodeType]
    NODE_TYPE_RANK: _ClassVar[NodeType]
    NODE_TYPE_RANGE: _ClassVar[NodeType]
    NODE_TYPE_RECIPROCAL: _ClassVar[NodeType]
    NODE_TYPE_REAL_DIV: _ClassVar[NodeType]
    NODE_TYPE_REDUCE_FUSION: _ClassVar[NodeType]
    NODE_TYPE_RESHAPE: _ClassVar[NodeType]
    NODE_TYPE_RESIZE: _ClassVar[NodeType]
    NODE_TYPE_ROUND: _ClassVar[NodeType]
    NODE_TYPE_RSQRT: _ClassVar[NodeType]
    NODE_TYPE_SCALE_FUSION: _ClassVar[NodeType]
    NODE_TYPE_SCATTER_ND: _ClassVar[NodeType]
    NODE_TYPE_SHAPE: _ClassVar[NodeType]
    NODE_TYPE_SIN: _ClassVar[NodeType]
    NODE_TYPE_SLICE_FUSION: _ClassVar[NodeType]
    NODE_TYPE_SOFTMAX: _ClassVar[NodeType]
    NODE_TYPE_SPACE_TO_BATCH_ND: _ClassVar[NodeType]
    NODE_TYPE_SPACE_TO_DEPTH: _ClassVar[NodeType]
    NODE_TYPE_SPARSE_TO_DENSE: _ClassVar[NodeType]
    NODE_TYPE_SPLIT: _ClassVar[NodeType]
    NODE_TYPE_SQRT: _ClassVar[NodeType]
    NODE_TYPE_SQUEEZE: _ClassVar[NodeType]
    NODE_TYPE_SQUARE: _ClassVar[NodeType]
    NODE_TYPE_SQUARED_DIFFERENCE: _ClassVar[NodeType]
    NODE_TYPE_STACK: _ClassVar[NodeType]
    NODE_TYPE_STRIDED_SLICE: _ClassVar[NodeType]
    NODE_TYPE_SUB_FUSION: _ClassVar[NodeType]
    NODE_TYPE_TILE_FUSION: _ClassVar[NodeType]
    NODE_TYPE_TOPK_FUSION: _ClassVar[NodeType]
    NODE_TYPE_TRANSPOSE: _ClassVar[NodeType]
    NODE_TYPE_UNSQUEEZE: _ClassVar[NodeType]
    NODE_TYPE_UNSTACK: _ClassVar[NodeType]
    NODE_TYPE_WHERE: _ClassVar[NodeType]
    NODE_TYPE_SELECT: _ClassVar[NodeType]
    NODE_TYPE_ERF: _ClassVar[NodeType]
    NODE_TYPE_LOG_SOFTMAX: _ClassVar[NodeType]
    NODE_TYPE_QUANT_DTYPE_CAST_V2: _ClassVar[NodeType]
NODE_TYPE_NONE: NodeType
NODE_TYPE_ABS: NodeType
NODE_TYPE_ACTIVATION: NodeType
NODE_TYPE_ADD_FUSION: NodeType
NODE_TYPE_ALL: NodeType
NODE_TYPE_ARGMAX_FUSION: NodeType
NODE_TYPE_ASSERT: NodeType
NODE_TYPE_AVGPOOL_FUSION: NodeType
NODE_TYPE_BATCH_TO_SPACE_ND: NodeType
NODE_TYPE_BIAS_ADD: NodeType
NODE_TYPE_BROADCAST_TO: NodeType
NODE_TYPE_CAST: NodeType
NODE_TYPE_CEIL: NodeType
NODE_TYPE_CLIP: NodeType
NODE_TYPE_CONCAT: NodeType
NODE_TYPE_CONV2D_FUSION: NodeType
NODE_TYPE_CONV2D_TRANSPOSE_FUSION: NodeType
NODE_TYPE_COS: NodeType
NODE_TYPE_CONSTANT_OF_SHAPE: NodeType
NODE_TYPE_CROP: NodeType
NODE_TYPE_DEPTH_TO_SPACE: NodeType
NODE_TYPE_DETECTION_POST_PROCESS: NodeType
NODE_TYPE_DIV_FUSION: NodeType
NODE_TYPE_ELTWISE: NodeType
NODE_TYPE_EQUAL: NodeType
NODE_TYPE_EXPFUSION: NodeType
NODE_TYPE_EXPAND_DIMS: NodeType
NODE_TYPE_FLATTEN: NodeType
NODE_TYPE_FLOOR: NodeType
NODE_TYPE_FILL: NodeType
NODE_TYPE_FULL_CONNECTION: NodeType
NODE_TYPE_FUSED_BATCH_NORM: NodeType
NODE_TYPE_GATHER: NodeType
NODE_TYPE_GATHER_ND: NodeType
NODE_TYPE_GREATER: NodeType
NODE_TYPE_GREATER_EQUAL: NodeType
NODE_TYPE_INSTANCE_NORM: NodeType
NODE_TYPE_LAYER_NORM_FUSION: NodeType
NODE_TYPE_LEAKY_RELU: NodeType
NODE_TYPE_LESS: NodeType
NODE_TYPE_LESS_EQUAL: NodeType
NODE_TYPE_LOG: NodeType
NODE_TYPE_LOGICAL_AND: NodeType
NODE_TYPE_LOGICAL_NOT: NodeType
NODE_TYPE_LOGICAL_OR: NodeType
NODE_TYPE_LRN: NodeType
NODE_TYPE_LSTM: NodeType
NODE_TYPE_L2_NORMALIZE_FUSION: NodeType
NODE_TYPE_MATMUL_FUSION: NodeType
NODE_TYPE_MAXIMUM: NodeType
NODE_TYPE_MAX_POOL_FUSION: NodeType
NODE_TYPE_MINIMUM: NodeType
NODE_TYPE_MOD: NodeType
NODE_TYPE_MUL_FUSION: NodeType
NODE_TYPE_NEG: NodeType
NODE_TYPE_NOT_EQUAL: NodeType
NODE_TYPE_ONE_HOT: NodeType
NODE_TYPE_PAD_FUSION: NodeType
NODE_TYPE_POW_FUSION: NodeType
NODE_TYPE_PRELU_FUSION: NodeType
NODE_TYPE_QUANT_DTYPE_CAST: NodeType
NODE_TYPE_RANK: NodeType
NODE_TYPE_RANGE: NodeType
NODE_TYPE_RECIPROCAL: NodeType
NODE_TYPE_REAL_DIV: NodeType
NODE_TYPE_REDUCE_FUSION: NodeType
NODE_TYPE_RESHAPE: NodeType
NODE_TYPE_RESIZE: NodeType
NODE_TYPE_ROUND: NodeType
NODE_TYPE_RSQRT: NodeType
NODE_TYPE_SCALE_FUSION: NodeType
NODE_TYPE_SCATTER_ND: NodeType
NODE_TYPE_SHAPE: NodeType
NODE_TYPE_SIN: NodeType
NODE_TYPE_SLICE_FUSION: NodeType
NODE_TYPE_SOFTMAX: NodeType
NODE_TYPE_SPACE_TO_BATCH_ND: NodeType
NODE_TYPE_SPACE_TO_DEPTH: NodeType
NODE_TYPE_SPARSE_TO_DENSE: NodeType
NODE_TYPE_SPLIT: NodeType
NODE_TYPE_SQRT: NodeType
NODE_TYPE_SQUEEZE: NodeType
NODE_TYPE_SQUARE: NodeType
NODE_TYPE_SQUARED_DIFFERENCE: NodeType
NODE_TYPE_STACK: NodeType
NODE_TYPE_STRIDED_SLICE: NodeType
NODE_TYPE_SUB_FUSION: NodeType
NODE_TYPE_TILE_FUSION: NodeType
NODE_TYPE_TOPK_FUSION: NodeType
NODE_TYPE_TRANSPOSE: NodeType
NODE_TYPE_UNSQUEEZE: NodeType
NODE_TYPE_UNSTACK: NodeType
NODE_TYPE_WHERE: NodeType
NODE_TYPE_SELECT: NodeType
NODE_TYPE_ERF: NodeType
NODE_TYPE_LOG_SOFTMAX: NodeType
NODE_TYPE_QUANT_DTYPE_CAST_V2: NodeType

class Abs(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Activation(_message.Message):
    __slots__ = ("activationType", "alpha", "minVal", "maxVal", "approximate")
    ACTIVATIONTYPE_FIELD_NUMBER: _ClassVar[int]
    ALPHA_FIELD_NUMBER: _ClassVar[int]
    MINVAL_FIELD_NUMBER: _ClassVar[int]
    MAXVAL_FIELD_NUMBER: _ClassVar[int]
    APPROXIMATE_FIELD_NUMBER: _ClassVar[int]
    activationType: _hdi_types_pb2.ActivationType
    alpha: float
    minVal: float
    maxVal: float
    approximate: bool
    def __init__(self, activationType: _Optional[_Union[_hdi_types_pb2.ActivationType, str]] = ..., alpha: _Optional[float] = ..., minVal: _Optional[float] = ..., maxVal: _Optional[float] = ..., approximate: _Optional[bool] = ...) -> None: ...

class AddFusion(_message.Message):
    __slots__ = ("activationType",)
    ACTIVATIONTYPE_FIELD_NUMBER: _ClassVar[int]
    activationType: _hdi_types_pb2.ActivationType
    def __init__(self, activationType: _Optional[_Union[_hdi_types_pb2.ActivationType, str]] = ...) -> None: ...

class All(_message.Message):
    __slots__ = ("keepDims",)
    KEEPDIMS_FIELD_NUMBER: _ClassVar[int]
    keepDims: int
    def __init__(self, keepDims: _Optional[int] = ...) -> None: ...

class ArgMaxFusion(_message.Message):
    __slots__ = ("axis", "topK", "keepDims", "outMaxValue")
    AXIS_FIELD_NUMBER: _ClassVar[int]
    TOPK_FIELD_NUMBER: _ClassVar[int]
    KEEPDIMS_FIELD_NUMBER: _ClassVar[int]
    OUTMAXVALUE_FIELD_NUMBER: _ClassVar[int]
    axis: int
    topK: int
    keepDims: bool
    outMaxValue: bool
    def __init__(self, axis: _Optional[int] = ..., topK: _Optional[int] = ..., keepDims: _Optional[bool] = ..., outMaxValue: _Optional[bool] = ...) -> None: ...

class Assert(_message.Message):
    __slots__ = ("summarize",)
    SUMMARIZE_FIELD_NUMBER: _ClassVar[int]
    summarize: int
    def __init__(self, summarize: _Optional[int] = ...) -> None: ...

class AvgPoolFusion(_message.Message):
    __slots__ = ("kernelSize", "strides", "pad", "padMode", "roundMode", "format", "activationType")
    KERNELSIZE_FIELD_NUMBER: _ClassVar[int]
    STRIDES_FIELD_NUMBER: _ClassVar[int]
    PAD_FIELD_NUMBER: _ClassVar[int]
    PADMODE_FIELD_NUMBER: _ClassVar[int]
    ROUNDMODE_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    GLOBAL_FIELD_NUMBER: _ClassVar[int]
    ACTIVATIONTYPE_FIELD_NUMBER: _ClassVar[int]
    kernelSize: _containers.RepeatedScalarFieldContainer[int]
    strides: _containers.RepeatedScalarFieldContainer[int]
    pad: _containers.RepeatedScalarFieldContainer[int]
    padMode: _hdi_types_pb2.PadMode
    roundMode: _hdi_types_pb2.RoundMode
    format: _hdi_types_pb2.Format
    activationType: _hdi_types_pb2.ActivationType
    def __init__(self, kernelSize: _Optional[_Iterable[int]] = ..., strides: _Optional[_Iterable[int]] = ..., pad: _Optional[_Iterable[int]] = ..., padMode: _Optional[_Union[_hdi_types_pb2.PadMode, str]] = ..., roundMode: _Optional[_Union[_hdi_types_pb2.RoundMode, str]] = ..., format: _Optional[_Union[_hdi_types_pb2.Format, str]] = ..., activationType: _Optional[_Union[_hdi_types_pb2.ActivationType, str]] = ..., **kwargs) -> None: ...

class BatchToSpaceND(_message.Message):
    __slots__ = ("blockShape", "crops")
    BLOCKSHAPE_FIELD_NUMBER: _ClassVar[int]
    CROPS_FIELD_NUMBER: _ClassVar[int]
    blockShape: _containers.RepeatedScalarFieldContainer[int]
    crops: _containers.RepeatedCompositeFieldContainer[_hdi_types_pb2.Int64Array]
    def __init__(self, blockShape: _Optional[_Iterable[int]] = ..., crops: _Optional[_Iterable[_Union[_hdi_types_pb2.Int64Array, _Mapping]]] = ...) -> None: ...

class BiasAdd(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class BroadcastTo(_message.Message):
    __slots__ = ("shape",)
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    shape: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, shape: _Optional[_Iterable[int]] = ...) -> None: ...

class Cast(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Ceil(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Clip(_message.Message):
    __slots__ = ("max", "min")
    MAX_FIELD_NUMBER: _ClassVar[int]
    MIN_FIELD_NUMBER: _ClassVar[int]
    max: float
    min: float
    def __init__(self, max: _Optional[float] = ..., min: _Optional[float] = ...) -> None: ...

class Concat(_message.Message):
    __slots__ = ("axis",)
    AXIS_FIELD_NUMBER: _ClassVar[int]
    axis: int
    def __init__(self, axis: _Optional[int] = ...) -> None: ...

class Conv2DFusion(_message.Message):
    __slots__ = ("kernelSize", "stride", "dilation", "padMode", "padList", "group", "inChannel", "outChannel", "activationType")
    KERNELSIZE_FIELD_NUMBER: _ClassVar[int]
    STRIDE_FIELD_NUMBER: _ClassVar[int]
    DILATION_FIELD_NUMBER: _ClassVar[int]
    PADMODE_FIELD_NUMBER: _ClassVar[int]
    PADLIST_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    INCHANNEL_FIELD_NUMBER: _ClassVar[int]
    OUTCHANNEL_FIELD_NUMBER: _ClassVar[int]
    ACTIVATIONTYPE_FIELD_NUMBER: _ClassVar[int]
    kernelSize: _containers.RepeatedScalarFieldContainer[int]
    stride: _containers.RepeatedScalarFieldContainer[int]
    dilation: _containers.RepeatedScalarFieldContainer[int]
    padMode: _hdi_types_pb2.PadMode
    padList: _containers.RepeatedScalarFieldContainer[int]
    group: int
    inChannel: int
    outChannel: int
    activationType: _hdi_types_pb2.ActivationType
    def __init__(self, kernelSize: _Optional[_Iterable[int]] = ..., stride: _Optional[_Iterable[int]] = ..., dilation: _Optional[_Iterable[int]] = ..., padMode: _Optional[_Union[_hdi_types_pb2.PadMode, str]] = ..., padList: _Optional[_Iterable[int]] = ..., group: _Optional[int] = ..., inChannel: _Optional[int] = ..., outChannel: _Optional[int] = ..., activationType: _Optional[_Union[_hdi_types_pb2.ActivationType, str]] = ...) -> None: ...

class Conv2dTransposeFusion(_message.Message):
    __slots__ = ("kernelSize", "stride", "dilation", "padMode", "padList", "group", "inChannel", "outChannel", "activationType", "outputPaddings")
    KERNELSIZE_FIELD_NUMBER: _ClassVar[int]
    STRIDE_FIELD_NUMBER: _ClassVar[int]
    DILATION_FIELD_NUMBER: _ClassVar[int]
    PADMODE_FIELD_NUMBER: _ClassVar[int]
    PADLIST_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    INCHANNEL_FIELD_NUMBER: _ClassVar[int]
    OUTCHANNEL_FIELD_NUMBER: _ClassVar[int]
    ACTIVATIONTYPE_FIELD_NUMBER: _ClassVar[int]
    OUTPUTPADDINGS_FIELD_NUMBER: _ClassVar[int]
    kernelSize: _containers.RepeatedScalarFieldContainer[int]
    stride: _containers.RepeatedScalarFieldContainer[int]
    dilation: _containers.RepeatedScalarFieldContainer[int]
    padMode: _hdi_types_pb2.PadMode
    padList: _containers.RepeatedScalarFieldContainer[int]
    group: int
    inChannel: int
    outChannel: int
    activationType: _hdi_types_pb2.ActivationType
    outputPaddings: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, kernelSize: _Optional[_Iterable[int]] = ..., stride: _Optional[_Iterable[int]] = ..., dilation: _Optional[_Iterable[int]] = ..., padMode: _Optional[_Union[_hdi_types_pb2.PadMode, str]] = ..., padList: _Optional[_Iterable[int]] = ..., group: _Optional[int] = ..., inChannel: _Optional[int] = ..., outChannel: _Optional[int] = ..., activationType: _Optional[_Union[_hdi_types_pb2.ActivationType, str]] = ..., outputPaddings: _Optional[_Iterable[int]] = ...) -> None: ...

class Cos(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ConstantOfShape(_message.Message):
    __slots__ = ("dataType", "value")
    DATATYPE_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    dataType: int
    value: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, dataType: _Optional[int] = ..., value: _Optional[_Iterable[float]] = ...) -> None: ...

class Crop(_message.Message):
    __slots__ = ("axis", "offset")
    AXIS_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    axis: int
    offset: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, axis: _Optional[int] = ..., offset: _Optional[_Iterable[int]] = ...) -> None: ...

class DepthToSpace(_message.Message):
    __slots__ = ("blockSize", "format", "mode")
    BLOCKSIZE_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    blockSize: int
    format: _hdi_types_pb2.Format
    mode: str
    def __init__(self, blockSize: _Optional[int] = ..., format: _Optional[_Union[_hdi_types_pb2.Format, str]] = ..., mode: _Optional[str] = ...) -> None: ...

class DetectionPostProcess(_message.Message):
    __slots__ = ("format", "inputSize", "scale", "nmsIoUThreshold", "nmsScoreThreshold", "maxDetections", "detectionsPerClass", "maxClassesPerDetection", "numClasses", "useRegularNms", "outQuantized")
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    INPUTSIZE_FIELD_NUMBER: _ClassVar[int]
    SCALE_FIELD_NUMBER: _ClassVar[int]
    NMSIOUTHRESHOLD_FIELD_NUMBER: _ClassVar[int]
    NMSSCORETHRESHOLD_FIELD_NUMBER: _ClassVar[int]
    MAXDETECTIONS_FIELD_NUMBER: _ClassVar[int]
    DETECTIONSPERCLASS_FIELD_NUMBER: _ClassVar[int]
    MAXCLASSESPERDETECTION_FIELD_NUMBER: _ClassVar[int]
    NUMCLASSES_FIELD_NUMBER: _ClassVar[int]
    USEREGULARNMS_FIELD_NUMBER: _ClassVar[int]
    OUTQUANTIZED_FIELD_NUMBER: _ClassVar[int]
    format: _hdi_types_pb2.Format
    inputSize: int
    scale: _containers.RepeatedScalarFieldContainer[float]
    nmsIoUThreshold: float
    nmsScoreThreshold: float
    maxDetections: int
    detectionsPerClass: int
    maxClassesPerDetection: int
    numClasses: int
    useRegularNms: bool
    outQuantized: bool
    def __init__(self, format: _Optional[_Union[_hdi_types_pb2.Format, str]] = ..., inputSize: _Optional[int] = ..., scale: _Optional[_Iterable[float]] = ..., nmsIoUThreshold: _Optional[float] = ..., nmsScoreThreshold: _Optional[float] = ..., maxDetections: _Optional[int] = ..., detectionsPerClass: _Optional[int] = ..., maxClassesPerDetection: _Optional[int] = ..., numClasses: _Optional[int] = ..., useRegularNms: _Optional[bool] = ..., outQuantized: _Optional[bool] = ...) -> None: ...

class DivFusion(_message.Message):
    __slots__ = ("activationType",)
    ACTIVATIONTYPE_FIELD_NUMBER: _ClassVar[int]
    activationType: _hdi_types_pb2.ActivationType
    def __init__(self, activationType: _Optional[_Union[_hdi_types_pb2.ActivationType, str]] = ...) -> None: ...

class Eltwise(_message.Message):
    __slots__ = ("mode",)
    MODE_FIELD_NUMBER: _ClassVar[int]
    mode: _hdi_types_pb2.EltwiseMode
    def __init__(self, mode: _Optional[_Union[_hdi_types_pb2.EltwiseMode, str]] = ...) -> None: ...

class Equal(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ExpFusion(_message.Message):
    __slots__ = ("base", "scale", "shift")
    BASE_FIELD_NUMBER: _ClassVar[int]
    SCALE_FIELD_NUMBER: _ClassVar[int]
    SHIFT_FIELD_NUMBER: _ClassVar[int]
    base: float
    scale: float
    shift: float
    def __init__(self, base: _Optional[float] = ..., scale: _Optional[float] = ..., shift: _Optional[float] = ...) -> None: ...

class ExpandDims(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Flatten(_message.Message):
    __slots__ = ("axis",)
    AXIS_FIELD_NUMBER: _ClassVar[int]
    axis: int
    def __init__(self, axis: _Optional[int] = ...) -> None: ...

class Floor(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Fill(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class FullConnection(_message.Message):
    __slots__ = ("hasBias", "useAxis", "axis", "activationType")
    HASBIAS_FIELD_NUMBER: _ClassVar[int]
    USEAXIS_FIELD_NUMBER: _ClassVar[int]
    AXIS_FIELD_NUMBER: _ClassVar[int]
    ACTIVATIONTYPE_FIELD_NUMBER: _ClassVar[int]
    hasBias: bool
    useAxis: bool
    axis: int
    activationType: _hdi_types_pb2.ActivationType
    def __init__(self, hasBias: _Optional[bool] = ..., useAxis: _Optional[bool] = ..., axis: _Optional[int] = ..., activationType: _Optional[_Union[_hdi_types_pb2.ActivationType, str]] = ...) -> None: ...

class FusedBatchNorm(_message.Message):
    __slots__ = ("epsilon",)
    EPSILON_FIELD_NUMBER: _ClassVar[int]
    epsilon: float
    def __init__(self, epsilon: _Optional[float] = ...) -> None: ...

class Gather(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GatherNd(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Greater(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GreaterEqual(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class InstanceNorm(_message.Message):
    __slots__ = ("epsilon",)
    EPSILON_FIELD_NUMBER: _ClassVar[int]
    epsilon: float
    def __init__(self, epsilon: _Optional[float] = ...) -> None: ...

class LayerNormFusion(_message.Message):
    __slots__ = ("beginNormAxis", "epsilon", "elementwiseAffine", "beginParamsAxis")
    BEGINNORMAXIS_FIELD_NUMBER: _ClassVar[int]
    EPSILON_FIELD_NUMBER: _ClassVar[int]
    ELEMENTWISEAFFINE_FIELD_NUMBER: _ClassVar[int]
    BEGINPARAMSAXIS_FIELD_NUMBER: _ClassVar[int]
    beginNormAxis: int
    epsilon: float
    elementwiseAffine: bool
    beginParamsAxis: int
    def __init__(self, beginNormAxis: _Optional[int] = ..., epsilon: _Optional[float] = ..., elementwiseAffine: _Optional[bool] = ..., beginParamsAxis: _Optional[int] = ...) -> None: ...

class LeakyRelu(_message.Message):
    __slots__ = ("negativeSlope",)
    NEGATIVESLOPE_FIELD_NUMBER: _ClassVar[int]
    negativeSlope: float
    def __init__(self, negativeSlope: _Optional[float] = ...) -> None: ...

class Less(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class LessEqual(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Log(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class LogicalAnd(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class LogicalNot(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class LogicalOr(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class LRN(_message.Message):
    __slots__ = ("depthRadius", "bias", "alpha", "beta", "normRegion")
    DEPTHRADIUS_FIELD_NUMBER: _ClassVar[int]
    BIAS_FIELD_NUMBER: _ClassVar[int]
    ALPHA_FIELD_NUMBER: _ClassVar[int]
    BETA_FIELD_NUMBER: _ClassVar[int]
    NORMREGION_FIELD_NUMBER: _ClassVar[int]
    depthRadius: int
    bias: float
    alpha: float
    beta: float
    normRegion: str
    def __init__(self, depthRadius: _Optional[int] = ..., bias: _Optional[float] = ..., alpha: _Optional[float] = ..., beta: _Optional[float] = ..., normRegion: _Optional[str] = ...) -> None: ...

class LSTM(_message.Message):
    __slots__ = ("bidirectional", "hasBias", "inputSize", "hiddenSize", "numLayers", "numDirections", "dropout", "zoneoutCell", "zoneoutHidden", "projSize")
    BIDIRECTIONAL_FIELD_NUMBER: _ClassVar[int]
    HASBIAS_FIELD_NUMBER: _ClassVar[int]
    INPUTSIZE_FIELD_NUMBER: _ClassVar[int]
    HIDDENSIZE_FIELD_NUMBER: _ClassVar[int]
    NUMLAYERS_FIELD_NUMBER: _ClassVar[int]
    NUMDIRECTIONS_FIELD_NUMBER: _ClassVar[int]
    DROPOUT_FIELD_NUMBER: _ClassVar[int]
    ZONEOUTCELL_FIELD_NUMBER: _ClassVar[int]
    ZONEOUTHIDDEN_FIELD_NUMBER: _ClassVar[int]
    PROJSIZE_FIELD_NUMBER: _ClassVar[int]
    bidirectional: bool
    hasBias: bool
    inputSize: int
    hiddenSize: int
    numLayers: int
    numDirections: int
    dropout: float
    zoneoutCell: float
    zoneoutHidden: float
    projSize: int
    def __init__(self, bidirectional: _Optional[bool] = ..., hasBias: _Optional[bool] = ..., inputSize: _Optional[int] = ..., hiddenSize: _Optional[int] = ..., numLayers: _Optional[int] = ..., numDirections: _Optional[int] = ..., dropout: _Optional[float] = ..., zoneoutCell: _Optional[float] = ..., zoneoutHidden: _Optional[float] = ..., projSize: _Optional[int] = ...) -> None: ...

class L2NormalizeFusion(_message.Message):
    __slots__ = ("axis", "epsilon", "activationType")
    AXIS_FIELD_NUMBER: _ClassVar[int]
    EPSILON_FIELD_NUMBER: _ClassVar[int]
    ACTIVATIONTYPE_FIELD_NUMBER: _ClassVar[int]
    axis: _containers.RepeatedScalarFieldContainer[int]
    epsilon: float
    activationType: _hdi_types_pb2.ActivationType
    def __init__(self, axis: _Optional[_Iterable[int]] = ..., epsilon: _Optional[float] = ..., activationType: _Optional[_Union[_hdi_types_pb2.ActivationType, str]] = ...) -> None: ...

class MatMulFusion(_message.Message):
    __slots__ = ("transposeA", "transposeB", "activationType")
    TRANSPOSEA_FIELD_NUMBER: _ClassVar[int]
    TRANSPOSEB_FIELD_NUMBER: _ClassVar[int]
    ACTIVATIONTYPE_FIELD_NUMBER: _ClassVar[int]
    transposeA: bool
    transposeB: bool
    activationType: _hdi_types_pb2.ActivationType
    def __init__(self, transposeA: _Optional[bool] = ..., transposeB: _Optional[bool] = ..., activationType: _Optional[_Union[_hdi_types_pb2.ActivationType, str]] = ...) -> None: ...

class Maximum(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class MaxPoolFusion(_message.Message):
    __slots__ = ("kernelSize", "strides", "pad", "padMode", "format", "roundMode", "activationType")
    KERNELSIZE_FIELD_NUMBER: _ClassVar[int]
    STRIDES_FIELD_NUMBER: _ClassVar[int]
    PAD_FIELD_NUMBER: _ClassVar[int]
    PADMODE_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    ROUNDMODE_FIELD_NUMBER: _ClassVar[int]
    GLOBAL_FIELD_NUMBER: _ClassVar[int]
    ACTIVATIONTYPE_FIELD_NUMBER: _ClassVar[int]
    kernelSize: _containers.RepeatedScalarFieldContainer[int]
    strides: _containers.RepeatedScalarFieldContainer[int]
    pad: _containers.RepeatedScalarFieldContainer[int]
    padMode: _hdi_types_pb2.PadMode
    format: _hdi_types_pb2.Format
    roundMode: _hdi_types_pb2.RoundMode
    activationType: _hdi_types_pb2.ActivationType
    def __init__(self, kernelSize: _Optional[_Iterable[int]] = ..., strides: _Optional[_Iterable[int]] = ..., pad: _Optional[_Iterable[int]] = ..., padMode: _Optional[_Union[_hdi_types_pb2.PadMode, str]] = ..., format: _Optional[_Union[_hdi_types_pb2.Format, str]] = ..., roundMode: _Optional[_Union[_hdi_types_pb2.RoundMode, str]] = ..., activationType: _Optional[_Union[_hdi_types_pb2.ActivationType, str]] = ..., **kwargs) -> None: ...

class Minimum(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Mod(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class MulFusion(_message.Message):
    __slots__ = ("activationType",)
    ACTIVATIONTYPE_FIELD_NUMBER: _ClassVar[int]
    activationType: _hdi_types_pb2.ActivationType
    def __init__(self, activationType: _Optional[_Union[_hdi_types_pb2.ActivationType, str]] = ...) -> None: ...

class Neg(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class NotEqual(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class OneHot(_message.Message):
    __slots__ = ("axis",)
    AXIS_FIELD_NUMBER: _ClassVar[int]
    axis: int
    def __init__(self, axis: _Optional[int] = ...) -> None: ...

class PadFusion(_message.Message):
    __slots__ = ("paddings", "paddingMode", "constantValue")
    PADDINGS_FIELD_NUMBER: _ClassVar[int]
    PADDINGMODE_FIELD_NUMBER: _ClassVar[int]
    CONSTANTVALUE_FIELD_NUMBER: _ClassVar[int]
    paddings: _containers.RepeatedCompositeFieldContainer[_hdi_types_pb2.Int64Array]
    paddingMode: _hdi_types_pb2.PaddingMode
    constantValue: float
    def __init__(self, paddings: _Optional[_Iterable[_Union[_hdi_types_pb2.Int64Array, _Mapping]]] = ..., paddingMode: _Optional[_Union[_hdi_types_pb2.PaddingMode, str]] = ..., constantValue: _Optional[float] = ...) -> None: ...

class PowFusion(_message.Message):
    __slots__ = ("scale", "shift")
    SCALE_FIELD_NUMBER: _ClassVar[int]
    SHIFT_FIELD_NUMBER: _ClassVar[int]
    scale: float
    shift: float
    def __init__(self, scale: _Optional[float] = ..., shift: _Optional[float] = ...) -> None: ...

class PReLUFusion(_message.Message):
    __slots__ = ("channelShared",)
    CHANNELSHARED_FIELD_NUMBER: _ClassVar[int]
    channelShared: bool
    def __init__(self, channelShared: _Optional[bool] = ...) -> None: ...

class QuantDTypeCast(_message.Message):
    __slots__ = ("srcT", "dstT")
    SRCT_FIELD_NUMBER: _ClassVar[int]
    DSTT_FIELD_NUMBER: _ClassVar[int]
    srcT: int
    dstT: int
    def __init__(self, srcT: _Optional[int] = ..., dstT: _Optional[int] = ...) -> None: ...

class Rank(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Range(_message.Message):
    __slots__ = ("dataType", "start", "limit", "delta")
    DATATYPE_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    dataType: int
    start: int
    limit: int
    delta: int
    def __init__(self, dataType: _Optional[int] = ..., start: _Optional[int] = ..., limit: _Optional[int] = ..., delta: _Optional[int] = ...) -> None: ...

class Reciprocal(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RealDiv(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ReduceFusion(_message.Message):
    __slots__ = ("keepDims", "mode", "reduceToEnd", "coeff")
    KEEPDIMS_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    REDUCETOEND_FIELD_NUMBER: _ClassVar[int]
    COEFF_FIELD_NUMBER: _ClassVar[int]
    keepDims: bool
    mode: _hdi_types_pb2.ReduceMode
    reduceToEnd: bool
    coeff: float
    def __init__(self, keepDims: _Optional[bool] = ..., mode: _Optional[_Union[_hdi_types_pb2.ReduceMode, str]] = ..., reduceToEnd: _Optional[bool] = ..., coeff: _Optional[float] = ...) -> None: ...

class Reshape(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Resize(_message.Message):
    __slots__ = ("method", "newHeight", "newWidth", "preserveAspectRatio", "coordinateTransformMode", "cubicCoeff", "excludeOutside", "extrapolationValue", "nearestMode")
    METHOD_FIELD_NUMBER: _ClassVar[int]
    NEWHEIGHT_FIELD_NUMBER: _ClassVar[int]
    NEWWIDTH_FIELD_NUMBER: _ClassVar[int]
    PRESERVEASPECTRATIO_FIELD_NUMBER: _ClassVar[int]
    COORDINATETRANSFORMMODE_FIELD_NUMBER: _ClassVar[int]
    CUBICCOEFF_FIELD_NUMBER: _ClassVar[int]
    EXCLUDEOUTSIDE_FIELD_NUMBER: _ClassVar[int]
    EXTRAPOLATIONVALUE_FIELD_NUMBER: _ClassVar[int]
    NEARESTMODE_FIELD_NUMBER: _ClassVar[int]
    method: _hdi_types_pb2.ResizeMethod
    newHeight: int
    newWidth: int
    preserveAspectRatio: bool
    coordinateTransformMode: _hdi_types_pb2.CoordinateTransformMode
    cubicCoeff: float
    excludeOutside: int
    extrapolationValue: float
    nearestMode: _hdi_types_pb2.NearestMode
    def __init__(self, method: _Optional[_Union[_hdi_types_pb2.ResizeMethod, str]] = ..., newHeight: _Optional[int] = ..., newWidth: _Optional[int] = ..., preserveAspectRatio: _Optional[bool] = ..., coordinateTransformMode: _Optional[_Union[_hdi_types_pb2.CoordinateTransformMode, str]] = ..., cubicCoeff: _Optional[float] = ..., excludeOutside: _Optional[int] = ..., extrapolationValue: _Optional[float] = ..., nearestMode: _Optional[_Union[_hdi_types_pb2.NearestMode, str]] = ...) -> None: ...

class Round(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Rsqrt(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ScaleFusion(_message.Message):
    __slots__ = ("axis", "activationType")
    AXIS_FIELD_NUMBER: _ClassVar[int]
    ACTIVATIONTYPE_FIELD_NUMBER: _ClassVar[int]
    axis: int
    activationType: _hdi_types_pb2.ActivationType
    def __init__(self, axis: _Optional[int] = ..., activationType: _Optional[_Union[_hdi_types_pb2.ActivationType, str]] = ...) -> None: ...

class ScatterNd(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Shape(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Sin(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class SliceFusion(_message.Message):
    __slots__ = ("axes",)
    AXES_FIELD_NUMBER: _ClassVar[int]
    axes: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, axes: _Optional[_Iterable[int]] = ...) -> None: ...

class Softmax(_message.Message):
    __slots__ = ("axis",)
    AXIS_FIELD_NUMBER: _ClassVar[int]
    axis: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, axis: _Optional[_Iterable[int]] = ...) -> None: ...

class SpaceToBatchND(_message.Message):
    __slots__ = ("blockShape", "paddings")
    BLOCKSHAPE_FIELD_NUMBER: _ClassVar[int]
    PADDINGS_FIELD_NUMBER: _ClassVar[int]
    blockShape: _containers.RepeatedScalarFieldContainer[int]
    paddings: _containers.RepeatedCompositeFieldContainer[_hdi_types_pb2.Int64Array]
    def __init__(self, blockShape: _Optional[_Iterable[int]] = ..., paddings: _Optional[_Iterable[_Union[_hdi_types_pb2.Int64Array, _Mapping]]] = ...) -> None: ...

class SpaceToDepth(_message.Message):
    __slots__ = ("blockSize", "format")
    BLOCKSIZE_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    blockSize: int
    format: _hdi_types_pb2.Format
    def __init__(self, blockSize: _Optional[int] = ..., format: _Optional[_Union[_hdi_types_pb2.Format, str]] = ...) -> None: ...

class SparseToDense(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Split(_message.Message):
    __slots__ = ("outputNum", "sizeSplits", "axis")
    OUTPUTNUM_FIELD_NUMBER: _ClassVar[int]
    SIZESPLITS_FIELD_NUMBER: _ClassVar[int]
    AXIS_FIELD_NUMBER: _ClassVar[int]
    outputNum: int
    sizeSplits: _containers.RepeatedScalarFieldContainer[int]
    axis: int
    def __init__(self, outputNum: _Optional[int] = ..., sizeSplits: _Optional[_Iterable[int]] = ..., axis: _Optional[int] = ...) -> None: ...

class Sqrt(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Squeeze(_message.Message):
    __slots__ = ("axis",)
    AXIS_FIELD_NUMBER: _ClassVar[int]
    axis: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, axis: _Optional[_Iterable[int]] = ...) -> None: ...

class Square(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class SquaredDifference(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Stack(_message.Message):
    __slots__ = ("axis",)
    AXIS_FIELD_NUMBER: _ClassVar[int]
    axis: int
    def __init__(self, axis: _Optional[int] = ...) -> None: ...

class StridedSlice(_message.Message):
    __slots__ = ("beginMask", "endMask", "ellipsisMask", "newAxisMask", "shrinkAxisMask")
    BEGINMASK_FIELD_NUMBER: _ClassVar[int]
    ENDMASK_FIELD_NUMBER: _ClassVar[int]
    ELLIPSISMASK_FIELD_NUMBER: _ClassVar[int]
    NEWAXISMASK_FIELD_NUMBER: _ClassVar[int]
    SHRINKAXISMASK_FIELD_NUMBER: _ClassVar[int]
    beginMask: int
    endMask: int
    ellipsisMask: int
    newAxisMask: int
    shrinkAxisMask: int
    def __init__(self, beginMask: _Optional[int] = ..., endMask: _Optional[int] = ..., ellipsisMask: _Optional[int] = ..., newAxisMask: _Optional[int] = ..., shrinkAxisMask: _Optional[int] = ...) -> None: ...

class SubFusion(_message.Message):
    __slots__ = ("activationType",)
    ACTIVATIONTYPE_FIELD_NUMBER: _ClassVar[int]
    activationType: _hdi_types_pb2.ActivationType
    def __init__(self, activationType: _Optional[_Union[_hdi_types_pb2.ActivationType, str]] = ...) -> None: ...

class TileFusion(_message.Message):
    __slots__ = ("dims",)
    DIMS_FIELD_NUMBER: _ClassVar[int]
    dims: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, dims: _Optional[_Iterable[int]] = ...) -> None: ...

class TopKFusion(_message.Message):
    __slots__ = ("sorted", "axis")
    SORTED_FIELD_NUMBER: _ClassVar[int]
    AXIS_FIELD_NUMBER: _ClassVar[int]
    sorted: bool
    axis: int
    def __init__(self, sorted: _Optional[bool] = ..., axis: _Optional[int] = ...) -> None: ...

class Transpose(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Unsqueeze(_message.Message):
    __slots__ = ("axis",)
    AXIS_FIELD_NUMBER: _ClassVar[int]
    axis: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, axis: _Optional[_Iterable[int]] = ...) -> None: ...

class Unstack(_message.Message):
    __slots__ = ("axis",)
    AXIS_FIELD_NUMBER: _ClassVar[int]
    axis: int
    def __init__(self, axis: _Optional[int] = ...) -> None: ...

class Where(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Select(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Erf(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class LogSoftmax(_message.Message):
    __slots__ = ("axis",)
    AXIS_FIELD_NUMBER: _ClassVar[int]
    axis: int
    def __init__(self, axis: _Optional[int] = ...) -> None: ...

class QuantDTypeCastV2(_message.Message):
    __slots__ = ("srcT", "dstT", "axis")
    SRCT_FIELD_NUMBER: _ClassVar[int]
    DSTT_FIELD_NUMBER: _ClassVar[int]
    AXIS_FIELD_NUMBER: _ClassVar[int]
    srcT: int
    dstT: int
    axis: int
    def __init__(self, srcT: _Optional[int] = ..., dstT: _Optional[int] = ..., axis: _Optional[int] = ...) -> None: ...

class Node(_message.Message):
    __slots__ = ("name", "nodeType", "inputIndex", "outputIndex", "quantType", "abs", "activation", "add_fusion", "all", "argmax_fusion", "avgpool_fusion", "batch_to_space_nd", "bias_add", "broadcast_to", "cast", "ceil", "clip", "concat", "conv2d_fusion", "conv2d_transpose_fusion", "cos", "constant_of_shape", "crop", "depth_to_space", "detection_post_process", "div_fusion", "eltwise", "equal", "expfusion", "expand_dims", "flatten", "floor", "fill", "full_connection", "fused_batch_norm", "gather", "gather_nd", "greater", "greater_equal", "instance_norm", "layer_norm_fusion", "leaky_relu", "less", "less_equal", "log", "logical_and", "logical_not", "logical_or", "lrn", "lstm", "l2_normalize_fusion", "matmul_fusion", "maximum", "max_pool_fusion", "minimum", "mod", "mul_fusion", "neg", "not_equal", "one_hot", "pad_fusion", "pow_fusion", "prelu_fusion", "quant_dtype_cast", "rank", "range", "reciprocal", "real_div", "reduce_fusion", "reshape", "resize", "round", "rsqrt", "scale_fusion", "scatter_nd", "shape", "sin", "slice_fusion", "softmax", "space_to_batch_nd", "space_to_depth", "sparse_to_dense", "split", "sqrt", "squeeze", "square", "squared_difference", "stack", "strided_slice", "sub_fusion", "tile_fusion", "topk_fusion", "transpose", "unsqueeze", "unstack", "where", "select", "erf", "log_softmax", "quant_dtype_cast_v2")
    NAME_FIELD_NUMBER: _ClassVar[int]
    NODETYPE_FIELD_NUMBER: _ClassVar[int]
    INPUTINDEX_FIELD_NUMBER: _ClassVar[int]
    OUTPUTINDEX_FIELD_NUMBER: _ClassVar[int]
    QUANTTYPE_FIELD_NUMBER: _ClassVar[int]
    ABS_FIELD_NUMBER: _ClassVar[int]
    ACTIVATION_FIELD_NUMBER: _ClassVar[int]
    ADD_FUSION_FIELD_NUMBER: _ClassVar[int]
    ALL_FIELD_NUMBER: _ClassVar[int]
    ARGMAX_FUSION_FIELD_NUMBER: _ClassVar[int]
    ASSERT_FIELD_NUMBER: _ClassVar[int]
    AVGPOOL_FUSION_FIELD_NUMBER: _ClassVar[int]
    BATCH_TO_SPACE_ND_FIELD_NUMBER: _ClassVar[int]
    BIAS_ADD_FIELD_NUMBER: _ClassVar[int]
    BROADCAST_TO_FIELD_NUMBER: _ClassVar[int]
    CAST_FIELD_NUMBER: _ClassVar[int]
    CEIL_FIELD_NUMBER: _ClassVar[int]
    CLIP_FIELD_NUMBER: _ClassVar[int]
    CONCAT_FIELD_NUMBER: _ClassVar[int]
    CONV2D_FUSION_FIELD_NUMBER: _ClassVar[int]
    CONV2D_TRANSPOSE_FUSION_FIELD_NUMBER: _ClassVar[int]
    COS_FIELD_NUMBER: _ClassVar[int]
    CONSTANT_OF_SHAPE_FIELD_NUMBER: _ClassVar[int]
    CROP_FIELD_NUMBER: _ClassVar[int]
    DEPTH_TO_SPACE_FIELD_NUMBER: _ClassVar[int]
    DETECTION_POST_PROCESS_FIELD_NUMBER: _ClassVar[int]
    DIV_FUSION_FIELD_NUMBER: _ClassVar[int]
    ELTWISE_FIELD_NUMBER: _ClassVar[int]
    EQUAL_FIELD_NUMBER: _ClassVar[int]
    EXPFUSION_FIELD_NUMBER: _ClassVar[int]
    EXPAND_DIMS_FIELD_NUMBER: _ClassVar[int]
    FLATTEN_FIELD_NUMBER: _ClassVar[int]
    FLOOR_FIELD_NUMBER: _ClassVar[int]
    FILL_FIELD_NUMBER: _ClassVar[int]
    FULL_CONNECTION_FIELD_NUMBER: _ClassVar[int]
    FUSED_BATCH_NORM_FIELD_NUMBER: _ClassVar[int]
    GATHER_FIELD_NUMBER: _ClassVar[int]
    GATHER_ND_FIELD_NUMBER: _ClassVar[int]
    GREATER_FIELD_NUMBER: _ClassVar[int]
    GREATER_EQUAL_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_NORM_FIELD_NUMBER: _ClassVar[int]
    LAYER_NORM_FUSION_FIELD_NUMBER: _ClassVar[int]
    LEAKY_RELU_FIELD_NUMBER: _ClassVar[int]
    LESS_FIELD_NUMBER: _ClassVar[int]
    LESS_EQUAL_FIELD_NUMBER: _ClassVar[int]
    LOG_FIELD_NUMBER: _ClassVar[int]
    LOGICAL_AND_FIELD_NUMBER: _ClassVar[int]
    LOGICAL_NOT_FIELD_NUMBER: _ClassVar[int]
    LOGICAL_OR_FIELD_NUMBER: _ClassVar[int]
    LRN_FIELD_NUMBER: _ClassVar[int]
    LSTM_FIELD_NUMBER: _ClassVar[int]
    L2_NORMALIZE_FUSION_FIELD_NUMBER: _ClassVar[int]
    MATMUL_FUSION_FIELD_NUMBER: _ClassVar[int]
    MAXIMUM_FIELD_NUMBER: _ClassVar[int]
    MAX_POOL_FUSION_FIELD_NUMBER: _ClassVar[int]
    MINIMUM_FIELD_NUMBER: _ClassVar[int]
    MOD_FIELD_NUMBER: _ClassVar[int]
    MUL_FUSION_FIELD_NUMBER: _ClassVar[int]
    NEG_FIELD_NUMBER: _ClassVar[int]
    NOT_EQUAL_FIELD_NUMBER: _ClassVar[int]
    ONE_HOT_FIELD_NUMBER: _ClassVar[int]
    PAD_FUSION_FIELD_NUMBER: _ClassVar[int]
    POW_FUSION_FIELD_NUMBER: _ClassVar[int]
    PRELU_FUSION_FIELD_NUMBER: _ClassVar[int]
    QUANT_DTYPE_CAST_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    RANGE_FIELD_NUMBER: _ClassVar[int]
    RECIPROCAL_FIELD_NUMBER: _ClassVar[int]
    REAL_DIV_FIELD_NUMBER: _ClassVar[int]
    REDUCE_FUSION_FIELD_NUMBER: _ClassVar[int]
    RESHAPE_FIELD_NUMBER: _ClassVar[int]
    RESIZE_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    RSQRT_FIELD_NUMBER: _ClassVar[int]
    SCALE_FUSION_FIELD_NUMBER: _ClassVar[int]
    SCATTER_ND_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    SIN_FIELD_NUMBER: _ClassVar[int]
    SLICE_FUSION_FIELD_NUMBER: _ClassVar[int]
    SOFTMAX_FIELD_NUMBER: _ClassVar[int]
    SPACE_TO_BATCH_ND_FIELD_NUMBER: _ClassVar[int]
    SPACE_TO_DEPTH_FIELD_NUMBER: _ClassVar[int]
    SPARSE_TO_DENSE_FIELD_NUMBER: _ClassVar[int]
    SPLIT_FIELD_NUMBER: _ClassVar[int]
    SQRT_FIELD_NUMBER: _ClassVar[int]
    SQUEEZE_FIELD_NUMBER: _ClassVar[int]
    SQUARE_FIELD_NUMBER: _ClassVar[int]
    SQUARED_DIFFERENCE_FIELD_NUMBER: _ClassVar[int]
    STACK_FIELD_NUMBER: _ClassVar[int]
    STRIDED_SLICE_FIELD_NUMBER: _ClassVar[int]
    SUB_FUSION_FIELD_NUMBER: _ClassVar[int]
    TILE_FUSION_FIELD_NUMBER: _ClassVar[int]
    TOPK_FUSION_FIELD_NUMBER: _ClassVar[int]
    TRANSPOSE_FIELD_NUMBER: _ClassVar[int]
    UNSQUEEZE_FIELD_NUMBER: _ClassVar[int]
    UNSTACK_FIELD_NUMBER: _ClassVar[int]
    WHERE_FIELD_NUMBER: _ClassVar[int]
    SELECT_FIELD_NUMBER: _ClassVar[int]
    ERF_FIELD_NUMBER: _ClassVar[int]
    LOG_SOFTMAX_FIELD_NUMBER: _ClassVar[int]
    QUANT_DTYPE_CAST_V2_FIELD_NUMBER: _ClassVar[int]
    name: str
    nodeType: NodeType
    inputIndex: _containers.RepeatedScalarFieldContainer[int]
    outputIndex: _containers.RepeatedScalarFieldContainer[int]
    quantType: _hdi_types_pb2.QuantType
    abs: Abs
    activation: Activation
    add_fusion: AddFusion
    all: All
    argmax_fusion: ArgMaxFusion
    avgpool_fusion: AvgPoolFusion
    batch_to_space_nd: BatchToSpaceND
    bias_add: BiasAdd
    broadcast_to: BroadcastTo
    cast: Cast
    ceil: Ceil
    clip: Clip
    concat: Concat
    conv2d_fusion: Conv2DFusion
    conv2d_transpose_fusion: Conv2dTransposeFusion
    cos: Cos
    constant_of_shape: ConstantOfShape
    crop: Crop
    depth_to_space: DepthToSpace
    detection_post_process: DetectionPostProcess
    div_fusion: DivFusion
    eltwise: Eltwise
    equal: Equal
    expfusion: ExpFusion
    expand_dims: ExpandDims
    flatten: Flatten
    floor: Floor
    fill: Fill
    full_connection: FullConnection
    fused_batch_norm: FusedBatchNorm
    gather: Gather
    gather_nd: GatherNd
    greater: Greater
    greater_equal: GreaterEqual
    instance_norm: InstanceNorm
    layer_norm_fusion: LayerNormFusion
    leaky_relu: LeakyRelu
    less: Less
    less_equal: LessEqual
    log: Log
    logical_and: LogicalAnd
    logical_not: LogicalNot
    logical_or: LogicalOr
    lrn: LRN
    lstm: LSTM
    l2_normalize_fusion: L2NormalizeFusion
    matmul_fusion: MatMulFusion
    maximum: Maximum
    max_pool_fusion: MaxPoolFusion
    minimum: Minimum
    mod: Mod
    mul_fusion: MulFusion
    neg: Neg
    not_equal: NotEqual
    one_hot: OneHot
    pad_fusion: PadFusion
    pow_fusion: PowFusion
    prelu_fusion: PReLUFusion
    quant_dtype_cast: QuantDTypeCast
    rank: Rank
    range: Range
    reciprocal: Reciprocal
    real_div: RealDiv
    reduce_fusion: ReduceFusion
    reshape: Reshape
    resize: Resize
    round: Round
    rsqrt: Rsqrt
    scale_fusion: ScaleFusion
    scatter_nd: ScatterNd
    shape: Shape
    sin: Sin
    slice_fusion: SliceFusion
    softmax: Softmax
    space_to_batch_nd: SpaceToBatchND
    space_to_depth: SpaceToDepth
    sparse_to_dense: SparseToDense
    split: Split
    sqrt: Sqrt
    squeeze: Squeeze
    square: Square
    squared_difference: SquaredDifference
    stack: Stack
    strided_slice: StridedSlice
    sub_fusion: SubFusion
    tile_fusion: TileFusion
    topk_fusion: TopKFusion
    transpose: Transpose
    unsqueeze: Unsqueeze
    unstack: Unstack
    where: Where
    select: Select
    erf: Erf
    log_softmax: LogSoftmax
    quant_dtype_cast_v2: QuantDTypeCastV2
    def __init__(self, name: _Optional[str] = ..., nodeType: _Optional[_Union[NodeType, str]] = ..., inputIndex: _Optional[_Iterable[int]] = ..., outputIndex: _Optional[_Iterable[int]] = ..., quantType: _Optional[_Union[_hdi_types_pb2.QuantType, str]] = ..., abs: _Optional[_Union[Abs, _Mapping]] = ..., activation: _Optional[_Union[Activation, _Mapping]] = ..., add_fusion: _Optional[_Union[AddFusion, _Mapping]] = ..., all: _Optional[_Union[All, _Mapping]] = ..., argmax_fusion: _Optional[_Union[ArgMaxFusion, _Mapping]] = ..., avgpool_fusion: _Optional[_Union[AvgPoolFusion, _Mapping]] = ..., batch_to_space_nd: _Optional[_Union[BatchToSpaceND, _Mapping]] = ..., bias_add: _Optional[_Union[BiasAdd, _Mapping]] = ..., broadcast_to: _Optional[_Union[BroadcastTo, _Mapping]] = ..., cast: _Optional[_Union[Cast, _Mapping]] = ..., ceil: _Optional[_Union[Ceil, _Mapping]] = ..., clip: _Optional[_Union[Clip, _Mapping]] = ..., concat: _Optional[_Union[Concat, _Mapping]] = ..., conv2d_fusion: _Optional[_Union[Conv2DFusion, _Mapping]] = ..., conv2d_transpose_fusion: _Optional[_Union[Conv2dTransposeFusion, _Mapping]] = ..., cos: _Optional[_Union[Cos, _Mapping]] = ..., constant_of_shape: _Optional[_Union[ConstantOfShape, _Mapping]] = ..., crop: _Optional[_Union[Crop, _Mapping]] = ..., depth_to_space: _Optional[_Union[DepthToSpace, _Mapping]] = ..., detection_post_process: _Optional[_Union[DetectionPostProcess, _Mapping]] = ..., div_fusion: _Optional[_Union[DivFusion, _Mapping]] = ..., eltwise: _Optional[_Union[Eltwise, _Mapping]] = ..., equal: _Optional[_Union[Equal, _Mapping]] = ..., expfusion: _Optional[_Union[ExpFusion, _Mapping]] = ..., expand_dims: _Optional[_Union[ExpandDims, _Mapping]] = ..., flatten: _Optional[_Union[Flatten, _Mapping]] = ..., floor: _Optional[_Union[Floor, _Mapping]] = ..., fill: _Optional[_Union[Fill, _Mapping]] = ..., full_connection: _Optional[_Union[FullConnection, _Mapping]] = ..., fused_batch_norm: _Optional[_Union[FusedBatchNorm, _Mapping]] = ..., gather: _Optional[_Union[Gather, _Mapping]] = ..., gather_nd: _Optional[_Union[GatherNd, _Mapping]] = ..., greater: _Optional[_Union[Greater, _Mapping]] = ..., greater_equal: _Optional[_Union[GreaterEqual, _Mapping]] = ..., instance_norm: _Optional[_Union[InstanceNorm, _Mapping]] = ..., layer_norm_fusion: _Optional[_Union[LayerNormFusion, _Mapping]] = ..., leaky_relu: _Optional[_Union[LeakyRelu, _Mapping]] = ..., less: _Optional[_Union[Less, _Mapping]] = ..., less_equal: _Optional[_Union[LessEqual, _Mapping]] = ..., log: _Optional[_Union[Log, _Mapping]] = ..., logical_and: _Optional[_Union[LogicalAnd, _Mapping]] = ..., logical_not: _Optional[_Union[LogicalNot, _Mapping]] = ..., logical_or: _Optional[_Union[LogicalOr, _Mapping]] = ..., lrn: _Optional[_Union[LRN, _Mapping]] = ..., lstm: _Optional[_Union[LSTM, _Mapping]] = ..., l2_normalize_fusion: _Optional[_Union[L2NormalizeFusion, _Mapping]] = ..., matmul_fusion: _Optional[_Union[MatMulFusion, _Mapping]] = ..., maximum: _Optional[_Union[Maximum, _Mapping]] = ..., max_pool_fusion: _Optional[_Union[MaxPoolFusion, _Mapping]] = ..., minimum: _Optional[_Union[Minimum, _Mapping]] = ..., mod: _Optional[_Union[Mod, _Mapping]] = ..., mul_fusion: _Optional[_Union[MulFusion, _Mapping]] = ..., neg: _Optional[_Union[Neg, _Mapping]] = ..., not_equal: _Optional[_Union[NotEqual, _Mapping]] = ..., one_hot: _Optional[_Union[OneHot, _Mapping]] = ..., pad_fusion: _Optional[_Union[PadFusion, _Mapping]] = ..., pow_fusion: _Optional[_Union[PowFusion, _Mapping]] = ..., prelu_fusion: _Optional[_Union[PReLUFusion, _Mapping]] = ..., quant_dtype_cast: _Optional[_Union[QuantDTypeCast, _Mapping]] = ..., rank: _Optional[_Union[Rank, _Mapping]] = ..., range: _Optional[_Union[Range, _Mapping]] = ..., reciprocal: _Optional[_Union[Reciprocal, _Mapping]] = ..., real_div: _Optional[_Union[RealDiv, _Mapping]] = ..., reduce_fusion: _Optional[_Union[ReduceFusion, _Mapping]] = ..., reshape: _Optional[_Union[Reshape, _Mapping]] = ..., resize: _Optional[_Union[Resize, _Mapping]] = ..., round: _Optional[_Union[Round, _Mapping]] = ..., rsqrt: _Optional[_Union[Rsqrt, _Mapping]] = ..., scale_fusion: _Optional[_Union[ScaleFusion, _Mapping]] = ..., scatter_nd: _Optional[_Union[ScatterNd, _Mapping]] = ..., shape: _Optional[_Union[Shape, _Mapping]] = ..., sin: _Optional[_Union[Sin, _Mapping]] = ..., slice_fusion: _Optional[_Union[SliceFusion, _Mapping]] = ..., softmax: _Optional[_Union[Softmax, _Mapping]] = ..., space_to_batch_nd: _Optional[_Union[SpaceToBatchND, _Mapping]] = ..., space_to_depth: _Optional[_Union[SpaceToDepth, _Mapping]] = ..., sparse_to_dense: _Optional[_Union[SparseToDense, _Mapping]] = ..., split: _Optional[_Union[Split, _Mapping]] = ..., sqrt: _Optional[_Union[Sqrt, _Mapping]] = ..., squeeze: _Optional[_Union[Squeeze, _Mapping]] = ..., square: _Optional[_Union[Square, _Mapping]] = ..., squared_difference: _Optional[_Union[SquaredDifference, _Mapping]] = ..., stack: _Optional[_Union[Stack, _Mapping]] = ..., strided_slice: _Optional[_Union[StridedSlice, _Mapping]] = ..., sub_fusion: _Optional[_Union[SubFusion, _Mapping]] = ..., tile_fusion: _Optional[_Union[TileFusion, _Mapping]] = ..., topk_fusion: _Optional[_Union[TopKFusion, _Mapping]] = ..., transpose: _Optional[_Union[Transpose, _Mapping]] = ..., unsqueeze: _Optional[_Union[Unsqueeze, _Mapping]] = ..., unstack: _Optional[_Union[Unstack, _Mapping]] = ..., where: _Optional[_Union[Where, _Mapping]] = ..., select: _Optional[_Union[Select, _Mapping]] = ..., erf: _Optional[_Union[Erf, _Mapping]] = ..., log_softmax: _Optional[_Union[LogSoftmax, _Mapping]] = ..., quant_dtype_cast_v2: _Optional[_Union[QuantDTypeCastV2, _Mapping]] = ..., **kwargs) -> None: ...
