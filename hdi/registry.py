"""Operator registries by NodeType: each driver keeps one table of its operator classes."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T", bound=type)


def registrar(table: dict[int, type]) -> Callable[..., Callable[[T], T]]:
    """A class decorator factory filling `table`: `@register(NODE_TYPE_A, NODE_TYPE_B)`
    makes the class the operator of each NodeType code given (once per code)."""

    def register(*node_types: int) -> Callable[[T], T]:
        def add(cls: T) -> T:
            for node_type in node_types:
                if node_type in table:
                    raise RuntimeError(f"NodeType {node_type} registered twice")
                table[node_type] = cls
            return cls

        return add

    return register
