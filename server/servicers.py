"""The INnrtDevice and IPreparedModel gRPC servicers: the HDI methods on top of a Device.

Every method answers with a `returnCode`; a DriverError becomes its code plus one log line,
and any other exception becomes NNRT_FAILED with a traceback in the log: bad input never
takes the driver down. Methods that touch session resources need the session token.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable

import grpc

from nnrt.protos import hdi_pb2 as pb
from nnrt.protos import hdi_pb2_grpc as rpc
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.server.buffers import MIB, SharedRegion
from nnrt.hdi.device import Device, PreparedModel
from nnrt.common.errors import (
    HDF_ERR_NOPERM,
    NNRT_FAILED,
    NNRT_INVALID_BUFFER,
    NNRT_INVALID_MODEL,
    NNRT_INVALID_MODEL_CACHE,
    NNRT_MEMORY_ERROR,
    NNRT_NOT_SUPPORT,
    DriverError,
)
from nnrt.server.faults import FaultInjection
from nnrt.hdi.model_validation import build_graph, validate_config
from nnrt.common.session_channel import METADATA_KEY
from nnrt.server.runner import Runner, refusal
from nnrt.server.sessions import PreparedEntry, Session, SessionRegistry

log = logging.getLogger(__name__)

HDI_VERSION = (2, 1)


def _session_of(registry: SessionRegistry, context: grpc.ServicerContext) -> Session:
    token = None
    for key, value in context.invocation_metadata():
        if key == METADATA_KEY:
            token = value
            break
    session = registry.lookup(token)
    if session is None:
        raise DriverError(HDF_ERR_NOPERM, "no valid nnrt-session metadata (open the session channel)")
    return session


def _refusal(name: str, where: str, exc: Exception, reply: type):
    """The reply (and the one log line, this module's) of a request that failed with `exc`."""
    return refusal(name, where, exc, reply, log)


def hdi_method(reply: type, *, session: bool = True) -> Callable:
    """Wrap a servicer method: session lookup, DriverError → returnCode, no exception escapes."""

    def wrap(method: Callable) -> Callable:
        name = method.__name__

        @functools.wraps(method)
        def handler(self, request, context):
            owner = None
            try:
                if session:
                    owner = _session_of(self.sessions, context)
                    return method(self, request, context, owner)
                return method(self, request, context)
            except Exception as exc:
                return _refusal(name, f"session {owner.id}" if owner else "no session", exc,
                                reply)

        return handler

    return wrap


def _check_bounds(region: SharedRegion, buffer: ht.SharedBuffer, code: int) -> None:
    if buffer.offset + buffer.dataSize > buffer.bufferSize or buffer.bufferSize != region.size:
        raise DriverError(
            code, f"window [{buffer.offset}, +{buffer.dataSize}) of a {region.size}-byte "
            f"buffer declared as {buffer.bufferSize}",
        )


def _check_window(session: Session, buffer: ht.SharedBuffer, code: int) -> None:
    """DriverError(code) unless the window lies inside a buffer of this session; nothing
    is copied (a request's windows are all checked before its bytes are counted)."""
    try:
        region = session.buffers.get(buffer.bufferId)
    except DriverError as exc:
        raise DriverError(code, exc.message)
    _check_bounds(region, buffer, code)


def _copy_out(session: Session, buffer: ht.SharedBuffer, code: int) -> bytes:
    """The bytes of a SharedBuffer window of this session; DriverError(code) if it is bad."""
    try:
        with session.buffers.borrow([buffer.bufferId]) as (region,):
            _check_bounds(region, buffer, code)
            return region.read(buffer.offset, buffer.dataSize)
    except DriverError as exc:
        if exc.code == NNRT_INVALID_BUFFER and code != NNRT_INVALID_BUFFER:
            raise DriverError(code, exc.message)
        raise


# Buffers one PrepareModelFromModelCache / PrepareOfflineModel may name: the framework's
# own limit for a model cache (hdi.md 4.1: 100 files, two of them its own). Checked before
# anything is copied; the bytes are counted against the session's budget (_Charge).
MAX_PREPARE_BLOBS = 98


class _Charge:
    """What one Prepare* (or GetSupportedOperation) makes the driver hold for its session —
    constants, descriptors, blobs copied out of its buffers — counted against the session's
    budgets before it is held (server/buffers.py: BufferTable.charge). Given back when the
    prepared model is released (its entry's on_close), or at once when the call fails."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self._given_back: list[Callable[[], None]] = []

    def add(self, nbytes: int, what: str) -> None:
        try:
            self._given_back.append(self.session.buffers.charge(nbytes))
        except DriverError as exc:
            raise DriverError(exc.code, f"{what} would make the driver hold {nbytes} bytes "
                              f"({nbytes / MIB:.1f} MiB) for this session, counted like a "
                              f"region: {exc.message}")

    def release(self) -> None:
        while self._given_back:
            self._given_back.pop()()


class DeviceServicer(rpc.INnrtDeviceServicer):
    def __init__(self, device: Device, sessions: SessionRegistry, faults: FaultInjection) -> None:
        self.device = device
        self.sessions = sessions
        self.faults = faults

    @hdi_method(pb.VersionReply, session=False)
    def GetVersion(self, request, context):
        return pb.VersionReply(major=HDI_VERSION[0], minor=HDI_VERSION[1])

    @hdi_method(pb.NameReply, session=False)
    def GetDeviceName(self, request, context):
        return pb.NameReply(name=self.device.name)

    @hdi_method(pb.NameReply, session=False)
    def GetVendorName(self, request, context):
        return pb.NameReply(name=self.device.vendor)

    @hdi_method(pb.DeviceTypeReply, session=False)
    def GetDeviceType(self, request, context):
        return pb.DeviceTypeReply(deviceType=self.device.device_type)

    @hdi_method(pb.DeviceStatusReply, session=False)
    def GetDeviceStatus(self, request, context):
        return pb.DeviceStatusReply(status=self.faults.device_status(self.device.status()))

    @hdi_method(pb.IsSupportedReply, session=False)
    def IsFloat16PrecisionSupported(self, request, context):
        return pb.IsSupportedReply(isSupported=self.device.capabilities.float16)

    @hdi_method(pb.IsSupportedReply, session=False)
    def IsPerformanceModeSupported(self, request, context):
        return pb.IsSupportedReply(isSupported=self.device.capabilities.performance_mode)

    @hdi_method(pb.IsSupportedReply, session=False)
    def IsPrioritySupported(self, request, context):
        return pb.IsSupportedReply(isSupported=self.device.capabilities.priority)

    @hdi_method(pb.IsSupportedReply, session=False)
    def IsDynamicInputSupported(self, request, context):
        return pb.IsSupportedReply(isSupported=self.device.capabilities.dynamic_input)

    @hdi_method(pb.IsSupportedReply, session=False)
    def IsModelCacheSupported(self, request, context):
        return pb.IsSupportedReply(isSupported=self.device.capabilities.model_cache)

    def _graph(self, session: Session, model, charge: _Charge, lenient_nodes: bool = False):
        def admit(windows, descriptors: int) -> None:
            for window in windows:  # a bad window's own code, before any size is counted
                _check_window(session, window, NNRT_MEMORY_ERROR)
            constants = sum(w.dataSize for w in windows)
            charge.add(constants + descriptors,
                       f"the model's {len(windows)} constants ({constants} bytes) and "
                       f"{len(model.allTensors)} tensors, {len(model.nodes)} nodes "
                       f"(~{descriptors} bytes)")

        return build_graph(model, lambda b: _copy_out(session, b, NNRT_MEMORY_ERROR),
                           lenient_nodes=lenient_nodes, admit=admit)

    @staticmethod
    def _blobs(session: Session, windows, charge: _Charge, count_code: int,
               what: str) -> list[bytes]:
        """The bytes of a Prepare*'s cache / offline buffers: their count and windows
        checked, their bytes charged, then copied (an identical window once)."""
        if len(windows) > MAX_PREPARE_BLOBS:
            raise DriverError(count_code, f"{len(windows)} {what}; this driver takes at most "
                                          f"{MAX_PREPARE_BLOBS}")
        for window in windows:
            _check_window(session, window, NNRT_INVALID_BUFFER)
        charge.add(sum(w.dataSize for w in windows), f"{len(windows)} {what}")
        copies: dict[tuple[int, int, int, int], bytes] = {}
        blobs = []
        for w in windows:
            key = (w.bufferId, w.bufferSize, w.offset, w.dataSize)
            if key not in copies:
                copies[key] = _copy_out(session, w, NNRT_INVALID_BUFFER)
            blobs.append(copies[key])
        return blobs

    @hdi_method(pb.GetSupportedOperationReply)
    def GetSupportedOperation(self, request, context, session):
        charge = _Charge(session)  # held for the call only
        try:
            graph = self._graph(session, request.model, charge, lenient_nodes=True)
            answers = self.device.supported_operations(graph)
        finally:
            charge.release()
        if len(answers) != len(graph.nodes):
            raise DriverError(NNRT_FAILED, f"device answered {len(answers)} of {len(graph.nodes)} nodes")
        ops = [a is True and i not in graph.undecodable for i, a in enumerate(answers)]
        reasons = ["" if ok else a if isinstance(a, str) else
                   "its type or attributes cannot be decoded" if i in graph.undecodable else
                   "not supported by this device" for i, (ok, a) in enumerate(zip(ops, answers))]
        return pb.GetSupportedOperationReply(ops=ops, reasons=reasons)

    def _config(self, config):
        prepared = validate_config(config)
        if prepared.enable_float16 and not self.device.capabilities.float16:
            raise DriverError(NNRT_NOT_SUPPORT, "enableFloat16 on a device without float16")
        self.device.check_extensions(prepared.extensions)
        return prepared

    def _admit(self, session: Session, charge: _Charge, prepare: Callable[[], PreparedModel],
               started: float, how: str, name: str = ""):
        """Prepare (the device's work) and hand the model to its session. Whatever fails
        after the device prepared it — the session closed meanwhile, above all — closes the
        model (its device memory back) and gives back what the call charged. `name`: the
        model's, for the run counters (a cache or offline model: how it came)."""
        try:
            model = prepare()
            try:
                mins, maxs = model.input_dim_ranges()
                entry = PreparedEntry(model, mins, maxs, model.static_output_shapes(),
                                      on_close=charge.release, name=name or f"({how})")
                self.faults.on_admit()
                model_id = session.add_prepared(entry)
            except BaseException:
                model.close()
                raise
        except BaseException:
            charge.release()
            raise
        log.info("session %d: prepared model %d %s in %.1f ms", session.id, model_id, how,
                 (time.monotonic() - started) * 1000)

        def described(spec) -> ht.Tensor:  # the I/O descriptor the reply carries (no data)
            return ht.Tensor(name=spec.name, dataType=spec.data_type, dims=spec.shape,
                             format=spec.format,
                             quantParams=[ht.QuantParam(numBits=q.num_bits, zeroPoint=q.zero_point,
                                                        scale=q.scale) for q in spec.quant_params])

        return pb.PrepareModelReply(preparedModelId=model_id,
                                    inputs=[described(t) for t in model.inputs],
                                    outputs=[described(t) for t in model.outputs])

    @hdi_method(pb.PrepareModelReply)
    def PrepareModel(self, request, context, session):
        self.faults.on_prepare()
        started = time.monotonic()
        charge = _Charge(session)

        def prepare() -> PreparedModel:
            graph = self._graph(session, request.model, charge)
            return self.device.prepare(graph, self._config(request.config))

        return self._admit(session, charge, prepare, started,
                           f"from {len(request.model.nodes)} nodes", request.model.name)

    @hdi_method(pb.PrepareModelReply)
    def PrepareModelFromModelCache(self, request, context, session):
        self.faults.on_prepare()
        started = time.monotonic()
        if not self.device.capabilities.model_cache:
            raise DriverError(NNRT_NOT_SUPPORT, "this device has no model cache")
        config = self._config(request.config)
        charge = _Charge(session)

        def prepare() -> PreparedModel:
            blobs = self._blobs(session, request.modelCache, charge, NNRT_INVALID_MODEL_CACHE,
                                "model cache buffers")
            return self.device.prepare_from_cache(blobs, config)

        return self._admit(session, charge, prepare, started, "from its cache")

    @hdi_method(pb.PrepareModelReply)
    def PrepareOfflineModel(self, request, context, session):
        self.faults.on_prepare()
        started = time.monotonic()
        config = self._config(request.config)
        charge = _Charge(session)

        def prepare() -> PreparedModel:
            blobs = self._blobs(session, request.offlineModels, charge, NNRT_INVALID_MODEL,
                                "offline model buffers")
            return self.device.prepare_offline(blobs, config)

        return self._admit(session, charge, prepare, started, "from an offline model")

    @hdi_method(pb.AllocateBufferReply)
    def AllocateBuffer(self, request, context, session):
        # The host's shared-memory budgets (per session, per driver) are charged when the
        # region is added to the session's table below (server/buffers.py), where imported
        # regions are charged too; a refusal there gives the device memory back (on_close).
        # A device with memory of its own (the accelerator) counts the buffer against it.
        self.device.reserve_memory(max(request.length, 0), "AllocateBuffer")
        try:
            region = SharedRegion.allocate(request.length)
        except BaseException:
            self.device.release_memory(max(request.length, 0))
            raise
        region.on_close = lambda: self.device.release_memory(request.length)
        buffer_id = session.buffers.add(region)
        return pb.AllocateBufferReply(buffer=ht.SharedBuffer(
            bufferId=buffer_id, bufferSize=region.size, offset=0, dataSize=request.length))

    @hdi_method(pb.ReturnCodeReply)
    def ReleaseBuffer(self, request, context, session):
        session.buffers.remove(request.buffer.bufferId)
        return pb.ReturnCodeReply()


class PreparedModelServicer(rpc.IPreparedModelServicer):
    def __init__(self, sessions: SessionRegistry, faults: FaultInjection,
                 runner: Runner) -> None:
        self.sessions = sessions
        self.faults = faults
        self.runner = runner  # Run's story, shared with the session channel

    @hdi_method(pb.VersionReply)
    def GetVersion(self, request, context, session):
        session.prepared(request.preparedModelId)
        return pb.VersionReply(major=HDI_VERSION[0], minor=HDI_VERSION[1])

    @hdi_method(pb.ExportModelCacheReply)
    def ExportModelCache(self, request, context, session):
        entry = session.prepared(request.preparedModelId)
        self.faults.on_export_cache()
        if not entry.cache:  # serialised once; later calls hand out the same buffers
            # Charged to the session's shared-memory budget like any buffer (buffers.py);
            # all blobs or none, so a refusal half way leaves no partial cache behind.
            added: list[int] = []
            try:
                for blob in map(self.faults.exported_blob, entry.model.export_cache()):
                    region = SharedRegion.allocate(len(blob))
                    region.array(0, "u1", len(blob))[:] = memoryview(blob)
                    added.append(session.buffers.add(region))
            except BaseException:
                for buffer_id in added:
                    try:
                        session.buffers.remove(buffer_id)
                    except DriverError:  # the session ended meanwhile: already freed
                        pass
                raise
            entry.cache.extend(added)
        return pb.ExportModelCacheReply(modelCache=[
            ht.SharedBuffer(bufferId=i, bufferSize=session.buffers.get(i).size, offset=0,
                            dataSize=session.buffers.get(i).size)
            for i in entry.cache
        ])

    @hdi_method(pb.GetInputDimRangesReply)
    def GetInputDimRanges(self, request, context, session):
        entry = session.prepared(request.preparedModelId)
        return pb.GetInputDimRangesReply(
            minInputDims=[ht.UInt32Array(values=d) for d in entry.min_dims],
            maxInputDims=[ht.UInt32Array(values=d) for d in entry.max_dims],
        )

    def Run(self, request, context):
        """The gRPC door of the run path; the Runner (server/runner.py) does the rest."""
        try:
            session = _session_of(self.sessions, context)
        except DriverError as exc:
            return self.runner.refused("no session", exc)
        return self.runner.run_request(session, request, context.is_active)

    @hdi_method(pb.ReturnCodeReply)
    def ReleasePreparedModel(self, request, context, session):
        session.release_prepared(request.preparedModelId)
        return pb.ReturnCodeReply()
