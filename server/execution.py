"""Run: bind a request's IOTensors to shared memory, check them, run, write the outputs.

All checks come before any computation, in the order of hdi.md 4.3, with the codes of
hdi.md section 11:

* input / output count → NNRT_INVALID_INPUT / NNRT_INVALID_OUTPUT;
* dataType, format → NNRT_INVALID_DATATYPE, NNRT_INVALID_FORMAT;
* rank or a fixed dimension → NNRT_INVALID_SHAPE; a dynamic one outside GetInputDimRanges →
  NNRT_OUT_OF_DIMENTION_RANGES;
* a buffer id unknown to the session, or `offset + dataSize > bufferSize` →
  NNRT_INVALID_BUFFER; a `bufferSize` other than the region's real size →
  NNRT_INVALID_BUFFER_SIZE; an input window smaller than dims × element size →
  NNRT_INVALID_PARAMETER;
* an output window too small → NNRT_INSUFFICIENT_BUFFER, nothing written anywhere, and the
  true shapes of all outputs in `outputDims`.

Inputs reach the device as read-only numpy views of the shared pages; outputs are copied
into their windows once. No tensor byte passes through a protobuf message.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext

import numpy as np

from nnrt.protos import hdi_types_pb2 as ht
from nnrt.server.buffers import BufferTable, SharedRegion
from nnrt.server.device import CancelCheck
from nnrt.common.errors import (
    NNRT_FAILED,
    NNRT_INSUFFICIENT_BUFFER,
    NNRT_INVALID_BUFFER,
    NNRT_INVALID_BUFFER_SIZE,
    NNRT_INVALID_DATATYPE,
    NNRT_INVALID_FORMAT,
    NNRT_INVALID_INPUT,
    NNRT_INVALID_OUTPUT,
    NNRT_INVALID_PARAMETER,
    NNRT_INVALID_SHAPE,
    NNRT_OUT_OF_DIMENTION_RANGES,
    DriverError,
)
from nnrt.server.graph import TensorSpec
from nnrt.server.sessions import PreparedEntry


MAX_CHECKED_REQUESTS = 64  # per prepared model


class InsufficientBuffer(DriverError):
    """An output window is too small; carries the true output shapes for outputDims."""

    def __init__(self, message: str, shapes: Sequence[Sequence[int]]) -> None:
        super().__init__(NNRT_INSUFFICIENT_BUFFER, message)
        self.shapes = [list(s) for s in shapes]


def _check_type(kind: str, i: int, spec: TensorSpec, io: ht.IOTensor) -> None:
    if io.dataType != spec.data_type:
        raise DriverError(
            NNRT_INVALID_DATATYPE, f"{kind} {i}: dataType {io.dataType}, model has {spec.data_type}"
        )
    if io.format != spec.format:
        raise DriverError(NNRT_INVALID_FORMAT, f"{kind} {i}: format {io.format}, model has {spec.format}")


def _check_dims(entry: PreparedEntry, i: int, spec: TensorSpec, dims: tuple[int, ...]) -> None:
    if len(dims) != len(spec.shape):
        raise DriverError(NNRT_INVALID_SHAPE, f"input {i}: rank {len(dims)}, model has {len(spec.shape)}")
    lows, highs = entry.min_dims[i], entry.max_dims[i]
    for axis, (d, want, low, high) in enumerate(zip(dims, spec.shape, lows, highs)):
        if want >= 0 and d != want:
            raise DriverError(NNRT_INVALID_SHAPE, f"input {i}: dimension {axis} is {d}, model has {want}")
        if not low <= d <= high:
            raise DriverError(
                NNRT_OUT_OF_DIMENTION_RANGES,
                f"input {i}: dimension {axis} is {d}, outside [{low}, {high}]",
            )


def _check_window(kind: str, i: int, data: ht.SharedBuffer, region: SharedRegion) -> None:
    if data.offset + data.dataSize > data.bufferSize:
        raise DriverError(
            NNRT_INVALID_BUFFER,
            f"{kind} {i}: offset {data.offset} + dataSize {data.dataSize} > bufferSize {data.bufferSize}",
        )
    if data.bufferSize != region.size:
        raise DriverError(
            NNRT_INVALID_BUFFER_SIZE,
            f"{kind} {i}: bufferSize {data.bufferSize}, buffer {data.bufferId} has {region.size}",
        )


def check_request(entry: PreparedEntry, inputs: Sequence[ht.IOTensor],
                  outputs: Sequence[ht.IOTensor]) -> list[tuple[int, ...]]:
    """Counts, types, formats and shapes of a Run request; returns the input shapes."""
    model = entry.model
    if len(inputs) != len(model.inputs):
        raise DriverError(NNRT_INVALID_INPUT, f"{len(inputs)} inputs, model has {len(model.inputs)}")
    if len(outputs) != len(model.outputs):
        raise DriverError(
            NNRT_INVALID_OUTPUT, f"{len(outputs)} outputs, model has {len(model.outputs)}"
        )
    shapes = []
    for i, (spec, io) in enumerate(zip(model.inputs, inputs)):
        if io.dataType != spec.data_type or io.format != spec.format:
            _check_type("input", i, spec, io)
        dims = tuple(io.dimensions)
        if spec.is_dynamic or dims != spec.shape:  # a static match needs no range check
            _check_dims(entry, i, spec, dims)
        shapes.append(dims)
    for i, (spec, io) in enumerate(zip(model.outputs, outputs)):
        _check_type("output", i, spec, io)
    return shapes


def _check_regions(model_inputs: Sequence[TensorSpec], inputs: Sequence[ht.IOTensor],
                   outputs: Sequence[ht.IOTensor], shapes: Sequence[tuple[int, ...]],
                   regions: Sequence[SharedRegion]) -> None:
    for i, (spec, io, shape, region) in enumerate(zip(model_inputs, inputs, shapes, regions)):
        _check_window("input", i, io.data, region)
        need = math.prod(shape) * spec.dtype.itemsize
        if io.data.dataSize < need:
            raise DriverError(
                NNRT_INVALID_PARAMETER, f"input {i}: {io.data.dataSize} bytes for {need} needed"
            )
    for i, (io, region) in enumerate(zip(outputs, regions[len(inputs):])):
        _check_window("output", i, io.data, region)


def _check_fit(model_outputs: Sequence[TensorSpec], outputs: Sequence[ht.IOTensor],
               shapes: Sequence[Sequence[int]]) -> None:
    for i, (spec, io, shape) in enumerate(zip(model_outputs, outputs, shapes)):
        need = math.prod(shape) * spec.dtype.itemsize
        if io.data.dataSize < need:
            raise InsufficientBuffer(
                f"output {i} needs {need} bytes, its window has {io.data.dataSize}", shapes
            )


def execute(entry: PreparedEntry, inputs: Sequence[ht.IOTensor], outputs: Sequence[ht.IOTensor],
            table: BufferTable, cancelled: CancelCheck,
            admit: Callable[[], AbstractContextManager] = nullcontext,
            request_key: bytes | None = None) -> list[list[int]]:
    """Check and run one request; returns outputDims. `admit()` is entered around the
    computation alone, after every check (the device's run scheduler). `request_key`: the
    serialized request, under which its checked shapes are kept for the next identical
    request (PreparedEntry.checked_requests)."""
    shapes = entry.checked_requests.get(request_key) if request_key is not None else None
    if shapes is None:
        shapes = check_request(entry, inputs, outputs)
        if request_key is not None and len(entry.checked_requests) < MAX_CHECKED_REQUESTS:
            entry.checked_requests[request_key] = shapes
    model = entry.model
    ids = [io.data.bufferId for io in inputs] + [io.data.bufferId for io in outputs]
    with table.borrow(ids) as regions:
        _check_regions(model.inputs, inputs, outputs, shapes, regions)
        views = [region.readonly_array(io.data.offset, spec.dtype, math.prod(shape)).reshape(shape)
                 for spec, io, shape, region in zip(model.inputs, inputs, shapes, regions)]
        static = entry.static_output_shapes
        if static is not None:
            _check_fit(model.outputs, outputs, static)
            if model.writes_into_outputs:
                targets = [region.array(io.data.offset, spec.dtype, math.prod(shape))
                           .reshape(shape) for spec, io, shape, region
                           in zip(model.outputs, outputs, static, regions[len(inputs):])]
                with admit():
                    model.run_into(views, targets, cancelled)
                del targets, views
                return [list(s) for s in static]
        with admit():
            results = model.run(views, cancelled)
        del views
        if len(results) != len(model.outputs):
            raise DriverError(NNRT_FAILED, f"device returned {len(results)} outputs")
        out_shapes = [list(r.shape) for r in results]
        if entry.static_output_shapes is None:
            _check_fit(model.outputs, outputs, out_shapes)
        for spec, io, result, region in zip(model.outputs, outputs, results,
                                            regions[len(inputs):]):
            if result.dtype != spec.dtype:
                raise DriverError(
                    NNRT_FAILED, f"device computed {result.dtype} for {spec.dtype} output {spec.name!r}"
                )
            target = region.array(io.data.offset, spec.dtype, result.size).reshape(result.shape)
            np.copyto(target, result, casting="no")
            del target
        del results
    return out_shapes
