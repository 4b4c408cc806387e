"""What a successful Build gives executors (`BuiltModel`: the prepared model in its first
session, and what recovery needs), and giving a prepared model back to its driver.

Below both the compiler (client/core/compiler.py, which makes BuiltModels) and the executors'
PreparedModel (client/core/prepared_model.py, which prepares one again through the compiler).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from nnrt.common.errors import NNRT_SUCCESS, code_name
from nnrt.common.hdi_model import IODesc, LoweredModel
from nnrt.protos import hdi_types_pb2 as ht

from .driver import DriverClient, DriverGone

if TYPE_CHECKING:
    from .device import Device
    from .hetero import HeteroCompilation
    from .model_cache import CacheContents

log = logging.getLogger(__name__)


@dataclass(eq=False)
class BuiltModel:
    """What a successful Build gives executors: the prepared model in its first session."""

    device: Device
    prepared_model_id: int  # in `client`'s session
    inputs: list[IODesc]
    outputs: list[IODesc]
    min_dims: list[list[int]]  # GetInputDimRanges, per input
    max_dims: list[list[int]]
    model: LoweredModel | None = None  # kept to re-prepare after a driver restart
    client: DriverClient | None = None  # the driver session holding prepared_model_id
    config: ht.ModelConfig = field(default_factory=ht.ModelConfig)  # as it was prepared
    source: str = "model"  # prepared from the "model", a "cache" or an "offline" model
    # The model cache blobs, once known: exported right after PrepareModel on a device with
    # a model cache, kept client-side for recovery (`prepare_again`) and ExportCacheToBuffer.
    cache: CacheContents | None = None
    digest: str | None = None  # the model's identity in caches
    # Releases the prepared model now (once); also called when the BuiltModel is garbage,
    # i.e. once the compilation and every executor holding it are gone.
    release: Callable[[], Any] = lambda: None
    # A model compiled for several devices (client/core/hetero.py): its steps and plans;
    # `prepared_model_id` and `client` then name nothing of their own.
    hetero: HeteroCompilation | None = None


def copy_desc(desc: IODesc) -> IODesc:
    return IODesc(desc.name, desc.data_type, list(desc.shape), desc.format)


def release_model(client: DriverClient, model_id: int, device_name: str = "") -> None:
    """ReleasePreparedModel (nothing if the driver died). Never raises: also called from a
    finalizer, when nothing (compilation, executor) holds a BuiltModel any more."""
    if not client.alive:
        return
    where = f" on {device_name}" if device_name else ""
    try:
        reply = client.release_prepared_model(model_id)
    except DriverGone:
        return
    except Exception:
        log.exception("releasing prepared model %d%s failed", model_id, where)
        return
    if reply.returnCode != NNRT_SUCCESS:
        log.warning("ReleasePreparedModel %d%s failed: %s", model_id, where,
                    code_name(reply.returnCode))
