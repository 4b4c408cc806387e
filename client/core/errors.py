"""OH_NN return codes and the exceptions that carry them.

`OH_NN_ReturnCode` (capi.md 3.4) is defined here, once: the C API (`capi/enums.py`) exports
it, the core raises it inside exceptions, the Pythonic API lets those reach the caller. The
driver's own codes (HDI `NNRT_ReturnCode`) are a different set, in `nnrt.common.errors`.

Every failure of the core is an `NNRtError`, or rather one of its subclasses, chosen by the
code (`NNRtError(code, message)` builds the right one), so that a caller can catch what it
can handle — `except RunTimeout`, `except ConnectionLost` — or everything. Where the builtin
exception of the same meaning exists the class derives from it too (`InvalidParameter` is a
`ValueError`, `RunTimeout` a `TimeoutError`, `ConnectionLost` a `ConnectionError`,
`OutOfMemory` a `MemoryError`). `reason` is the driver's own explanation when the driver
gave one (the `reason` field of its reply), already part of the message.

`DriverGone` is the transport's failure, below the codes: the driver's process died, stopped
or never answered. The core's callers see it as `ConnectionLost` (OH_NN_CONNECTION_EXCEPTION).
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any

__all__ = ["OH_NN_ReturnCode", "NNRtError", "Failed", "InvalidParameter", "OutOfMemory",
           "OperationForbidden", "NullPointer", "InvalidFile", "InvalidPath", "RunTimeout",
           "Unsupported", "ConnectionLost", "SaveCacheFailed", "DynamicShape", "DeviceNotFound", "RunCancelled",
           "DeviceUnavailable", "error_class", "DriverGone", "UntrustedDriver"]


class OH_NN_ReturnCode(IntEnum):
    """capi.md 3.4."""

    OH_NN_SUCCESS = 0
    OH_NN_FAILED = 1
    OH_NN_INVALID_PARAMETER = 2
    OH_NN_MEMORY_ERROR = 3
    OH_NN_OPERATION_FORBIDDEN = 4
    OH_NN_NULL_PTR = 5
    OH_NN_INVALID_FILE = 6
    OH_NN_UNAVALIDABLE_DEVICE = 7
    OH_NN_INVALID_PATH = 8
    OH_NN_TIMEOUT = 9
    OH_NN_UNSUPPORTED = 10
    OH_NN_CONNECTION_EXCEPTION = 11
    OH_NN_SAVE_CACHE_EXCEPTION = 12
    OH_NN_DYNAMIC_SHAPE = 13
    OH_NN_UNAVAILABLE_DEVICE = 14


# Each code also as a module-level constant (python-capi.md "Names": OH_NN_SUCCESS, ...),
# built from the enum so that the two can never disagree.
globals().update(OH_NN_ReturnCode.__members__)
__all__ += list(OH_NN_ReturnCode.__members__)


class NNRtError(Exception):
    """A failed NNRt call: `code` (an OH_NN_ReturnCode), `message`, the driver's `reason`."""

    code_value: OH_NN_ReturnCode = OH_NN_ReturnCode.OH_NN_FAILED

    def __new__(cls, code: int | str = -1, message: str = "", *args: Any,
                **kwargs: Any) -> NNRtError:
        if cls is NNRtError:  # NNRtError(code, ...) is the subclass of that code
            cls = _BY_CODE.get(code, NNRtError)
        if issubclass(cls, MemoryError):  # (MemoryError.__new__ takes its own type only)
            return Exception.__new__(cls)
        return super().__new__(cls)

    def __init__(self, code: int | str = -1, message: str = "", *, reason: str = "") -> None:
        if isinstance(code, str):  # a subclass given its message alone: RunTimeout("...")
            code, message = -1, code
        if code == -1:
            code = type(self).code_value
        try:
            self.code: OH_NN_ReturnCode | int = OH_NN_ReturnCode(code)
            name = self.code.name
        except ValueError:
            self.code, name = code, str(code)
        self.reason = reason
        if reason and reason not in message:
            message = f"{message}: {reason}" if message else reason
        self.message = message
        self.text = f"{message} ({name})" if message else name
        super().__init__(self.text)
        self.args = (self.text,)  # (OSError's subclasses keep the arguments of __new__)

    def __str__(self) -> str:
        return self.text

    def __reduce__(self) -> tuple:  # picklable (multiprocessing) with its reason
        return (_rebuild, (int(self.code), self.message, self.reason))


def _rebuild(code: int, message: str, reason: str) -> NNRtError:
    error = NNRtError(code, message)
    error.reason = reason
    return error


class Failed(NNRtError):
    code_value = OH_NN_ReturnCode.OH_NN_FAILED


class RunCancelled(Failed):
    """The run was cancelled by its caller and the driver abandoned it."""


class DeviceNotFound(Failed, LookupError):
    """No device matches what was asked for (core/device.py `find_device`)."""


class InvalidParameter(NNRtError, ValueError):
    code_value = OH_NN_ReturnCode.OH_NN_INVALID_PARAMETER


class OutOfMemory(NNRtError, MemoryError):
    code_value = OH_NN_ReturnCode.OH_NN_MEMORY_ERROR


class OperationForbidden(NNRtError):
    code_value = OH_NN_ReturnCode.OH_NN_OPERATION_FORBIDDEN


class NullPointer(NNRtError, ValueError):
    code_value = OH_NN_ReturnCode.OH_NN_NULL_PTR


class InvalidFile(NNRtError):
    code_value = OH_NN_ReturnCode.OH_NN_INVALID_FILE


class InvalidPath(NNRtError):
    code_value = OH_NN_ReturnCode.OH_NN_INVALID_PATH


class RunTimeout(NNRtError, TimeoutError):
    code_value = OH_NN_ReturnCode.OH_NN_TIMEOUT


class Unsupported(NNRtError):
    code_value = OH_NN_ReturnCode.OH_NN_UNSUPPORTED


class ConnectionLost(NNRtError, ConnectionError):
    """The driver went away (its process died or its socket closed)."""

    code_value = OH_NN_ReturnCode.OH_NN_CONNECTION_EXCEPTION


class SaveCacheFailed(NNRtError):
    code_value = OH_NN_ReturnCode.OH_NN_SAVE_CACHE_EXCEPTION


class DynamicShape(NNRtError):
    code_value = OH_NN_ReturnCode.OH_NN_DYNAMIC_SHAPE


class DeviceUnavailable(NNRtError):
    """The device failed the call (OH_NN_UNAVAILABLE_DEVICE, and the deprecated 7)."""

    code_value = OH_NN_ReturnCode.OH_NN_UNAVAILABLE_DEVICE


_BY_CODE: dict[int, type[NNRtError]] = {
    cls.code_value: cls for cls in (Failed, InvalidParameter, OutOfMemory, OperationForbidden,
                                    NullPointer, InvalidFile, InvalidPath, RunTimeout,
                                    Unsupported, ConnectionLost, SaveCacheFailed, DynamicShape,
                                    DeviceUnavailable)}
_BY_CODE[OH_NN_ReturnCode.OH_NN_UNAVALIDABLE_DEVICE] = DeviceUnavailable


def error_class(code: int) -> type[NNRtError]:
    """The exception class of an OH_NN_ReturnCode (NNRtError itself for an unknown code)."""
    return _BY_CODE.get(code, NNRtError)


# -- the transport ----------------------------------------------------------------------------


class DriverGone(ConnectionError):
    """The driver cannot be reached: it died, stopped, or never answered."""


class UntrustedDriver(DriverGone):
    """The driver is refused before anything is sent to it: its runtime directory cannot be
    trusted, or it is served by a process of a user we do not trust (SO_PEERCRED)."""
