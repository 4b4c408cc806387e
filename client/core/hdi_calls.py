"""The HDI methods a `DriverClient` offers besides Run over the session channel: each one
gRPC call (`run_grpc`, Run for a request too big for a packet, included), or for a buffer's
fd a request over the session channel (fetch, import). A mixin of `DriverClient`
(driver.py), which owns the transport: `_call` (gRPC with the session's metadata, a dead
driver raised as DriverGone) and `_session_request`; `device` and `prepared` are its stubs.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from typing import Any

from google.protobuf import empty_pb2

from nnrt.protos import hdi_pb2 as pb
from nnrt.protos import hdi_pb2_grpc as rpc
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import model_types_pb2 as mt
from nnrt.common import session_channel as channel
from nnrt.common.errors import NNRT_SUCCESS, code_name

from .buffer import SharedMemory
from .run_framing import RunTicket, io_messages, unless_past_deadline

log = logging.getLogger(__name__)

_EMPTY = empty_pb2.Empty()


class HdiCalls:
    """INnrtDevice's methods, the buffers' and IPreparedModel's (Run over gRPC)."""

    device: rpc.INnrtDeviceStub
    prepared: rpc.IPreparedModelStub
    _call: Callable[..., Any]
    _session_request: Callable[..., tuple[dict, list[int]]]

    # -- INnrtDevice --------------------------------------------------------------------------

    def get_version(self) -> pb.VersionReply:
        return self._call(self.device.GetVersion, _EMPTY)

    def get_device_name(self) -> pb.NameReply:
        return self._call(self.device.GetDeviceName, _EMPTY)

    def get_vendor_name(self) -> pb.NameReply:
        return self._call(self.device.GetVendorName, _EMPTY)

    def get_device_type(self) -> pb.DeviceTypeReply:
        return self._call(self.device.GetDeviceType, _EMPTY)

    def get_device_status(self) -> pb.DeviceStatusReply:
        return self._call(self.device.GetDeviceStatus, _EMPTY)

    def get_supported_operation(self, model: mt.Model) -> pb.GetSupportedOperationReply:
        return self._call(self.device.GetSupportedOperation,
                          pb.GetSupportedOperationRequest(model=model))

    def is_float16_precision_supported(self) -> pb.IsSupportedReply:
        return self._call(self.device.IsFloat16PrecisionSupported, _EMPTY)

    def is_performance_mode_supported(self) -> pb.IsSupportedReply:
        return self._call(self.device.IsPerformanceModeSupported, _EMPTY)

    def is_priority_supported(self) -> pb.IsSupportedReply:
        return self._call(self.device.IsPrioritySupported, _EMPTY)

    def is_dynamic_input_supported(self) -> pb.IsSupportedReply:
        return self._call(self.device.IsDynamicInputSupported, _EMPTY)

    def is_model_cache_supported(self) -> pb.IsSupportedReply:
        return self._call(self.device.IsModelCacheSupported, _EMPTY)

    def prepare_model(self, model: mt.Model, config: ht.ModelConfig | None = None) -> pb.PrepareModelReply:
        return self._call(self.device.PrepareModel,
                          pb.PrepareModelRequest(model=model, config=config or ht.ModelConfig()))

    def prepare_model_from_model_cache(self, cache: Sequence[ht.SharedBuffer],
                                       config: ht.ModelConfig | None = None) -> pb.PrepareModelReply:
        return self._call(self.device.PrepareModelFromModelCache,
                          pb.PrepareModelFromModelCacheRequest(
                              modelCache=cache, config=config or ht.ModelConfig()))

    def prepare_offline_model(self, models: Sequence[ht.SharedBuffer],
                              config: ht.ModelConfig | None = None) -> pb.PrepareModelReply:
        return self._call(self.device.PrepareOfflineModel,
                          pb.PrepareOfflineModelRequest(
                              offlineModels=models, config=config or ht.ModelConfig()))

    def allocate_buffer(self, length: int) -> tuple[int, SharedMemory | None]:
        """AllocateBuffer, then fetch and map its memfd: (returnCode, memory or None)."""
        reply = self._call(self.device.AllocateBuffer, pb.AllocateBufferRequest(length=length))
        if reply.returnCode != NNRT_SUCCESS:
            return reply.returnCode, None
        return self.map_buffer(reply.buffer)

    def map_buffer(self, buffer: ht.SharedBuffer) -> tuple[int, SharedMemory | None]:
        """Fetch the fd of a buffer of this session (AllocateBuffer's, ExportModelCache's)
        over the session channel and map it: (returnCode, memory or None)."""
        answer, fds = self._session_request({"op": "fetch", "bufferId": buffer.bufferId})
        if answer.get("returnCode") != NNRT_SUCCESS or len(fds) != 1:
            channel.close_fds(fds)
            return answer.get("returnCode", ht.NNRT_FAILED), None
        memory = SharedMemory(buffer.bufferId, fds[0], buffer.bufferSize)
        memory.client = self
        return NNRT_SUCCESS, memory

    def fetch_bytes(self, buffer: ht.SharedBuffer) -> bytes | None:
        """The bytes of a window of a driver-owned buffer of this session (an exported cache blob).

        What `allocate_buffer` does after its RPC: fetch the memfd over the session channel, map
        it, copy the window out, unmap. None (logged) when that fails.
        """
        if buffer.offset + buffer.dataSize > buffer.bufferSize:
            log.warning("driver buffer %d: window [%d, +%d) outside %d bytes", buffer.bufferId,
                        buffer.offset, buffer.dataSize, buffer.bufferSize)
            return None
        answer, fds = self._session_request({"op": "fetch", "bufferId": buffer.bufferId})
        if answer.get("returnCode") != NNRT_SUCCESS or len(fds) != 1:
            channel.close_fds(fds)
            log.warning("fetching driver buffer %d failed: %s", buffer.bufferId,
                        code_name(answer.get("returnCode", -1)))
            return None
        if buffer.bufferSize == 0:
            channel.close_fds(fds)
            return b""
        try:
            memory = SharedMemory(buffer.bufferId, fds[0], buffer.bufferSize)
        except (OSError, ValueError) as exc:
            channel.close_fds(fds)
            log.warning("mapping driver buffer %d failed: %s", buffer.bufferId, exc)
            return None
        try:
            view = memory.view(buffer.offset, buffer.dataSize)
            data = bytes(view)
            view.release()
            return data
        finally:
            memory.close()

    def register_fd(self, fd: int) -> tuple[int, SharedMemory | None]:
        """Make the caller's memfd a buffer of this session; the caller keeps its own fd."""
        answer, fds = self._session_request({"op": "import"}, [fd])
        channel.close_fds(fds)
        if answer.get("returnCode") != NNRT_SUCCESS:
            return answer["returnCode"], None
        own = os.dup(fd)
        memory = SharedMemory(answer["bufferId"], own, answer["bufferSize"])
        memory.client = self
        return NNRT_SUCCESS, memory

    def import_fd(self, fd: int) -> tuple[int, int, int]:
        """Make the caller's memfd a buffer of this session without mapping it here:
        (returnCode, bufferId, bufferSize). The caller keeps its fd and its own mapping."""
        answer, fds = self._session_request({"op": "import"}, [fd])
        channel.close_fds(fds)
        code = answer.get("returnCode", ht.NNRT_FAILED)
        if code != NNRT_SUCCESS:
            return code, 0, 0
        return NNRT_SUCCESS, answer["bufferId"], answer["bufferSize"]

    def release_buffer(self, buffer: ht.SharedBuffer | SharedMemory) -> pb.ReturnCodeReply:
        """ReleaseBuffer on the driver. The client's mapping is closed by SharedMemory.close()."""
        if isinstance(buffer, SharedMemory):
            buffer = buffer.descriptor()
        return self._call(self.device.ReleaseBuffer, pb.ReleaseBufferRequest(buffer=buffer))

    # -- IPreparedModel -----------------------------------------------------------------------

    def prepared_model_version(self, model_id: int) -> pb.VersionReply:
        return self._call(self.prepared.GetVersion, pb.PreparedModelRef(preparedModelId=model_id))

    def export_model_cache(self, model_id: int) -> pb.ExportModelCacheReply:
        return self._call(self.prepared.ExportModelCache,
                          pb.PreparedModelRef(preparedModelId=model_id))

    def get_input_dim_ranges(self, model_id: int) -> pb.GetInputDimRangesReply:
        return self._call(self.prepared.GetInputDimRanges,
                          pb.PreparedModelRef(preparedModelId=model_id))

    def release_prepared_model(self, model_id: int) -> pb.ReturnCodeReply:
        return self._call(self.prepared.ReleasePreparedModel,
                          pb.PreparedModelRef(preparedModelId=model_id))

    def run_grpc(self, model_id: int, inputs: Sequence[ht.IOTensor | bytes],
                 outputs: Sequence[ht.IOTensor | bytes],
                 timeout: float | None = None, ticket: RunTicket | None = None,
                 profile: bool = False) -> pb.RunReply:
        """Run through the gRPC IPreparedModel service; `timeout` is the gRPC deadline. A
        `ticket` does not cancel it (a cancelled gRPC call would not say when the driver is
        done with the buffers): such a run ends at its end or its deadline."""
        reply = self._call(self.prepared.Run,
                           pb.RunRequest(preparedModelId=model_id, inputs=io_messages(inputs),
                                         outputs=io_messages(outputs), profile=profile),
                           timeout)
        return unless_past_deadline(reply, timeout, ticket)
