"""The handle objects the OH_NN* functions share, and the contracts between their modules.

Every opaque C handle is an instance of a `Handle` subclass. A handle is guarded by its own
lock; `destroy()` marks it dead, after which every function given it returns
OH_NN_INVALID_PARAMETER (python-capi.md), also when another thread destroyed it meanwhile.

Module ownership (one module per C object, like the headers):
  quant_param.py  NN_QuantParam          tensor_desc.py  NN_TensorDesc
  model.py        OH_NNModel (+ operations.py, the per-operation checks and HDI lowering)
  compilation.py  OH_NNCompilation (+ model_cache.py, the on-disk cache)
  tensor.py       NN_Tensor              executor.py     OH_NNExecutor (+ deprecated.py)
  device.py       OH_NNDevice_*
The dataclasses below are what crosses module boundaries.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from nnrt.protos import hdi_types_pb2 as ht

if TYPE_CHECKING:
    from nnrt.client.devices import Device
    from nnrt.client.hdi import SharedMemory
    from nnrt.client.hdi_model import HdiModelBuilder

H = TypeVar("H", bound="Handle")


class Handle:
    """Base of every opaque handle: a lock and a liveness flag."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.destroyed = False

    def destroy(self) -> bool:
        """Mark destroyed; False if it already was."""
        with self.lock:
            if self.destroyed:
                return False
            self.destroyed = True
            return True


def live(obj: Any, cls: type[H]) -> H | None:
    """`obj` if it is a live handle of `cls`, else None (None, wrong type, destroyed)."""
    if isinstance(obj, cls) and not obj.destroyed:
        return obj
    return None


# -- OH_NN_DataType / OH_NN_Format ↔ HDI (capi.md 3.7, 3.9) --------------------------------

# OH_NN_DataType value -> (HDI DataType code, numpy dtype or None for UNKNOWN)
DATA_TYPES: dict[int, tuple[int, np.dtype | None]] = {
    0: (ht.DATA_TYPE_UNKNOWN, None),
    1: (ht.DATA_TYPE_BOOL, np.dtype(np.bool_)),
    2: (ht.DATA_TYPE_INT8, np.dtype(np.int8)),
    3: (ht.DATA_TYPE_INT16, np.dtype(np.int16)),
    4: (ht.DATA_TYPE_INT32, np.dtype(np.int32)),
    5: (ht.DATA_TYPE_INT64, np.dtype(np.int64)),
    6: (ht.DATA_TYPE_UINT8, np.dtype(np.uint8)),
    7: (ht.DATA_TYPE_UINT16, np.dtype(np.uint16)),
    8: (ht.DATA_TYPE_UINT32, np.dtype(np.uint32)),
    9: (ht.DATA_TYPE_UINT64, np.dtype(np.uint64)),
    10: (ht.DATA_TYPE_FLOAT16, np.dtype(np.float16)),
    11: (ht.DATA_TYPE_FLOAT32, np.dtype(np.float32)),
    12: (ht.DATA_TYPE_FLOAT64, np.dtype(np.float64)),
}
HDI_TO_OH_DATA_TYPE = {hdi: oh for oh, (hdi, _) in DATA_TYPES.items()}


def element_size(data_type: int) -> int:
    """Bytes per element of an OH_NN_DataType; 0 for UNKNOWN or an undefined value."""
    entry = DATA_TYPES.get(data_type)
    return 0 if entry is None or entry[1] is None else entry[1].itemsize


def hdi_format(oh_format: int) -> int:
    """OH_NN_Format → HDI Format, the same for graph and run-time tensors in nnrt.

    NCHW→FORMAT_NCHW, NHWC→FORMAT_NHWC, NONE and ND→FORMAT_NONE. (Upstream tags graph
    tensors NONE/ND as NHWC but run-time ones as FORMAT_NONE; ours keeps both untagged,
    and drivers compute untagged spatial inputs as NHWC — semantics.md.)
    """
    return {1: ht.FORMAT_NCHW, 2: ht.FORMAT_NHWC}.get(oh_format, ht.FORMAT_NONE)


# -- what crosses module boundaries ---------------------------------------------------------


@dataclass
class IODesc:
    """A model input or output as the front end describes it (OH_NN numbering)."""

    name: str
    data_type: int  # OH_NN_DataType
    shape: list[int]  # -1 = dynamic
    format: int  # OH_NN_Format


@dataclass
class LoweredModel:
    """What a finished OH_NNModel gives a compilation (model.py → compilation.py).

    `hdi` holds the HDI graph with parameter tensors folded into node attributes and the
    remaining tensors renumbered; `hdi.prepare(client)` packs the constants into one shared
    buffer and calls PrepareModel.
    """

    hdi: HdiModelBuilder
    inputs: list[IODesc]
    outputs: list[IODesc]


@dataclass(eq=False)
class BuiltModel:
    """What a successful Build gives executors (compilation.py → executor.py)."""

    device: Device
    prepared_model_id: int  # in device.client()'s session
    inputs: list[IODesc]
    outputs: list[IODesc]
    min_dims: list[list[int]]  # GetInputDimRanges, per input
    max_dims: list[list[int]]
    model: LoweredModel | None = None  # kept to re-prepare after a driver restart
    extra: dict[str, Any] = field(default_factory=dict)
