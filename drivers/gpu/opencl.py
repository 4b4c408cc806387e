"""The OpenCL side of the GPU driver: which device, its context and queue, the programs built
for it, and its memory as a budget.

One `ClRuntime` per driver process. Everything the prepared models enqueue goes to its one
in-order queue. Programs are built once per distinct (device, options, source) in the
process and shared by every model; their binaries (`CL_PROGRAM_BINARIES`) travel in model
caches so that a model prepared from its cache builds nothing, but what a cache brings
serves the model it came with alone (`ProgramCache`). Device memory is a budget: every
buffer the driver creates is reserved against the device's global memory (or the operator's
`--gpu-memory-mb`) first, so that a model that does not fit is refused with
NNRT_OUT_OF_MEMORY at prepare instead of failing somewhere inside the OpenCL driver.
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
import mmap
import os
import threading
from collections import Counter, OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

import numpy as np

# A daemon has no business writing pyopencl's compiler cache into its user's home directory;
# the driver keeps its own program cache (in memory and in model caches).
os.environ.setdefault("PYOPENCL_NO_CACHE", "1")
import pyopencl as cl  # noqa: E402

from .. import DeviceUnavailable  # noqa: E402
from nnrt.hdi.memory_budget import MemoryBudget  # noqa: E402

from nnrt.common.errors import (  # noqa: E402
    NNRT_DEVICE_ERROR,
    NNRT_FAILED,
    NNRT_OUT_OF_MEMORY,
    DriverError,
)
from nnrt.hdi.regions import on_unmap  # noqa: E402

log = logging.getLogger(__name__)

# OpenCL status codes that mean "not enough memory or resources" (cl.h).
_OUT_OF_MEMORY_CODES = {
    -4,  # CL_MEM_OBJECT_ALLOCATION_FAILURE
    -5,  # CL_OUT_OF_RESOURCES
    -6,  # CL_OUT_OF_HOST_MEMORY
    -61,  # CL_INVALID_BUFFER_SIZE (beyond CL_DEVICE_MAX_MEM_ALLOC_SIZE)
}
# ... and those that mean the device itself is gone or broken.
_DEVICE_LOST_CODES = {
    -2,  # CL_DEVICE_NOT_AVAILABLE
    -14,  # CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST
    -9999,  # NVIDIA: illegal read or write to a buffer (the context is unusable afterwards)
}


class DeviceChoiceError(DeviceUnavailable):
    """No OpenCL device matches --cl-device; the message lists what was found."""


@dataclass(frozen=True)
class FoundDevice:
    platform_index: int
    device_index: int
    platform: cl.Platform
    device: cl.Device

    @property
    def is_gpu(self) -> bool:
        return bool(self.device.type & cl.device_type.GPU)

    def describe(self) -> str:
        kind = cl.device_type.to_string(self.device.type).replace("ALL | ", "")
        return (f"{self.platform_index}:{self.device_index} {self.device.name.strip()} "
                f"({kind}, platform {self.platform.name.strip()!r}, "
                f"{self.device.global_mem_size >> 20} MiB)")

    def build_error(self) -> str | None:
        """Why this device's OpenCL C compiler cannot build a trivial kernel, or None. A
        device can be listed yet unable to compile: the PoCL in pyopencl's wheel (LLVM 14)
        does not know CPUs newer than its LLVM (an AMD Zen 5 becomes target CPU 'generic',
        which clang refuses), so every prepare would fail."""
        return _build_errors.get(self)


class _BuildProbe:
    """One probe build per device per process (a context and a one-line kernel: ~10 ms)."""

    def __init__(self) -> None:
        self._results: dict[tuple[int, int], str | None] = {}
        self._lock = threading.Lock()

    def get(self, found: FoundDevice) -> str | None:
        key = (found.platform_index, found.device_index)
        with self._lock:
            if key not in self._results:
                self._results[key] = self._probe(found.device)
            return self._results[key]

    @staticmethod
    def _probe(device: cl.Device) -> str | None:
        try:
            context = cl.Context([device])
            program = cl.Program(context, "__kernel void probe(__global float *a) "
                                          "{ a[get_global_id(0)] += 1.0f; }")
        except cl.Error as exc:
            return f"no context: {exc}"
        try:
            program.build()
        except cl.Error as exc:
            try:
                build_log = program.get_build_info(device, cl.program_build_info.LOG)
            except cl.Error:
                build_log = ""
            lines = [line.strip() for line in f"{build_log}\n{exc}".splitlines()
                     if line.strip()]
            return next((line for line in lines if "error" in line.lower()),
                        lines[0] if lines else type(exc).__name__)[:300]
        return None


_build_errors = _BuildProbe()


def found_devices() -> list[FoundDevice]:
    """Every OpenCL device of every platform the ICD loader finds, in index order."""
    try:
        platforms = cl.get_platforms()
    except cl.Error:  # CL_PLATFORM_NOT_FOUND_KHR: no ICD at all
        return []
    found = []
    for p_index, platform in enumerate(platforms):
        try:
            devices = platform.get_devices()
        except cl.Error:  # CL_DEVICE_NOT_FOUND on a platform with no device
            continue
        found.extend(FoundDevice(p_index, d_index, platform, device)
                     for d_index, device in enumerate(devices))
    return found


def choose_device(choice: str) -> FoundDevice:
    """The device `--cl-device` names: `gpu` (the first of type GPU), `any` (the first of
    any type) or `P:D` (platform and device index); `gpu` and `any` pass over devices whose
    compiler cannot build a kernel (logged), `P:D` names one that must."""
    found = found_devices()
    listing = ("; ".join(f.describe() for f in found) if found
               else "none (no OpenCL platform: is an ICD installed in /etc/OpenCL/vendors "
                    "or named by OCL_ICD_VENDORS?)")
    hint = (f"OpenCL devices found: {listing}. Pick one with --cl-device P:D, or "
            f"--cl-device any for any type (PoCL's CPU device included)")
    if choice in ("gpu", "any"):
        candidates = [f for f in found if f.is_gpu or choice == "any"]
        if not candidates:
            raise DeviceChoiceError(f"no OpenCL device{' of type GPU' if choice == 'gpu' else ''}"
                                    f". {hint}")
        refused = []
        for f in candidates:
            error = f.build_error()
            if error is None:
                for skipped in refused:
                    log.warning("OpenCL device %s skipped: %s", *skipped)
                return f
            refused.append((f.describe(), f"it cannot build a kernel ({error})"))
        raise DeviceChoiceError(
            f"no OpenCL device{' of type GPU' if choice == 'gpu' else ''} can build a "
            f"kernel: {'; '.join(f'{d}: {why}' for d, why in refused)}. {hint}")
    platform, sep, device = choice.partition(":")
    if not (sep and platform.isdigit() and device.isdigit()):
        raise DeviceChoiceError(f"--cl-device {choice!r} is not gpu, any or P:D. {hint}")
    for f in found:
        if (f.platform_index, f.device_index) == (int(platform), int(device)):
            error = f.build_error()
            if error is not None:
                raise DeviceChoiceError(f"OpenCL device {f.describe()} cannot build a kernel "
                                        f"({error}). {hint}")
            return f
    raise DeviceChoiceError(f"no OpenCL device {choice}. {hint}")


def cl_error(exc: Exception, what: str) -> DriverError:
    """The HDI code of an OpenCL failure: out of memory / resources, a lost device, or
    NNRT_FAILED; logged here with the OpenCL code."""
    status = getattr(exc, "code", None)
    status = status() if callable(status) else status
    if isinstance(exc, cl.MemoryError) or status in _OUT_OF_MEMORY_CODES:
        result = NNRT_OUT_OF_MEMORY
    elif status in _DEVICE_LOST_CODES:
        result = NNRT_DEVICE_ERROR
    else:
        result = NNRT_FAILED
    log.error("%s: OpenCL error %s: %s", what, status, exc)
    return DriverError(result, f"{what}: OpenCL error {status}: {exc}")


class DeviceMemory:
    """Buffers created for one owner (a prepared model, or one shape specialisation of it),
    counted against the budget and released together."""

    def __init__(self, runtime: ClRuntime, owner: str) -> None:
        self.runtime = runtime
        self.owner = owner
        self.bytes = 0
        self._buffers: list[cl.Buffer] = []

    def allocate(self, nbytes: int, what: str) -> cl.Buffer:
        nbytes = max(int(nbytes), 4)  # OpenCL refuses empty buffers; a 0-element tensor has one
        self.runtime.memory.reserve(nbytes, f"{self.owner}: {what}")
        try:
            buffer = cl.Buffer(self.runtime.context, cl.mem_flags.READ_WRITE, nbytes)
        except cl.Error as exc:
            self.runtime.memory.release(nbytes)
            raise cl_error(exc, f"{self.owner}: allocating {nbytes} bytes for {what}")
        self._buffers.append(buffer)
        self.bytes += nbytes
        return buffer

    def upload(self, array: np.ndarray, what: str) -> cl.Buffer:
        array = np.ascontiguousarray(array)
        buffer = self.allocate(array.nbytes, what)
        if array.nbytes:
            cl.enqueue_copy(self.runtime.queue, buffer, array, is_blocking=True)
        return buffer

    def release(self) -> None:
        for buffer in self._buffers:
            buffer.release()
        self._buffers.clear()
        self.runtime.memory.release(self.bytes)
        self.bytes = 0


MAX_WINDOWS = 64  # wrapped client windows kept per device (beyond: the oldest unused go)


def _in_mapping(array: np.ndarray) -> bool:
    """Whether `array` views an mmap (directly or through memoryviews and numpy views)."""
    owner = array
    while isinstance(owner, np.ndarray) and owner.base is not None:
        owner = owner.base
    while isinstance(owner, memoryview):
        owner = owner.obj
    return isinstance(owner, mmap.mmap)


class HostWindows:
    """Client windows wrapped as buffers over their own memory (`CL_MEM_USE_HOST_PTR`), on a
    device whose memory is the host's (`CL_DEVICE_HOST_UNIFIED_MEMORY`: PoCL's CPU device, an
    integrated GPU): kernels read the inputs and write the outputs where the client put them,
    instead of a copy each way. A window qualifies when its address is aligned to
    `CL_DEVICE_MEM_BASE_ADDR_ALIGN`; any other (and any window on a discrete GPU) is copied.

    One wrapping per (address, size, writable), made at its first run and kept for the next
    ones, until the host unmaps the region under it (hdi/regions.py `on_unmap`: a region
    goes only when no run borrows it) or it is the oldest unused beyond MAX_WINDOWS. A
    wrapping holds the address, never the mapping (no Python buffer export), so it cannot
    keep a released region mapped; it is released before the unmap, so nothing runs on a
    stale one. It takes no device memory: the window is already charged to the session.

    The byte counts are the device's: copied to or from the device, and served in place."""

    def __init__(self, device: cl.Device, context: cl.Context, enabled: bool) -> None:
        self.context = context
        self.enabled = enabled
        self.align = max(int(device.mem_base_addr_align) // 8, 1)  # bits, in bytes
        self._buffers: OrderedDict[tuple[int, int, bool], cl.Buffer] = OrderedDict()
        self._in_use: Counter[tuple[int, int, bool]] = Counter()  # by runs now enqueuing
        self._lock = threading.Lock()
        self.copied_in = self.copied_out = self.zero_copy = 0
        self.wrapped = 0  # wrappings made (a run that misses its cache makes one)
        self._stop_listening = on_unmap(self._unmapped) if enabled else None

    def usable(self, array: np.ndarray, device_dtype: np.dtype) -> bool:
        """Whether `array` can be wrapped: the device's dtype, dense, aligned, not empty, in
        a mapping (a shared-memory window, whose unmap the host announces)."""
        return (self.enabled and array.size > 0 and array.dtype == device_dtype
                and array.flags.c_contiguous and array.ctypes.data % self.align == 0
                and _in_mapping(array))

    def acquire(self, array: np.ndarray, writable: bool) -> tuple[tuple[int, int, bool],
                                                                   cl.Buffer]:
        """The wrapping of `array`'s memory, held until `release`d (a run enqueuing on it)."""
        key = (int(array.ctypes.data), int(array.nbytes), writable)
        with self._lock:
            buffer = self._buffers.get(key)
            if buffer is None:
                flags = cl.mem_flags.USE_HOST_PTR | (cl.mem_flags.READ_WRITE if writable
                                                     else cl.mem_flags.READ_ONLY)
                host = (ctypes.c_char * key[1]).from_address(key[0])
                try:
                    buffer = cl.Buffer(self.context, flags, hostbuf=host)
                except cl.Error as exc:
                    raise cl_error(exc, f"wrapping a {key[1]}-byte window")
                self._buffers[key] = buffer
                self.wrapped += 1
                self._evict()
            else:
                self._buffers.move_to_end(key)
            self._in_use[key] += 1
        return key, buffer

    def release(self, keys: list[tuple[int, int, bool]]) -> None:
        with self._lock:
            for key in keys:
                self._in_use[key] -= 1
                if not self._in_use[key]:
                    del self._in_use[key]
            self._evict()

    def count(self, copied_in: int = 0, copied_out: int = 0, zero_copy: int = 0) -> None:
        with self._lock:
            self.copied_in += copied_in
            self.copied_out += copied_out
            self.zero_copy += zero_copy

    def _evict(self) -> None:
        for key in list(self._buffers):
            if len(self._buffers) <= MAX_WINDOWS:
                break
            if key not in self._in_use:
                self._buffers.pop(key).release()

    def _unmapped(self, address: int, size: int) -> None:
        with self._lock:
            for key in [k for k in self._buffers if address <= k[0] < address + size]:
                if key in self._in_use:  # the host unmaps only what no run borrows
                    log.error("a window at %#x is unmapped while a run uses it", key[0])
                self._buffers.pop(key).release()

    @property
    def live(self) -> int:
        return len(self._buffers)

    def status(self) -> dict[str, str]:
        with self._lock:
            return {
                "zero_copy": "yes" if self.enabled else "no",
                "copied_bytes": str(self.copied_in + self.copied_out),
                "copied_in_bytes": str(self.copied_in),
                "copied_out_bytes": str(self.copied_out),
                "zero_copy_bytes": str(self.zero_copy),
                "zero_copy_windows": str(len(self._buffers)),
            }

    def close(self) -> None:
        if self._stop_listening is not None:
            self._stop_listening()
        with self._lock:
            for buffer in self._buffers.values():
                buffer.release()
            self._buffers.clear()


class BroughtPrograms:
    """The programs one model's cache brought (its blob authenticated): binaries until first
    asked for, then what was loaded from them. They serve that model alone (`ProgramCache.
    brought_by`): a binary is opaque code, and the driver did not build it in this process,
    so no other session's model ever runs it."""

    def __init__(self, binaries: dict[str, bytes]) -> None:
        self.binaries = dict(binaries)  # key -> binary, not loaded yet
        self.programs: dict[str, cl.Program] = {}  # key -> loaded (or built: unloadable)

    def forget_unused(self) -> None:
        """Drop the binaries never asked for (a static model has built all it needs)."""
        self.binaries.clear()


_brought: ContextVar[BroughtPrograms | None] = ContextVar("nnrt_cl_brought", default=None)


class ProgramCache:
    """Programs by (device, options, source): built from source once per process and shared
    by every model; binaries out (for model caches) and in, but a binary brought by a model's
    cache serves only that model (`brought_by`), so a session cannot put code under a
    program another session uses."""

    def __init__(self, runtime: ClRuntime) -> None:
        self.runtime = runtime
        self._programs: dict[str, cl.Program] = {}  # built here from source: the driver's own
        self._lock = threading.Lock()
        self.builds = 0  # from source
        self.loads = 0  # from a binary

    def key(self, source: str, options: tuple[str, ...]) -> str:
        """What the driver itself would build: a digest of the device, options and source."""
        return hashlib.sha256((self.runtime.identity + "\0" + " ".join(options) + "\0"
                               + source).encode()).hexdigest()

    @contextmanager
    def brought_by(self, brought: BroughtPrograms | None) -> Iterator[None]:
        """Within the block (one model's prepare or run), `get` may use what `brought` holds."""
        token = _brought.set(brought)
        try:
            yield
        finally:
            _brought.reset(token)

    def get(self, source: str, options: tuple[str, ...] = ()) -> tuple[str, cl.Program]:
        """The program: the process's own build if there is one, else one the current model's
        cache brought, else built from source now (and shared from then on)."""
        key = self.key(source, options)
        brought = _brought.get()
        with self._lock:
            program = self._programs.get(key)
            if program is None and brought is not None:
                program = brought.programs.get(key)
                if program is None and key in brought.binaries:
                    program = self._load(key, brought.binaries.pop(key))
                    if program is not None:
                        brought.programs[key] = program
            if program is None:
                program = self._build(key, source, options)
                self._programs[key] = program
        return key, program

    def _build(self, key: str, source: str, options: tuple[str, ...]) -> cl.Program:
        try:
            program = cl.Program(self.runtime.context, source).build(options=list(options))
        except cl.Error as exc:
            raise cl_error(exc, f"building program {key[:12]}")
        self.builds += 1
        log.debug("built program %s (%d builds)", key[:12], self.builds)
        return program

    def _load(self, key: str, binary: bytes) -> cl.Program | None:
        rt = self.runtime
        try:
            program = cl.Program(rt.context, [rt.device], [binary]).build()
        except cl.Error as exc:  # a binary the driver cannot load: build from source instead
            log.warning("program binary %s not loadable (%s): building from source",
                        key[:12], exc)
            return None
        self.loads += 1
        return program

    def binary(self, key: str, brought: BroughtPrograms | None = None) -> bytes:
        """The binary of a program a model uses (the shared one, or one it brought)."""
        with self._lock:
            program = self._programs.get(key)
            if program is None and brought is not None:
                program = brought.programs.get(key)
        if program is None:
            raise KeyError(key)
        (binary,) = program.get_info(cl.program_info.BINARIES)
        return bytes(binary)


class ClRuntime:
    """The chosen OpenCL device with its context, queue, programs and memory budget."""

    def __init__(self, found: FoundDevice, memory_limit: int | None = None,
                 zero_copy: bool | None = None) -> None:
        """`zero_copy`: wrap client windows instead of copying them (`HostWindows`); by
        default where the device's memory is the host's."""
        self.found = found
        self.device = found.device
        self.context = cl.Context([self.device])
        self.queue = cl.CommandQueue(self.context)  # in order: kernels run as enqueued
        self.programs = ProgramCache(self)
        global_memory = int(self.device.global_mem_size)
        self.memory = MemoryBudget(min(global_memory, memory_limit) if memory_limit
                                   else global_memory)
        self.fp16 = "cl_khr_fp16" in self.device.extensions.split()
        self.fp64 = "cl_khr_fp64" in self.device.extensions.split()
        self.unified_memory = bool(self.device.host_unified_memory)
        self.max_work_group = int(self.device.max_work_group_size)
        self.local_memory = int(self.device.local_mem_size)
        self.windows = HostWindows(self.device, self.context,
                                   self.unified_memory if zero_copy is None else zero_copy)

    @property
    def identity(self) -> str:
        """What compiled programs depend on: the device and its OpenCL driver."""
        d = self.device
        return (f"{self.found.platform.name.strip()} | {d.name.strip()} | "
                f"{d.driver_version.strip()} | {d.version.strip()}")

    def details(self) -> dict[str, str]:
        d = self.device
        return {
            "opencl_platform": self.found.platform.name.strip(),
            "opencl_platform_version": self.found.platform.version.strip(),
            "opencl_device": d.name.strip(),
            "opencl_device_index": f"{self.found.platform_index}:{self.found.device_index}",
            "opencl_device_type": cl.device_type.to_string(d.type).replace("ALL | ", ""),
            "opencl_driver_version": d.driver_version.strip(),
            "global_memory_mib": str(int(d.global_mem_size) >> 20),
            "memory_limit_mib": str(self.memory.limit >> 20),
            "compute_units": str(d.max_compute_units),
            "fp16": "yes" if self.fp16 else "no",
            "fp64": "yes" if self.fp64 else "no",
            "host_unified_memory": "yes" if self.unified_memory else "no",
        }

    def status(self) -> dict[str, str]:
        return {
            "memory_used_bytes": str(self.memory.used),
            "memory_peak_bytes": str(self.memory.peak),
            "programs_built": str(self.programs.builds),
            "programs_loaded_from_binary": str(self.programs.loads),
            **self.windows.status(),
        }

    def close(self) -> None:
        self.windows.close()
        try:
            self.queue.finish()
        except cl.Error:
            pass


def iter_chunks(items: list, size: int) -> Iterator[list]:
    for start in range(0, len(items), size):
        yield items[start:start + size]
