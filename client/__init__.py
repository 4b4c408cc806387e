"""The client side: the HDI client layer, the OH_NN* C API (`nnrt.client.capi`) and the
Pythonic API on top of it (`Model`, `Compiled`, `Executor`, `NNRtError`, `list_devices`), and
onnxruntime's session shape over it (`InferenceSession`, `SessionOptions`; ONNX models are
imported by `nnrt.client.onnx_import`).

The Pythonic names are loaded on first use, so importing only the HDI client layer
(`nnrt.client.hdi`) stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["Compiled", "DeviceInfo", "Executor", "Model", "NNRtError", "Operand", "list_devices",
           "InferenceSession", "SessionOptions", "NodeArg", "OnnxImportError"]
_SESSION = {"InferenceSession", "SessionOptions", "NodeArg"}

if TYPE_CHECKING:
    from nnrt.client.api import (
        Compiled,
        DeviceInfo,
        Executor,
        Model,
        NNRtError,
        Operand,
        list_devices,
    )
    from nnrt.client.onnx_import import OnnxImportError
    from nnrt.client.session import InferenceSession, NodeArg, SessionOptions


def __getattr__(name: str) -> Any:
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
