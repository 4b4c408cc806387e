"""The handle objects the OH_NN* functions share, and the contracts between their modules.

Every opaque C handle is an instance of a `Handle` subclass. A handle is guarded by its own
lock; `destroy()` marks it dead, after which every function given it returns
OH_NN_INVALID_PARAMETER (python-capi.md), also when another thread destroyed it meanwhile.

Module ownership (one module per C object, like the headers):
  quant_param.py  NN_QuantParam          tensor_desc.py  NN_TensorDesc
  model.py        OH_NNModel (+ operations.py, the per-operation checks and HDI lowering)
  compilation.py  OH_NNCompilation (the core's compiler.py and model_cache.py under it)
  tensor.py       NN_Tensor              executor.py     OH_NNExecutor (+ deprecated.py)
  device.py       OH_NNDevice_*
What crosses module boundaries is the core's (client/core/): a Build's BuiltModel, the
executor's PreparedModel, shared memory.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, TypeVar

H = TypeVar("H", bound="Handle")


class _FailureReasons(logging.Handler):
    """Why each thread's last failing C API call failed: the last warning it logged (as
    `dlerror` says why `dlopen` failed). Installed once on the C API's loggers; a front end
    built on the C API (the Pythonic API) reads it into its exception (`last_failure`)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self._local = threading.local()

    def emit(self, record: logging.LogRecord) -> None:
        self._local.message = record.getMessage()

    def take(self) -> str | None:
        message = getattr(self._local, "message", None)
        self._local.message = None
        return message


_failure_reasons = _FailureReasons()
logging.getLogger("nnrt.client.capi").addHandler(_failure_reasons)


def last_failure() -> str | None:
    """The reason this thread's last failing C API call logged, once (None: none since)."""
    return _failure_reasons.take()


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


# -- what crosses module boundaries ---------------------------------------------------------
