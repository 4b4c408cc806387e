"""`OH_NNCompilation`: compiling a model for a device, or restoring it (capi.md 1.1–1.14).

A compilation has exactly one source — a finished `OH_NNModel`, an offline model file or
buffer, or nothing (`ConstructForCache`) to be restored from a cache directory or an
imported cache blob — and options: device (0 = first), cache directory + version,
performance mode, priority, float16, extension configs. `OH_NNCompilation_Build` turns it
into a `BuiltModel` (`compilation.built`), the prepared model executors run.

Build, in the order of capi.md 1.13 with our decisions of 5.2:

1. handle, single source, not built yet (a second Build after success → OPERATION_FORBIDDEN;
   after a failure a retry is allowed);
2. the device (unknown → FAILED; its driver unreachable → CONNECTION_EXCEPTION);
3. capabilities: a cache (directory or imported blob) on a device without model-cache
   support → OPERATION_FORBIDDEN (upstream; the header is silent); float16, performance
   mode or priority the device lacks → UNAVAILABLE_DEVICE; a failed capability query →
   UNAVAILABLE_DEVICE (the performance-mode query: FAILED); a ModelName that cannot name
   cache files → INVALID_PARAMETER;
4. the source: GetSupportedOperation (query fails → UNAVAILABLE_DEVICE, any node
   unsupported → FAILED) and PrepareModel (→ FAILED; INVALID_PARAMETER when the driver
   rejects the config, e.g. an extension) with the constants packed once in one shared
   buffer; PrepareOfflineModel for offline sources; PrepareModelFromModelCache for a cache;
   then GetInputDimRanges.

The cache directory follows the header table of capi.md 1.9: no cache → compile and save;
same version → restore without compiling; older → compile and overwrite; newer →
INVALID_PARAMETER; corrupt, truncated, another device's or another model's cache →
INVALID_FILE (never trusted, never silently replaced); missing / inaccessible directory →
INVALID_PATH; version UINT32_MAX → INVALID_PARAMETER; failing to save → SAVE_CACHE_EXCEPTION
(the prepared model is released: the Build failed and may be retried). The layout is in
model_cache.py.

All extension configs reach the driver in `ModelConfig.extensions` (capi.md §4); `ModelName`
also prefixes the cache file names.

Setters (1.8–1.12) reject a value C could not pass (a negative device ID, a performance
mode outside 0..4, a priority outside 0..3, a version outside uint32) at once with
INVALID_PARAMETER, and answer OPERATION_FORBIDDEN after a successful Build (5.2) and while a
Build is running. ExportCacheToBuffer on a device without model-cache support answers
UNSUPPORTED (upstream's constant answer), the driver failing to export SAVE_CACHE_EXCEPTION.

A Build's result is a `BuiltModel` (client/core/prepared_model.py: the prepared model, its
session, config, source, cache blobs and release), which executors run.

Every function may be called from any thread. Build holds the compilation's lock only to
read the options and to publish the result, never while it talks to the driver, so a
Destroy from another thread returns at once; that Build then answers
OH_NN_INVALID_PARAMETER and its prepared model is released.
"""

from __future__ import annotations

import fcntl
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nnrt.client.core import model_cache
from nnrt.client.capi._objects import Handle, live
from nnrt.client.core.built_model import BuiltModel
from nnrt.common.hdi_model import HDI_TO_OH_DATA_TYPE, IODesc, LoweredModel, hdi_format
from nnrt.client.capi.device import find_device
from nnrt.client.capi.enums import (
    OH_NN_CONNECTION_EXCEPTION,
    OH_NN_FAILED,
    OH_NN_FORMAT_NCHW,
    OH_NN_FORMAT_NHWC,
    OH_NN_FORMAT_NONE,
    OH_NN_INVALID_FILE,
    OH_NN_INVALID_PARAMETER,
    OH_NN_INVALID_PATH,
    OH_NN_OPERATION_FORBIDDEN,
    OH_NN_SAVE_CACHE_EXCEPTION,
    OH_NN_SUCCESS,
    OH_NN_UNKNOWN,
    OH_NN_UNSUPPORTED,
    OH_NN_ReturnCode,
)
from nnrt.client.capi.model import OH_NNModel
from nnrt.client.core.compiler import (PERFORMANCE_MODES, PRIORITIES, blobs_in_driver, built_model,
                                       check_capabilities, compile_model, driver_cache,
                                       prepare_failed)
from nnrt.client.core.errors import NNRtError
from nnrt.client.core.model_cache import CacheContents, CacheDir, CacheInvalid
from nnrt.client.capi.structs import c_count, c_int
from nnrt.client.core.device import Device
from nnrt.client.core.hetero import HeteroCompilation, PreparePartition
from nnrt.client.core.driver import DriverClient, DriverGone
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.common.errors import NNRT_SUCCESS, code_name

__all__ = [
    "OH_NNCompilation",
    "OH_NNCompilation_Construct",
    "OH_NNCompilation_ConstructWithOfflineModelFile",
    "OH_NNCompilation_ConstructWithOfflineModelBuffer",
    "OH_NNCompilation_ConstructForCache",
    "OH_NNCompilation_ExportCacheToBuffer",
    "OH_NNCompilation_ImportCacheFromBuffer",
    "OH_NNCompilation_AddExtensionConfig",
    "OH_NNCompilation_SetDevice",
    "OH_NNCompilation_SetCache",
    "OH_NNCompilation_SetPerformanceMode",
    "OH_NNCompilation_SetPriority",
    "OH_NNCompilation_EnableFloat16",
    "OH_NNCompilation_Build",
    "OH_NNCompilation_Destroy",
]

log = logging.getLogger(__name__)

UINT32_MAX = model_cache.UINT32_MAX
MODEL_NAME = "ModelName"  # the extension that prefixes cache file names (capi.md §4)
MAX_OFFLINE_BYTES = 1 << 30  # one driver buffer



class OH_NNCompilation(Handle):
    """The opaque `OH_NNCompilation` handle; `built` is the BuiltModel after a successful Build."""

    def __init__(self) -> None:
        super().__init__()
        # the source (exactly one is expected; ConstructForCache sets none of the first three)
        self.model: OH_NNModel | None = None
        self.offline_path: str | None = None
        self.offline_buffer: bytes | None = None
        self.for_cache = False
        self.imported: bytes | None = None  # ImportCacheFromBuffer
        # options
        self.device_id = 0
        # nnrt's own (no C function sets them; the Pythonic API does): several devices in
        # preference order (client/core/hetero.py), and whether a driver's death moves runs
        # to the devices left.
        self.devices: list[Any] | None = None
        self.failover = True
        self.cache_path: str | None = None
        self.cache_version = 0
        self.performance = 0
        self.priority = 0
        self.float16 = False
        self.extensions: dict[str, bytes] = {}
        # state
        self.built: BuiltModel | None = None
        self.attempted = False  # Build was called (successfully or not)
        self.building = False
        self.exported: bytes | None = None  # the ExportCacheToBuffer blob, made once

    def sources(self) -> int:
        return sum(x is not None for x in (self.model, self.offline_path, self.offline_buffer,
                                           self.imported))

    def __repr__(self) -> str:
        if self.destroyed:
            return "<OH_NNCompilation destroyed>"
        state = "built" if self.built is not None else "configuring"
        return f"<OH_NNCompilation {state} device={self.device_id}>"


def _compilation(obj: Any) -> OH_NNCompilation | None:
    return live(obj, OH_NNCompilation)


def _text(value: Any) -> str | None:
    """A C string argument: str or UTF-8 bytes, cut at a NUL; None if not one."""
    if isinstance(value, (bytes, bytearray)):
        try:
            value = bytes(value).decode()
        except UnicodeDecodeError:
            return None
    if not isinstance(value, str):
        return None
    return value.split("\0", 1)[0]


def _path(value: Any) -> str | None:
    """A C path argument: as `_text`, os.PathLike accepted too."""
    return _text(os.fspath(value) if isinstance(value, os.PathLike) else value)


def _bytes(buffer: Any, length: Any) -> bytes | None:
    """A copy of the first `length` bytes of a buffer-protocol object; None if impossible
    or empty (every caller needs at least one byte)."""
    n = c_count(length)
    if n is None or n == 0:
        return None
    try:
        view = memoryview(buffer)
    except TypeError:
        return None
    with view:
        if n > view.nbytes:
            return None
        return view.tobytes()[:n] if not view.c_contiguous else bytes(view.cast("B")[:n])


# -- 1.1 – 1.4: constructors -------------------------------------------------------------


def _construct(**source: Any) -> OH_NNCompilation:
    """A new compilation with its source (the attributes given) set."""
    compilation = OH_NNCompilation()
    for name, value in source.items():
        setattr(compilation, name, value)
    return compilation


def OH_NNCompilation_Construct(model: OH_NNModel | None) -> OH_NNCompilation | None:
    """capi.md 1.1: a compilation of an OH_NNModel (finished by Build time), or None."""
    m = live(model, OH_NNModel)
    return None if m is None else _construct(model=m)


def OH_NNCompilation_ConstructWithOfflineModelFile(
        modelPath: str | bytes | os.PathLike | None) -> OH_NNCompilation | None:
    """capi.md 1.2: a compilation of an offline model file (read at Build), or None."""
    if modelPath is None:
        return None
    path = _path(modelPath)
    return None if path is None else _construct(offline_path=path)


def OH_NNCompilation_ConstructWithOfflineModelBuffer(modelBuffer: Any,
                                                     modelSize: int) -> OH_NNCompilation | None:
    """capi.md 1.3: a compilation of an offline model in memory (copied), or None."""
    if modelBuffer is None:
        return None
    data = _bytes(modelBuffer, modelSize)
    return None if data is None else _construct(offline_buffer=data)


def OH_NNCompilation_ConstructForCache() -> OH_NNCompilation:
    """capi.md 1.4: an empty compilation, to be restored by SetCache or ImportCacheFromBuffer."""
    return _construct(for_cache=True)


# -- 1.5 – 1.6: the cache as one blob ----------------------------------------------------


def OH_NNCompilation_ExportCacheToBuffer(compilation: OH_NNCompilation | None, buffer: Any,
                                         length: int) -> tuple[OH_NN_ReturnCode, int | None]:
    """capi.md 1.5: write the compiled model's cache into `buffer`; `(code, modelSize)`.

    A buffer smaller than the cache gives `(OH_NN_INVALID_PARAMETER, needed)` and nothing
    written. A device without model-cache support → OH_NN_UNSUPPORTED; the driver failing
    to export → OH_NN_SAVE_CACHE_EXCEPTION; its driver gone → OH_NN_CONNECTION_EXCEPTION.
    """
    c = _compilation(compilation)
    if c is None or buffer is None:
        return OH_NN_INVALID_PARAMETER, None
    n = c_count(length)
    if n is None or n == 0:
        return OH_NN_INVALID_PARAMETER, None
    try:
        view = memoryview(buffer)
    except TypeError:
        return OH_NN_INVALID_PARAMETER, None
    if view.readonly or not view.c_contiguous or n > view.nbytes:
        return OH_NN_INVALID_PARAMETER, None
    with c.lock:
        if c.destroyed or not c.attempted or c.built is None:
            return OH_NN_INVALID_PARAMETER, None  # never built, or the Build failed (keep 2)
        built, blob = c.built, c.exported
        version = c.cache_version if c.cache_path else 0
    if blob is None:
        code, blob, why = _export(built, version)
        if code != OH_NN_SUCCESS:
            log.warning("OH_NNCompilation_ExportCacheToBuffer: %s", why)
            return code, None
        with c.lock:
            c.exported = blob
    if len(blob) > n:
        return OH_NN_INVALID_PARAMETER, len(blob)
    view.cast("B")[:len(blob)] = blob
    return OH_NN_SUCCESS, len(blob)


def _export(built: BuiltModel, version: int) -> tuple[OH_NN_ReturnCode, bytes | None, str]:
    """(code, the cache blob, why it failed) of a built model."""
    if built.hetero is not None:
        return OH_NN_UNSUPPORTED, None, "a model over several devices has no single cache blob"
    contents = built.cache
    if contents is None:
        try:
            code, contents, why = driver_cache(built.client, built)
        except DriverGone as exc:
            return OH_NN_CONNECTION_EXCEPTION, None, f"device {built.device.name}: {exc}"
        if code != OH_NN_SUCCESS:
            return code, None, why
    digest = built.digest
    if digest is None:
        digest = built.digest = model_cache.model_digest(built.model)
    try:
        blob = model_cache.pack(contents, version, built.device.id, digest)
    except ValueError as exc:
        return OH_NN_SAVE_CACHE_EXCEPTION, None, str(exc)
    return OH_NN_SUCCESS, blob, ""


def OH_NNCompilation_ImportCacheFromBuffer(compilation: OH_NNCompilation | None, buffer: Any,
                                           modelSize: int) -> OH_NN_ReturnCode:
    """capi.md 1.6: keep (a copy of) a cache blob for Build; validated at Build."""
    c = _compilation(compilation)
    if c is None or buffer is None:
        return OH_NN_INVALID_PARAMETER
    data = _bytes(buffer, modelSize)
    if data is None:
        return OH_NN_INVALID_PARAMETER
    with c.lock:
        if c.destroyed:
            return OH_NN_INVALID_PARAMETER
        c.imported = data
    return OH_NN_SUCCESS


# -- 1.7 – 1.12: options -----------------------------------------------------------------


def OH_NNCompilation_AddExtensionConfig(compilation: OH_NNCompilation | None,
                                        configName: str | bytes | None, configValue: Any,
                                        configValueSize: int) -> OH_NN_ReturnCode:
    """capi.md 1.7: keep a named byte string for the driver (copied); a repeated name
    appends `|` + the value. Every pair reaches the driver in ModelConfig.extensions."""
    c = _compilation(compilation)
    if c is None or configName is None or configValue is None:
        return OH_NN_INVALID_PARAMETER
    name = _text(configName)
    value = _bytes(configValue, configValueSize)
    if not name or value is None:
        return OH_NN_INVALID_PARAMETER
    with c.lock:
        if c.destroyed:
            return OH_NN_INVALID_PARAMETER
        old = c.extensions.get(name)
        c.extensions[name] = value if old is None else old + b"|" + value
    return OH_NN_SUCCESS


def _configure(compilation: Any, apply) -> OH_NN_ReturnCode:
    """Run `apply(c)` under the lock unless the compilation is built (→ OPERATION_FORBIDDEN)."""
    c = _compilation(compilation)
    if c is None:
        return OH_NN_INVALID_PARAMETER
    with c.lock:
        if c.destroyed:
            return OH_NN_INVALID_PARAMETER
        if c.built is not None or c.building:
            return OH_NN_OPERATION_FORBIDDEN
        return apply(c)


def _store(compilation: Any, **options: Any) -> OH_NN_ReturnCode:
    """`_configure` that sets the compilation's `options` (attribute → value); a value None,
    an argument C could not have passed, → INVALID_PARAMETER once the compilation itself is
    accepted."""

    def apply(c: OH_NNCompilation) -> OH_NN_ReturnCode:
        if any(value is None for value in options.values()):
            return OH_NN_INVALID_PARAMETER
        for name, value in options.items():
            setattr(c, name, value)
        return OH_NN_SUCCESS

    return _configure(compilation, apply)


def OH_NNCompilation_SetDevice(compilation: OH_NNCompilation | None,
                               deviceID: int) -> OH_NN_ReturnCode:
    """capi.md 1.8: choose the device (0 = first); checked at Build; after Build → 4."""
    return _store(compilation, device_id=c_count(deviceID))


def OH_NNCompilation_SetCache(compilation: OH_NNCompilation | None, cachePath: str | bytes | None,
                              version: int) -> OH_NN_ReturnCode:
    """capi.md 1.9: the cache directory and version; everything is checked at Build."""
    if _compilation(compilation) is None or cachePath is None:
        return OH_NN_INVALID_PARAMETER
    return _store(compilation, cache_path=_path(cachePath),
                  cache_version=c_int(version, 0, UINT32_MAX))


def OH_NNCompilation_SetPerformanceMode(compilation: OH_NNCompilation | None,
                                        performanceMode: int) -> OH_NN_ReturnCode:
    """capi.md 1.10: 0..4 stored (device support checked at Build → 14); after Build → 4."""
    return _store(compilation, performance=c_int(performanceMode, PERFORMANCE_MODES.start,
                                                 PERFORMANCE_MODES.stop - 1))


def OH_NNCompilation_SetPriority(compilation: OH_NNCompilation | None,
                                 priority: int) -> OH_NN_ReturnCode:
    """capi.md 1.11: 0..3 stored (device support checked at Build → 14); after Build → 4."""
    return _store(compilation, priority=c_int(priority, PRIORITIES.start, PRIORITIES.stop - 1))


def OH_NNCompilation_EnableFloat16(compilation: OH_NNCompilation | None,
                                   enableFloat16: bool) -> OH_NN_ReturnCode:
    """capi.md 1.12: stored (device support checked at Build → 14); after Build → 4."""
    value = c_int(enableFloat16, -(1 << 63), (1 << 64) - 1)  # a C bool: any integer
    return _store(compilation, float16=None if value is None else bool(value))


# -- 1.13: Build -----------------------------------------------------------------------


@dataclass
class _Options:
    """What Build reads from the compilation, taken under its lock."""

    model: OH_NNModel | None
    offline_path: str | None
    offline_buffer: bytes | None
    imported: bytes | None
    device_id: int
    cache_path: str | None
    cache_version: int
    performance: int
    priority: int
    float16: bool
    extensions: dict[str, bytes] = field(default_factory=dict)
    devices: list[Any] | None = None
    failover: bool = True

    @property
    def uses_cache(self) -> bool:
        return bool(self.cache_path) or self.imported is not None


def OH_NNCompilation_Build(compilation: OH_NNCompilation | None) -> OH_NN_ReturnCode:
    """capi.md 1.13: compile (or restore) on the chosen device; `compilation.built` on success."""
    c = _compilation(compilation)
    if c is None:
        return OH_NN_INVALID_PARAMETER
    with c.lock:
        if c.destroyed or c.sources() > 1:
            return OH_NN_INVALID_PARAMETER
        if c.built is not None or c.building:
            return OH_NN_OPERATION_FORBIDDEN
        c.building = True
        c.attempted = True
        options = _Options(c.model, c.offline_path, c.offline_buffer, c.imported, c.device_id,
                           c.cache_path, c.cache_version, c.performance, c.priority, c.float16,
                           dict(c.extensions), c.devices, c.failover)
    built = None
    try:
        built = _build(options)
        code = OH_NN_SUCCESS
    except NNRtError as exc:
        code = exc.code
        if exc.message:
            log.warning("OH_NNCompilation_Build: %s", exc.message)
    except DriverGone as exc:
        code = OH_NN_CONNECTION_EXCEPTION
        log.warning("OH_NNCompilation_Build: %s", exc)
    except Exception:
        code = OH_NN_FAILED
        log.exception("OH_NNCompilation_Build failed unexpectedly")
    with c.lock:
        c.building = False
        if c.destroyed:
            return OH_NN_INVALID_PARAMETER  # destroyed meanwhile: `built` is dropped, released
        if code == OH_NN_SUCCESS:
            c.built = built
    return code


def _build(o: _Options) -> BuiltModel:
    if o.devices is not None:
        return _build_hetero(o)
    device = find_device(o.device_id)
    if device is None:
        raise NNRtError(OH_NN_FAILED, f"no device with ID {o.device_id}")
    client = device.client()
    check_capabilities(device, client, uses_cache=o.uses_cache, float16=o.float16,
                       performance=o.performance, priority=o.priority)
    prefix = _model_name(o.extensions) if o.cache_path else ""
    config = ht.ModelConfig(enableFloat16=o.float16, mode=o.performance, priority=o.priority,
                            extensions=o.extensions)
    if o.offline_path is not None or o.offline_buffer is not None:
        return _build_offline(device, client, config, o)  # (a cache directory is not used)
    if o.model is not None:
        lowered = _lowered(o.model)
        if o.cache_path:
            return _build_with_cache(device, client, config, lowered, o.cache_path,
                                     o.cache_version, prefix)
        return compile_model(device, client, config, lowered)
    # ConstructForCache
    if o.imported is not None:
        try:
            index, contents = model_cache.unpack(o.imported)
        except CacheInvalid as exc:
            raise NNRtError(OH_NN_INVALID_FILE, f"imported cache rejected: {exc}") from exc
        if index.device_id != device.id:
            raise NNRtError(OH_NN_INVALID_FILE, "the imported cache was made for another device")
        return _restore(device, client, config, contents, None, index.model_digest)
    if o.cache_path:
        return _build_with_cache(device, client, config, None, o.cache_path, o.cache_version,
                                 prefix)
    raise NNRtError(OH_NN_INVALID_PARAMETER, "a compilation for a cache has neither a cache "
                  "directory nor an imported cache")


def _build_hetero(o: _Options) -> BuiltModel:
    """A model over several devices (client/core/hetero.py); a model source only. With a
    cache directory, each partition keeps a cache of its own there (`_partition_cache`)."""
    if o.model is None:
        raise NNRtError(OH_NN_INVALID_PARAMETER, "a compilation for several devices needs a "
                        "model (not an offline model or a cache)")
    config = ht.ModelConfig(enableFloat16=o.float16, mode=o.performance, priority=o.priority,
                            extensions=o.extensions)
    prepare = None
    if o.cache_path:
        prefix = _model_name(o.extensions)
        if o.cache_version == model_cache.INVALID_VERSION:
            raise NNRtError(OH_NN_INVALID_PARAMETER, "cache version UINT32_MAX is reserved")
        if not os.path.isdir(o.cache_path) or \
                not os.access(o.cache_path, os.R_OK | os.W_OK | os.X_OK):
            raise NNRtError(OH_NN_INVALID_PATH,
                            f"cache directory {o.cache_path!r} is missing or not accessible")

        def prepare(device: Device, client: DriverClient, sub: LoweredModel) -> BuiltModel:
            return _partition_cache(compilation, device, client, config, sub, o.cache_path,
                                    o.cache_version, prefix)

    compilation = HeteroCompilation(o.devices, _lowered(o.model), config,
                                    failover=o.failover, prepare=prepare)
    return compilation.build()


def _partition_cache(compilation: HeteroCompilation, device: Device, client: DriverClient,
                     config: ht.ModelConfig, sub: LoweredModel, cache_path: str, version: int,
                     prefix: str) -> BuiltModel:
    """A partition through the cache directory: its own cache there, named by the device and
    the partition (`<ModelName>part-<device ID>-<sub-model digest>-`, then upstream's file
    names), so the same model over the same devices finds every partition's cache again,
    and a partition two models share, one cache. The cache-directory table of capi.md 1.9
    holds per partition; a device without a model cache prepares its partitions without."""
    supported = client.is_model_cache_supported()
    if supported.returnCode != NNRT_SUCCESS or not supported.isSupported:
        log.info("device %s has no model cache: its partition is prepared without one",
                 device.name)
        return compilation.prepare_partition(device, client, sub)
    digest = model_cache.model_digest(sub)
    return _build_with_cache(device, client, config, sub, cache_path, version,
                             f"{prefix}part-{device.id}-{digest[:16]}-",
                             prepare=compilation.prepare_partition, digest=digest)


def _model_name(extensions: dict[str, bytes]) -> str:
    """The cache file-name prefix; INVALID_PARAMETER for one that cannot name a file."""
    raw = extensions.get(MODEL_NAME)
    if raw is None:
        return ""
    try:
        name = raw.decode()
    except UnicodeDecodeError:
        name = None
    if not name or "/" in name or "\0" in name:
        raise NNRtError(OH_NN_INVALID_PARAMETER,
                      f"ModelName {raw!r} cannot prefix cache file names")
    return name


def _lowered(model: OH_NNModel) -> LoweredModel:
    m = live(model, OH_NNModel)
    if m is None:
        raise NNRtError(OH_NN_INVALID_PARAMETER, "the model was destroyed before Build")
    with m.lock:
        if m.destroyed or not m.finished:
            raise NNRtError(OH_NN_INVALID_PARAMETER, "the model is not finished")
        return m.lowered()


def _build_offline(device: Device, client: DriverClient, config: ht.ModelConfig,
                   o: _Options) -> BuiltModel:
    """capi.md 1.2 / 1.3 "Ours": the offline model to the driver's PrepareOfflineModel."""
    data = o.offline_buffer
    if data is None:
        path = Path(o.offline_path)
        try:
            if path.stat().st_size > MAX_OFFLINE_BYTES:
                raise NNRtError(OH_NN_INVALID_FILE, f"offline model {path} is larger than 1 GiB")
            data = path.read_bytes()
        except (FileNotFoundError, NotADirectoryError) as exc:
            raise NNRtError(OH_NN_INVALID_PATH, f"offline model {path}: {exc.strerror}") from exc
        except OSError as exc:
            raise NNRtError(OH_NN_INVALID_FILE,
                          f"offline model {path}: {exc.strerror or exc}") from exc
        if not data:
            raise NNRtError(OH_NN_INVALID_FILE, f"offline model {path} is empty")
    with blobs_in_driver(client, device, [data]) as windows:
        reply = client.prepare_offline_model(windows, config)
    if reply.returnCode != NNRT_SUCCESS:
        raise prepare_failed("PrepareOfflineModel", device, reply.returnCode, reply.reason)
    # The front end cannot read an offline model: its inputs and outputs are those the
    # driver describes in the reply (nnrt's addition to PrepareModelReply, protos/hdi.proto).
    # A driver that describes none leaves the executor without descriptors, as upstream.
    return built_model(device, client, reply.preparedModelId,
                  [_described(t) for t in reply.inputs], [_described(t) for t in reply.outputs],
                  config, None, "offline", None, "")


# HDI Format -> OH_NN_Format: `hdi_format` inverted (FORMAT_NONE -> OH_NN_FORMAT_NONE).
_OH_FORMAT = {hdi_format(f): f for f in (OH_NN_FORMAT_NCHW, OH_NN_FORMAT_NHWC)}


def _described(tensor: ht.Tensor) -> IODesc:
    """The front end's descriptor of a tensor the driver described (HDI codes → OH_NN ones;
    a data type it does not know becomes OH_NN_UNKNOWN, a format OH_NN_FORMAT_NONE)."""
    return IODesc(tensor.name, HDI_TO_OH_DATA_TYPE.get(tensor.dataType, OH_NN_UNKNOWN),
                  list(tensor.dims), _OH_FORMAT.get(tensor.format, OH_NN_FORMAT_NONE))


def _restore(device: Device, client: DriverClient, config: ht.ModelConfig,
             contents: CacheContents, lowered: LoweredModel | None, digest: str) -> BuiltModel:
    """PrepareModelFromModelCache; a driver that refuses the blobs → INVALID_FILE."""
    with blobs_in_driver(client, device, contents.blobs) as windows:
        reply = client.prepare_model_from_model_cache(windows, config)
    if reply.returnCode != NNRT_SUCCESS:
        raise NNRtError(OH_NN_INVALID_FILE, f"PrepareModelFromModelCache on {device.name} refused "
                      f"the cache: {code_name(reply.returnCode)}")
    inputs = lowered.inputs if lowered is not None else contents.inputs
    outputs = lowered.outputs if lowered is not None else contents.outputs
    return built_model(device, client, reply.preparedModelId, inputs, outputs, config, lowered,
                  "cache", contents, digest)


@contextmanager
def _dir_lock(path: str, exclusive: bool) -> Iterator[None]:
    """flock on the directory itself: writers exclude readers and each other (processes
    sharing a cache directory); where the filesystem cannot lock, go on without."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        except OSError as exc:
            log.debug("cannot lock cache directory %s: %s", path, exc)
        yield
    finally:
        os.close(fd)


def _build_with_cache(device: Device, client: DriverClient, config: ht.ModelConfig,
                      lowered: LoweredModel | None, cache_path: str, version: int,
                      prefix: str, *, prepare: PreparePartition | None = None,
                      digest: str | None = None
                      ) -> BuiltModel:
    """The cache-directory table of capi.md 1.9 (header contract, our decisions of 5.2).
    `prepare(device, client, lowered)` prepares the model when no cache serves (default
    `compile_model` with `config`); `digest`, the model's if already known."""
    if version == model_cache.INVALID_VERSION:
        raise NNRtError(OH_NN_INVALID_PARAMETER, "cache version UINT32_MAX is reserved")
    directory = os.path.realpath(cache_path)
    access = os.R_OK | os.X_OK | (os.W_OK if lowered is not None else 0)
    if not os.path.isdir(directory) or not os.access(directory, access):
        raise NNRtError(OH_NN_INVALID_PATH,
                      f"cache directory {cache_path!r} is missing or not accessible")
    cache = CacheDir(directory, prefix)
    if digest is None:
        digest = model_cache.model_digest(lowered)
    try:
        with _dir_lock(directory, exclusive=False):
            index = cache.read_index()
            if index is not None and index.version == version:
                if index.device_id != device.id:
                    raise CacheInvalid(f"made for device {index.device_id}, not {device.id}")
                if lowered is not None and index.model_digest != digest:
                    raise CacheInvalid("made from another model")
                contents = cache.load(index)
            else:
                contents = None
    except CacheInvalid as exc:
        raise NNRtError(OH_NN_INVALID_FILE, f"cache in {directory!r} (prefix {prefix!r}) rejected: "
                      f"{exc}") from exc
    except OSError as exc:
        raise NNRtError(OH_NN_INVALID_PATH, f"cache directory {cache_path!r}: {exc}") from exc
    if index is not None and index.version > version:
        raise NNRtError(OH_NN_INVALID_PARAMETER, f"the cache in {directory!r} has version "
                      f"{index.version}, newer than the requested {version}")
    if contents is not None:
        log.info("restoring the model from the cache in %s (version %d)", directory, version)
        return _restore(device, client, config, contents, lowered, index.model_digest)
    if lowered is None:
        raise NNRtError(OH_NN_INVALID_PARAMETER, f"no usable cache in {directory!r} (prefix "
                      f"{prefix!r}, version {version}) and no model to compile")
    built = prepare(device, client, lowered) if prepare is not None else \
        compile_model(device, client, config, lowered)
    try:
        contents = built.cache  # exported by _compile when it could
        if contents is None:
            code, contents, why = driver_cache(client, built)
            if code != OH_NN_SUCCESS:
                raise NNRtError(OH_NN_SAVE_CACHE_EXCEPTION,
                              f"the compiled model cannot be saved: {why}")
        try:
            with _dir_lock(directory, exclusive=True):
                cache.write(contents, version, device.id, digest)
        except (OSError, ValueError) as exc:
            raise NNRtError(OH_NN_SAVE_CACHE_EXCEPTION, f"saving the cache in {directory!r} failed: "
                          f"{exc}") from exc
    except BaseException:
        built.release()  # the Build fails: no one will ever use this prepared model
        raise
    built.cache = contents
    built.digest = digest
    return built


def OH_NNCompilation_Destroy(compilation: OH_NNCompilation | None) -> None:
    """capi.md 1.14: free the compilation; executors made from it keep working."""
    c = _compilation(compilation)
    if c is None:
        return None
    with c.lock:
        if c.destroyed:
            return None
        c.destroyed = True
        built, c.built = c.built, None
        c.model = None
        c.offline_buffer = c.imported = c.exported = None
    del built  # the prepared model is released once no executor holds it either
    return None
