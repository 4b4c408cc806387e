"""The values of the import: one ONNX tensor (`_Value`, its operand and recorded
permutation), its quantisation parameters, a node's attributes, and the permutation
and axis arithmetic the handlers share."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..api.operand import Operand
from .loading import OnnxImportError


_NHWC = (0, 2, 3, 1)
_SQRT2 = math.sqrt(2.0)
_FUSE = {None: 0, "relu": 1, "relu6": 2}
_INT64_MAX = np.iinfo(np.int64).max


@dataclass(eq=False)
class _Value:
    """One ONNX tensor during the import."""

    shape: tuple[int, ...]  # ONNX layout, -1 where unknown
    dtype: np.dtype
    const: np.ndarray | None = None  # a constant, in the ONNX layout
    operand: Operand | None = None  # the device tensor, transposed by `perm`
    perm: tuple[int, ...] | None = None  # operand = onnx_value.transpose(perm); None: identity
    views: dict[tuple[int, ...] | None, Operand] = field(default_factory=dict)
    quant: _Quant | None = None  # an int8/uint8 (int32) tensor's quantisation parameters
    deq: _Value | None = None  # a DequantizeLinear's result: the quantised tensor it reads
    # (a float value that has no operand until a float operation needs one)


@dataclass(frozen=True, eq=False)
class _Quant:
    """Quantisation parameters: r = (q - zero_point) * scale, per tensor (axis None) or per
    channel along the ONNX `axis`."""

    scale: np.ndarray  # float32, [] or [channels]
    zero_point: np.ndarray  # int64, the same shape
    axis: int | None
    dtype: np.dtype  # the quantised type: int8, uint8 (int32: a bias)

    def same(self, other: _Quant | None) -> bool:
        return other is not None and self.dtype == other.dtype and self.axis == other.axis \
            and np.array_equal(self.scale, other.scale) \
            and np.array_equal(self.zero_point, other.zero_point)

    def moved(self, axis: int | None) -> _Quant:
        return _Quant(self.scale, self.zero_point, axis, self.dtype)

    def real(self, q: np.ndarray, dtype: np.dtype) -> np.ndarray:
        """DequantizeLinear of the constant q, as onnxruntime computes it (in float32)."""
        shape = [1] * q.ndim
        if self.axis is not None:
            shape[self.axis] = -1
        zero = self.zero_point.reshape(shape) if self.axis is not None else self.zero_point
        scale = self.scale.reshape(shape) if self.axis is not None else self.scale
        return ((q.astype(np.int64) - zero).astype(np.float32) * scale).astype(dtype)


class _Attrs:
    """A node's attributes; records which were read, so unread ones can be refused."""

    def __init__(self, node: Any) -> None:
        from onnx import helper

        self.node = node
        self.values = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        self.read: set[str] = set()

    def get(self, name: str, default: Any = None) -> Any:
        self.read.add(name)
        value = self.values.get(name, default)
        if isinstance(value, bytes):
            value = value.decode()
        return value

    def ints(self, name: str, default: Sequence[int] | None = None) -> list[int] | None:
        value = self.get(name)
        return list(default) if value is None and default is not None else (
            None if value is None else [int(v) for v in value])

    def unread(self) -> list[str]:
        return sorted(set(self.values) - self.read)


def _inverse(perm: Sequence[int]) -> tuple[int, ...]:
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(inv)


def _identity(perm: Sequence[int] | None) -> bool:
    return perm is None or tuple(perm) == tuple(range(len(perm)))


def _permuted(shape: Sequence[int], perm: Sequence[int] | None) -> tuple[int, ...]:
    return tuple(shape) if perm is None else tuple(shape[p] for p in perm)


def _moves_only_units(perm: Sequence[int], shape: Sequence[int]) -> bool:
    """Whether transposing by `perm` keeps the element order (it moves only size-1 axes)."""
    kept = [p for p in perm if shape[p] != 1]
    return kept == sorted(kept)


def _reshape_target(shape: Sequence[int]) -> list[int] | None:
    """A Reshape target for a shape of at most one unknown dimension (else None)."""
    if sum(d < 0 for d in shape) > 1:
        return None
    return [int(d) for d in shape]


def _axis(axis: int, rank: int, node: Any) -> int:
    if not -rank <= axis < max(rank, 1):
        raise OnnxImportError(f"axis {axis} is outside a rank-{rank} tensor", node)
    return axis % rank if rank else 0


def _physical_axis(axis: int, perm: tuple[int, ...] | None) -> int:
    return axis if perm is None else perm.index(axis)
