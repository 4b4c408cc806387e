"""`NN_QuantParam`: quantization parameters for model tensors (capi.md 2.1–2.5).

An `NN_QuantParam` holds three lists — scales, zero points, bit widths — that
`OH_NNModel_SetTensorQuantParams` copies onto a model tensor (and checks there: equal
counts, every bit width 8). The setters only copy.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from nnrt.client.capi._objects import Handle, live
from nnrt.client.capi.enums import OH_NN_INVALID_PARAMETER, OH_NN_SUCCESS, OH_NN_ReturnCode
from nnrt.client.capi.structs import c_array, c_count, c_double, int32, uint32

__all__ = [
    "NN_QuantParam",
    "OH_NNQuantParam_Create",
    "OH_NNQuantParam_SetScales",
    "OH_NNQuantParam_SetZeroPoints",
    "OH_NNQuantParam_SetNumBits",
    "OH_NNQuantParam_Destroy",
]



class NN_QuantParam(Handle):
    """The opaque `NN_QuantParam` handle: per-group scales, zero points and bit widths."""

    def __init__(self) -> None:
        super().__init__()
        self.scales: list[float] = []
        self.zero_points: list[int] = []
        self.num_bits: list[int] = []

    def __repr__(self) -> str:
        state = "destroyed" if self.destroyed else f"{len(self.scales)} scales"
        return f"<NN_QuantParam {state}>"


def OH_NNQuantParam_Create() -> NN_QuantParam:
    """capi.md 2.1: a new, empty set of quantization parameters."""
    return NN_QuantParam()


def _set(quant_params: Any, values: Any, count: Any, attr: str,
         convert: Callable[[Any], Any]) -> OH_NN_ReturnCode:
    handle = live(quant_params, NN_QuantParam)
    if handle is None or values is None:
        return OH_NN_INVALID_PARAMETER
    n = c_count(count)
    if n is None or n == 0:
        return OH_NN_INVALID_PARAMETER
    copied = c_array(values, n, convert)
    if copied is None:
        return OH_NN_INVALID_PARAMETER
    with handle.lock:
        if handle.destroyed:
            return OH_NN_INVALID_PARAMETER
        setattr(handle, attr, copied)
    return OH_NN_SUCCESS


def OH_NNQuantParam_SetScales(quantParams: NN_QuantParam | None, scales: Sequence[float] | None,
                              quantCount: int) -> OH_NN_ReturnCode:
    """capi.md 2.2: copy `quantCount` scales (replacing any previous ones)."""
    return _set(quantParams, scales, quantCount, "scales", c_double)


def OH_NNQuantParam_SetZeroPoints(quantParams: NN_QuantParam | None,
                                  zeroPoints: Sequence[int] | None,
                                  quantCount: int) -> OH_NN_ReturnCode:
    """capi.md 2.3: copy `quantCount` int32 zero points."""
    return _set(quantParams, zeroPoints, quantCount, "zero_points", int32)


def OH_NNQuantParam_SetNumBits(quantParams: NN_QuantParam | None, numBits: Sequence[int] | None,
                               quantCount: int) -> OH_NN_ReturnCode:
    """capi.md 2.4: copy `quantCount` uint32 bit widths (validated when applied: must be 8)."""
    return _set(quantParams, numBits, quantCount, "num_bits", uint32)


def OH_NNQuantParam_Destroy(quantParams: NN_QuantParam | None) -> OH_NN_ReturnCode:
    """capi.md 2.5: free; NULL, a destroyed or a foreign handle → OH_NN_INVALID_PARAMETER."""
    handle = live(quantParams, NN_QuantParam)
    if handle is None or not handle.destroy():
        return OH_NN_INVALID_PARAMETER
    return OH_NN_SUCCESS
