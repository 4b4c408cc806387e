"""A driver's session token, through a real driver process: every session method over gRPC
needs one, the token is what grants access, an ended session's token is refused, and device
queries need none."""

from __future__ import annotations

import numpy as np
import pytest
from google.protobuf import empty_pb2

from nnrt.common.hdi_model import HdiModelBuilder
from nnrt.protos import hdi_pb2 as pb
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from nnrt.common.errors import HDF_ERR_NOPERM, NNRT_SUCCESS
from tests.conftest import wait_until
from tests.server.test_model_validation import (  # noqa: F401  (fixtures among them)
    SHAPE,
    TIMEOUT,
    add_builder,
    client,
    raw_stubs,
    run_add,
)


# ---------------------------------------------------------------- sessions


def _inputs_only_model():
    """y = a + b with both operands inputs: no constant buffer needed."""
    b = HdiModelBuilder("inputs-only")
    a = b.input("a", np.float32, SHAPE)
    c = b.input("b", np.float32, SHAPE)
    y = b.tensor("y", np.float32, SHAPE)
    b.node(na.NODE_TYPE_ADD_FUSION, [a, c], [y])
    b.mark_outputs(y)
    return b.model()


def _session_calls(device, prepared, model_id, buffer):
    ref = pb.PreparedModelRef(preparedModelId=model_id)
    return {
        "PrepareModel": (device.PrepareModel, pb.PrepareModelRequest(model=_inputs_only_model())),
        "GetSupportedOperation": (device.GetSupportedOperation,
                                  pb.GetSupportedOperationRequest(model=_inputs_only_model())),
        "AllocateBuffer": (device.AllocateBuffer, pb.AllocateBufferRequest(length=64)),
        "ReleaseBuffer": (device.ReleaseBuffer, pb.ReleaseBufferRequest(buffer=buffer)),
        "PrepareModelFromModelCache": (device.PrepareModelFromModelCache,
                                       pb.PrepareModelFromModelCacheRequest(modelCache=[buffer])),
        "PrepareOfflineModel": (device.PrepareOfflineModel,
                                pb.PrepareOfflineModelRequest(offlineModels=[buffer])),
        "Run": (prepared.Run, pb.RunRequest(preparedModelId=model_id)),
        "GetInputDimRanges": (prepared.GetInputDimRanges, ref),
        "ExportModelCache": (prepared.ExportModelCache, ref),
        "PreparedModel.GetVersion": (prepared.GetVersion, ref),
        "ReleasePreparedModel": (prepared.ReleasePreparedModel, ref),
    }


SESSION_METHODS = ["PrepareModel", "GetSupportedOperation", "AllocateBuffer", "ReleaseBuffer",
                   "PrepareModelFromModelCache", "PrepareOfflineModel", "Run",
                   "GetInputDimRanges", "ExportModelCache", "PreparedModel.GetVersion",
                   "ReleasePreparedModel"]


@pytest.mark.parametrize("token", [None, "", "0" * 32, "not-a-session"],
                         ids=["no-metadata", "empty", "zeros", "bogus"])
@pytest.mark.parametrize("method", SESSION_METHODS)
def test_session_methods_need_a_session(client, shared_driver, raw_stubs, method, token):
    # A model and a buffer that exist, in a real session: a call without that session's
    # token must neither use nor release them.
    model_id = add_builder().prepare(client)
    code, held = client.allocate_buffer(64)
    assert code == NNRT_SUCCESS
    call, request = _session_calls(*raw_stubs, model_id, held.descriptor())[method]
    metadata = None if token is None else (("nnrt-session", token),)
    reply = call(request, metadata=metadata, timeout=TIMEOUT)
    assert reply.returnCode == HDF_ERR_NOPERM
    run_add(client, model_id)
    assert client.release_prepared_model(model_id).returnCode == NNRT_SUCCESS
    held.close()
    assert client.release_buffer(held.descriptor()).returnCode == NNRT_SUCCESS


def test_the_session_token_is_what_grants_access(client, raw_stubs):
    """The same raw stubs with the client's token do reach its session (so the refusals
    above are about the token, not about the raw channel)."""
    device, _ = raw_stubs
    metadata = client._metadata  # the (nnrt-session, token) pair of the session handshake
    reply = device.AllocateBuffer(pb.AllocateBufferRequest(length=64), metadata=metadata,
                                  timeout=TIMEOUT)
    assert reply.returnCode == NNRT_SUCCESS
    assert device.ReleaseBuffer(pb.ReleaseBufferRequest(buffer=reply.buffer), metadata=metadata,
                                timeout=TIMEOUT).returnCode == NNRT_SUCCESS
    reply = device.PrepareModel(pb.PrepareModelRequest(model=_inputs_only_model()),
                                metadata=metadata, timeout=TIMEOUT)
    assert reply.returnCode == NNRT_SUCCESS
    assert client.release_prepared_model(reply.preparedModelId).returnCode == NNRT_SUCCESS


def test_the_token_of_an_ended_session_is_refused(shared_driver, raw_stubs):
    device, _ = raw_stubs
    with shared_driver.client() as gone:
        metadata = gone._metadata
        assert device.AllocateBuffer(pb.AllocateBufferRequest(length=64), metadata=metadata,
                                     timeout=TIMEOUT).returnCode == NNRT_SUCCESS

    def refused():
        reply = device.GetSupportedOperation(
            pb.GetSupportedOperationRequest(model=_inputs_only_model()), metadata=metadata,
            timeout=TIMEOUT)
        return reply.returnCode == HDF_ERR_NOPERM

    assert wait_until(refused, timeout=5.0)


def test_device_queries_work_without_a_session(raw_stubs):
    device, _ = raw_stubs
    empty = empty_pb2.Empty()
    version = device.GetVersion(empty, timeout=TIMEOUT)
    assert (version.returnCode, version.major, version.minor) == (NNRT_SUCCESS, 2, 1)
    for call in (device.GetDeviceName, device.GetVendorName):
        reply = call(empty, timeout=TIMEOUT)
        assert reply.returnCode == NNRT_SUCCESS and reply.name
    reply = device.GetDeviceType(empty, timeout=TIMEOUT)
    assert (reply.returnCode, reply.deviceType) == (NNRT_SUCCESS, ht.CPU)
    reply = device.GetDeviceStatus(empty, timeout=TIMEOUT)
    assert (reply.returnCode, reply.status) == (NNRT_SUCCESS, ht.AVAILABLE)
    for call in (device.IsFloat16PrecisionSupported, device.IsPerformanceModeSupported,
                 device.IsPrioritySupported, device.IsDynamicInputSupported,
                 device.IsModelCacheSupported):
        assert call(empty, timeout=TIMEOUT).returnCode == NNRT_SUCCESS
    assert device.IsDynamicInputSupported(empty, timeout=TIMEOUT).isSupported is True
