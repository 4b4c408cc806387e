"""The client side: the HDI client layer, the OH_NN* C API (`nnrt.client.capi`) and the
Pythonic API on top of it (`Model`, `Compiled`, `Executor`, `NNRtError`, `list_devices`), and
onnxruntime's session shape over it (`InferenceSession`, `SessionOptions`, `RunOptions`,
`IOBinding`, `get_available_providers`; ONNX models are imported by
`nnrt.client.onnx_import`).

The Pythonic names are loaded on first use, so importing only the HDI client layer
(`nnrt.client.core.driver`) stays light.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

# A library's loggers (python.org's logging HOWTO): nothing printed unless the application
# configures logging. A Python caller learns of a failure from the code or the exception,
# which carry the reason; the CLI and the drivers configure logging and print it.
logging.getLogger(__name__).addHandler(logging.NullHandler())

__all__ = ["Compiled", "DeviceInfo", "Executor", "Model", "NNRtError", "Operand", "list_devices",
           "InferenceSession", "SessionOptions", "NodeArg", "RunOptions", "IOBinding",
           "SharedTensor", "get_available_providers", "OnnxImportError"]
_SESSION = {"InferenceSession", "SessionOptions", "NodeArg", "RunOptions", "IOBinding",
            "SharedTensor", "get_available_providers"}
# The exception hierarchy (client/core/errors.py): NNRtError and one class per return code.
_ERRORS = {"Failed", "InvalidParameter", "OutOfMemory", "OperationForbidden", "InvalidFile",
           "InvalidPath", "RunTimeout", "Unsupported", "ConnectionLost", "SaveCacheFailed",
           "DynamicShape", "DeviceUnavailable", "DeviceNotFound", "RunCancelled"}
__all__ += sorted(_ERRORS)

if TYPE_CHECKING:
    from nnrt.client.api import Compiled, DeviceInfo, Executor, Model, Operand, list_devices
    from nnrt.client.core.errors import NNRtError
    from nnrt.client.onnx_import import OnnxImportError
    from nnrt.client.session import (InferenceSession, IOBinding, NodeArg, RunOptions,
                                     SessionOptions, SharedTensor, get_available_providers)


def __getattr__(name: str) -> Any:
    if name in _ERRORS:
        from nnrt.client.core import errors

        return getattr(errors, name)
    if name in _SESSION:
        from nnrt.client import session

        return getattr(session, name)
    if name == "OnnxImportError":
        from nnrt.client import onnx_import

        return onnx_import.OnnxImportError
    if name in __all__:
        from nnrt.client import api

        return getattr(api, name)
    raise AttributeError(f"module 'nnrt.client' has no attribute {name!r}")
