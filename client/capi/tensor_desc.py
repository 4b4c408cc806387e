"""`NN_TensorDesc`: tensor descriptors — name, data type, shape, format (capi.md 1.15–1.26).

A descriptor is a template: model tensors (`OH_NNModel_AddTensorToModel`) and `NN_Tensor`s
take copies of it. Initial state: name "", data type OH_NN_UNKNOWN, format
OH_NN_FORMAT_NONE and no shape (`shape is None`; a model tensor added from it is a scalar,
while the size queries reject it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from nnrt.client.capi._objects import Handle, live
from nnrt.common.hdi_model import element_size
from nnrt.client.capi.enums import (
    OH_NN_DYNAMIC_SHAPE,
    OH_NN_INVALID_PARAMETER,
    OH_NN_SUCCESS,
    OH_NN_DataType,
    OH_NN_Format,
    OH_NN_ReturnCode,
)
from nnrt.client.capi.structs import c_array, c_count, c_int, int32

__all__ = [
    "NN_TensorDesc",
    "OH_NNTensorDesc_Create",
    "OH_NNTensorDesc_Destroy",
    "OH_NNTensorDesc_SetName",
    "OH_NNTensorDesc_GetName",
    "OH_NNTensorDesc_SetDataType",
    "OH_NNTensorDesc_GetDataType",
    "OH_NNTensorDesc_SetShape",
    "OH_NNTensorDesc_GetShape",
    "OH_NNTensorDesc_SetFormat",
    "OH_NNTensorDesc_GetFormat",
    "OH_NNTensorDesc_GetElementCount",
    "OH_NNTensorDesc_GetByteSize",
]


MAX_RANK = 10  # capi.md 0.3: maximum rank accepted by OH_NNTensorDesc_SetShape
SIZE_MAX = (1 << 64) - 1  # size_t on the LP64 ABI


class NN_TensorDesc(Handle):
    """The opaque `NN_TensorDesc` handle.

    `owner` is set (by whoever hands a descriptor out that it keeps owning, such as
    `OH_NNTensor_GetTensorDesc`) to refuse `OH_NNTensorDesc_Destroy` on it.
    """

    def __init__(self) -> None:
        super().__init__()
        self.name: str | None = ""
        self.data_type: int = 0  # OH_NN_DataType
        self.shape: list[int] | None = None  # None: never set
        self.format: int = 0  # OH_NN_Format
        self.owner: object | None = None

    def copy(self) -> NN_TensorDesc:
        """A new, independent descriptor with the same name, data type, shape and format."""
        with self.lock:
            other = NN_TensorDesc()
            other.name = self.name
            other.data_type = self.data_type
            other.shape = None if self.shape is None else list(self.shape)
            other.format = self.format
            return other

    def __repr__(self) -> str:
        if self.destroyed:
            return "<NN_TensorDesc destroyed>"
        return (f"<NN_TensorDesc {self.name!r} type={self.data_type} shape={self.shape} "
                f"format={self.format}>")


def _desc(obj: Any) -> NN_TensorDesc | None:
    return live(obj, NN_TensorDesc)


def OH_NNTensorDesc_Create() -> NN_TensorDesc:
    """capi.md 1.15: a new descriptor (name "", OH_NN_UNKNOWN, OH_NN_FORMAT_NONE, no shape)."""
    return NN_TensorDesc()


def OH_NNTensorDesc_Destroy(tensorDesc: NN_TensorDesc | None) -> OH_NN_ReturnCode:
    """capi.md 1.16: free the descriptor; NULL / destroyed / foreign → OH_NN_INVALID_PARAMETER."""
    desc = _desc(tensorDesc)
    if desc is None or desc.owner is not None or not desc.destroy():
        return OH_NN_INVALID_PARAMETER
    return OH_NN_SUCCESS


def _text(value: Any) -> str | None:
    """A C string argument: str or UTF-8 bytes, cut at the first NUL as C would read it."""
    if isinstance(value, (bytes, bytearray)):
        try:
            value = bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return None
    if not isinstance(value, str):
        return None
    return value.split("\0", 1)[0]


def _store(tensorDesc: Any, field: str, value: Any) -> OH_NN_ReturnCode:
    """Set one field of a live descriptor; a `value` of None (refused input) → 2."""
    desc = _desc(tensorDesc)
    if desc is None or value is None:
        return OH_NN_INVALID_PARAMETER
    with desc.lock:
        if desc.destroyed:
            return OH_NN_INVALID_PARAMETER
        setattr(desc, field, value)
    return OH_NN_SUCCESS


def _read(tensorDesc: Any, read: Callable[[NN_TensorDesc], Any]) -> tuple[OH_NN_ReturnCode, Any]:
    """`(SUCCESS, read(desc))` for a live descriptor, `(INVALID_PARAMETER, None)` otherwise."""
    desc = _desc(tensorDesc)
    if desc is None:
        return OH_NN_INVALID_PARAMETER, None
    with desc.lock:
        if desc.destroyed:
            return OH_NN_INVALID_PARAMETER, None
        return OH_NN_SUCCESS, read(desc)


def OH_NNTensorDesc_SetName(tensorDesc: NN_TensorDesc | None,
                            name: str | bytes | None) -> OH_NN_ReturnCode:
    """capi.md 1.17: copy the name (empty allowed)."""
    return _store(tensorDesc, "name", None if name is None else _text(name))


def OH_NNTensorDesc_GetName(tensorDesc: NN_TensorDesc | None) -> tuple[OH_NN_ReturnCode, str | None]:
    """capi.md 1.18: `(code, name)`; "" when never set."""
    return _read(tensorDesc, lambda desc: desc.name or "")


def OH_NNTensorDesc_SetDataType(tensorDesc: NN_TensorDesc | None, dataType: int) -> OH_NN_ReturnCode:
    """capi.md 1.19: any OH_NN_DataType 0..12 (OH_NN_UNKNOWN included)."""
    return _store(tensorDesc, "data_type", c_int(dataType, 0, 12))


def OH_NNTensorDesc_GetDataType(
        tensorDesc: NN_TensorDesc | None) -> tuple[OH_NN_ReturnCode, OH_NN_DataType | None]:
    """capi.md 1.20: `(code, dataType)`."""
    return _read(tensorDesc, lambda desc: OH_NN_DataType(desc.data_type))


def OH_NNTensorDesc_SetShape(tensorDesc: NN_TensorDesc | None, shape: Sequence[int] | None,
                             shapeLength: int) -> OH_NN_ReturnCode:
    """capi.md 1.21: copy `shapeLength` (1..10) int32 dimensions; values are not validated."""
    n = c_count(shapeLength)
    dims = None
    if shape is not None and n is not None and 0 < n <= MAX_RANK:
        dims = c_array(shape, n, int32)
    return _store(tensorDesc, "shape", dims)


def OH_NNTensorDesc_GetShape(tensorDesc: NN_TensorDesc | None) -> tuple[OH_NN_ReturnCode, list[int] | None]:
    """capi.md 1.22: `(code, shape)`; `[]` when no shape was set."""
    return _read(tensorDesc, lambda desc: list(desc.shape or []))


def OH_NNTensorDesc_SetFormat(tensorDesc: NN_TensorDesc | None, format: int) -> OH_NN_ReturnCode:  # noqa: A002
    """capi.md 1.23: OH_NN_FORMAT_NONE(0)..OH_NN_FORMAT_ND(3)."""
    return _store(tensorDesc, "format", c_int(format, 0, 3))


def OH_NNTensorDesc_GetFormat(
        tensorDesc: NN_TensorDesc | None) -> tuple[OH_NN_ReturnCode, OH_NN_Format | None]:
    """capi.md 1.24: `(code, format)`."""
    return _read(tensorDesc, lambda desc: OH_NN_Format(desc.format))


def _element_count(shape: list[int] | None) -> tuple[OH_NN_ReturnCode, int | None]:
    if shape is None:
        return OH_NN_INVALID_PARAMETER, None
    if any(d <= 0 for d in shape):
        return OH_NN_DYNAMIC_SHAPE, 0
    count = 1
    for d in shape:
        count *= d
        if count > SIZE_MAX:
            return OH_NN_INVALID_PARAMETER, None
    return OH_NN_SUCCESS, count


def OH_NNTensorDesc_GetElementCount(
        tensorDesc: NN_TensorDesc | None) -> tuple[OH_NN_ReturnCode, int | None]:
    """capi.md 1.25: `(code, count)`; a dimension ≤ 0 gives `(OH_NN_DYNAMIC_SHAPE, 0)`."""
    code, shape = _read(tensorDesc, lambda desc: None if desc.shape is None else list(desc.shape))
    return (code, None) if code != OH_NN_SUCCESS else _element_count(shape)


def OH_NNTensorDesc_GetByteSize(tensorDesc: NN_TensorDesc | None) -> tuple[OH_NN_ReturnCode, int | None]:
    """capi.md 1.26: `(code, bytes)`; dynamic shape → `(OH_NN_DYNAMIC_SHAPE, 0)` (ours, 5.2)."""
    code, read = _read(tensorDesc, lambda desc: (
        None if desc.shape is None else list(desc.shape), desc.data_type))
    if code != OH_NN_SUCCESS:
        return code, None
    shape, data_type = read
    code, count = _element_count(shape)
    if code != OH_NN_SUCCESS:
        return code, count
    size = element_size(data_type)
    if size == 0:
        return OH_NN_INVALID_PARAMETER, None
    total = count * size
    if total > SIZE_MAX:
        return OH_NN_INVALID_PARAMETER, None
    return OH_NN_SUCCESS, total
