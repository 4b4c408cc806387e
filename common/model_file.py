"""Saved models: a finished model in one file, compiled and run later without the code that
built it (`nnrt run`, `nnrt bench`).

    from nnrt.common import model_file
    model_file.save_model(model.handle, "mlp.nnrt")    # a finished OH_NNModel (Pythonic: .handle)
    lowered = model_file.load("mlp.nnrt")              # LoweredModel: HDI graph + I/O descriptors
    model_id = lowered.hdi.prepare(client)             # on any device, later, elsewhere

What is saved is the model as `OH_NNModel_Finish` lowered it (client/capi/model.py): the HDI
graph a compilation prepares (tensors with their data types, dimensions, formats and
quantization parameters; typed nodes with their attributes; inputs and outputs) and the
front end's description of the inputs and outputs (names, OH_NN data types, shapes with -1
for a dynamic dimension, OH_NN formats). It is device-independent: unlike a model cache
(hdi/graph_cache.py) it names no device and no driver.

File layout (version 1, little endian; suggested extension `.nnrt`):

    offset  size  field
    0       8     magic "NNRTMODL"
    8       4     u32 format version (1)
    12      4     u32 CRC-32 (zlib.crc32) of every byte after this field, to the end of file
    16      4     u32 header length H
    20      H     header: UTF-8 JSON object
                    {"inputs":  [{"name": str, "data_type": int, "shape": [int], "format": int}],
                     "outputs": [same]}
                  data_type is the OH_NN_DataType value, format the OH_NN_Format value
    20+H    8     u64 model length M
    28+H    M     the HDI `Model` protobuf (protos/model_types.proto): allTensors, nodes,
                  inputIndex, outputIndex, subGraph. A constant tensor's `data` is a window
                  {bufferId: 1, bufferSize: C, offset, dataSize} of the constant section
    28+H+M  C     constant section: the constant tensors' bytes back to back, in tensor order
                  (C = the rest of the file)

A file with another magic or format version, a CRC mismatch (a flipped bit, a truncation,
bytes appended), an undecodable header or model, a constant window that does not tile the
constant section, an index out of range, or I/O descriptors that disagree with the graph is
refused with a ValueError naming what is wrong. (CRC-32 detects accidents, not tampering:
whoever can write the file can write the model.) The graph itself is validated by the driver
that prepares it, as for any model.
"""

from __future__ import annotations

import json
import math
import os
import struct
import tempfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import model_types_pb2 as mt

from .dtypes import numpy_dtype
from .hdi_model import DATA_TYPES, HdiModelBuilder, IODesc, LoweredModel, hdi_format

__all__ = ["EXTENSION", "FORMAT_VERSION", "MAGIC", "dtype_of", "dumps", "load", "loads", "save",
           "save_model", "shape_text"]

MAGIC = b"NNRTMODL"
FORMAT_VERSION = 1
EXTENSION = ".nnrt"
_CONSTANTS = 1  # the pseudo buffer id constant windows refer to
_PREFIX = struct.Struct("<8sII")  # magic, version, CRC-32
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_OH_FORMATS = range(0, 4)  # OH_NN_Format: NONE, NCHW, NHWC, ND


# -- writing --------------------------------------------------------------------------------


def _io_json(desc: IODesc) -> dict[str, Any]:
    return {"name": desc.name, "data_type": int(desc.data_type),
            "shape": [int(d) for d in desc.shape], "format": int(desc.format)}


def dumps(lowered: LoweredModel) -> bytes:
    """The bytes of the saved-model file of `lowered`."""
    hdi = lowered.hdi
    if any(not 0 <= i < len(hdi.tensors) for i in hdi.constants):
        raise ValueError("a constant refers to a tensor the model does not have")
    chunks = [np.ascontiguousarray(hdi.constants[i]).reshape(-1).view(np.uint8).tobytes()
              for i in sorted(hdi.constants)]
    total = sum(len(c) for c in chunks)
    model = hdi.model(ht.SharedBuffer(bufferId=_CONSTANTS, bufferSize=total) if total else None)
    header = json.dumps({"inputs": [_io_json(d) for d in lowered.inputs],
                         "outputs": [_io_json(d) for d in lowered.outputs]},
                        separators=(",", ":")).encode()
    body = model.SerializeToString()
    payload = b"".join([_U32.pack(len(header)), header, _U64.pack(len(body)), body, *chunks])
    return _PREFIX.pack(MAGIC, FORMAT_VERSION, zlib.crc32(payload)) + payload


def save(lowered: LoweredModel, path: str | os.PathLike) -> Path:
    """Write `lowered` to `path` (atomically: a reader never sees half a file)."""
    data = dumps(lowered)
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent or ".")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return path


def save_model(model: Any, path: str | os.PathLike) -> Path:
    """Save a finished `OH_NNModel` (the Pythonic `Model`'s is `model.handle`; a `Model`
    itself is accepted too): anything whose `lowered()` gives its LoweredModel. TypeError for
    anything else, ValueError if it is not finished or destroyed."""
    handle = model if callable(getattr(model, "lowered", None)) else getattr(model, "handle", None)
    if not callable(getattr(handle, "lowered", None)):
        raise TypeError(f"save_model takes a finished OH_NNModel, not {type(model).__name__}")
    if getattr(handle, "destroyed", False):
        raise ValueError("the model is destroyed")
    return save(handle.lowered(), path)


# -- reading --------------------------------------------------------------------------------


class _Refused(ValueError):
    """Why a file is not a sound saved model (`loads` names the file)."""


def _bad(why: str) -> _Refused:
    return _Refused(why)


def _io_desc(entry: Any, where: str) -> IODesc:
    if not isinstance(entry, dict):
        raise _bad(f"{where} is not an object")
    name, data_type = entry.get("name"), entry.get("data_type")
    shape, fmt = entry.get("shape"), entry.get("format")
    if not isinstance(name, str):
        raise _bad(f"{where}: name missing")
    if not isinstance(data_type, int) or DATA_TYPES.get(data_type, (0, None))[1] is None:
        raise _bad(f"{where} ({name!r}): data type {data_type!r} is not an OH_NN_DataType")
    if not isinstance(shape, list) or not all(isinstance(d, int) and (d >= 1 or d == -1)
                                              for d in shape):
        raise _bad(f"{where} ({name!r}): shape {shape!r} is not a list of dimensions")
    if not isinstance(fmt, int) or fmt not in _OH_FORMATS:
        raise _bad(f"{where} ({name!r}): format {fmt!r} is not an OH_NN_Format")
    return IODesc(name=name, data_type=data_type, shape=list(shape), format=fmt)


def _constant(tensor: ht.Tensor, data: bytes) -> np.ndarray:
    """The constant as an array of the tensor's type and shape where they fit its bytes."""
    dtype = numpy_dtype(tensor.dataType)
    if dtype is None or len(data) % dtype.itemsize:
        return np.frombuffer(data, np.uint8).copy()
    array = np.frombuffer(data, dtype).copy()
    dims = list(tensor.dims)
    if all(d >= 0 for d in dims) and math.prod(dims) == array.size:
        return array.reshape(dims)
    return array


def loads(blob: bytes | bytearray | memoryview, source: str = "the data") -> LoweredModel:
    """The model of a saved-model file's bytes; ValueError (naming `source` and what is
    wrong) otherwise."""
    try:
        return _parse(memoryview(blob))
    except _Refused as exc:
        raise ValueError(f"{source} is not a valid nnrt model file: {exc}") from None


def _parse(view: memoryview) -> LoweredModel:
    if not len(view):
        raise _bad("the file is empty")
    if bytes(view[:len(MAGIC)]) != MAGIC:
        raise _bad(f"it does not start with {MAGIC.decode()!r}")
    if len(view) < _PREFIX.size:
        raise _bad(f"truncated: only {len(view)} bytes")
    _, version, checksum = _PREFIX.unpack_from(view, 0)
    if version != FORMAT_VERSION:
        raise _bad(f"format version {version}; this nnrt reads {FORMAT_VERSION}")
    payload = view[_PREFIX.size:]
    if zlib.crc32(payload) != checksum:
        raise _bad("checksum mismatch (corrupt, truncated or extended)")
    if len(payload) < _U32.size:
        raise _bad("truncated header")
    (header_length,) = _U32.unpack_from(payload, 0)
    model_at = _U32.size + header_length
    if model_at + _U64.size > len(payload):
        raise _bad(f"header length {header_length} runs past the end")
    try:
        header = json.loads(bytes(payload[_U32.size:model_at]).decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _bad(f"undecodable header: {exc}") from None
    if not isinstance(header, dict) or not isinstance(header.get("inputs"), list) \
            or not isinstance(header.get("outputs"), list):
        raise _bad("the header has no inputs and outputs lists")
    inputs = [_io_desc(e, f"input {i}") for i, e in enumerate(header["inputs"])]
    outputs = [_io_desc(e, f"output {i}") for i, e in enumerate(header["outputs"])]
    (model_length,) = _U64.unpack_from(payload, model_at)
    constants_at = model_at + _U64.size + model_length
    if constants_at > len(payload):
        raise _bad(f"model length {model_length} runs past the end")
    try:
        model = mt.Model.FromString(bytes(payload[model_at + _U64.size:constants_at]))
    except Exception as exc:  # protobuf's DecodeError and friends
        raise _bad(f"undecodable model: {exc}") from None
    constants = payload[constants_at:]
    return _lowered(model, constants, inputs, outputs)


def _lowered(model: mt.Model, constants: memoryview, inputs: list[IODesc],
             outputs: list[IODesc]) -> LoweredModel:
    count = len(model.allTensors)
    builder = HdiModelBuilder(model.name or "model")
    offset = 0
    for index, stored in enumerate(model.allTensors):
        tensor = ht.Tensor()
        tensor.CopyFrom(stored)
        if stored.HasField("data"):
            window = stored.data
            if window.bufferId != _CONSTANTS or window.bufferSize != len(constants) \
                    or window.offset != offset or offset + window.dataSize > len(constants):
                raise _bad(f"tensor {index} ({stored.name!r}): its constant window "
                           f"does not fit the constant section")
            builder.constants[index] = _constant(
                stored, bytes(constants[offset:offset + window.dataSize]))
            offset += window.dataSize
            tensor.ClearField("data")
        builder.tensors.append(tensor)
    if offset != len(constants):
        raise _bad(f"{len(constants) - offset} bytes after the last constant")
    for position, node in enumerate(model.nodes):
        if node.WhichOneof("nodeAttr") is None:
            raise _bad(f"node {position} ({node.name!r}) has no attributes")
        bad = [i for i in [*node.inputIndex, *node.outputIndex] if i >= count]
        if bad:
            raise _bad(f"node {position} ({node.name!r}) refers to tensor {bad[0]}, "
                       f"the model has {count}")
    builder.nodes = [node for node in model.nodes]
    for kind, indices, descs in (("input", model.inputIndex, inputs),
                                 ("output", model.outputIndex, outputs)):
        if len(indices) != len(descs):
            raise _bad(f"the graph has {len(indices)} {kind}s, the header describes "
                       f"{len(descs)}")
        for i, (index, desc) in enumerate(zip(indices, descs)):
            if index >= count:
                raise _bad(f"{kind} {i} is tensor {index}, the model has {count}")
            tensor = builder.tensors[index]
            if DATA_TYPES[desc.data_type][0] != tensor.dataType or \
                    list(tensor.dims) != desc.shape or hdi_format(desc.format) != tensor.format:
                raise _bad(f"{kind} {i} ({desc.name!r}) is described as "
                           f"{_describe_io(desc)}, the graph's tensor {index} disagrees")
    builder.inputs = list(model.inputIndex)
    builder.outputs = list(model.outputIndex)
    if not builder.inputs or not builder.outputs:
        raise _bad("the model has no inputs or no outputs")
    return LoweredModel(hdi=builder, inputs=inputs, outputs=outputs)


def load(path: str | os.PathLike) -> LoweredModel:
    """The model saved in `path`; ValueError (naming the file and what is wrong) if the file
    is not a sound saved model, OSError if it cannot be read."""
    path = Path(path)
    return loads(path.read_bytes(), str(path))


# -- describing -----------------------------------------------------------------------------


def dtype_of(desc: IODesc) -> np.dtype:
    """The numpy type of an I/O descriptor."""
    dtype = DATA_TYPES[desc.data_type][1]
    assert dtype is not None
    return dtype


def shape_text(shape: list[int] | tuple[int, ...]) -> str:
    """`[?, 16]`: a shape, dynamic dimensions as `?`."""
    return "[" + ", ".join("?" if d < 0 else str(d) for d in shape) + "]"


def _describe_io(desc: IODesc) -> str:
    return f"{dtype_of(desc)} {shape_text(desc.shape)}"
