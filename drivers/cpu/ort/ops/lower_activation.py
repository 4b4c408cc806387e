"""Activation: the ActivationType with its parameters (`..activation`)."""

from __future__ import annotations

from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.reference.kernel import Kernel
from ..activation import emit_activation
from ..lowering import NodeEmitter, lowers


@lowers(na.NODE_TYPE_ACTIVATION)
def activation(k: Kernel, e: NodeEmitter) -> None:
    e.require_float32()
    emit_activation(e, e.input(0), k.kind, out=e.output(), alpha=k.alpha, min_val=k.min_val,
                    max_val=k.max_val, approximate=k.approximate)
