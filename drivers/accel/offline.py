"""Offline models of the NPU simulator: its own compiled binary, `.npubin`.

`nnrt compile MODEL.nnrt --device accel -o MODEL.npubin` (drivers/accel/compile.py) writes
one; PrepareOfflineModel (`OH_NNCompilation_ConstructWithOfflineModelFile` / `...Buffer`)
loads it without compiling again. A binary is made for one device specification: the
program it holds is what that NPU runs (float16 / int8, every node accepted by
drivers/accel/support.py), and its recorded costs are that NPU's.

Layout (version 1, little endian). The envelope is hdi/sealed_blob.py's:

    offset  size  field
    0       8     magic "NNRTNPUB"
    8       4     u32 format version (1)
    12      4     u32 identity length I
    16      I     the spec identity it was compiled for (AccelSpec.identity, UTF-8)
    16+I    4     u32 CRC-32 of the payload (everything after this field, to the end)
    20+I    ...   payload:
                  u32 header length H | header (UTF-8 JSON) | u64 program length G | program

and the payload ends exactly there. The header:

    {"model": str, "float16": bool, "spec": str (the identity again),
     "execution_order": [node index, ...],   the schedule, topologically sorted
     "inputs": [io], "outputs": [io],        the I/O descriptors as the client exchanges them
     "weights_bytes": int,                    constant bytes of the program (device memory)
     "costs": [{"macs", "vector_ops", "bytes_moved", "precision"}] | null}

    io = {"index": int, "name": str, "data_type": int (HDI), "shape": [int] (-1 dynamic),
          "format": int (HDI), "quant_params": [[num_bits, zero_point, scale], ...]}

The program is the device graph — the model as `support.device_graph` made it, already
float16 in relaxed precision, weights quantised / converted — serialised by
hdi/graph_cache.py (`encode` with the spec identity, in its checksummed envelope: a
binary is portable, so no driver's key vouches for it; its own sealed blob nested here, so
there is one graph serialiser). The I/O descriptors are kept apart from the program because
in float16 mode the program's edge tensors are float16 while the client still exchanges
float32 (as the CPU driver's float16 mode does). `costs` is the cost model's per-node
estimate in execution order when every tensor shape is static (null otherwise): a record of
what was compiled, shown by the compile tool; the device recomputes durations at prepare.

Decisions:
* Everything that is wrong with a binary is refused with NNRT_INVALID_MODEL and a message
  "offline model refused: <reason>" (not NNRT_INVALID_MODEL_CACHE: this is the model
  itself): not an npubin (another magic; a saved `.nnrt` model is named as such), another
  format version, another spec (both identities named), truncated, corrupt (CRC mismatch),
  trailing bytes, an undecodable header or program, descriptors or a schedule that do not
  fit the program, a node this NPU does not run.
* The spec identity is the envelope's identity: a binary runs only on a device with exactly
  that spec (its rates, memory and clocks determine the program's costs and fit). It is
  read before the checksum is verified, so a flipped bit inside it reads as another spec.
* On a CRC mismatch the payload's own lengths tell a truncation or appended bytes apart
  from corruption (appended bytes are certain when the CRC of the declared prefix matches).
* A blob that passes the checksum is still validated (graph_cache decodes through the
  host's model validation, then the schedule, descriptors and nodes are checked): a
  checksum proves integrity, not that the writer was sound.
"""

from __future__ import annotations

import json
import struct
import zlib
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from nnrt.hdi import graph_cache
from nnrt.common.dtypes import numpy_dtype
from nnrt.common.errors import NNRT_INVALID_MODEL, DriverError
from nnrt.hdi.graph import DYNAMIC, Graph, QuantParam, TensorSpec
from nnrt.hdi.sealed_blob import seal, unseal

from . import support
from .cost import NodeCost, graph_costs
from .spec import AccelSpec

MAGIC = b"NNRTNPUB"
FORMAT_VERSION = 1
EXTENSION = ".npubin"
WHAT = "offline model"
_SAVED_MODEL_MAGIC = b"NNRTMODL"  # common/model_file.py: what `nnrt compile` reads
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_ENVELOPE = len(MAGIC) + 8  # magic, version, identity length


@dataclass(frozen=True)
class OfflineModel:
    """A loaded `.npubin`: what PrepareOfflineModel prepares."""

    graph: Graph  # the device graph, run as is (no further float16 rewrite)
    enable_float16: bool  # compiled from a float32 model in relaxed precision
    spec_identity: str
    # What the client exchanges, in graph.inputs / graph.outputs order (same tensor
    # indices): float32 where enable_float16 made the program's edge float16, else the
    # program's own edge tensors.
    inputs: tuple[TensorSpec, ...] = ()
    outputs: tuple[TensorSpec, ...] = ()
    # The cost model's per-node estimate at compile time (execution order) when the model
    # is static, else None. A record: the device recomputes durations with its cost model.
    costs: tuple[NodeCost, ...] | None = None


def refused(why: str) -> DriverError:
    return DriverError(NNRT_INVALID_MODEL, f"{WHAT} refused: {why}")


# -- writing ------------------------------------------------------------------------------------


def _io_json(spec: TensorSpec) -> dict[str, Any]:
    return {"index": spec.index, "name": spec.name, "data_type": int(spec.data_type),
            "shape": [int(d) for d in spec.shape], "format": int(spec.format),
            "quant_params": [[q.num_bits, q.zero_point, q.scale] for q in spec.quant_params]}


def _static_costs(program: Graph, spec: AccelSpec) -> list[dict[str, Any]] | None:
    """The cost model's per-node estimate when every tensor's shape is known, else None."""
    if any(t.is_dynamic for t in program.tensors):
        return None
    shapes = {t.index: t.shape for t in program.tensors}
    return [{"macs": int(c.macs), "vector_ops": int(c.vector_ops),
             "bytes_moved": int(c.bytes_moved), "precision": str(c.precision)}
            for c in graph_costs(program, shapes, spec)]


def compile_offline(graph: Graph, spec: AccelSpec, enable_float16: bool) -> bytes:
    """The `.npubin` of a validated model graph for the NPU of `spec`.

    DriverError as `support.device_graph` refuses (NNRT_UNSUPPORTED_OP naming the node and
    why, e.g. float32 without `enable_float16`).
    """
    program = support.device_graph(graph, enable_float16)
    identity = spec.identity
    header = {
        "model": graph.name,
        "float16": bool(enable_float16),
        "spec": identity,
        "execution_order": list(program.execution_order),
        "inputs": [_io_json(t) for t in graph.inputs],
        "outputs": [_io_json(t) for t in graph.outputs],
        "weights_bytes": sum(t.constant.nbytes for t in program.tensors if t.is_constant),
        "costs": _static_costs(program, spec),
    }
    head = json.dumps(header, separators=(",", ":")).encode()
    body = graph_cache.encode(program, identity, keyed=False)  # portable: no driver's key
    payload = b"".join((_U32.pack(len(head)), head, _U64.pack(len(body)), body))
    return seal(MAGIC, FORMAT_VERSION, identity, payload)


# -- reading ------------------------------------------------------------------------------------


def describe(blob: bytes | memoryview) -> dict[str, Any]:
    """The header of a binary (for tools), without checking the spec; DriverError as
    load_offline refuses a corrupt one."""
    view = memoryview(blob)
    _check_envelope(view, None)
    header, _ = _split(_payload(view, _identity(view)))
    return header


def load_offline(blob: bytes | memoryview, spec: AccelSpec) -> OfflineModel:
    """The program of a binary compiled for this spec; DriverError(NNRT_INVALID_MODEL,
    "offline model refused: <reason>") for anything else (module docstring)."""
    view = memoryview(blob)
    identity = spec.identity
    _check_envelope(view, identity)
    header, program_blob = _split(_payload(view, identity))
    try:
        program = graph_cache.decode(program_blob, identity, keyed=False)
    except DriverError as exc:
        raise refused(f"undecodable program: {exc.message}") from None
    program = _scheduled(program, header)
    float16 = header.get("float16")
    if not isinstance(float16, bool):
        raise refused("header: 'float16' is not a boolean")
    inputs = _edges(header, "inputs", program.inputs, float16)
    outputs = _edges(header, "outputs", program.outputs, float16)
    for index in program.execution_order:
        try:
            support.check_node(program.nodes[index])
        except DriverError as exc:
            raise refused(f"this NPU does not run the program: {exc.message}") from None
    return OfflineModel(program, float16, identity, inputs, outputs, _costs(header, program))


def _payload(view: memoryview, identity: str) -> memoryview:
    """The checksummed payload of a binary whose envelope _check_envelope accepted."""
    try:
        return unseal(view, MAGIC, FORMAT_VERSION, identity, WHAT)
    except DriverError as exc:  # NNRT_INVALID_MODEL_CACHE from the envelope: say precisely
        raise refused(_diagnose(view, exc.message)) from None


def _identity(view: memoryview) -> str:
    (length,) = _U32.unpack_from(view, len(MAGIC) + 4)
    return bytes(view[_ENVELOPE:_ENVELOPE + length]).decode(errors="replace")


def _check_envelope(view: memoryview, identity: str | None) -> None:
    """What the envelope says before its checksum: kind, version, spec (None: any)."""
    if bytes(view[:len(MAGIC)]) != MAGIC:
        if bytes(view[:len(_SAVED_MODEL_MAGIC)]) == _SAVED_MODEL_MAGIC:
            raise refused("this is a saved model (.nnrt), not a compiled one: compile it with "
                          "`nnrt compile MODEL.nnrt --device accel -o MODEL.npubin`")
        if len(view) < len(MAGIC) and MAGIC.startswith(bytes(view)) and len(view) > 0:
            raise refused(f"truncated ({len(view)} bytes)")
        raise refused(f"not an NPU simulator binary ({EXTENSION}: no {MAGIC.decode()} magic)")
    if len(view) < _ENVELOPE:
        raise refused(f"truncated ({len(view)} bytes)")
    (version,) = _U32.unpack_from(view, len(MAGIC))
    if version != FORMAT_VERSION:
        raise refused(f"format version {version}, this driver reads version {FORMAT_VERSION}")
    (length,) = _U32.unpack_from(view, len(MAGIC) + 4)
    if len(view) < _ENVELOPE + length + 4:
        raise refused(f"truncated ({len(view)} bytes)")
    written_for = _identity(view)
    if identity is not None and written_for != identity:
        raise refused(f"compiled for spec {written_for!r}, this device's spec is {identity!r} "
                      f"(compile it again with this device's --spec)")


def _diagnose(view: memoryview, why: str) -> str:
    """Why the envelope's checksum failed: appended bytes, a truncation, or corruption."""
    (length,) = _U32.unpack_from(view, len(MAGIC) + 4)
    start = _ENVELOPE + length + 4
    (checksum,) = _U32.unpack_from(view, start - 4)
    payload = view[start:]
    if len(payload) >= _U32.size:
        (head,) = _U32.unpack_from(payload, 0)
        at = _U32.size + head
        if len(payload) < at + _U64.size:
            return f"truncated ({len(view)} bytes; checksum mismatch)"
        (body,) = _U64.unpack_from(payload, at)
        end = at + _U64.size + body
        if end > len(payload):
            return (f"truncated ({len(view)} bytes, the binary declares {start + end}; "
                    f"checksum mismatch)")
        if end < len(payload) and zlib.crc32(payload[:end]) == checksum:
            return f"{len(payload) - end} trailing bytes after the binary"
    return "checksum mismatch (corrupt)" if "checksum" in why else why


def _split(payload: memoryview) -> tuple[dict[str, Any], memoryview]:
    """(header, program blob) of a payload whose checksum matched."""
    if len(payload) < _U32.size:
        raise refused("truncated payload")
    (head,) = _U32.unpack_from(payload, 0)
    at = _U32.size + head
    if len(payload) < at + _U64.size:
        raise refused("truncated header")
    try:
        header = json.loads(bytes(payload[_U32.size:at]).decode())
    except (UnicodeDecodeError, ValueError) as exc:
        raise refused(f"undecodable header: {exc}") from None
    if not isinstance(header, dict):
        raise refused("undecodable header: not a JSON object")
    (body,) = _U64.unpack_from(payload, at)
    end = at + _U64.size + body
    if end > len(payload):
        raise refused("truncated program")
    if end < len(payload):
        raise refused(f"{len(payload) - end} trailing bytes after the program")
    return header, payload[at + _U64.size:end]


def _scheduled(program: Graph, header: dict[str, Any]) -> Graph:
    """The program with the binary's schedule, checked to be a topological order of it."""
    order = header.get("execution_order")
    if not isinstance(order, list) or not all(type(i) is int for i in order) or \
            sorted(order) != sorted(program.execution_order):
        raise refused("the schedule does not cover the program's nodes")
    ready = {t.index for t in program.inputs} | {t.index for t in program.tensors
                                                 if t.is_constant}
    for index in order:
        node = program.nodes[index]
        missing = [t.index for t in node.inputs if t.index not in ready]
        if missing:
            raise refused(f"the schedule runs node {index} ({node.name!r}) before tensors "
                          f"{missing} are computed")
        ready.update(t.index for t in node.outputs)
    return replace(program, execution_order=tuple(order))


def _edges(header: dict[str, Any], key: str, program_side: tuple[TensorSpec, ...],
           float16: bool) -> tuple[TensorSpec, ...]:
    """The client-side descriptors of the program's inputs or outputs, checked against it."""
    entries = header.get(key)
    if not isinstance(entries, list) or len(entries) != len(program_side):
        raise refused(f"header: {key} do not match the program's {len(program_side)}")
    specs = []
    for i, (entry, edge) in enumerate(zip(entries, program_side)):
        where = f"header: {key}[{i}]"
        try:
            quant = tuple(QuantParam(int(b), int(z), float(s))
                          for b, z, s in entry["quant_params"])
            data_type = int(entry["data_type"])
            spec = TensorSpec(index=int(entry["index"]), name=str(entry["name"]),
                              data_type=data_type, dtype=numpy_dtype(data_type),
                              shape=tuple(int(d) for d in entry["shape"]),
                              format=int(entry["format"]), quant_params=quant)
        except (KeyError, TypeError, ValueError) as exc:
            raise refused(f"{where}: malformed ({exc})") from None
        if spec.dtype is None:
            raise refused(f"{where} ({spec.name!r}): unknown data type {data_type}")
        if spec.index != edge.index or spec.shape != edge.shape or \
                any(d < 0 and d != DYNAMIC for d in spec.shape):
            raise refused(f"{where} ({spec.name!r}) does not match the program's tensor "
                          f"{edge.index}")
        relaxed = float16 and spec.dtype == np.float32 and edge.dtype == np.float16
        if spec.dtype != edge.dtype and not relaxed:
            raise refused(f"{where} ({spec.name!r}) is {spec.dtype}, the program's tensor "
                          f"{edge.dtype}")
        specs.append(spec)
    return tuple(specs)


def _costs(header: dict[str, Any], program: Graph) -> tuple[NodeCost, ...] | None:
    costs = header.get("costs")
    if costs is None:
        return None
    fields = {"macs", "vector_ops", "bytes_moved", "precision"}
    if not isinstance(costs, list) or len(costs) != len(program.execution_order) or \
            not all(isinstance(c, dict) and set(c) == fields for c in costs):
        raise refused("header: the recorded costs do not match the program")
    try:
        return tuple(NodeCost(int(c["macs"]), int(c["vector_ops"]), int(c["bytes_moved"]),
                              str(c["precision"])) for c in costs)
    except (TypeError, ValueError) as exc:
        raise refused(f"header: malformed costs ({exc})") from None
