"""Build's work (capi.md 1.13, the order in client/capi/compilation.py): from a model on
one device or over several (a cache per partition), from an offline model, and with a
cache directory (restore, or compile and save, under a directory lock)."""

from __future__ import annotations

import fcntl
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nnrt.client.capi._objects import live
from nnrt.client.capi.device import find_device
from nnrt.client.capi.enums import (OH_NN_FAILED, OH_NN_FORMAT_NCHW, OH_NN_FORMAT_NHWC,
                                    OH_NN_FORMAT_NONE, OH_NN_INVALID_FILE, OH_NN_INVALID_PARAMETER,
                                    OH_NN_INVALID_PATH, OH_NN_SAVE_CACHE_EXCEPTION, OH_NN_SUCCESS,
                                    OH_NN_UNKNOWN)
from nnrt.client.capi.model import OH_NNModel
from nnrt.client.core import model_cache
from nnrt.client.core.built_model import BuiltModel
from nnrt.client.core.compiler import (blobs_in_driver, built_model, check_capabilities,
                                       compile_model, driver_cache, prepare_failed)
from nnrt.client.core.device import Device
from nnrt.client.core.driver import DriverClient
from nnrt.client.core.errors import NNRtError
from nnrt.client.core.hetero import HeteroCompilation, PreparePartition
from nnrt.client.core.model_cache import CacheContents, CacheDir, CacheInvalid
from nnrt.common.errors import code_name, NNRT_SUCCESS
from nnrt.common.hdi_model import hdi_format, HDI_TO_OH_DATA_TYPE, IODesc, LoweredModel
from nnrt.protos import hdi_types_pb2 as ht

log = logging.getLogger(__name__)

MODEL_NAME = "ModelName"  # the extension that prefixes cache file names (capi.md §4)
MAX_OFFLINE_BYTES = 1 << 30  # one driver buffer


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
