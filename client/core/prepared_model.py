"""A compiled model on a device, as every front end runs it (the OH_NNExecutor is one).

What it owns: the driver session holding the prepared model (`session()`), prepared again
after a driver restart — from the model cache blob the Build kept when the driver supports a
cache, else from the lowered model —, exactly once per new session whatever the number of
threads that need it; the input ranges the driver publishes (`dim_ranges()`, asked once); the
output shapes of the last run; the count of runs using it, so that closing it while runs are
in flight releases it when the last one ends.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from nnrt.common.errors import (HDF_ERR_NOT_SUPPORT, NNRT_NOT_SUPPORT, NNRT_OPERATION_FORBIDDEN,
                                NNRT_SUCCESS, code_name)
from nnrt.common.hdi_model import PrepareError

from .built_model import BuiltModel, copy_desc, release_model
from .compiler import can_prepare_again, prepare_again
from .driver import DriverClient, DriverGone

if TYPE_CHECKING:
    from .hetero_run import HeteroRunner

log = logging.getLogger(__name__)

_UNSUPPORTED_CODES = (NNRT_NOT_SUPPORT, NNRT_OPERATION_FORBIDDEN, HDF_ERR_NOT_SUPPORT)


class DimRanges:
    """The answer to GetInputDimRanges, kept for the prepared model's lifetime (capi.md 1.43).

    `accepted[i]`: the last shape of input i found within the ranges (a run whose input
    shapes did not change checks nothing again).
    """

    __slots__ = ("status", "mins", "maxs", "accepted")
    OK, UNSUPPORTED, FAILED = "ok", "unsupported", "failed"

    def __init__(self, status: str, mins: list[list[int]] | None = None,
                 maxs: list[list[int]] | None = None) -> None:
        self.status = status
        self.mins = mins or []
        self.maxs = maxs or []
        self.accepted: list[list[int] | None] = [None] * len(self.mins)

    def first_violation(self, shapes: Sequence[Sequence[int]]) -> tuple[int, str] | None:
        """The first input whose shape is outside the ranges, and why; None when all are
        within (or the device publishes no ranges for these inputs)."""
        if self.status != DimRanges.OK or len(self.mins) != len(shapes):
            return None
        for index, shape in enumerate(shapes):
            why = self.violation(index, shape)
            if why is not None:
                return index, why
        return None

    def violation(self, index: int, shape: Sequence[int]) -> str | None:
        """Why input `index` may not have `shape` (None when it may): the device's ranges."""
        lows, highs = self.mins[index], self.maxs[index]
        if len(lows) != len(highs):
            return f"the device published ranges of different ranks, {lows} and {highs}"
        if len(shape) != len(lows):
            return f"rank {len(shape)}, the device takes rank {len(lows)}"
        for axis, (d, lo, hi) in enumerate(zip(shape, lows, highs)):
            if d < 0 or not lo <= d <= hi:
                return f"dimension {axis} is {d}, outside the device's range [{lo}, {hi}]"
        return None


class PreparedModel:
    """A compiled model on its device: the driver session that holds it, its I/O
    descriptors and input ranges, the last output shapes the driver reported. Thread-safe;
    runs may overlap. Prepared again, transparently, after its driver restarts (`session`).

    `close()` while runs are in flight releases what it owns when the last one ends.
    """

    def __init__(self, built: BuiltModel, client: DriverClient) -> None:
        self.lock = threading.RLock()
        self.destroyed = False  # closed: every call refuses it
        # Holding the BuiltModel keeps the Build's prepared model alive (it is released when
        # nothing holds it any more); dropped when this model is released.
        self.built: BuiltModel | None = built
        self.device = built.device
        self.inputs = [copy_desc(d) for d in built.inputs]
        self.outputs = [copy_desc(d) for d in built.outputs]
        self._build_ranges = (built.min_dims, built.max_dims)
        self.output_shapes: list[list[int]] = [list(d.shape) for d in built.outputs]
        # The last successful Run reply (a kept, shared decoded message: the same object
        # for the same bytes, DriverClient.run) and its checked output shapes: a run
        # answered alike again is not read and checked again (execution.run).
        self.reply_shapes: tuple[Any, list[list[int]]] | None = None
        self._client = client
        self._model_id = built.prepared_model_id
        self._own_model = False  # True once this model was prepared again by itself
        self._session_lock = threading.Lock()  # one re-prepare at a time
        self._state_lock = threading.Lock()  # the session swap against _release
        # One entry per re-prepare after a driver restart: "cache" or "model" (its source).
        self.recoveries: list[str] = []
        self._ranges: DimRanges | None = None
        self._active = 0  # runs using the model's resources right now
        self._released = False
        # Over several devices: the runs over the compilation's steps (its session is one
        # of theirs, its ranges theirs).
        self.hetero: HeteroRunner | None = \
            built.hetero.runner() if built.hetero is not None else None

    # -- the driver session ------------------------------------------------------------------

    def session(self) -> tuple[DriverClient, int]:
        """The live client and the prepared model id in its session; DriverGone if none.

        When the driver has died, a driver of the same device is looked for (a failed
        connect is immediate) and the model prepared there again — from the cache blob the
        Build kept when the driver supports a cache, else from the lowered model
        (compiler.prepare_again). Without either (a Build that kept neither) the model stays
        unusable (the header: compile again).
        """
        if self.hetero is not None:
            return self.hetero.session()
        client = self._client
        if client.alive:
            return client, self._model_id
        with self._session_lock:
            if self._client.alive:  # another thread recovered meanwhile
                return self._client, self._model_id
            built = self.built
            if built is None or self._released or not can_prepare_again(built):
                raise DriverGone(f"{self.device.name}: the driver session of this executor has "
                                 "ended; compile the model again")
            client = self.device.client()  # DriverGone at once while the driver is away
            started = time.monotonic()
            try:
                model_id, source = prepare_again(built, client)
            except PrepareError as exc:
                raise DriverGone(f"{self.device.name}: preparing the model again failed: "
                                 f"{exc}") from exc
            log.info("executor: model prepared again on %s after a driver restart (id %d, from "
                     "its %s, %.1f ms)", self.device.name, model_id, source,
                     (time.monotonic() - started) * 1000)
            # (not self.lock: SetInput holds it while it asks for the session)
            with self._state_lock:
                released = self._released  # destroyed meanwhile: give the model back
                if not released:
                    self._client, self._model_id, self._own_model = client, model_id, True
                    self._ranges = None
                    self.recoveries.append(source)
        if released:
            release_model(client, model_id)
            raise DriverGone(f"{self.device.name}: the executor was destroyed")
        return client, model_id

    def dim_ranges(self) -> DimRanges:
        """GetInputDimRanges of the prepared model: from the Build, else asked once."""
        ranges = self._ranges
        if ranges is not None:
            return ranges
        if self.hetero is not None:
            self._ranges = ranges = self.hetero.dim_ranges()
            return ranges
        mins, maxs = self._build_ranges
        if mins or maxs or not self.inputs:
            ranges = DimRanges(DimRanges.OK, [list(map(int, d)) for d in mins or []],
                             [list(map(int, d)) for d in maxs or []])
        else:
            try:
                client, model_id = self.session()
                reply = client.get_input_dim_ranges(model_id)
            except DriverGone as exc:
                log.warning("GetInputDimRanges on %s: %s", self.device.name, exc)
                return DimRanges(DimRanges.FAILED)  # not cached: the driver may come back
            if reply.returnCode == NNRT_SUCCESS:
                ranges = DimRanges(DimRanges.OK, [list(a.values) for a in reply.minInputDims],
                                 [list(a.values) for a in reply.maxInputDims])
            else:
                log.warning("GetInputDimRanges on %s failed: %s", self.device.name,
                            code_name(reply.returnCode))
                ranges = DimRanges(DimRanges.UNSUPPORTED if reply.returnCode in _UNSUPPORTED_CODES
                                 else DimRanges.FAILED)
        self._ranges = ranges
        return ranges

    # -- resource accounting (destroy while another thread runs) ----------------------------

    def enter(self) -> bool:
        """Count a run in; False if the executor is destroyed."""
        with self.lock:
            if self.destroyed:
                return False
            self._active += 1
            return True

    def leave(self) -> None:
        with self.lock:
            self._active -= 1
            release = self.destroyed and self._active == 0 and not self._released
            if release:
                self._released = True
        if release:
            self._release()

    def close(self) -> None:
        """Mark closed; release what it owns now, or when the last run leaves."""
        with self.lock:
            if self.destroyed:
                return
            self.destroyed = True
            release = self._active == 0 and not self._released
            if release:
                self._released = True
        if release:
            self._release()

    def _release(self) -> None:
        with self._state_lock:
            client, model_id, own = self._client, self._model_id, self._own_model
            self._own_model = False
        self.release_extra(client)
        if self.hetero is not None:
            self.hetero.close()
        if own:
            release_model(client, model_id)
        self.built = None  # the compilation's prepared model goes once nobody holds it

    def release_extra(self, client: DriverClient) -> None:
        """What a front end keeps with the model, released with it (nothing here)."""

    def store_output_shapes(self, outputs: Sequence[Any] | None,
                            shapes: Sequence[Sequence[int]]) -> None:
        """Keep the driver's output shapes, and give each output tensor its own
        (`tensor.take_shape(shape)`: every front end's tensor type has it)."""
        if outputs is not None:
            for tensor, shape in zip(outputs, shapes):
                tensor.take_shape(shape)
        with self.lock:
            self.output_shapes = [list(s) for s in shapes]
