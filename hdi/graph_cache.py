"""Serialising a validated Graph into a model-cache blob and back (ExportModelCache /
PrepareModelFromModelCache), for any device that caches its models as graphs.

The blob is sealed (hdi/sealed_blob.py: magic "NNRTGRPH", format version 2, identity,
the driver's HMAC) around this payload (little endian):

    u64 model length | Model protobuf | constant bytes, back to back

A blob from another device, another driver version, another format version, or whose tag
does not verify (altered, truncated, trailing garbage, crafted, another driver's key) is
refused with NNRT_INVALID_MODEL_CACHE before its payload is read. A blob that passes is
still validated as a fresh Model (model_validation.build_graph, as PrepareModel does: a tag
proves who wrote it, not that the writer was sound).

`keyed=False`: the same payload in the checksummed envelope (format version 1), the program
inside an offline binary (drivers/accel/offline.py), which no driver key can vouch for.
"""

from __future__ import annotations

import struct

from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import model_types_pb2 as mt
from nnrt.protos import node_attrs_pb2 as na
from nnrt.common.errors import DriverError
from nnrt.hdi.graph import Graph
from nnrt.hdi.model_validation import build_graph
from nnrt.hdi.sealed_blob import refusal, seal, seal_keyed, unseal, unseal_keyed

MAGIC = b"NNRTGRPH"
WHAT = "model cache"
FORMAT_VERSION = 2  # the keyed envelope
CHECKSUMMED_FORMAT_VERSION = 1  # the checksummed one (keyed=False)
_CONSTANTS = 1  # the pseudo buffer id constants are read from inside a blob
# attribute message type -> its Node.nodeAttr member
_MEMBER_OF = {f.message_type.full_name: f.name
              for f in na.Node.DESCRIPTOR.oneofs_by_name["nodeAttr"].fields}


def encode(graph: Graph, identity: str, *, keyed: bool = True) -> bytes:
    model = mt.Model(name=graph.name, inputIndex=[t.index for t in graph.inputs],
                     outputIndex=[t.index for t in graph.outputs])
    chunks, offset = [], 0
    total = sum(t.constant.nbytes for t in graph.tensors if t.constant is not None)
    for spec in graph.tensors:
        tensor = model.allTensors.add(
            name=spec.name, dataType=spec.data_type, dims=spec.shape, format=spec.format,
            quantParams=[ht.QuantParam(numBits=q.num_bits, zeroPoint=q.zero_point, scale=q.scale)
                         for q in spec.quant_params])
        if spec.constant is not None:
            data = spec.constant.tobytes()
            tensor.data.CopyFrom(ht.SharedBuffer(bufferId=_CONSTANTS, bufferSize=total,
                                                 offset=offset, dataSize=len(data)))
            chunks.append(data)
            offset += len(data)
    for node in graph.nodes:
        proto = model.nodes.add(name=node.name, nodeType=node.node_type,
                                inputIndex=[t.index for t in node.inputs],
                                outputIndex=[t.index for t in node.outputs],
                                quantType=node.quant_type)
        getattr(proto, _MEMBER_OF[node.attrs.DESCRIPTOR.full_name]).CopyFrom(node.attrs)
    model.subGraph.add(name="NNRt_SubGraph", inputIndices=model.inputIndex,
                       outputIndices=model.outputIndex, nodeIndices=range(len(graph.nodes)))
    body = model.SerializeToString()
    payload = struct.pack("<Q", len(body)) + body + b"".join(chunks)
    if keyed:
        return seal_keyed(MAGIC, FORMAT_VERSION, identity, payload)
    return seal(MAGIC, CHECKSUMMED_FORMAT_VERSION, identity, payload)


def _refuse(why: str) -> DriverError:
    return refusal(WHAT, why)


def decode(blob: bytes, identity: str, *, keyed: bool = True) -> Graph:
    """The graph of a blob written by `encode` with the same identity (and, keyed, by this
    driver), validated as a fresh model; DriverError otherwise."""
    payload = (unseal_keyed(blob, MAGIC, FORMAT_VERSION, identity, WHAT) if keyed
               else unseal(blob, MAGIC, CHECKSUMMED_FORMAT_VERSION, identity, WHAT))
    if len(payload) < 8:
        raise _refuse("truncated")
    (body_length,) = struct.unpack_from("<Q", payload, 0)
    if 8 + body_length > len(payload):
        raise _refuse("truncated model")
    try:
        model = mt.Model.FromString(bytes(payload[8:8 + body_length]))
    except Exception as exc:  # protobuf's DecodeError and friends
        raise _refuse(f"undecodable model: {exc}")
    constants = payload[8 + body_length:]  # no copy: constants stay views of the blob

    def read_constant(buffer: ht.SharedBuffer) -> bytes:
        if buffer.bufferId != _CONSTANTS or buffer.bufferSize != len(constants) or \
                buffer.offset + buffer.dataSize > len(constants):
            raise _refuse("constant outside the blob")
        return constants[buffer.offset:buffer.offset + buffer.dataSize].toreadonly()

    try:
        return build_graph(model, read_constant)
    except DriverError as exc:
        raise _refuse(exc.message)
