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
into their windows once, or written there by the device. No tensor byte passes through a
protobuf message.

A request that comes again byte for byte (the session channel's common case: a client
running the same tensors) is served from its `CheckedRequest`: not decoded, not checked
again, and run through the binding its model made of its windows the first time — only
the borrow of its buffers (which refuses a released one) stands before the computation.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple, TypeVar

import numpy as np

from nnrt.protos import hdi_types_pb2 as ht
from nnrt.server.buffers import BufferTable, SharedRegion
from nnrt.hdi.device import BoundRun, CancelCheck, StepTime
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
from nnrt.hdi.graph import TensorSpec
from nnrt.server.sessions import PreparedEntry


MAX_CHECKED_REQUESTS = 64  # per prepared model

T = TypeVar("T")


class InsufficientBuffer(DriverError):
    """An output window is too small; carries the true output shapes for outputDims."""

    def __init__(self, message: str, shapes: Sequence[Sequence[int]]) -> None:
        super().__init__(NNRT_INSUFFICIENT_BUFFER, message)
        self.shapes = [list(s) for s in shapes]


class Window(NamedTuple):
    """Where a tensor lies, as the request says (ht.SharedBuffer)."""

    buffer_id: int
    buffer_size: int
    offset: int
    data_size: int


@dataclass(eq=False, slots=True)
class CheckedRequest:
    """A Run request past the checks that depend on it alone: all a run of it needs, so that
    the session channel keeps it under the request's bytes (PreparedEntry.checked_requests)
    for the next identical request — a client that runs the same tensors again sends the
    same bytes — which then is neither decoded nor checked again.

    The checks of its windows against their buffers are pure as well (a buffer id is never
    reused within a session and a buffer's size is fixed for its life), so they are made
    once (`windows_checked`); and a model that writes into its outputs may bind them once
    (`bound`, hdi/device.py `PreparedModel.bind`): the same ids are the same mappings for
    as long as the buffers exist, and a request naming a released one is refused at
    `BufferTable.borrow` before anything runs."""

    shapes: list[tuple[int, ...]]  # of the inputs
    inputs: list[Window]
    outputs: list[Window]
    buffer_ids: list[int]  # inputs, then outputs
    windows_checked: bool = False
    bound: BoundRun | None = None


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


def _check_window(kind: str, i: int, window: Window, region: SharedRegion) -> None:
    if window.offset + window.data_size > window.buffer_size:
        raise DriverError(
            NNRT_INVALID_BUFFER,
            f"{kind} {i}: offset {window.offset} + dataSize {window.data_size} > bufferSize "
            f"{window.buffer_size}",
        )
    if window.buffer_size != region.size:
        raise DriverError(
            NNRT_INVALID_BUFFER_SIZE,
            f"{kind} {i}: bufferSize {window.buffer_size}, buffer {window.buffer_id} has "
            f"{region.size}",
        )


def _window(io: ht.IOTensor) -> Window:
    data = io.data
    return Window(data.bufferId, data.bufferSize, data.offset, data.dataSize)


def check_request(entry: PreparedEntry, inputs: Sequence[ht.IOTensor],
                  outputs: Sequence[ht.IOTensor]) -> CheckedRequest:
    """Counts, types, formats and shapes of a Run request."""
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
    input_windows = [_window(io) for io in inputs]
    output_windows = [_window(io) for io in outputs]
    return CheckedRequest(shapes, input_windows, output_windows,
                          [w.buffer_id for w in input_windows + output_windows])


def _check_regions(model_inputs: Sequence[TensorSpec], request: CheckedRequest,
                   regions: Sequence[SharedRegion]) -> None:
    for i, (spec, window, shape, region) in enumerate(zip(model_inputs, request.inputs,
                                                          request.shapes, regions)):
        _check_window("input", i, window, region)
        need = math.prod(shape) * spec.dtype.itemsize
        if window.data_size < need:
            raise DriverError(
                NNRT_INVALID_PARAMETER, f"input {i}: {window.data_size} bytes for {need} needed"
            )
    for i, (window, region) in enumerate(zip(request.outputs, regions[len(request.inputs):])):
        _check_window("output", i, window, region)


def _check_fit(model_outputs: Sequence[TensorSpec], outputs: Sequence[Window],
               shapes: Sequence[Sequence[int]]) -> None:
    for i, (spec, window, shape) in enumerate(zip(model_outputs, outputs, shapes)):
        need = math.prod(shape) * spec.dtype.itemsize
        if window.data_size < need:
            raise InsufficientBuffer(
                f"output {i} needs {need} bytes, its window has {window.data_size}", shapes
            )


def execute(entry: PreparedEntry, request: CheckedRequest, table: BufferTable,
            cancelled: CancelCheck,
            admitted: Callable[[Callable[[], T]], T] = lambda compute: compute(),
            keep: bool = False, steps: list[StepTime] | None = None) -> list[list[int]]:
    """Check a request against its buffers and run it; returns outputDims. The computation
    alone, after every check, goes through `admitted` (the device's run scheduler, which
    may compute it on another thread).
    `keep`: the request is kept for identical ones (`CheckedRequest`), so a model that
    writes into its outputs binds them once for all of its runs.
    `steps`: a profiled run (RunRequest.profile), timed step by step into it on the plain
    path (`PreparedModel.run_profiled`), never the bound one."""
    model = entry.model
    static = entry.static_output_shapes
    with table.borrow(request.buffer_ids) as regions:
        if not request.windows_checked:
            _check_regions(model.inputs, request, regions)
            if static is not None:
                _check_fit(model.outputs, request.outputs, static)
            request.windows_checked = True
        if request.bound is not None and steps is None:
            bound = request.bound
            admitted(lambda: bound(cancelled))
            return [list(s) for s in static]
        views = [region.readonly_array(w.offset, spec.dtype, math.prod(shape)).reshape(shape)
                 for spec, w, shape, region
                 in zip(model.inputs, request.inputs, request.shapes, regions)]
        if static is not None and model.writes_into_outputs and steps is None:
            targets = [region.array(w.offset, spec.dtype, math.prod(shape)).reshape(shape)
                       for spec, w, shape, region
                       in zip(model.outputs, request.outputs, static,
                              regions[len(request.inputs):])]
            bound = model.bind(views, targets) if keep else None
            if bound is not None:  # it keeps addresses, not the views
                request.bound = bound
                del targets, views
                admitted(lambda: bound(cancelled))
            else:
                admitted(lambda: model.run_into(views, targets, cancelled))
                del targets, views
            return [list(s) for s in static]
        if steps is None:
            results = admitted(lambda: model.run(views, cancelled))
        else:
            results = admitted(lambda: model.run_profiled(views, cancelled, steps))
        del views
        if len(results) != len(model.outputs):
            raise DriverError(NNRT_FAILED, f"device returned {len(results)} outputs")
        out_shapes = [list(r.shape) for r in results]
        if static is None:
            _check_fit(model.outputs, request.outputs, out_shapes)
        for spec, w, result, region in zip(model.outputs, request.outputs, results,
                                           regions[len(request.inputs):]):
            if result.dtype != spec.dtype:
                raise DriverError(
                    NNRT_FAILED, f"device computed {result.dtype} for {spec.dtype} output {spec.name!r}"
                )
            target = region.array(w.offset, spec.dtype, result.size).reshape(result.shape)
            np.copyto(target, result, casting="no")
            del target
        del results
    return out_shapes
