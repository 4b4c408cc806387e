"""Serialising a validated Graph into a model-cache blob and back (ExportModelCache /
PrepareModelFromModelCache), for any device that caches its models as graphs.

Blob layout (little endian):

    magic "NNRTGRPH" | u32 format version | u32 identity length | identity (UTF-8)
    | u32 CRC-32 of everything after it | u64 model length | Model protobuf
    | constant bytes, back to back

(CRC-32 detects corruption and truncation at memory speed; a cache is not a security
boundary — whoever can write it can write the model too.)

`identity` names the device and driver version that wrote the blob (plus any setting the
compiled form depends on); a blob from another device, another driver version, another
format version, or with a wrong digest, a truncation or trailing garbage is refused with
NNRT_INVALID_MODEL_CACHE. A blob that passes is still validated as a Model (a digest
proves integrity, not that the writer was sound).
"""

from __future__ import annotations

import struct
import zlib

from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import model_types_pb2 as mt
from nnrt.protos import node_attrs_pb2 as na
from nnrt.server.errors import NNRT_INVALID_MODEL_CACHE, DriverError
from nnrt.server.graph import Graph
from nnrt.server.model_validation import build_graph

MAGIC = b"NNRTGRPH"
FORMAT_VERSION = 1
_CONSTANTS = 1  # the pseudo buffer id constants are read from inside a blob
# attribute message type -> its Node.nodeAttr member
_MEMBER_OF = {f.message_type.full_name: f.name
              for f in na.Node.DESCRIPTOR.oneofs_by_name["nodeAttr"].fields}


def encode(graph: Graph, identity: str) -> bytes:
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
    ident = identity.encode()
    return (MAGIC + struct.pack("<II", FORMAT_VERSION, len(ident)) + ident
            + struct.pack("<I", zlib.crc32(payload)) + payload)


def _refuse(why: str) -> DriverError:
    return DriverError(NNRT_INVALID_MODEL_CACHE, f"model cache refused: {why}")


def decode(blob: bytes, identity: str) -> Graph:
    """The graph of a blob written by `encode` with the same identity; DriverError otherwise."""
    view = memoryview(blob)
    head = len(MAGIC) + 8
    if len(view) < head or bytes(view[:len(MAGIC)]) != MAGIC:
        raise _refuse("not an nnrt graph cache")
    version, ident_length = struct.unpack_from("<II", view, len(MAGIC))
    if version != FORMAT_VERSION:
        raise _refuse(f"format version {version}, this driver reads {FORMAT_VERSION}")
    ident_end = head + ident_length
    if len(view) < ident_end + 4 + 8:
        raise _refuse("truncated")
    written_by = bytes(view[head:ident_end]).decode(errors="replace")
    if written_by != identity:
        raise _refuse(f"written by {written_by!r}, this is {identity!r}")
    (checksum,) = struct.unpack_from("<I", view, ident_end)
    payload = view[ident_end + 4:]
    if zlib.crc32(payload) != checksum:
        raise _refuse("checksum mismatch (corrupt or truncated)")
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
