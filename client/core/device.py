"""Device discovery for the front end: every driver found in `NNRT_RUNTIME_DIR` is a device.

Decisions:

* **Name and ID.** A device's name is `<deviceName>_<vendorName>_v<major>_<minor>` (as
  upstream registers backends, capi.md 1.49; `OH_NNDevice_GetName` returns it). Its ID is a
  64-bit hash of that name *and* of its driver's socket name in the runtime directory: two
  drivers of one kind (the README's `cpu` and `flaky`) are two devices with two IDs, each
  reachable through the C API, and a driver instance keeps its ID across restarts (the
  device manager and `nnrt-driver@` restart it under the same socket name).
* **Listing keeps no session.** A listing checks each driver with a connect to its gRPC
  socket that reads the peer's credentials (`SO_PEERCRED`: pid and uid) and sends nothing;
  a driver served by an untrusted uid (common/runtime_dir.py `trusted_uids`) is skipped. A
  driver not seen before, or now served by another pid (restarted), has its identity read
  over a session-less gRPC channel (GetDeviceName/VendorName/Version/DeviceType need no
  session), closed at once. The session (`DriverClient`) is opened when the device is first
  used (`client()`), and is then shared by everything in this process that uses the device;
  when the driver dies that connection is dropped, and the next `client()` call reconnects
  if a driver of the same identity serves again (checked on the session itself).
* **Which runtime directory** (`DeviceRegistry.choose_directory()`): chosen once per registry by
  client/core/embedded.py's rules: the configured one, or the private directory of embedded
  default drivers when the configured one shows no sign of a driver or device manager.
"""

from __future__ import annotations

import atexit
import hashlib
import logging
import socket
import struct
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import empty_pb2

from nnrt.common.errors import NNRT_SUCCESS
from nnrt.common.runtime_dir import driver_names, grpc_socket, runtime_dir, trusted_uids
from nnrt.protos import hdi_pb2 as pb
from nnrt.protos import hdi_pb2_grpc

from .driver import DriverClient, DriverGone
from .embedded import EmbeddedDrivers, embedded_disabled, find_or_start
from .errors import DeviceNotFound

log = logging.getLogger(__name__)

CONNECT_TIMEOUT = 2.0


def device_id_of(name: str, driver: str) -> int:
    """The stable ID of the device `name` served by the driver whose socket name is
    `driver`: a non-zero 63-bit hash of both (fits size_t and int64)."""
    digest = hashlib.blake2b(f"{name}\0{driver}".encode(), digest_size=8).digest()
    return (int.from_bytes(digest, "little") & ((1 << 63) - 1)) or 1


def serving_peer(path: Path, timeout: float = 1.0) -> tuple[int, int] | None:
    """(pid, uid) of the process listening on the Unix stream socket `path`, None when no
    one does. Connects and reads `SO_PEERCRED`; sends nothing."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    probe.settimeout(timeout)
    try:
        probe.connect(str(path))
        pid, uid, _gid = struct.unpack("3i", probe.getsockopt(socket.SOL_SOCKET,
                                                              socket.SO_PEERCRED, 12))
        return pid, uid
    except OSError:
        return None
    finally:
        probe.close()


@dataclass(eq=False)
class Device:
    """One registered device (one driver)."""

    driver: str  # socket name in the runtime directory
    directory: Path
    device_name: str
    vendor: str
    version: tuple[int, int]
    hdi_device_type: int
    pid: int | None = None  # the driver process last seen serving it (SO_PEERCRED)
    _client: DriverClient | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def name(self) -> str:
        return f"{self.device_name}_{self.vendor}_v{self.version[0]}_{self.version[1]}"

    @property
    def id(self) -> int:
        return device_id_of(self.name, self.driver)

    @property
    def identity(self) -> tuple[str, str, tuple[int, int]]:
        return self.device_name, self.vendor, self.version

    @property
    def connected(self) -> bool:
        """Whether this process holds a live session with the device's driver."""
        client = self._client
        return client is not None and client.alive

    def client(self) -> DriverClient:
        """The live session with this device's driver; DriverGone if it cannot be reached."""
        with self._lock:
            if self._client is not None and self._client.alive:
                return self._client
            if self._client is not None:
                self._client.close()
                self._client = None
            client = DriverClient.connect(self.driver, self.directory, timeout=CONNECT_TIMEOUT)
            if _identity(client) != (self.device_name, self.vendor, self.version):
                client.close()
                raise DriverGone(f"driver {self.driver} now serves another device")
            self._client = client
            return client

    def get_device_type(self) -> pb.DeviceTypeReply:
        """GetDeviceType, on the session when one is open, else without one (a query opens
        no session); DriverGone if the driver does not answer."""
        client = self._client
        if client is not None and client.alive:
            return client.get_device_type()
        with grpc.insecure_channel(f"unix:{grpc_socket(self.directory, self.driver)}") as channel:
            try:
                return hdi_pb2_grpc.INnrtDeviceStub(channel).GetDeviceType(
                    empty_pb2.Empty(), timeout=CONNECT_TIMEOUT)
            except grpc.RpcError as exc:
                raise DriverGone(f"driver {self.driver}: GetDeviceType: {exc.code()}") from None

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None


def _probe_identity(directory: Path, driver: str) -> tuple[tuple[str, str, tuple[int, int]],
                                                            int] | None:
    """(identity, HDI device type) of a driver, read without a session; None if it does not
    answer or does not report its identity (upstream skips such a device, hdi.md 1.3)."""
    empty = empty_pb2.Empty()
    # No channel_ready_future: its polling makes close() wait ~0.2 s; an unreachable
    # driver fails the first call at once (UNAVAILABLE) instead.
    with grpc.insecure_channel(f"unix:{grpc_socket(directory, driver)}") as channel:
        stub = hdi_pb2_grpc.INnrtDeviceStub(channel)
        try:
            name = stub.GetDeviceName(empty, timeout=CONNECT_TIMEOUT)
            vendor = stub.GetVendorName(empty, timeout=CONNECT_TIMEOUT)
            version = stub.GetVersion(empty, timeout=CONNECT_TIMEOUT)
            kind = stub.GetDeviceType(empty, timeout=CONNECT_TIMEOUT)
        except grpc.RpcError as exc:
            log.info("skipping driver %s: %s", driver, exc.code())
            return None
    identity = identity_of(name, vendor, version)
    if identity is None:
        log.warning("skipping driver %s: it does not report its identity", driver)
        return None
    return identity, kind.deviceType if kind.returnCode == NNRT_SUCCESS else 0


def identity_of(name: pb.NameReply, vendor: pb.NameReply,
                version: pb.VersionReply) -> tuple[str, str, tuple[int, int]] | None:
    """(device name, vendor, version) from the replies of GetDeviceName, GetVendorName and
    GetVersion; None if any failed (upstream skips such a device, hdi.md 1.3)."""
    if NNRT_SUCCESS != name.returnCode or NNRT_SUCCESS != vendor.returnCode or \
            NNRT_SUCCESS != version.returnCode:
        return None
    return name.name, vendor.name, (version.major, version.minor)


def _identity(client: DriverClient) -> tuple[str, str, tuple[int, int]] | None:
    return identity_of(client.get_device_name(), client.get_vendor_name(), client.get_version())


class DeviceRegistry:
    """The devices of one runtime directory, rescanned on every listing."""

    def __init__(self, directory: Path | None = None) -> None:
        self._directory = directory
        self._devices: dict[str, Device] = {}  # by driver socket name
        self._lock = threading.Lock()
        self._embedded: EmbeddedDrivers | None = None
        self._chosen: Path | None = None  # the directory chosen once (client/core/embedded.py)
        self._embedding = threading.Lock()

    def choose_directory(self) -> Path:
        """The runtime directory in force, chosen once — and for the environment's default
        one with no driver in it, the embedded default drivers STARTED here, in a private
        directory, for this process (client/core/embedded.py; NNRT_NO_EMBEDDED=1 switches that
        off). A method, not a property: it may start processes.

        On first use it may wait, bounded, for a driver or device manager that is starting;
        a driver that restarts later is waited for, never replaced."""
        if self._directory is not None:
            return self._directory
        chosen = self._chosen
        if chosen is not None:
            return chosen
        with self._embedding:
            if self._chosen is None:
                try:
                    self._chosen, self._embedded = find_or_start()
                except RuntimeError as exc:
                    if not embedded_disabled():
                        raise
                    log.debug("%s", exc)  # switched off: the empty directory, no device
                    self._chosen = runtime_dir()
                if self._embedded is not None:
                    atexit.register(self.close)  # sessions end before the drivers stop (LIFO)
            return self._chosen

    def devices(self) -> list[Device]:
        """Every device whose driver answers now, in a stable order (by driver name). Opens
        no session: see the module docstring."""
        directory = self.choose_directory()
        found = []
        for driver in driver_names(directory):
            with self._lock:
                known = self._devices.get(driver)
            if known is not None and known.directory != directory:
                known = None
            if known is not None and known.connected:
                found.append(known)  # in use: its session is the liveness check
                continue
            peer = serving_peer(grpc_socket(directory, driver))
            if peer is None:
                log.info("skipping driver %s: nothing serves %s", driver,
                         grpc_socket(directory, driver))
                continue
            pid, uid = peer
            if uid not in trusted_uids():
                log.error("skipping driver %s: served by uid %d, which is not trusted (us, "
                          "root or NNRT_SERVICE_USER)", driver, uid)
                continue
            if known is not None and known.pid == pid:
                found.append(known)  # the same process as when its identity was read
                continue
            probed = _probe_identity(directory, driver)
            if probed is None:
                continue
            (name, vendor, version), kind = probed
            with self._lock:
                old = self._devices.get(driver)
                if old is not None and old.directory == directory and \
                        old.identity == (name, vendor, version):
                    old.pid, old.hdi_device_type = pid, kind
                    device = old  # a restart of the same device: the object others hold
                else:
                    if old is not None:
                        old.close()
                    device = Device(driver, directory, name, vendor, version, kind, pid)
                    self._devices[driver] = device
            found.append(device)
        return found

    def get(self, device_id: int) -> Device | None:
        """The device of an ID (0: the first device), None if there is none."""
        devices = self.devices()
        if not devices:
            return None
        if device_id == 0:
            return devices[0]
        return next((d for d in devices if d.id == device_id), None)

    def close(self) -> None:
        """End every session; stop the embedded drivers this registry started, if any."""
        with self._lock:
            devices, self._devices = list(self._devices.values()), {}
        for device in devices:
            device.close()
        with self._embedding:
            embedded, self._embedded = self._embedded, None
            if embedded is not None:
                self._chosen = None  # its directory is gone with it
        if embedded is not None:
            embedded.stop()


def find_device(devices: Sequence[Device], wanted: Any) -> Device:
    """The device `wanted` names, by the one set of rules every front end uses (the C API's
    IDs aside, which are IDs only):

    * None: the first device;
    * a Device, or anything with an `id` (the Pythonic API's DeviceInfo): that device;
    * a device type enum (OH_NN_DeviceType, HDI DeviceType; same values): the first of that
      type;
    * an int, or a string of digits: the device of that ID;
    * a string, case-insensitive, tried in turn as the full name (`nnrt-cpu_nnrt_v2_1`), the
      device-name part (`nnrt-cpu`, or `cpu` for it), the driver's socket name (`flaky`),
      the type (`cpu`, `gpu`, `accelerator`, `other`; `oh_nn_cpu` too).

    DeviceNotFound (OH_NN_FAILED) names the devices there are; TypeError for anything else.
    """
    if not devices:
        raise DeviceNotFound(f"no device {wanted!r}: no driver answers" if wanted is not None
                             else "no device: no driver answers")
    if wanted is None:
        return devices[0]
    if isinstance(wanted, IntEnum):
        match = [d for d in devices if d.hdi_device_type == int(wanted)]
    elif hasattr(wanted, "id") and not isinstance(wanted, (int, str)):
        match = [d for d in devices if d.id == wanted.id]
    elif isinstance(wanted, int) and not isinstance(wanted, bool):
        match = [d for d in devices if d.id == wanted]
    elif isinstance(wanted, str):
        key = wanted.strip().lower()
        if key.isdigit():
            match = [d for d in devices if d.id == int(key)]
        else:
            kind = key.removeprefix("oh_nn_").removesuffix("s")  # OH_NN_OTHERS: other
            match = [d for d in devices if d.name.lower() == key] or \
                [d for d in devices if d.device_name.lower() in (key, f"nnrt-{key}")] or \
                [d for d in devices if d.driver.lower() == key] or \
                [d for d in devices if _TYPE_NAMES.get(d.hdi_device_type) == kind]
    else:
        raise TypeError(f"a device is named by an ID, a name or a device type, not {wanted!r}")
    if not match:
        names = ", ".join(f"{d.name} (ID {d.id}, driver {d.driver})" for d in devices)
        raise DeviceNotFound(f"no device {wanted!r} (devices: {names})")
    return match[0]


_TYPE_NAMES = {0: "other", 1: "cpu", 2: "gpu", 3: "accelerator"}  # HDI DeviceType values

_registry: DeviceRegistry | None = None
_registry_lock = threading.Lock()


def registry() -> DeviceRegistry:
    """The process-wide registry (of the runtime directory in force)."""
    global _registry
    with _registry_lock:
        if _registry is None:
            _registry = DeviceRegistry()
        return _registry
