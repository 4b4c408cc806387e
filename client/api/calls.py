"""Calling the C API from the Pythonic one: a failure code becomes NNRtError, with the
C API's reason."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from nnrt.client.capi._objects import last_failure
from nnrt.client.capi.enums import OH_NN_ReturnCode
from nnrt.client.core.errors import NNRtError


def _call(what: str, fn: Callable[..., Any], *args: Any) -> Any:
    """Call a C API function; raise NNRtError (with the C API's reason) on a failure code.

    Functions returning a tuple give back its out-values; functions returning a handle give
    it back (None → NNRtError(OH_NN_FAILED)).
    """
    last_failure()  # forget an earlier call's
    result = fn(*args)
    if isinstance(result, tuple):
        code, *values = result
        if code != OH_NN_ReturnCode.OH_NN_SUCCESS:
            raise NNRtError(code, _failed(what))
        return values[0] if len(values) == 1 else tuple(values)
    if isinstance(result, int) and not isinstance(result, bool):
        if result != OH_NN_ReturnCode.OH_NN_SUCCESS:
            raise NNRtError(result, _failed(what))
        return None
    if result is None:
        raise NNRtError(OH_NN_ReturnCode.OH_NN_FAILED, _failed(what))
    return result


def _failed(what: str) -> str:
    reason = last_failure()
    return f"{what} failed: {reason}" if reason else f"{what} failed"


def _check(code: int, what: str) -> None:
    if code != OH_NN_ReturnCode.OH_NN_SUCCESS:
        raise NNRtError(code, f"{what} failed")
