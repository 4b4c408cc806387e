"""The admin service `nnrt.admin.v1.NnrtAdmin` of a driver process: a stub, GetStatus, SetFaults."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import grpc
from google.protobuf import empty_pb2

from nnrt.protos import admin_pb2 as apb
from nnrt.protos import admin_pb2_grpc


@contextmanager
def admin(driver) -> Iterator[admin_pb2_grpc.NnrtAdminStub]:
    """An admin stub on a plain channel: no session, no metadata."""
    with grpc.insecure_channel(f"unix:{driver.grpc_path}") as channel:
        yield admin_pb2_grpc.NnrtAdminStub(channel)


def status(driver) -> apb.DriverStatus:
    with admin(driver) as stub:
        reply = stub.GetStatus(empty_pb2.Empty(), timeout=5)
    assert reply.returnCode == 0
    return reply


def set_faults(driver, **fields) -> apb.FaultReply:
    with admin(driver) as stub:
        return stub.SetFaults(apb.FaultConfig(**fields), timeout=5)
