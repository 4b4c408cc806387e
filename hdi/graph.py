"""The validated, device-neutral form of an HDI Model that the host hands to a driver.

The host builds a `Graph` once per PrepareModel / GetSupportedOperation from the protobuf
Model after validating it (hdi/model_validation.py); constant data is already copied out
of the client's shared buffer, because that buffer is released as soon as the call returns.
Drivers never see protobuf tensors, buffer ids or sessions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

DYNAMIC = -1  # a dimension whose size is only known at Run time

Shape = tuple[int, ...]


@dataclass(frozen=True)
class QuantParam:
    num_bits: int
    zero_point: int
    scale: float


@dataclass(frozen=True, eq=False)
class TensorSpec:
    """One entry of Model.allTensors."""

    index: int
    name: str
    data_type: int  # HDI DataType code
    dtype: np.dtype
    shape: Shape  # DYNAMIC marks a run-time dimension; () is a scalar
    format: int  # HDI Format code
    quant_params: tuple[QuantParam, ...] = ()
    constant: np.ndarray | None = None  # read-only, shaped, owned by the driver

    @property
    def is_constant(self) -> bool:
        return self.constant is not None

    @property
    def is_dynamic(self) -> bool:
        return DYNAMIC in self.shape

    def byte_size(self, shape: Shape | None = None) -> int:
        """Bytes of a dense tensor of this type with `shape` (default: the declared one)."""
        return math.prod(self.shape if shape is None else shape) * self.dtype.itemsize


@dataclass(frozen=True, eq=False)
class NodeSpec:
    """One entry of Model.nodes, with its tensors resolved."""

    index: int
    name: str
    node_type: int  # HDI NodeType code
    attrs: Any  # the typed attribute message of the node's oneof (nnrt.protos.node_attrs_pb2)
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    quant_type: int = 0  # HDI QuantType code


@dataclass(frozen=True, eq=False)
class Graph:
    """A validated Model: acyclic, every index in range, every tensor consistent."""

    name: str
    tensors: tuple[TensorSpec, ...]
    nodes: tuple[NodeSpec, ...]  # Model.nodes order (the order of GetSupportedOperation)
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    execution_order: tuple[int, ...] = field(default=())  # node indices, topologically sorted
    # GetSupportedOperation only: nodes whose type or attributes could not be decoded. They
    # carry attrs=None and must be answered False (hdi.md 3.5); PrepareModel never has any.
    undecodable: frozenset[int] = frozenset()
