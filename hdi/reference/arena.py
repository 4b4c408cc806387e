"""Per-run buffer arenas of a CPU prepared model: intermediates and kernel working memory
reused from run to run instead of allocated afresh.

An `Arena` holds three kinds of buffers, each handed out again while the shape and dtype
asked for are unchanged (a dynamic-shape model whose shapes change gets new ones for what
changed):

* `output(kernel, position, ...)`: the buffer of one intermediate tensor, keyed by tensor
  index. Within a run every tensor is written once, so it is never another tensor's buffer;
  a kernel may return a view of its input (Reshape) and that view stays valid for the run.
* `scratch(kernel, name, ...)`: a node's own working memory kept between runs, e.g. a padded
  input whose border is written once (`fill`) and only its interior at each run.
* `workspace(name, ...)`: transient working memory shared by all the kernels of a run (they
  run one after the other), grown to the largest request: the im2col matrices, which would
  otherwise cost up to 9x the input of every convolution.

An `ExecutionPlan` owns an `ArenaPool`; each run takes an arena of its own for its whole
duration and gives it back at the end, so concurrent runs of one prepared model never share
one (the pool keeps IDLE_ARENAS idle ones; more concurrent runs make more). The run in
progress makes its arena current (a context variable, so per thread). Outside a run (a
kernel executed on its own, as the unit tests do) and for the model's output tensors the
helpers give fresh memory: the host copies outputs into the client's buffers after the run,
when the arena may already serve another run. A model output that is a view of an arena
buffer is copied out by the plan before the arena goes back (`Arena.holds`).

An idle arena keeps about the model's intermediates, its padded inputs and the largest
im2col block (at most 16 MiB, op_conv2d) alive; it goes with its prepared model.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Hashable
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Iterator

import numpy as np

if TYPE_CHECKING:
    from nnrt.hdi.reference.kernel import Kernel

_current: ContextVar[Arena | None] = ContextVar("nnrt_cpu_arena", default=None)

IDLE_ARENAS = 2  # idle arenas a pool keeps (more concurrent runs make more, then drop them)


class Arena:
    """The buffers of one run at a time."""

    def __init__(self, reserved: frozenset[int] = frozenset()) -> None:
        self.reserved = reserved  # tensor indices that always get fresh memory (model outputs)
        self._buffers: dict[Hashable, np.ndarray] = {}

    def get(self, key: Hashable, shape: tuple[int, ...], dtype: np.dtype,
            fill: float | int | None = None) -> tuple[np.ndarray, bool]:
        """(buffer, fresh): the buffer kept under `key`, or a new one (filled with `fill` when
        given) when there is none of that shape and dtype yet; `fresh` says it is new."""
        buffer = self._buffers.get(key)
        if buffer is not None and buffer.shape == shape and buffer.dtype == dtype:
            return buffer, False
        if fill is None:
            buffer = np.empty(shape, dtype)
        else:
            buffer = np.full(shape, fill, dtype)
        self._buffers[key] = buffer
        return buffer, True

    def workspace(self, name: str, count: int, dtype: np.dtype) -> np.ndarray:
        """A flat buffer of at least `count` elements shared by every kernel of the run
        (kernels run one after the other), grown to the largest request."""
        key = ("workspace", name, dtype)
        buffer = self._buffers.get(key)
        if buffer is None or buffer.size < count:
            buffer = self._buffers[key] = np.empty(count, dtype)
        return buffer[:count]

    def holds(self, array: np.ndarray) -> bool:
        """Whether `array` may share memory with one of this arena's buffers."""
        return any(np.may_share_memory(array, b) for b in self._buffers.values())

    @property
    def nbytes(self) -> int:
        return sum(b.nbytes for b in self._buffers.values())


class ArenaPool:
    """The idle arenas of one prepared model; `use()` lends one to a run."""

    def __init__(self, reserved: frozenset[int]) -> None:
        self.reserved = reserved
        self._idle: list[Arena] = []
        self._lock = threading.Lock()

    @contextmanager
    def use(self) -> Iterator[Arena]:
        """An arena of its own for the calling run, current while the block runs."""
        with self._lock:
            arena = self._idle.pop() if self._idle else Arena(self.reserved)
        token = _current.set(arena)
        try:
            yield arena
        finally:
            _current.reset(token)
            with self._lock:
                if len(self._idle) < IDLE_ARENAS:
                    self._idle.append(arena)


def current() -> Arena | None:
    return _current.get()


def output(kernel: Kernel, position: int, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """Memory for output `position` of the kernel's node (contents undefined): the current
    run's buffer for that tensor, reused while its shape and dtype stay the same, or a fresh
    array outside a run and for the model's outputs."""
    arena = _current.get()
    index = kernel.node.outputs[position].index
    if arena is None or index in arena.reserved:
        return np.empty(shape, dtype)
    return arena.get(index, tuple(shape), np.dtype(dtype))[0]


def workspace(name: str, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """Working memory (contents undefined) that no kernel needs beyond its own execute: one
    buffer per name and dtype in the current run's arena, shared by all its kernels (an
    im2col matrix), or fresh memory outside a run."""
    arena = _current.get()
    dtype = np.dtype(dtype)
    if arena is None:
        return np.empty(shape, dtype)
    return arena.workspace(name, math.prod(shape), dtype).reshape(shape)


def scratch(kernel: Kernel, name: str, shape: tuple[int, ...], dtype: np.dtype,
            fill: float | int | None = None) -> tuple[np.ndarray, bool]:
    """(buffer, fresh): working memory of the kernel's node, kept under `name` in the current
    run's arena (fresh memory outside a run). A buffer made with `fill` starts filled with
    it; the parts the kernel never writes (a padding border) keep that value from run to
    run, so `fresh` tells whether anything else still has to be set up."""
    arena = _current.get()
    shape, dtype = tuple(shape), np.dtype(dtype)
    if arena is None:
        return (np.empty(shape, dtype) if fill is None else np.full(shape, fill, dtype)), True
    return arena.get((kernel.node.index, name, fill), shape, dtype, fill)
