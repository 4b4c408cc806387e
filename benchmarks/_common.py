"""Helpers the benchmark scripts share. The scripts run as `python benchmarks/<name>.py`, so
this directory is on sys.path and they import it as `_common`."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from nnrt.client import capi


def timed(fn: Callable[[], object], calls: int) -> float:
    """Median seconds per call over `calls` calls."""
    samples = []
    for _ in range(calls):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def u32(values: list[int]) -> capi.OH_NN_UInt32Array:
    """An OH_NN_UInt32Array of `values` (data NULL when empty)."""
    return capi.OH_NN_UInt32Array(data=values or None, size=len(values))


def float32_desc(shape: list[int]) -> capi.NN_TensorDesc:
    """A float32 tensor descriptor of `shape`; the caller destroys it."""
    d = capi.OH_NNTensorDesc_Create()
    capi.OH_NNTensorDesc_SetDataType(d, capi.OH_NN_FLOAT32)
    capi.OH_NNTensorDesc_SetShape(d, shape, len(shape))
    return d
