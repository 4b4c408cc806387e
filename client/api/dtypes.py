"""The numpy dtype of each OH_NN data type, and back; the shape of a tensor."""

from __future__ import annotations

import numpy as np

from nnrt.client.capi.enums import OH_NN_DataType


_DTYPES: dict[int, np.dtype] = {
    OH_NN_DataType.OH_NN_BOOL: np.dtype(np.bool_),
    OH_NN_DataType.OH_NN_INT8: np.dtype(np.int8),
    OH_NN_DataType.OH_NN_INT16: np.dtype(np.int16),
    OH_NN_DataType.OH_NN_INT32: np.dtype(np.int32),
    OH_NN_DataType.OH_NN_INT64: np.dtype(np.int64),
    OH_NN_DataType.OH_NN_UINT8: np.dtype(np.uint8),
    OH_NN_DataType.OH_NN_UINT16: np.dtype(np.uint16),
    OH_NN_DataType.OH_NN_UINT32: np.dtype(np.uint32),
    OH_NN_DataType.OH_NN_UINT64: np.dtype(np.uint64),
    OH_NN_DataType.OH_NN_FLOAT16: np.dtype(np.float16),
    OH_NN_DataType.OH_NN_FLOAT32: np.dtype(np.float32),
    OH_NN_DataType.OH_NN_FLOAT64: np.dtype(np.float64),
}
_OH_TYPES = {dtype: oh for oh, dtype in _DTYPES.items()}


Shape = tuple[int, ...]
