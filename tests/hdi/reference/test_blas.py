"""blas.gemm (direct BLAS calls, numpy where they cannot be used) against products summed in
float64 by numpy's einsum: plain and accumulating products, transposed operands, strided
output blocks, every fallback (other dtypes, unaligned, overlapping, empty), shape errors,
and the library lookup with its self-check and NNRT_CPU_DIRECT_BLAS=0."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from nnrt.hdi.reference import blas


def reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.einsum("ik,kj->ij", a.astype(np.float64), b.astype(np.float64))


def operands(m: int, k: int, n: int, dtype, seed: int = 0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((m, k)).astype(dtype), rng.standard_normal((k, n)).astype(dtype),
            rng.standard_normal((m, n)).astype(dtype))


@pytest.fixture(params=["direct", "numpy"])
def path(request, monkeypatch) -> str:
    if request.param == "numpy":
        monkeypatch.setattr(blas, "_BLAS", None)
    elif not blas.direct():
        pytest.skip("no BLAS library of numpy's in this process")
    return request.param


def test_the_direct_path_is_found() -> None:
    # numpy's wheels bundle scipy-openblas (CI installs them): found, and passed its check.
    if os.environ.get(blas.ENV) == "0":
        pytest.skip(f"{blas.ENV}=0")
    if not any("blas" in path.rsplit("/", 1)[-1] for path in blas._candidate_paths()):
        pytest.skip("this numpy loaded no BLAS library by a name with 'blas' in it")
    assert blas.direct()


@pytest.mark.parametrize("dtype, tol", [(np.float32, 1e-4), (np.float64, 1e-12)])
@pytest.mark.parametrize("m, k, n", [(1, 1, 1), (7, 5, 3), (64, 33, 17), (1, 300, 9)])
def test_product_and_accumulation(path: str, dtype, tol: float, m: int, k: int, n: int) -> None:
    a, b, c = operands(m, k, n, dtype)
    out = np.empty((m, n), dtype)
    blas.gemm(a, b, out)
    np.testing.assert_allclose(out, reference(a, b), rtol=tol, atol=tol)
    start = c.copy()
    blas.gemm(a, b, c, accumulate=True)
    np.testing.assert_allclose(c, start + reference(a, b), rtol=tol, atol=tol)


def test_transposed_operands_and_strided_blocks(path: str) -> None:
    rng = np.random.default_rng(1)
    a = rng.standard_normal((9, 6)).astype(np.float32).T  # [6, 9], column-contiguous
    b = rng.standard_normal((4, 9)).astype(np.float32).T  # [9, 4]
    big = rng.standard_normal((10, 12)).astype(np.float32)
    before = big.copy()
    block = big[2:8, 3:7]  # [6, 4] inside a [10, 12] matrix
    blas.gemm(a, b, block, accumulate=True)
    expected = before.copy()
    expected[2:8, 3:7] += reference(a, b)
    np.testing.assert_allclose(big, expected, rtol=1e-5, atol=1e-5)  # nothing else touched
    rows = rng.standard_normal((12, 9)).astype(np.float32)[::2]  # every other row: lda 18
    blas.gemm(rows, b, block)
    np.testing.assert_allclose(block, reference(rows, b), rtol=1e-5, atol=1e-5)


def test_fallbacks_give_the_same_results() -> None:
    a, b, c = operands(6, 5, 4, np.float32, seed=2)
    # float16: no BLAS routine
    out16 = np.empty((6, 4), np.float16)
    blas.gemm(a.astype(np.float16), b.astype(np.float16), out16)
    np.testing.assert_allclose(out16, reference(a, b), rtol=1e-2, atol=1e-2)
    # mixed dtypes
    out = np.empty((6, 4), np.float64)
    blas.gemm(a.astype(np.float64), b, out)
    np.testing.assert_allclose(out, reference(a, b), rtol=1e-5, atol=1e-5)
    # unaligned operand
    raw = np.zeros(a.nbytes + 1, np.uint8)
    unaligned = raw[1:].view(np.float32).reshape(a.shape)
    unaligned[...] = a
    assert not unaligned.flags.aligned
    out = np.empty((6, 4), np.float32)
    blas.gemm(unaligned, b, out)
    np.testing.assert_allclose(out, reference(a, b), rtol=1e-5, atol=1e-5)
    # negative strides and a broadcast operand
    blas.gemm(a[::-1], b, out)
    np.testing.assert_allclose(out, reference(a[::-1], b), rtol=1e-5, atol=1e-5)
    wide = np.broadcast_to(b[:1], (5, 4))
    blas.gemm(a, wide, out)
    np.testing.assert_allclose(out, reference(a, wide), rtol=1e-5, atol=1e-5)
    # the output overlapping an operand: numpy's buffered product, not BLAS's garbage
    square = np.random.default_rng(3).standard_normal((5, 5)).astype(np.float32)
    expected = square + reference(square, square)
    blas.gemm(square, square, square, accumulate=True)
    np.testing.assert_allclose(square, expected, rtol=1e-4, atol=1e-4)
    # empty dimensions
    empty = np.ones((6, 0), np.float32)
    out = np.full((6, 4), 7, np.float32)
    blas.gemm(empty, np.ones((0, 4), np.float32), out, accumulate=True)
    assert (out == 7).all()
    blas.gemm(empty, np.ones((0, 4), np.float32), out)
    assert (out == 0).all()


def test_shape_errors() -> None:
    a, b, _ = operands(3, 4, 5, np.float32)
    with pytest.raises(ValueError, match="gemm"):
        blas.gemm(a, b, np.empty((3, 4), np.float32))
    with pytest.raises(ValueError, match="gemm"):
        blas.gemm(a, b.T, np.empty((3, 5), np.float32))
    with pytest.raises(ValueError, match="gemm"):
        blas.gemm(a[None], b, np.empty((3, 5), np.float32))


def test_a_read_only_output_falls_back_to_numpy_and_raises() -> None:
    a, b, c = operands(3, 4, 5, np.float32)
    c.flags.writeable = False
    with pytest.raises(ValueError):
        blas.gemm(a, b, c)


def test_a_library_that_fails_its_check_is_not_used() -> None:
    class Wrong:
        path = "wrong"

        def __init__(self) -> None:
            self.functions = {np.dtype(np.float32): self.call, np.dtype(np.float64): self.call}

        @staticmethod
        def call(*args) -> None:  # computes nothing
            pass

    class Raising(Wrong):
        @staticmethod
        def call(*args) -> None:
            raise OSError("exception: access violation")

    assert blas._self_checked(Wrong()) is None
    assert blas._self_checked(Raising()) is None
    assert blas._self_checked(None) is None
    if blas.direct():
        assert blas._self_checked(blas._BLAS) is blas._BLAS


@pytest.mark.multiprocess
@pytest.mark.parametrize("value, direct", [("0", False), ("1", True)])
def test_environment_switch(value: str, direct: bool) -> None:
    code = ("from nnrt.hdi.reference import blas; import numpy as np; "
            "a = np.ones((2, 3), np.float32); out = np.empty((2, 2), np.float32); "
            "blas.gemm(a, a.T, out); print(blas.direct(), out.sum())")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60, env={**os.environ, blas.ENV: value}, check=True)
    assert result.stdout.split() == [str(direct), "12.0"]


def test_which_operands_go_to_blas_itself() -> None:
    if not blas.direct():
        pytest.skip("no BLAS library of numpy's in this process")
    a, b, c = operands(6, 5, 4, np.float32, seed=4)
    big = np.zeros((8, 9), np.float32)
    takes = [(a, b, c), (np.asfortranarray(a), b, c), (a, np.asfortranarray(b), c),
             (a, b, big[1:7, 2:6]), (a[:, :5], b, c)]
    for x, y, out in takes:
        expected = out + reference(x, y)
        assert blas._call(blas._BLAS, x, y, out, 1.0)
        np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
    raw = np.zeros(a.nbytes + 1, np.uint8)
    unaligned = raw[1:].view(np.float32).reshape(a.shape)
    refused = [(a.astype(np.float16), b.astype(np.float16), c.astype(np.float16)),
               (a.astype(np.float64), b, c), (unaligned, b, c), (a[::-1], b, c),
               (a, b, np.asfortranarray(c)), (a, b, big[1:7, 2:6].T.T[:, ::-1])]
    for x, y, out in refused:
        assert not blas._call(blas._BLAS, x, y, out, 1.0)
    square = np.ones((5, 5), np.float32)
    assert not blas._call(blas._BLAS, square, square, square, 1.0)  # overlapping


def test_dimensions_beyond_the_librarys_integers_are_not_passed(monkeypatch) -> None:
    if not blas.direct():
        pytest.skip("no BLAS library of numpy's in this process")
    a, b, c = operands(6, 5, 4, np.float32, seed=5)
    monkeypatch.setattr(blas._BLAS, "max_int", 5)  # as if 6 rows did not fit a C int
    assert not blas._call(blas._BLAS, a, b, c, 1.0)
    expected = c + reference(a, b)
    blas.gemm(a, b, c, accumulate=True)  # numpy does it
    np.testing.assert_allclose(c, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.multiprocess
def test_limit_threads_caps_numpys_blas_in_its_process() -> None:
    """In a process of its own (the cap lasts for the process): numpy's OpenBLAS starts with
    OPENBLAS_NUM_THREADS=2, is capped to 1 and computes the same product after; a cap above
    what it uses changes nothing."""
    code = ("from nnrt.hdi.reference import blas; import numpy as np; "
            "a = np.arange(64 * 64, dtype=np.float32).reshape(64, 64) % 7; "
            "before = blas.threads(); above = blas.limit_threads(8); "
            "capped = blas.limit_threads(1); "
            "print(before, above, capped, blas.threads(), np.array_equal(a @ a, "
            "np.einsum('ik,kj->ij', a.astype(np.float64), a).astype(np.float32)))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60, env={**os.environ, "OPENBLAS_NUM_THREADS": "2"},
                            check=True)
    assert result.stdout.split() == ["2", "2", "1", "1", "True"], result.stdout
