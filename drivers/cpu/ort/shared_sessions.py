"""onnxruntime sessions shared by the segments of one model prepared many times.

Eight client processes that compile the same model each get a prepared model of their own
(their own buffers, bindings, run counters), but one onnxruntime session per width under
them: one copy of the prepacked weights in memory and in the CPU's caches instead of
eight, which with many clients on few cores is what a run's compute time is made of
(benchmarks/clients.py). onnxruntime runs a session from several threads at once; each run
keeps its own IOBinding.

A session is found by the digest of the model it was made from and by every option that
shapes it (`SessionKey`); an optimised session is also filed under the model onnxruntime
made of it, so that a model prepared afresh and the same model restored from its cache
meet. The shelf holds sessions weakly: the last segment that lets go of one frees it.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass

import onnxruntime as ort

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SessionKey:
    model_digest: bytes  # sha256 of the ONNX model's bytes
    optimize: bool  # graph optimisations on (a lowered model) or off (an optimised one)
    options: tuple  # everything else that shapes the session (threads, spinning, int8 mode)


class SharedSession:
    """One onnxruntime session and the optimised model it runs (the model cache's blob)."""

    def __init__(self, session: ort.InferenceSession, optimized_model: bytes) -> None:
        self.session = session
        self.optimized_model = optimized_model


_lock = threading.Lock()
_shelf: weakref.WeakValueDictionary[SessionKey, SharedSession] = weakref.WeakValueDictionary()
_making: dict[SessionKey, threading.Lock] = {}  # one maker per key: the others wait for it


def shared_session(model: bytes, optimize: bool, options: tuple,
                   make: Callable[[bytes, str | None], ort.InferenceSession]) -> SharedSession:
    """The session of `model` under `options`, made by `make(model, optimized_path)` unless
    a segment of the same model already holds one. `optimize`: onnxruntime optimises the
    model, and `make` writes what it made to `optimized_path`."""
    key = SessionKey(hashlib.sha256(model).digest(), optimize, options)
    with _lock:
        shared = _shelf.get(key)
        if shared is not None:
            return shared
        maker = _making.setdefault(key, threading.Lock())
    try:
        with maker:  # two prepares of one model at once: one session made, not two
            with _lock:
                shared = _shelf.get(key)
            if shared is None:
                shared = _make(model, optimize, make)
                with _lock:
                    _shelf[key] = shared
                    if optimize:  # the same model restored from its cache finds it too
                        _shelf.setdefault(SessionKey(
                            hashlib.sha256(shared.optimized_model).digest(), False, options),
                            shared)
            else:
                log.debug("onnxruntime session shared with another prepared model of the "
                          "same graph")
    finally:  # a failed make too: the next prepare tries afresh
        with _lock:
            _making.pop(key, None)
    return shared


def _make(model: bytes, optimize: bool,
          make: Callable[[bytes, str | None], ort.InferenceSession]) -> SharedSession:
    if not optimize:
        return SharedSession(make(model, None), model)
    with tempfile.TemporaryDirectory(prefix="nnrt-ort-") as workdir:
        path = os.path.join(workdir, "optimized.onnx")
        session = make(model, path)
        with open(path, "rb") as f:
            return SharedSession(session, f.read())


def sessions_held() -> int:
    """How many distinct sessions the shelf holds now (for tests and the admin details)."""
    with _lock:
        return len({id(shared) for shared in _shelf.values()})
