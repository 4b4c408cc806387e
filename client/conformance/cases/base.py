"""The cases' building blocks: `Operand`, `Case`, the generator registry (`generates`)
and `cases_for`; the generators are in this package's family modules."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na

NHWC = ht.FORMAT_NHWC


@dataclass(frozen=True)
class Operand:
    """One input of the node: `constant` ones travel in the model, the others at Run;
    `quant`: (numBits, zeroPoint, scale) per channel, empty when not quantised."""

    array: np.ndarray
    constant: bool = False
    quant: tuple[tuple[int, int, float], ...] = ()


@dataclass(frozen=True)
class Case:
    """One node type's node, its operands and what its outputs are."""

    name: str
    node_type: int
    operands: tuple[Operand, ...]
    attrs: Any = None
    outputs: int = 1
    out_dtype: Any = None  # default: the first operand's
    out_quant: tuple[tuple[int, int, float], ...] = ()
    fmt: int = ht.FORMAT_NONE
    quant_type: int = ht.QUANT_TYPE_NONE
    # Whether float16 mode applies (float32 operands; the node is not integer-only).
    float16: bool = True
    notes: dict[str, Any] = field(default_factory=dict)

    @property
    def type_name(self) -> str:
        return na.NodeType.Name(self.node_type)


Generator = Callable[[np.random.Generator], list[Case]]
GENERATORS: dict[int, Generator] = {}


def _f32(rng: np.random.Generator, *shape: int, low: float = -2.0, high: float = 2.0) -> np.ndarray:
    return rng.uniform(low, high, shape).astype(np.float32)


def _run(array: np.ndarray) -> Operand:
    return Operand(np.asarray(array))


def _const(array: Any, dtype: Any = None) -> Operand:
    return Operand(np.asarray(array, dtype=dtype), constant=True)


def generates(*node_types: int) -> Callable[[Generator], Generator]:
    def register(function: Generator) -> Generator:
        for node_type in node_types:
            GENERATORS[node_type] = _bind(function, node_type)
        return function
    return register


def _bind(function: Callable[..., list[Case]], node_type: int) -> Generator:
    return lambda rng: function(rng, node_type)


def _case(node_type: int, name: str, operands: list[Operand], attrs: Any = None,
          **kw: Any) -> Case:
    return Case(name=name, node_type=node_type, operands=tuple(operands), attrs=attrs, **kw)


def cases_for(node_type: int, seed: int = 2024) -> list[Case]:
    """The cases of one node type (empty when there is no generator for it)."""
    generator = GENERATORS.get(node_type)
    if generator is None:
        return []
    return generator(np.random.default_rng(seed * 1000 + node_type))
