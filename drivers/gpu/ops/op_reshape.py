"""Reshape, Flatten, Squeeze, Unsqueeze and ExpandDims: the output is the input's bytes in
another shape, so these ops launch nothing and share their input's device buffer
(`alias_input = 0`); any dtype. The output shape is the reference's inference.

Refused: a Reshape whose shape tensor, or an ExpandDims whose axis, arrives at run time (the
GPU plan needs every shape from the input shapes alone). A constant shape / axis input is
read by the reference and never uploaded.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..kernel import Builder, DeviceTensor, Epilogue, GpuOp, Launch, register
from nnrt.hdi.reference.kernel import Kernel, unsupported
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import NodeSpec


@register(na.NODE_TYPE_RESHAPE, na.NODE_TYPE_FLATTEN, na.NODE_TYPE_SQUEEZE,
          na.NODE_TYPE_UNSQUEEZE, na.NODE_TYPE_EXPAND_DIMS)
class Alias(GpuOp):
    alias_input = 0

    def __init__(self, node: NodeSpec, ref: Kernel) -> None:
        super().__init__(node, ref)
        if node.node_type == na.NODE_TYPE_RESHAPE and ref.target is None:
            raise unsupported(node, "a run-time shape tensor (the output shape depends on "
                                    "its values)")
        if node.node_type == na.NODE_TYPE_EXPAND_DIMS and ref.axis is None:
            raise unsupported(node, "a run-time axis (the output shape depends on its value)")
        self.own_constants = frozenset(range(1, len(node.inputs)))

    def build(self, b: Builder, inputs: Sequence[DeviceTensor | None],
              outputs: Sequence[DeviceTensor], post: Epilogue) -> list[Launch]:
        return []  # the plan shares the input's buffer; nothing to launch
