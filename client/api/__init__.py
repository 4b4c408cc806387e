"""The Pythonic API of nnrt: models from numpy in a few lines, compiled for a device, run with
numpy arrays — built on the OH_NN* C API (`nnrt.client.capi`), the same core.

    import numpy as np
    from nnrt.client import Model

    with Model() as m:
        x = m.input([None, 4])                       # None / -1: a dynamic dimension
        w = m.constant(np.random.rand(3, 4).astype(np.float32))
        y = m.softmax(m.fully_connected(x, w, activation="relu"))
        m.outputs(y)
        with m.compile("cpu") as compiled, compiled.executor() as ex:
            probs = ex.run(np.random.rand(8, 4).astype(np.float32))   # numpy in, numpy out
            probs = await ex.run_async(batch, timeout=1.0)            # from asyncio

* Errors raise `NNRtError(code, message)`; `code` is the `OH_NN_ReturnCode`.
* Every object is a context manager; `close()` releases what it holds (handles, shared
  memory, prepared models).
* Inputs are copied once, into the shared memory the driver reads; outputs come back as
  numpy arrays over the shared memory the driver wrote (no copy). An executor never
  overwrites arrays it has handed out while they are alive: a run whose previous results
  are still referenced gets fresh tensors, released once those arrays are gone.
* A driver that crashes fails the runs in flight (`NNRtError(OH_NN_CONNECTION_EXCEPTION)`)
  and every run while it is down; once a driver of the same device serves again, the next
  run prepares the model there again and succeeds, with the same executor and tensors.

The package: `model` (the builder) and its `operand`s, `shapes` (their inference), `compiled`,
`executor`; below them `devices`, `dtypes` and `calls` (a C API failure as NNRtError).
"""

from __future__ import annotations

from nnrt.client.core.errors import NNRtError

from .compiled import Compiled
from .devices import DeviceInfo, list_devices
from .executor import DEFAULT_RUN_TIMEOUT, Executor  # noqa: F401 - the default deadline of a run
from .model import Model
from .operand import Operand

# Model.load reads .onnx through the importer, which registers itself in model.READERS (it
# builds Models, so the dependency goes from it to model.py, never back)
from .. import onnx_import  # noqa: F401,E402

__all__ = [
    "NNRtError",
    "DeviceInfo",
    "list_devices",
    "Model",
    "Operand",
    "Compiled",
    "Executor",
]
