"""Assert: checks that every element of the condition (input 0) is true; when one is false the
run fails with NNRT_FAILED, the message naming the node and showing the first `summarize`
entries of each data tensor (inputs 1...). Otherwise the output is the condition itself.

Decisions where the spec is silent:

* The condition is a BOOL tensor of any shape (TensorFlow takes a scalar; an empty tensor
  holds no false element and passes). Other dtypes are unsupported.
* Any number of data tensors (the C API sends exactly one), of any dtype; only their
  values in the failure message depend on them.
* summarize >= 0 shows that many entries of each data tensor (0: only its shape and
  dtype); a negative summarize shows every entry, capped at 1000 to keep the message
  bounded.
* One output, the condition (same shape, BOOL), or none. A constant false condition is not
  refused at prepare time: every run fails, as the graph says.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np

from nnrt.hdi.reference.kernel import Kernel, invalid, register, unsupported
from nnrt.protos import node_attrs_pb2 as na
from nnrt.common.errors import NNRT_FAILED, DriverError
from nnrt.hdi.graph import NodeSpec, Shape

log = logging.getLogger(__name__)

BOOL = np.dtype(np.bool_)
MAX_SHOWN = 1000  # entries per data tensor in a failure message, whatever summarize says


@register(na.NODE_TYPE_ASSERT)
class Assert(Kernel):
    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        if not node.inputs:
            raise invalid(node, "Assert needs a condition input")
        if len(node.outputs) > 1:
            raise invalid(node, f"expects 0 or 1 outputs, has {len(node.outputs)}")
        cond = node.inputs[0]
        if cond.dtype != BOOL:
            raise unsupported(node, f"condition dtype {cond.dtype} (bool only)")
        if node.outputs and node.outputs[0].dtype != BOOL:
            raise invalid(node, f"output dtype {node.outputs[0].dtype} is not bool")
        summarize = int(node.attrs.summarize)
        self.shown = MAX_SHOWN if summarize < 0 else min(summarize, MAX_SHOWN)

    def infer_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        return [tuple(input_shapes[0])] if self.node.outputs else []

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        cond = inputs[0]
        if not cond.all():
            node = self.node
            parts = [f"node {node.index} ({node.name}): assertion failed "
                     f"({int(cond.size - np.count_nonzero(cond))} of {cond.size} condition "
                     f"elements false)"]
            for k, data in enumerate(inputs[1:], start=1):
                shown = f": {self.entries(data)}" if self.shown else ""
                parts.append(f"input {k} {data.dtype}{list(data.shape)}{shown}")
            message = "; ".join(parts)
            log.info("%s", message)
            raise DriverError(NNRT_FAILED, message)
        return [cond] if self.node.outputs else []

    def entries(self, data: np.ndarray) -> str:
        flat = data.reshape(-1)
        shown = ", ".join(str(v) for v in flat[:self.shown])  # numpy scalars: shortest repr
        more = "" if flat.size <= self.shown else f", ... ({flat.size - self.shown} more)"
        return f"[{shown}{more}]"
