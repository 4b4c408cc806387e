"""What the simulated NPU computes: int8 (quantised) and float16 natively, never float32.

Like an NNAPI accelerator driver, the NPU runs a float32 model only in relaxed precision:
with EnableFloat16 the graph is rewritten to float16 (hdi/reference/float16.py, the CPU
driver's float16 mode and the rules of semantics.md) before anything else; without it every
node that computes on float32 is unsupported. float64 is never computed. The numbers are
the CPU driver's reference kernels in those precisions (shared code, not a copy), so int8
results are bit-exact with the CPU driver's.
"""

from __future__ import annotations

import numpy as np

from nnrt.hdi.reference.float16 import to_float16
from nnrt.hdi.reference.graph_checks import reference_kernel
from nnrt.hdi.reference.kernel import unsupported
from nnrt.hdi.graph import Graph, NodeSpec

# Computing in these is not the NPU's: float32 needs relaxed precision (EnableFloat16).
_NOT_NATIVE = (np.dtype(np.float32), np.dtype(np.float64))


def check_node(node: NodeSpec) -> None:
    """Accept a node of a (possibly rewritten) graph; DriverError otherwise."""
    for tensor in (*node.inputs, *node.outputs):
        if tensor.dtype in _NOT_NATIVE:
            hint = (" (compile with EnableFloat16: the NPU runs float32 models in float16)"
                    if tensor.dtype == np.float32 else "")
            raise unsupported(node, f"the NPU does not compute in {tensor.dtype} "
                                    f"({tensor.name!r}){hint}")
    reference_kernel(node)


def device_graph(graph: Graph, enable_float16: bool) -> Graph:
    """The graph as the NPU runs it (float16 in relaxed precision), every node checked;
    DriverError (NNRT_UNSUPPORTED_OP naming the node and why) otherwise."""
    if enable_float16:
        graph = to_float16(graph)
    for index in graph.execution_order:
        check_node(graph.nodes[index])
    return graph


def accepts(node: NodeSpec) -> None:
    """GetSupportedOperation's rule (it knows no ModelConfig: float32 is not native)."""
    check_node(node)

