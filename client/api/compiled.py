"""`Compiled`: a model compiled for a device (an OH_NNCompilation); makes executors."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Mapping
from typing import Any

from nnrt.client import capi
from nnrt.client.capi.enums import OH_NN_PerformanceMode, OH_NN_Priority, OH_NN_ReturnCode
from nnrt.client.core.errors import NNRtError

from .calls import _call, _check
from .devices import _device_id
from .executor import Executor
from .shapes import _ShapePlan


class Compiled:
    """A model compiled for a device (wraps an OH_NNCompilation); makes executors."""

    def __init__(self, handle: capi.OH_NNCompilation, plan: _ShapePlan | None) -> None:
        self._handle: capi.OH_NNCompilation | None = handle
        self._plan = plan
        self._executor: Executor | None = None
        self._executors: weakref.WeakSet[Executor] = weakref.WeakSet()
        self._lock = threading.Lock()

    @classmethod
    def _build(cls, handle: capi.OH_NNCompilation, device: Any, plan: _ShapePlan | None, *,
               performance: Any = None, priority: Any = None, float16: bool = False,
               cache_dir: str | None = None, cache_version: int = 0,
               extensions: Mapping[str, bytes] | None = None) -> Compiled:
        try:
            if handle.devices is None:
                _call("OH_NNCompilation_SetDevice", capi.OH_NNCompilation_SetDevice, handle,
                      _device_id(device))
            if performance is not None:
                _call("OH_NNCompilation_SetPerformanceMode",
                      capi.OH_NNCompilation_SetPerformanceMode, handle, performance)
            if priority is not None:
                _call("OH_NNCompilation_SetPriority", capi.OH_NNCompilation_SetPriority, handle,
                      priority)
            if float16:
                _call("OH_NNCompilation_EnableFloat16", capi.OH_NNCompilation_EnableFloat16,
                      handle, True)
            if cache_dir is not None:
                _call("OH_NNCompilation_SetCache", capi.OH_NNCompilation_SetCache, handle,
                      str(cache_dir), cache_version)
            for key, value in (extensions or {}).items():
                _call("OH_NNCompilation_AddExtensionConfig",
                      capi.OH_NNCompilation_AddExtensionConfig, handle, key, value, len(value))
            _call("OH_NNCompilation_Build", capi.OH_NNCompilation_Build, handle)
        except BaseException:
            capi.OH_NNCompilation_Destroy(handle)
            raise
        return cls(handle, plan)

    @classmethod
    def from_cache(cls, cache: bytes, device: Any = None) -> Compiled:
        """Restore a compilation from `export_cache()` bytes (on the same kind of device)."""
        handle = _call("OH_NNCompilation_ConstructForCache", capi.OH_NNCompilation_ConstructForCache)
        try:
            _call("OH_NNCompilation_ImportCacheFromBuffer",
                  capi.OH_NNCompilation_ImportCacheFromBuffer, handle, cache, len(cache))
        except BaseException:
            capi.OH_NNCompilation_Destroy(handle)
            raise
        return cls._build(handle, device, None)

    @classmethod
    def from_offline(cls, model: Any, device: Any = None, *,
                     performance: OH_NN_PerformanceMode | int | None = None,
                     priority: OH_NN_Priority | int | None = None,
                     extensions: Mapping[str, bytes] | None = None) -> Compiled:
        """Prepare an offline model — the device's own compiled binary, e.g. an `.npubin`
        from `nnrt compile` — given as bytes (OH_NNCompilation_ConstructWithOfflineModelBuffer)
        or as a file path, str or os.PathLike (...ConstructWithOfflineModelFile, read at
        Build). Its inputs and outputs are those the driver describes."""
        if isinstance(model, (bytes, bytearray, memoryview)):
            data = bytes(model)
            handle = _call("OH_NNCompilation_ConstructWithOfflineModelBuffer",
                           capi.OH_NNCompilation_ConstructWithOfflineModelBuffer, data, len(data))
        else:
            handle = _call("OH_NNCompilation_ConstructWithOfflineModelFile",
                           capi.OH_NNCompilation_ConstructWithOfflineModelFile, model)
        return cls._build(handle, device, None, performance=performance, priority=priority,
                          extensions=extensions)

    @property
    def handle(self) -> capi.OH_NNCompilation:
        if self._handle is None:
            raise NNRtError(OH_NN_ReturnCode.OH_NN_INVALID_PARAMETER, "the compilation is closed")
        return self._handle

    @property
    def hetero(self) -> Any:
        """Over several devices, the core's HeteroCompilation (its plans); else None."""
        built = self.handle.built
        return built.hetero if built is not None else None

    def explain(self) -> str:
        """The plan in words (over several devices): each step's device and nodes, why
        nodes went where, the boundary tensors and their bytes."""
        hetero = self.hetero
        if hetero is None:
            return f"one device: {self.handle.built.device.name}"
        return hetero.explain()

    def export_cache(self) -> bytes:
        """The compiled model as bytes (OH_NNCompilation_ExportCacheToBuffer)."""
        probe = bytearray(1)  # too small: the call reports the size it needs
        code, size = capi.OH_NNCompilation_ExportCacheToBuffer(self.handle, probe, 1)
        if code == OH_NN_ReturnCode.OH_NN_SUCCESS:
            return bytes(probe[:size])
        if code != OH_NN_ReturnCode.OH_NN_INVALID_PARAMETER or not size:
            raise NNRtError(code, "OH_NNCompilation_ExportCacheToBuffer failed")
        buffer = bytearray(size)
        code, size = capi.OH_NNCompilation_ExportCacheToBuffer(self.handle, buffer, len(buffer))
        _check(code, "OH_NNCompilation_ExportCacheToBuffer")
        return bytes(buffer[:size])

    def executor(self) -> Executor:
        """A new executor (each has its own tensors; several may run at once)."""
        executor = Executor(self)
        self._executors.add(executor)
        return executor

    def run(self, *inputs: Any, **named: Any) -> Any:
        """Run on this compilation's default executor (see `Executor.run`)."""
        return self._default().run(*inputs, **named)

    async def run_async(self, *inputs: Any, **named: Any) -> Any:
        """Await a run on this compilation's default executor (see `Executor.run_async`)."""
        return await self._default().run_async(*inputs, **named)

    def _default(self) -> Executor:
        with self._lock:
            if self._executor is None:
                self._executor = self.executor()
            return self._executor

    def close(self) -> None:
        """Close its executors and release the compilation."""
        for executor in list(self._executors):
            executor.close()
        if self._handle is not None:
            capi.OH_NNCompilation_Destroy(self._handle)
            self._handle = None

    def __enter__(self) -> Compiled:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
