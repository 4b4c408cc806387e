"""`Operand`: a tensor of a Model (an input, a constant or a result), with Python's
arithmetic operators as the model's operations."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .dtypes import Shape

if TYPE_CHECKING:
    from .model import Model


@dataclass(eq=False)
class Operand:
    """A tensor of a `Model`: an input, a constant, or an operation's result."""

    model: Model
    index: int
    shape: Shape
    dtype: np.dtype
    value: np.ndarray | None = field(default=None, repr=False)  # constants

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __add__(self, other: Any) -> Operand:
        return self.model.add(self, other)

    def __radd__(self, other: Any) -> Operand:
        return self.model.add(other, self)

    def __sub__(self, other: Any) -> Operand:
        return self.model.sub(self, other)

    def __rsub__(self, other: Any) -> Operand:
        return self.model.sub(other, self)

    def __mul__(self, other: Any) -> Operand:
        return self.model.mul(self, other)

    def __rmul__(self, other: Any) -> Operand:
        return self.model.mul(other, self)

    def __truediv__(self, other: Any) -> Operand:
        return self.model.div(self, other)

    def __matmul__(self, other: Any) -> Operand:
        return self.model.matmul(self, other)
