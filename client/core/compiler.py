"""Compiling a model for a device: what the C API's Build, the Pythonic API and the CLI share.

`compile_model` asks the device whether it runs every node (GetSupportedOperation, whose
per-node reasons name what it refuses) and prepares the model (PrepareModel, the constants
packed once for both), then keeps what recovery needs: the model cache blobs, exported right
after preparing on a device with a cache (`keep_cache`), so that a PreparedModel prepares
itself again after a driver restart without any disk (`prepare_again`: from the blobs when
the driver takes them, else from the lowered model). The BuiltModel releases its prepared
model when nothing holds it any more.

Failures are NNRtErrors with the code capi.md gives the Build, and the driver's reason.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Iterator
from contextlib import contextmanager

from nnrt.common.errors import (NNRT_INVALID_PARAMETER, NNRT_INVALID_PERFORMANCE_MODE,
                                NNRT_INVALID_PRIORITY, NNRT_NOT_SUPPORT, NNRT_SUCCESS,
                                code_name)
from nnrt.common.hdi_model import IODesc, LoweredModel, PrepareError
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import model_types_pb2 as mt

from .built_model import BuiltModel, copy_desc, release_model
from .device import Device
from .driver import DriverClient, DriverGone
from .errors import (OH_NN_FAILED, OH_NN_INVALID_FILE, OH_NN_INVALID_PARAMETER,
                     OH_NN_OPERATION_FORBIDDEN, OH_NN_SAVE_CACHE_EXCEPTION, OH_NN_SUCCESS,
                     OH_NN_UNAVAILABLE_DEVICE, OH_NN_UNSUPPORTED, NNRtError, OH_NN_ReturnCode)
from .model_cache import CacheContents

log = logging.getLogger(__name__)


PERFORMANCE_MODES = range(0, 5)  # OH_NN_PERFORMANCE_NONE .. EXTREME
PRIORITIES = range(0, 4)  # OH_NN_PRIORITY_NONE .. HIGH
# Driver codes that mean "the configuration was refused" (1.7: a rejected extension).
_CONFIG_REJECTED = {NNRT_INVALID_PARAMETER, NNRT_INVALID_PERFORMANCE_MODE, NNRT_INVALID_PRIORITY}


def driver_cache(client: DriverClient,
                 built: BuiltModel) -> tuple[OH_NN_ReturnCode, CacheContents | None, str]:
    """IsModelCacheSupported + ExportModelCache + the blobs' bytes: (code, contents, why).

    No cache support → OH_NN_UNSUPPORTED; the query failing → OH_NN_UNAVAILABLE_DEVICE; the
    export failing → OH_NN_SAVE_CACHE_EXCEPTION. DriverGone passes through.
    """
    name = built.device.name
    if not client.alive:
        raise DriverGone(f"the driver session of {name} has ended")
    supported = client.is_model_cache_supported()
    if supported.returnCode != NNRT_SUCCESS:
        return OH_NN_UNAVAILABLE_DEVICE, None, \
            f"IsModelCacheSupported on {name} failed: {code_name(supported.returnCode)}"
    if not supported.isSupported:
        return OH_NN_UNSUPPORTED, None, f"device {name} has no model cache"
    reply = client.export_model_cache(built.prepared_model_id)
    if reply.returnCode != NNRT_SUCCESS:
        code = OH_NN_UNSUPPORTED if reply.returnCode == NNRT_NOT_SUPPORT else \
            OH_NN_SAVE_CACHE_EXCEPTION
        return code, None, f"ExportModelCache on {name} failed: {code_name(reply.returnCode)}"
    blobs = []
    for buffer in reply.modelCache:
        data = client.fetch_bytes(buffer)
        if data is None:
            return OH_NN_SAVE_CACHE_EXCEPTION, None, f"cannot read the cache blobs of {name}"
        blobs.append(data)
    if not blobs:
        return OH_NN_SAVE_CACHE_EXCEPTION, None, f"ExportModelCache on {name} returned no blob"
    return OH_NN_SUCCESS, CacheContents(blobs, list(built.inputs), list(built.outputs)), ""


def supported(device: Device, what: str, query) -> bool:
    """A capability query; its failure → UNAVAILABLE_DEVICE (performance mode: FAILED)."""
    reply = query()
    if reply.returnCode != NNRT_SUCCESS:
        code = OH_NN_FAILED if what == "IsPerformanceModeSupported" else OH_NN_UNAVAILABLE_DEVICE
        raise NNRtError(code, f"{what} on {device.name} failed: {code_name(reply.returnCode)}"
                            + (f": {reply.reason}" if reply.reason else ""))
    return reply.isSupported


def check_capabilities(device: Device, client: DriverClient, *, uses_cache: bool = False,
                       float16: bool = False, performance: int = 0, priority: int = 0) -> None:
    """What the compilation asks of the device, asked of it (capi.md 1.13 row 6 with 5.2):
    a model cache, float16, a performance mode, a priority."""
    if uses_cache and not supported(device, "IsModelCacheSupported",
                                       client.is_model_cache_supported):
        raise NNRtError(OH_NN_OPERATION_FORBIDDEN, f"device {device.name} has no model cache")
    if float16 and not supported(device, "IsFloat16PrecisionSupported",
                                    client.is_float16_precision_supported):
        raise NNRtError(OH_NN_UNAVAILABLE_DEVICE, f"device {device.name} has no float16 mode")
    if performance != 0:
        if not supported(device, "IsPerformanceModeSupported",
                          client.is_performance_mode_supported):
            raise NNRtError(OH_NN_UNAVAILABLE_DEVICE,
                          f"device {device.name} has no performance modes")
        if performance not in PERFORMANCE_MODES:
            raise NNRtError(OH_NN_INVALID_PARAMETER)
    if priority != 0:
        if not supported(device, "IsPrioritySupported", client.is_priority_supported):
            raise NNRtError(OH_NN_UNAVAILABLE_DEVICE, f"device {device.name} has no priorities")
        if priority not in PRIORITIES:
            raise NNRtError(OH_NN_INVALID_PARAMETER)



def prepare_failed(what: str, device: Device, code: int, reason: str = "") -> NNRtError:
    mapped = OH_NN_INVALID_PARAMETER if code in _CONFIG_REJECTED else OH_NN_FAILED
    return NNRtError(mapped, f"{what} on {device.name} failed: {code_name(code)}"
                           + (f": {reason}" if reason else ""))


def check_supported(client: DriverClient, device: Device, model: mt.Model) -> None:
    supported = client.get_supported_operation(model)
    if supported.returnCode != NNRT_SUCCESS:
        raise NNRtError(OH_NN_UNAVAILABLE_DEVICE, f"GetSupportedOperation on {device.name} "
                      f"failed: {code_name(supported.returnCode)}")
    ops = list(supported.ops)
    if len(ops) != len(model.nodes) or not all(ops):
        refused = [i for i, ok in enumerate(ops) if not ok]
        reasons = list(supported.reasons)  # the driver's why, per node (an nnrt addition)
        why = "; ".join(reasons[i] if reasons[i].startswith(f"node {i} ") else
                        f"node {i}: {reasons[i]}" for i in refused[:4]
                        if i < len(reasons) and reasons[i])
        raise NNRtError(OH_NN_FAILED, f"device {device.name} cannot run operations "
                      f"{refused or 'of the model'} ({len(ops)} answers for "
                      f"{len(model.nodes)} nodes)" + (f": {why}" if why else ""))


def compile_model(device: Device, client: DriverClient, config: ht.ModelConfig,
                  lowered: LoweredModel, *, recoverable: bool = True) -> BuiltModel:
    """GetSupportedOperation + PrepareModel, the constants packed once for both; with
    `recoverable`, the model cache kept for preparing again after a driver restart."""
    try:
        with lowered.hdi.packed(client) as model:
            # GetSupportedOperation knows no ModelConfig: a device that runs float32 models
            # only in relaxed precision (an NPU) says no to float32 nodes, so in float16
            # mode PrepareModel alone decides (its refusal names the node in the log).
            if not config.enableFloat16:
                check_supported(client, device, model)
            reply = client.prepare_model(model, config)
    except PrepareError as exc:
        raise NNRtError(OH_NN_FAILED, f"on {device.name}: {exc}") from exc
    if reply.returnCode != NNRT_SUCCESS:
        raise prepare_failed("PrepareModel", device, reply.returnCode, reply.reason)
    built = built_model(device, client, reply.preparedModelId, lowered.inputs, lowered.outputs,
                        config, lowered, "model", None, None)
    if recoverable:
        keep_cache(client, built)
    return built


def keep_cache(client: DriverClient, built: BuiltModel) -> None:
    """Export the freshly prepared model's cache and keep it in `built.cache`, so
    that executors can prepare it again from the cache after a driver restart without any
    disk (and ExportCacheToBuffer needs no driver call). Best effort: a device without a
    cache, or one that fails to export, leaves it None (recovery then uses the model).
    DriverGone passes through (the Build fails: the driver died under it)."""
    try:
        code, contents, why = driver_cache(client, built)
    except DriverGone:
        built.release()
        raise
    if code == OH_NN_SUCCESS:
        built.cache = contents
    else:
        log.debug("no model cache kept for recovery: %s", why)


def can_prepare_again(built: BuiltModel) -> bool:
    """Whether `prepare_again` has something to prepare from (a kept cache or the model)."""
    return built.model is not None or built.cache is not None


def prepare_again(built: BuiltModel, client: DriverClient) -> tuple[int, str]:
    """Prepare a built model in a later session of its device's driver (a new process
    after a crash): `(preparedModelId, "cache" | "model")`.

    From the cache blobs kept at Build, copied into a fresh shared buffer
    (PrepareModelFromModelCache), when the driver says it supports a cache; from the lowered
    model when it does not, when there is no kept cache, or when the driver refuses the
    blobs. DriverGone passes through; PrepareError when nothing could be prepared.
    """
    device = built.device
    config = built.config
    contents = built.cache
    if contents is not None:
        supported = client.is_model_cache_supported()
        if supported.returnCode == NNRT_SUCCESS and supported.isSupported:
            try:
                with blobs_in_driver(client, device, contents.blobs) as windows:
                    reply = client.prepare_model_from_model_cache(windows, config)
            except NNRtError as exc:
                log.warning("preparing again from the kept cache on %s: %s", device.name, exc)
            else:
                if reply.returnCode == NNRT_SUCCESS:
                    return reply.preparedModelId, "cache"
                log.warning("%s refused the kept model cache (%s); preparing from the model",
                            device.name, code_name(reply.returnCode))
    if built.model is None:
        raise PrepareError("preparing again (no model kept, and the cache was not usable)",
                           NNRT_NOT_SUPPORT)
    return built.model.hdi.prepare(client, config), "model"


def built_model(device: Device, client: DriverClient, model_id: int, inputs: list[IODesc],
           outputs: list[IODesc], config: ht.ModelConfig, lowered: LoweredModel | None,
           source: str, contents: CacheContents | None, digest: str | None) -> BuiltModel:
    """The BuiltModel of a prepared model (with its input ranges); released with it."""
    try:
        ranges = client.get_input_dim_ranges(model_id)
    except DriverGone:
        release_model(client, model_id, device.name)
        raise
    mins: list[list[int]] = []
    maxs: list[list[int]] = []
    if ranges.returnCode == NNRT_SUCCESS:
        mins = [list(a.values) for a in ranges.minInputDims]
        maxs = [list(a.values) for a in ranges.maxInputDims]
    else:  # the executor asks again and answers GetInputDimRange with its code
        log.warning("GetInputDimRanges on %s failed: %s", device.name,
                    code_name(ranges.returnCode))
    built = BuiltModel(device, model_id, [copy_desc(d) for d in inputs],
                       [copy_desc(d) for d in outputs],
                       mins, maxs, lowered, client=client, config=config, source=source,
                       cache=contents, digest=digest)
    finalizer = weakref.finalize(built, release_model, client, model_id, device.name)
    finalizer.atexit = False  # at exit the session ends, and with it the prepared model
    built.release = finalizer  # calling it releases now (once)
    return built


@contextmanager
def blobs_in_driver(client: DriverClient, device: Device,
                     blobs: list[bytes]) -> Iterator[list[ht.SharedBuffer]]:
    """The blobs back to back in one fresh driver buffer (released afterwards), as windows."""
    total = sum(len(b) for b in blobs)
    if total == 0:
        raise NNRtError(OH_NN_INVALID_FILE, "the cache holds no data")
    code, memory = client.allocate_buffer(total)
    if code != NNRT_SUCCESS or memory is None:
        raise NNRtError(OH_NN_FAILED,
                      f"AllocateBuffer({total}) on {device.name} failed: {code_name(code)}")
    try:
        windows, offset = [], 0
        for blob in blobs:
            memory.view(offset, len(blob))[:] = blob
            windows.append(memory.descriptor(offset, len(blob)))
            offset += len(blob)
        yield windows
    finally:
        descriptor = memory.descriptor()
        memory.close()
        if client.alive:
            client.release_buffer(descriptor)
