"""Device discovery for the front end: every driver found in `NNRT_RUNTIME_DIR` is a device.

A device is known by what it is, not by where it runs: its name is
`<deviceName>_<vendorName>_v<major>_<minor>` (as upstream registers backends, capi.md 1.49)
and its ID a 64-bit hash of that name, so the ID stays the same when the driver process
restarts. One `DriverClient` (= one session) per driver is shared by everything in this
process that uses the device; when the driver dies that connection is dropped, and the
next `client()` call reconnects if a driver of the same identity is serving again.
"""

from __future__ import annotations

import atexit
import hashlib
import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path

from nnrt.client.embedded import EmbeddedDrivers, embedded_disabled, find_or_start
from nnrt.client.hdi import DriverClient, DriverGone
from nnrt.server.errors import NNRT_SUCCESS
from nnrt.server.runtime_dir import driver_names, runtime_dir

log = logging.getLogger(__name__)

CONNECT_TIMEOUT = 2.0


def device_id_of(name: str) -> int:
    """The stable ID of a device name: a non-zero 63-bit hash (fits size_t and int64)."""
    digest = hashlib.blake2b(name.encode(), digest_size=8).digest()
    return (int.from_bytes(digest, "little") & ((1 << 63) - 1)) or 1


@dataclass(eq=False)
class Device:
    """One registered device (one driver)."""

    driver: str  # socket name in the runtime directory
    directory: Path
    device_name: str
    vendor: str
    version: tuple[int, int]
    hdi_device_type: int
    _client: DriverClient | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def name(self) -> str:
        return f"{self.device_name}_{self.vendor}_v{self.version[0]}_{self.version[1]}"

    @property
    def id(self) -> int:
        return device_id_of(self.name)

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

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None


def _identity(client: DriverClient) -> tuple[str, str, tuple[int, int]] | None:
    name, vendor, version = client.get_device_name(), client.get_vendor_name(), client.get_version()
    if NNRT_SUCCESS != name.returnCode or NNRT_SUCCESS != vendor.returnCode or \
            NNRT_SUCCESS != version.returnCode:
        return None  # upstream skips a device whose identity queries fail (hdi.md 1.3)
    return name.name, vendor.name, (version.major, version.minor)


class DeviceRegistry:
    """The devices of one runtime directory, rescanned on every listing."""

    def __init__(self, directory: Path | None = None) -> None:
        self._directory = directory
        self._devices: dict[str, Device] = {}  # by driver socket name
        self._lock = threading.Lock()
        self._embedded: EmbeddedDrivers | None = None
        self._embedding = threading.Lock()

    @property
    def directory(self) -> Path:
        """The runtime directory in force; for the environment's default one with no
        driver in it, the private directory of embedded default drivers started once for
        this process (client/embedded.py; NNRT_NO_EMBEDDED=1 switches that off)."""
        if self._directory is not None:
            return self._directory
        if self._embedded is not None:
            return self._embedded.directory
        configured = runtime_dir()
        if driver_names(configured) or embedded_disabled():
            return configured
        with self._embedding:
            if self._embedded is None:
                directory, self._embedded = find_or_start()
                atexit.register(self.close)  # sessions end before the drivers stop (LIFO)
                return directory
            return self._embedded.directory

    def devices(self) -> list[Device]:
        """Every device whose driver answers now, in a stable order (by driver name)."""
        directory = self.directory
        found = []
        for driver in driver_names(directory):
            with self._lock:
                known = self._devices.get(driver)
            if known is not None and known.directory == directory:
                try:
                    known.client()
                    found.append(known)
                    continue
                except DriverGone:
                    pass  # gone, or replaced by another device: probe afresh below
            device = self._probe(directory, driver)
            if device is not None:
                with self._lock:
                    old = self._devices.get(driver)
                    if old is not None and old is not device:
                        old.close()
                    self._devices[driver] = device
                found.append(device)
        return found

    def _probe(self, directory: Path, driver: str) -> Device | None:
        try:
            client = DriverClient.connect(driver, directory, timeout=CONNECT_TIMEOUT)
        except DriverGone as exc:
            log.info("skipping driver %s: %s", driver, exc)
            return None
        try:
            identity = _identity(client)
            kind = client.get_device_type()
        except DriverGone as exc:
            client.close()
            log.info("skipping driver %s: %s", driver, exc)
            return None
        if identity is None:
            client.close()
            log.warning("skipping driver %s: it does not report its identity", driver)
            return None
        name, vendor, version = identity
        device = Device(driver, directory, name, vendor, version,
                        kind.deviceType if kind.returnCode == NNRT_SUCCESS else 0)
        device._client = client
        return device

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
            embedded.stop()


_registry: DeviceRegistry | None = None
_registry_lock = threading.Lock()


def registry() -> DeviceRegistry:
    """The process-wide registry (of the runtime directory in force)."""
    global _registry
    with _registry_lock:
        if _registry is None:
            _registry = DeviceRegistry()
        return _registry
