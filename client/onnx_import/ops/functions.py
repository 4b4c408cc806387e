"""Operators imported through their ONNX function body: ONNX defines these operators as a
graph of other operators (a FunctionProto in the operator's schema; a context-dependent one,
built for the node's attributes and input types, for Attention and the like). Before the
import, each such node is replaced by its body, its inner tensors renamed apart, and the
body is imported node by node like any other graph — so the mapping is ONNX's own
definition, and exact wherever each inner operator's mapping is.

Only the operators listed in `BY_FUNCTION_BODY` are expanded (each checked against onnx's
node tests); `EXPAND_INSTEAD` names forms of operators the importer maps directly that its
direct mapping refuses but the body computes (LayerNormalization over axis 0). A body that
cannot be built (an unknown schema, a context the schema refuses) leaves the node as it
is, for the importer to refuse by name; an inner node that cannot be mapped is refused
naming the operator it came from ("Attention/Expand")."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

__all__ = ["BY_FUNCTION_BODY", "EXPAND_INSTEAD", "expand_functions"]

log = logging.getLogger(__name__)

# operator -> domain whose opset the body is taken for
BY_FUNCTION_BODY: dict[str, str] = {
    "Attention": "",
    "FlexAttention": "ai.onnx.preview",
    "GroupNormalization": "",
    "MeanVarianceNormalization": "",
    "Swish": "",
}

_DEFAULT_DOMAINS = ("", "ai.onnx")
_MAX_ROUNDS = 4  # bodies whose inner operators are expanded in turn


def _layer_norm_axis0(node: Any, ranks: dict[str, int]) -> bool:
    from onnx import helper

    axis = next((helper.get_attribute_value(a) for a in node.attribute if a.name == "axis"), -1)
    rank = ranks.get(node.input[0])
    return rank is not None and rank > 0 and axis % rank == 0


# handled operator -> the forms its direct mapping refuses and its body computes
EXPAND_INSTEAD: dict[str, Callable[[Any, dict[str, int]], bool]] = {
    "LayerNormalization": _layer_norm_axis0,
}


def _opsets(proto: Any) -> dict[str, int]:
    return {("" if o.domain in _DEFAULT_DOMAINS else o.domain): o.version
            for o in proto.opset_import}


def _body(node: Any, opset: int, types: dict[str, Any]) -> tuple[Any, Any] | None:
    """The node's function body (FunctionProto) at `opset` and its schema, or None."""
    from onnx import FunctionProto, defs

    try:
        schema = defs.get_schema(node.op_type, opset, node.domain)
    except Exception:  # no schema at this opset: refused by name later
        return None
    body = FunctionProto()
    try:
        if schema.has_function:
            version = max(v for v in schema.function_opset_versions if v <= opset)
            body.ParseFromString(schema.get_function_with_opset_version(version))
        elif schema.has_context_dependent_function:
            if any(n and n not in types for n in node.input):
                return None
            version = max(v for v in schema.context_dependent_function_opset_versions
                          if v <= opset)
            body.ParseFromString(schema.get_context_dependent_function_with_opset_version(
                version, node.SerializeToString(),
                [types[n].SerializeToString() for n in node.input if n]))
        else:
            return None
    except Exception as exc:  # the schema refuses this context
        log.debug("no function body for %s: %s", node.op_type, exc)
        return None
    if any(a.type in (a.GRAPH, a.GRAPHS) for n in body.node for a in n.attribute):
        return None  # control flow inside: refused as the operator itself
    return body, schema


def _expanded(node: Any, body: Any, schema: Any, prefix: str) -> list[Any]:
    """The body's nodes wired to the node's inputs and outputs, inner tensors renamed
    `prefix`..., attribute references resolved from the node (or the schema's defaults)."""
    from onnx import NodeProto

    names: dict[str, str] = {"": ""}
    for k, formal in enumerate(body.input):
        names[formal] = node.input[k] if k < len(node.input) else ""
    for k, formal in enumerate(body.output):
        if k < len(node.output) and node.output[k]:
            names[formal] = node.output[k]
    given = {a.name: a for a in node.attribute}
    label = f"{node.name or node.op_type}/"
    nodes = []
    for inner in body.node:
        new = NodeProto()
        new.CopyFrom(inner)
        new.name = label + (inner.name or inner.op_type)
        del new.input[:]
        del new.output[:]
        new.input.extend(names.get(n, prefix + n) for n in inner.input)
        new.output.extend(names.get(n, prefix + n) for n in inner.output)
        del new.attribute[:]
        for a in inner.attribute:
            if not a.ref_attr_name:
                new.attribute.append(a)
                continue
            source = given.get(a.ref_attr_name)
            if source is None and a.ref_attr_name in schema.attributes:
                default = schema.attributes[a.ref_attr_name].default_value
                source = default if default.name else None
            if source is not None:
                value = type(a)()
                value.CopyFrom(source)
                value.name = a.name
                new.attribute.append(value)
        nodes.append(new)
    return nodes


def expand_functions(proto: Any, handled: set[str]) -> Any:
    """`proto` (modified in place) with each node of `BY_FUNCTION_BODY` (and each form of
    `EXPAND_INSTEAD`) replaced by its function body; the operators in `handled` are left
    to their direct mappings."""
    from onnx import shape_inference

    opsets = _opsets(proto)
    for round_ in range(_MAX_ROUNDS):
        wanted = {k for k, n in enumerate(proto.graph.node)
                  if (n.op_type in BY_FUNCTION_BODY and n.op_type not in handled and
                      (n.domain or "") in (BY_FUNCTION_BODY[n.op_type], "ai.onnx")) or
                  n.op_type in EXPAND_INSTEAD}
        if not wanted:
            return proto
        try:
            inferred = shape_inference.infer_shapes(proto, strict_mode=False)
        except Exception:  # the import says what inference cannot do
            inferred = proto
        types = {v.name: v.type for v in [*inferred.graph.input, *inferred.graph.value_info,
                                           *inferred.graph.output]}
        ranks = {name: len(t.tensor_type.shape.dim) for name, t in types.items()
                 if t.HasField("tensor_type") and t.tensor_type.HasField("shape")}
        from onnx import helper

        for t in proto.graph.initializer:
            types.setdefault(t.name, helper.make_tensor_type_proto(t.data_type, t.dims))
            ranks.setdefault(t.name, len(t.dims))
        changed = False
        replaced: list[Any] = []
        for k, node in enumerate(proto.graph.node):
            check = EXPAND_INSTEAD.get(node.op_type)
            expand = k in wanted and (check is None or check(node, ranks))
            found = _body(node, opsets.get(BY_FUNCTION_BODY.get(node.op_type, ""), 0),
                          types) if expand else None
            if found is None:
                replaced.append(node)
                continue
            body, schema = found
            replaced.extend(_expanded(node, body, schema, f"{node.op_type}_{round_}_{k}__"))
            for o in body.opset_import:
                domain = "" if o.domain in _DEFAULT_DOMAINS else o.domain
                if domain not in opsets:
                    proto.opset_import.append(helper.make_opsetid(o.domain, o.version))
                    opsets[domain] = o.version
            changed = True
        if not changed:
            return proto
        del proto.graph.node[:]
        proto.graph.node.extend(replaced)
    return proto
