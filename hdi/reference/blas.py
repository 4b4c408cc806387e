"""Accumulating GEMM straight from the BLAS library numpy itself runs on: `out += a @ b`
(BLAS's beta = 1), which `np.matmul` cannot say, without a temporary and a second pass over
`out`.

Why: a convolution computed as a sum of GEMMs over its kernel's rows (op_conv2d) then
needs neither a temporary per row nor an addition pass over its output, and saves most of
an im2col copy. (Writing a bias into the output first and accumulating the product onto
it was measured too, and was slower in whole models than adding the bias afterwards.)

The library is the one numpy already loaded (its wheel's `scipy_openblas`, or a system
BLAS found in this process's memory map), so the GEMMs share numpy's BLAS threads and
nothing new is installed. It is checked once against `np.matmul` on a small product
before use. Where no such library is found, the check fails, the operands do not fit a
BLAS call (unaligned, negative or overlapping strides, `out` sharing memory with an
operand, another dtype, a single row or column, which numpy's gemv does faster) or
`NNRT_CPU_DIRECT_BLAS=0` is set, `gemm` computes the same thing with numpy (a temporary
and an addition): never a wrong result, only a slower one. A product that does not
accumulate is numpy's own `np.matmul`.

Only numpy arrays go in, and the leading dimensions passed to BLAS are taken from their
strides, so BLAS reads and writes nothing outside them.

`limit_threads` caps the threads that library computes on for the rest of the process
(OpenBLAS's own call; the accelerator simulator computes on one, drivers/accel/device.py).
"""

from __future__ import annotations

import ctypes
import logging
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

ENV = "NNRT_CPU_DIRECT_BLAS"  # "0": numpy only

_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112
# (symbol prefix, symbol suffix, integer type) of the cblas entry points, most likely first:
# numpy's wheels (scipy-openblas, 64-bit integers), then reference-named ones.
_NAMINGS = (("scipy_cblas_", "64_", ctypes.c_int64), ("cblas_", "64_", ctypes.c_int64),
            ("scipy_cblas_", "", ctypes.c_int), ("cblas_", "", ctypes.c_int))


class _Blas:
    """sgemm and dgemm of one library, with their ctypes signatures set."""

    def __init__(self, path: str, sgemm, dgemm, int_type) -> None:
        self.path = path
        # the largest dimension or leading dimension the library's integers hold
        self.max_int = 2 ** (8 * ctypes.sizeof(int_type) - 1) - 1
        self.functions = {np.dtype(np.float32): sgemm, np.dtype(np.float64): dgemm}
        for function, real in ((sgemm, ctypes.c_float), (dgemm, ctypes.c_double)):
            function.restype = None
            function.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, int_type, int_type,
                                 int_type, real, ctypes.c_void_p, int_type, ctypes.c_void_p,
                                 int_type, real, ctypes.c_void_p, int_type]


def _candidate_paths() -> list[str]:
    """BLAS libraries numpy may have loaded: its wheel's bundled ones, then any *blas*
    library mapped into this process."""
    paths: list[str] = []
    bundled = Path(np.__file__).resolve().parent.parent / "numpy.libs"
    if bundled.is_dir():
        paths += sorted(str(p) for p in bundled.iterdir() if "blas" in p.name)
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            for line in maps:
                fields = line.split(maxsplit=5)
                if len(fields) == 6 and "blas" in Path(fields[5].strip()).name:
                    paths.append(fields[5].strip())
    except OSError:
        pass
    return list(dict.fromkeys(paths))


def _libraries() -> Iterator[tuple[str, ctypes.CDLL]]:
    """The candidate libraries that load, with their paths."""
    for path in _candidate_paths():
        try:
            yield path, ctypes.CDLL(path)
        except OSError:
            continue


def _find() -> _Blas | None:
    for path, library in _libraries():
        for prefix, suffix, int_type in _NAMINGS:
            try:
                sgemm = getattr(library, f"{prefix}sgemm{suffix}")
                dgemm = getattr(library, f"{prefix}dgemm{suffix}")
            except AttributeError:
                continue
            return _Blas(path, sgemm, dgemm, int_type)
    return None


def _leading(x: np.ndarray) -> tuple[int, int] | None:
    """(transpose flag, leading dimension) describing 2-D `x` to BLAS, or None when it is
    neither row- nor column-contiguous (with a leading dimension covering its rows)."""
    rows, cols = x.shape
    item = x.itemsize
    s0, s1 = x.strides
    if (s1 == item or cols == 1) and s0 % item == 0 and s0 // item >= max(cols, 1):
        return _NO_TRANS, s0 // item
    if (s0 == item or rows == 1) and s1 % item == 0 and s1 // item >= max(rows, 1):
        return _TRANS, s1 // item
    if rows == 1 and cols == 1:
        return _NO_TRANS, 1
    return None


def _call(blas: _Blas, a: np.ndarray, b: np.ndarray, out: np.ndarray, beta: float) -> bool:
    """out = a @ b + beta * out through BLAS; False (nothing done) when it cannot."""
    function = blas.functions.get(out.dtype)
    if function is None or a.dtype != out.dtype or b.dtype != out.dtype:
        return False
    if not (a.flags.aligned and b.flags.aligned and out.flags.aligned and out.flags.writeable):
        return False
    m, k = a.shape
    n = b.shape[1]
    if min(m, n, k) == 0:
        return False
    la, lb, lc = _leading(a), _leading(b), _leading(out)
    if la is None or lb is None or lc is None or lc[0] != _NO_TRANS:
        return False
    if max(m, n, k, la[1], lb[1], lc[1]) > blas.max_int:
        return False
    if np.may_share_memory(out, a) or np.may_share_memory(out, b):
        return False
    function(_ROW_MAJOR, la[0], lb[0], m, n, k, 1.0, a.ctypes.data, la[1], b.ctypes.data,
             lb[1], beta, out.ctypes.data, lc[1])
    return True


def gemm(a: np.ndarray, b: np.ndarray, out: np.ndarray, accumulate: bool = False) -> None:
    """out = a @ b, or out += a @ b with `accumulate`, for 2-D a [m, k], b [k, n] and
    out [m, n] of one float dtype (out may be a strided block of a larger array)."""
    if a.ndim != 2 or b.ndim != 2 or out.ndim != 2 or a.shape[1] != b.shape[0] \
            or out.shape != (a.shape[0], b.shape[1]):
        raise ValueError(f"gemm of {a.shape} @ {b.shape} into {out.shape}")
    if not accumulate:  # numpy's own call (gemv for a single row or column)
        np.matmul(a, b, out=out)
        return
    # A single row or column is numpy's gemv, faster than BLAS's gemm for it.
    vector = a.shape[0] == 1 or b.shape[1] == 1
    if not vector and _BLAS is not None and _call(_BLAS, a, b, out, 1.0):
        return
    out += a @ b


def direct() -> bool:
    """Whether gemm calls BLAS itself (rather than numpy) where the operands allow."""
    return _BLAS is not None


def _self_checked(blas: _Blas | None) -> _Blas | None:
    """`blas` when it computes a small product and an accumulation as numpy does."""
    if blas is None:
        return None
    rng = np.random.default_rng(0)
    for dtype in (np.float32, np.float64):
        a = rng.standard_normal((5, 7)).astype(dtype)
        b = rng.standard_normal((3, 7)).astype(dtype).T  # a transposed operand
        big = rng.standard_normal((6, 9)).astype(dtype)
        out = big[1:6, 2:5]  # a strided block
        expected = out + a @ b
        try:
            done = _call(blas, a, b, out, 1.0)
        except Exception as exc:  # noqa: BLE001 - a foreign library: any failure disables it
            log.warning("direct BLAS %s failed its check (%s): numpy's matmul instead",
                        blas.path, exc)
            return None
        if not done or not np.allclose(out, expected, rtol=1e-5, atol=1e-5):
            log.warning("direct BLAS %s failed its check: numpy's matmul instead", blas.path)
            return None
    return blas


def _load() -> _Blas | None:
    if os.environ.get(ENV, "1") == "0":
        log.info("%s=0: GEMMs through numpy only", ENV)
        return None
    blas = _self_checked(_find())
    if blas is None:
        log.info("no BLAS library of numpy's found: GEMMs through numpy only")
    else:
        log.debug("direct GEMMs through %s", blas.path)
    return blas


_BLAS = _load()

# OpenBLAS's thread-count calls, most likely first (numpy's wheels: scipy-openblas, 64-bit).
_THREAD_CALLS = (("scipy_openblas_set_num_threads64_", "scipy_openblas_get_num_threads64_"),
                 ("openblas_set_num_threads64_", "openblas_get_num_threads64_"),
                 ("openblas_set_num_threads", "openblas_get_num_threads"))


def _thread_calls() -> tuple[object, object] | None:
    """(set, get) of the thread count of the OpenBLAS numpy loaded, or None."""
    for _, library in _libraries():
        for set_name, get_name in _THREAD_CALLS:
            try:
                set_threads, get_threads = getattr(library, set_name), getattr(library, get_name)
            except AttributeError:
                continue
            set_threads.argtypes, set_threads.restype = [ctypes.c_int], None
            get_threads.argtypes, get_threads.restype = [], ctypes.c_int
            return set_threads, get_threads
    return None


def threads() -> int | None:
    """How many threads numpy's BLAS computes on; None where it cannot say (not OpenBLAS)."""
    calls = _thread_calls()
    return None if calls is None else int(calls[1]())


def limit_threads(count: int) -> int | None:
    """Have numpy's BLAS compute on at most `count` threads from now on (every later GEMM of
    this process); the count it uses then, or None where the library offers no such call."""
    calls = _thread_calls()
    if calls is None:
        return None
    set_threads, get_threads = calls
    if get_threads() > count:
        set_threads(count)
    return int(get_threads())
