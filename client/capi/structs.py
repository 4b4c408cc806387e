"""The C structs of neural_network_runtime_type.h (capi.md 3.12), and C arrays in Python.

Structs are plain classes with the C field names, constructible by keyword; they accept any
value (an enum-typed field takes any integer) and never raise — the call that uses a struct
validates it and answers with the C return code (python-capi.md "Arguments").

The helpers below read a Python sequence that stands for a C array with its count: the
first `count` elements, `None` when the count is larger than the sequence or an element is
not representable in the C element type (both OH_NN_INVALID_PARAMETER for the caller).
"""

from __future__ import annotations

import numbers
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

__all__ = ["OH_NN_UInt32Array", "OH_NN_QuantParam", "OH_NN_Tensor", "OH_NN_Memory"]

T = TypeVar("T")


@dataclass
class OH_NN_UInt32Array:
    """`OH_NN_UInt32Array` (capi.md 3.12): `data=None` is NULL, any list (even empty) is not."""

    data: Any = None
    size: Any = 0


@dataclass
class OH_NN_QuantParam:
    """`OH_NN_QuantParam` (deprecated since 11): `quantCount` entries of each array."""

    quantCount: Any = 0
    numBits: Any = None
    scale: Any = None
    zeroPoint: Any = None


@dataclass
class OH_NN_Tensor:
    """`OH_NN_Tensor` (deprecated since 11): `dimensions=None` with `dimensionCount=0` is a scalar."""

    dataType: Any = 0
    dimensionCount: Any = 0
    dimensions: Any = None
    quantParam: Any = None
    type: Any = 0


@dataclass(eq=False)
class OH_NN_Memory:
    """`OH_NN_Memory` (deprecated since 11): `data` a writable memoryview, `length` in bytes."""

    data: Any = None
    length: Any = 0


# -- C arrays ------------------------------------------------------------------------------


def c_int(value: Any, lo: int, hi: int) -> int | None:
    """`value` as a C integer in [lo, hi], None if it is not an integer or out of range."""
    if isinstance(value, float):
        return None
    try:
        v = operator.index(value)
    except TypeError:
        return None
    return v if lo <= v <= hi else None


def c_count(value: Any) -> int | None:
    """A count / length argument (size_t, uint32_t): a non-negative integer or None."""
    return c_int(value, 0, (1 << 64) - 1)


def c_double(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    return float(value)


def c_array(seq: Any, count: int, convert: Callable[[Any], T | None]) -> list[T] | None:
    """The first `count` elements of `seq`, each converted; None when that is impossible."""
    if seq is None or isinstance(seq, (str, bytes)):
        return None
    try:
        if count > len(seq):
            return None
        items = [seq[i] for i in range(count)]
    except (TypeError, IndexError, KeyError):
        return None
    out = []
    for item in items:
        v = convert(item)
        if v is None:
            return None
        out.append(v)
    return out


INT32 = (-(1 << 31), (1 << 31) - 1)
UINT32 = (0, (1 << 32) - 1)


def int32(value: Any) -> int | None:
    return c_int(value, *INT32)


def uint32(value: Any) -> int | None:
    return c_int(value, *UINT32)

