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

A Build's result is a `BuiltModel` (client/core/built_model.py: the prepared model, its
session, config, source, cache blobs and release), which executors run. The Build's work —
from a model, over several devices, offline, with a cache directory — is in
compilation_build.py.

Every function may be called from any thread. Build holds the compilation's lock only to
read the options and to publish the result, never while it talks to the driver, so a
Destroy from another thread returns at once; that Build then answers
OH_NN_INVALID_PARAMETER and its prepared model is released.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from nnrt.client.capi._objects import Handle, live
from nnrt.client.capi.enums import (OH_NN_CONNECTION_EXCEPTION, OH_NN_FAILED,
                                    OH_NN_INVALID_PARAMETER, OH_NN_OPERATION_FORBIDDEN,
                                    OH_NN_ReturnCode, OH_NN_SAVE_CACHE_EXCEPTION, OH_NN_SUCCESS,
                                    OH_NN_UNSUPPORTED)
from nnrt.client.capi.model import OH_NNModel
from nnrt.client.capi.structs import c_count, c_int
from nnrt.client.core import model_cache
from nnrt.client.core.built_model import BuiltModel
from nnrt.client.core.compiler import driver_cache, PERFORMANCE_MODES, PRIORITIES
from nnrt.client.core.driver import DriverGone
from nnrt.client.core.errors import NNRtError

from .compilation_build import _build, _Options


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
