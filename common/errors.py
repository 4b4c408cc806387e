"""HDI status codes (spec/hdi.md sections 1.3 and 6.18) and the exception that carries one.

Inside a driver process every failure that reaches a client is a `DriverError`: the host
turns it into the reply's `returnCode` and one log line. Drivers and kernels raise it with
the code of hdi.md section 11; they never return sentinel values.
"""

from __future__ import annotations

from nnrt.protos import hdi_types_pb2 as _t

ReturnCode = _t.NNRT_ReturnCode

NNRT_SUCCESS = _t.NNRT_SUCCESS
NNRT_FAILED = _t.NNRT_FAILED
NNRT_NULL_PTR = _t.NNRT_NULL_PTR
NNRT_INVALID_PARAMETER = _t.NNRT_INVALID_PARAMETER
NNRT_MEMORY_ERROR = _t.NNRT_MEMORY_ERROR
NNRT_OUT_OF_MEMORY = _t.NNRT_OUT_OF_MEMORY
NNRT_OPERATION_FORBIDDEN = _t.NNRT_OPERATION_FORBIDDEN
NNRT_INSUFFICIENT_BUFFER = _t.NNRT_INSUFFICIENT_BUFFER
NNRT_NOT_SUPPORT = _t.NNRT_NOT_SUPPORT
NNRT_DEVICE_ERROR = _t.NNRT_DEVICE_ERROR
NNRT_DEVICE_BUSY = _t.NNRT_DEVICE_BUSY
NNRT_CANCELLED = _t.NNRT_CANCELLED
NNRT_TIME_OUT = _t.NNRT_TIME_OUT
NNRT_INVALID_TENSOR = _t.NNRT_INVALID_TENSOR
NNRT_INVALID_NODE = _t.NNRT_INVALID_NODE
NNRT_INVALID_INPUT = _t.NNRT_INVALID_INPUT
NNRT_INVALID_OUTPUT = _t.NNRT_INVALID_OUTPUT
NNRT_INVALID_DATATYPE = _t.NNRT_INVALID_DATATYPE
NNRT_INVALID_FORMAT = _t.NNRT_INVALID_FORMAT
NNRT_INVALID_SHAPE = _t.NNRT_INVALID_SHAPE
NNRT_OUT_OF_DIMENTION_RANGES = _t.NNRT_OUT_OF_DIMENTION_RANGES
NNRT_INVALID_BUFFER = _t.NNRT_INVALID_BUFFER
NNRT_INVALID_BUFFER_SIZE = _t.NNRT_INVALID_BUFFER_SIZE
NNRT_INVALID_PERFORMANCE_MODE = _t.NNRT_INVALID_PERFORMANCE_MODE
NNRT_INVALID_PRIORITY = _t.NNRT_INVALID_PRIORITY
NNRT_INVALID_MODEL = _t.NNRT_INVALID_MODEL
NNRT_INVALID_MODEL_CACHE = _t.NNRT_INVALID_MODEL_CACHE
NNRT_UNSUPPORTED_OP = _t.NNRT_UNSUPPORTED_OP

# Generic HDF codes (negative), section 1.3.
HDF_FAILURE = -1
HDF_ERR_NOT_SUPPORT = -2
HDF_ERR_INVALID_PARAM = -3
HDF_ERR_NOPERM = -19


def code_name(code: int) -> str:
    """NNRT_INVALID_NODE for 19, HDF_ERR_NOPERM for -19, the number otherwise."""
    if code >= 0:
        try:
            return ReturnCode.Name(code)
        except ValueError:
            return str(code)
    return {
        HDF_FAILURE: "HDF_FAILURE",
        HDF_ERR_NOT_SUPPORT: "HDF_ERR_NOT_SUPPORT",
        HDF_ERR_INVALID_PARAM: "HDF_ERR_INVALID_PARAM",
        HDF_ERR_NOPERM: "HDF_ERR_NOPERM",
    }.get(code, str(code))


class DriverError(Exception):
    """A request failed with an HDI status code; `message` says why, for the log line."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"{code_name(code)}: {message}")
        self.code = code
        self.message = message
