"""HDI DataType codes (spec/hdi.md section 6.6) and their numpy element types."""

from __future__ import annotations

import numpy as np

from nnrt.protos import hdi_types_pb2 as _t

NUMPY_DTYPES: dict[int, np.dtype] = {
    _t.DATA_TYPE_BOOL: np.dtype(np.bool_),
    _t.DATA_TYPE_INT8: np.dtype(np.int8),
    _t.DATA_TYPE_INT16: np.dtype(np.int16),
    _t.DATA_TYPE_INT32: np.dtype(np.int32),
    _t.DATA_TYPE_INT64: np.dtype(np.int64),
    _t.DATA_TYPE_UINT8: np.dtype(np.uint8),
    _t.DATA_TYPE_UINT16: np.dtype(np.uint16),
    _t.DATA_TYPE_UINT32: np.dtype(np.uint32),
    _t.DATA_TYPE_UINT64: np.dtype(np.uint64),
    _t.DATA_TYPE_FLOAT16: np.dtype(np.float16),
    _t.DATA_TYPE_FLOAT32: np.dtype(np.float32),
    _t.DATA_TYPE_FLOAT64: np.dtype(np.float64),
}

HDI_DATA_TYPES: dict[np.dtype, int] = {v: k for k, v in NUMPY_DTYPES.items()}

VALID_FORMATS = frozenset({_t.FORMAT_NONE, _t.FORMAT_NCHW, _t.FORMAT_NHWC})


def numpy_dtype(data_type: int) -> np.dtype | None:
    """The numpy type of an HDI DataType, None for DATA_TYPE_UNKNOWN and undefined codes."""
    return NUMPY_DTYPES.get(data_type)


def hdi_data_type(dtype: np.dtype | type) -> int:
    """The HDI DataType code of a numpy type; KeyError for types HDI cannot carry."""
    return HDI_DATA_TYPES[np.dtype(dtype)]
