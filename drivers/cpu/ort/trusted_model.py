"""What an optimised ONNX model read back from a model cache must be before onnxruntime sees
it: the driver's own segment, and nothing that reaches outside the blob.

The blob's tag (hdi/sealed_blob.py `unseal_keyed`) already proves the driver wrote it;
this is the second wall, for a key that leaked or a writer that was unsound. onnxruntime
resolves an initializer's external data as a path (relative to the working directory for a
model given as bytes): a crafted model would make the driver read any file it can, and hand
its bytes back as a run's output. So a model is refused when any tensor in it, at any depth
(initializers, sparse initializers, node attributes, subgraphs, functions), names external
data; when it was not produced by nnrt; when a node belongs to a domain the driver's
lowerings and onnxruntime's own optimisations never emit; or when its inputs and outputs
are not those of the segment it stands for.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import onnx

from nnrt.hdi.sealed_blob import refusal

WHAT = "onnxruntime model cache"
PRODUCER = "nnrt"  # engine._segment_model's producer_name, kept by onnxruntime's optimiser
# The default domain (the lowerings) and those of onnxruntime's CPU fusions and layouts.
NODE_DOMAINS = frozenset({"", "ai.onnx", "com.microsoft", "com.microsoft.nchwc"})


def _graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    """`graph` and every subgraph inside its nodes' attributes."""
    yield graph
    for node in graph.node:
        for attribute in node.attribute:
            for sub in [attribute.g] if attribute.HasField("g") else []:
                yield from _graphs(sub)
            for sub in attribute.graphs:
                yield from _graphs(sub)


def _tensors(graph: onnx.GraphProto) -> Iterator[onnx.TensorProto]:
    """Every tensor `graph` holds itself (not its subgraphs')."""
    yield from graph.initializer
    for sparse in graph.sparse_initializer:
        yield sparse.values
        yield sparse.indices
    for node in graph.node:
        yield from _node_tensors(node)


def _node_tensors(node: onnx.NodeProto) -> Iterator[onnx.TensorProto]:
    for attribute in node.attribute:
        if attribute.HasField("t"):
            yield attribute.t
        yield from attribute.tensors
        for sparse in ([attribute.sparse_tensor] if attribute.HasField("sparse_tensor")
                       else []) + list(attribute.sparse_tensors):
            yield sparse.values
            yield sparse.indices


def check_own_model(blob: bytes, input_names: Sequence[str],
                    output_names: Sequence[str]) -> None:
    """NNRT_INVALID_MODEL_CACHE unless `blob` is a segment model as the driver writes it,
    reading these inputs and writing these outputs, with every byte of data inside it."""
    try:
        model = onnx.ModelProto.FromString(blob)
    except Exception as exc:  # protobuf's DecodeError and friends
        raise refusal(WHAT, f"a segment is not an ONNX model ({exc})") from None
    if model.producer_name != PRODUCER:
        raise refusal(WHAT, f"a segment was produced by {model.producer_name!r}, not by nnrt")
    if model.functions:
        raise refusal(WHAT, "a segment defines functions")
    graphs = list(_graphs(model.graph))
    for graph in graphs:
        for tensor in _tensors(graph):
            if tensor.data_location == onnx.TensorProto.EXTERNAL or tensor.external_data:
                raise refusal(WHAT, f"a segment's tensor {tensor.name!r} names external data")
        for node in graph.node:
            if node.domain not in NODE_DOMAINS:
                raise refusal(WHAT, f"a segment's node {node.name!r} is of domain "
                                    f"{node.domain!r}")
    if [i.name for i in model.graph.input] != list(input_names) or \
            [o.name for o in model.graph.output] != list(output_names):
        raise refusal(WHAT, "a segment's inputs or outputs are not those of its place in the "
                            "model")
