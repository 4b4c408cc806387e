"""Float16 precision mode (ModelConfig.enableFloat16): a float32 model computed in float16.

The graph is rewritten once at prepare time: every FLOAT32 tensor becomes FLOAT16 (constants
converted), so every kernel is planned and runs in float16. The model's inputs and outputs
stay FLOAT32 on the wire: inputs are converted on entry, outputs on exit.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from nnrt.protos import hdi_types_pb2 as ht
from nnrt.server.graph import Graph, TensorSpec

_HALF = np.dtype(np.float16)


def _half(spec: TensorSpec) -> TensorSpec:
    if spec.dtype != np.float32:
        return spec
    constant = None if spec.constant is None else spec.constant.astype(_HALF)
    if constant is not None:
        constant.flags.writeable = False
    return replace(spec, dtype=_HALF, data_type=ht.DATA_TYPE_FLOAT16, constant=constant)


def to_float16(graph: Graph) -> Graph:
    """The same graph with every float32 tensor in float16."""
    tensors = tuple(_half(t) for t in graph.tensors)
    nodes = tuple(
        replace(node, inputs=tuple(tensors[t.index] for t in node.inputs),
                outputs=tuple(tensors[t.index] for t in node.outputs))
        for node in graph.nodes
    )
    return replace(graph, tensors=tensors, nodes=nodes,
                   inputs=tuple(tensors[t.index] for t in graph.inputs),
                   outputs=tuple(tensors[t.index] for t in graph.outputs))
