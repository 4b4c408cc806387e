"""The client side: the HDI client layer, the OH_NN* C API (`nnrt.client.capi`) and the
Pythonic API on top of it (`Model`, `Compiled`, `Executor`, `NNRtError`, `list_devices`).

The Pythonic names are loaded on first use, so importing only the HDI client layer
(`nnrt.client.hdi`) stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["Compiled", "DeviceInfo", "Executor", "Model", "NNRtError", "Operand", "list_devices"]

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


def __getattr__(name: str) -> Any:
    if name in __all__:
        from nnrt.client import api

        return getattr(api, name)
    raise AttributeError(f"module 'nnrt.client' has no attribute {name!r}")
