"""Helpers the benchmark scripts share. The scripts run as `python benchmarks/<name>.py`, so
this directory is on sys.path and they import it as `_common`."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import numpy as np

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


def add_one_executor() -> capi.OH_NNExecutor:
    """y = x + 1 on one float32 element, through the C API."""
    model = capi.OH_NNModel_Construct()
    for _ in range(3):
        d = float32_desc([1])
        assert capi.OH_NNModel_AddTensorToModel(model, d) == 0
        capi.OH_NNTensorDesc_Destroy(d)
    one = np.ones(1, np.float32)
    assert capi.OH_NNModel_SetTensorData(model, 1, one, one.nbytes) == 0
    assert capi.OH_NNModel_AddOperation(model, capi.OH_NN_OPS_ADD, u32([]), u32([0, 1]),
                                        u32([2])) == 0
    assert capi.OH_NNModel_SpecifyInputsAndOutputs(model, u32([0]), u32([2])) == 0
    assert capi.OH_NNModel_Finish(model) == 0
    compilation = capi.OH_NNCompilation_Construct(model)
    assert capi.OH_NNCompilation_SetDevice(compilation, 0) == 0
    assert capi.OH_NNCompilation_Build(compilation) == 0
    executor = capi.OH_NNExecutor_Construct(compilation)
    assert executor is not None
    capi.OH_NNCompilation_Destroy(compilation)
    capi.OH_NNModel_Destroy(model)
    return executor
