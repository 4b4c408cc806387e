"""The element-wise unary math family: Abs, Neg, Square, Ceil, Floor, Round, Cos, Sin, Log,
Reciprocal, Sqrt, Rsqrt and Erf. y = f(x), same shape and dtype as x (rank 0 included).

Decisions where the spec is silent:

* Dtypes. Abs, Neg and Square take every integer and float type; integer results wrap
  (two's complement, as the C kernels do): |INT_MIN| = INT_MIN, -INT_MIN = INT_MIN, the
  negation of an unsigned value is 2^n - x, squares wrap. Abs of an unsigned value is the
  value. Ceil, Floor and Round also take integers, where they are the identity (every
  integer is already integral). Cos, Sin, Log, Reciprocal, Sqrt, Rsqrt and Erf take float
  types only (an integer result of 1/x or sqrt(x) would have to invent a rounding):
  integers are unsupported. Bool is unsupported everywhere.
* float16 is computed in float32 and rounded once for the transcendental functions (Cos,
  Sin, Log, Reciprocal, Sqrt, Rsqrt, Erf); the exact ones (Abs, Neg, Ceil, Floor, Round,
  Square) are computed in float16 directly (numpy rounds each result correctly).
* Round is round-half-to-even (numpy's rint, as ONNX and hdi_ops.json say): 2.5 -> 2.
* IEEE 754 specials, no error: Log(0) = -inf, Log(x < 0) = NaN, Sqrt(x < 0) = NaN,
  Rsqrt(0) = +inf, Reciprocal(±0) = ±inf. Rsqrt's "rank < 8" limit of the C API is not
  enforced (numpy has no such limit).
* Erf: numpy has no erf and scipy is not installed, so it is computed here in float64,
  vectorised: the everywhere-positive series erf(t) = 2/sqrt(pi) t e^(-t^2) sum 2^n t^(2n)
  / (2n+1)!! on |t| < 2 (no cancellation, full relative accuracy near 0) and
  1 - erfc(|t|) from erfc's Laplace continued fraction beyond, odd symmetry for t < 0.
  Maximum relative error below 1e-15 for float64 and below 1e-9 with the shorter
  expansions used for float32/float16 results (both checked against math.erf in the
  tests); erf(±inf) = ±1, erf(NaN) = NaN.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from nnrt.hdi.reference.kernel import Kernel, register
from nnrt.hdi.reference.ops._common import (
    FLOAT_DTYPES,
    NUMERIC_DTYPES,
    cast,
    common_dtype,
    compute_dtype,
    require_unquantised,
)
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import NodeSpec, Shape


class Unary(Kernel):
    """One input, one output of the same shape and dtype, y = compute(x).

    Subclasses set `allowed` (the dtypes computed) and `compute`; with `widen` set, float16
    is computed in float32 and rounded once. Other element-wise unary modules reuse it.
    """

    allowed: frozenset[np.dtype] = FLOAT_DTYPES
    widen: bool = True
    compute: Callable[..., np.ndarray]

    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        self.expect_counts(1)
        require_unquantised(node)
        self.dtype = common_dtype(node, node.inputs, self.allowed, "input")
        self.work = compute_dtype(self.dtype) if self.widen else self.dtype

    def infer_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        return [tuple(input_shapes[0])]

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        x = inputs[0].astype(self.work, copy=False)  # a copy for float16 only
        with np.errstate(all="ignore"):  # IEEE specials and integer wrap-around are the semantics
            result = np.asarray(self.compute(x))
        return [cast(result, self.dtype)]


class NumericUnary(Unary):
    """A Unary over every numeric dtype, computed in the input's own dtype (integers exactly,
    wrapping where C would)."""

    allowed = NUMERIC_DTYPES
    widen = False


def _identity_for_integers(fn: Callable[[np.ndarray], np.ndarray]) -> Callable[..., np.ndarray]:
    """fn on floats; integers are returned as they are (already integral)."""

    def compute(self: Unary, x: np.ndarray) -> np.ndarray:
        return x if np.issubdtype(x.dtype, np.integer) else fn(x)

    return compute


@register(na.NODE_TYPE_ABS)
class Abs(NumericUnary):
    compute = staticmethod(np.abs)


@register(na.NODE_TYPE_NEG)
class Neg(NumericUnary):
    compute = staticmethod(np.negative)


@register(na.NODE_TYPE_SQUARE)
class Square(NumericUnary):
    compute = staticmethod(np.square)


@register(na.NODE_TYPE_CEIL)
class Ceil(NumericUnary):
    compute = _identity_for_integers(np.ceil)


@register(na.NODE_TYPE_FLOOR)
class Floor(NumericUnary):
    compute = _identity_for_integers(np.floor)


@register(na.NODE_TYPE_ROUND)
class Round(NumericUnary):
    compute = _identity_for_integers(np.rint)  # half to even


@register(na.NODE_TYPE_COS)
class Cos(Unary):
    compute = staticmethod(np.cos)


@register(na.NODE_TYPE_SIN)
class Sin(Unary):
    compute = staticmethod(np.sin)


@register(na.NODE_TYPE_LOG)
class Log(Unary):
    compute = staticmethod(np.log)


@register(na.NODE_TYPE_SQRT)
class Sqrt(Unary):
    compute = staticmethod(np.sqrt)


@register(na.NODE_TYPE_RECIPROCAL)
class Reciprocal(Unary):
    @staticmethod
    def compute(x: np.ndarray) -> np.ndarray:
        return np.reciprocal(x)


@register(na.NODE_TYPE_RSQRT)
class Rsqrt(Unary):
    @staticmethod
    def compute(x: np.ndarray) -> np.ndarray:
        r = np.sqrt(x)
        return np.reciprocal(r, out=r) if r.ndim else np.reciprocal(r)


# ----------------------------------------------------------------------------- erf

# (series terms on |t| < 2, continued-fraction depth beyond) for float64 results and for
# float32 / float16 results.
_ERF_PRECISE = (32, 40)
_ERF_SINGLE = (22, 18)
_ERF_SERIES_LIMIT = 2.0


def _series_coefficients(terms: int) -> np.ndarray:
    """c_n = 2^n / (2n+1)!! for n = 0..terms, highest first (Horner order)."""
    coefficients = [1.0]
    for n in range(1, terms + 1):
        coefficients.append(coefficients[-1] * 2.0 / (2 * n + 1))
    return np.array(coefficients[::-1])


_ERF_COEFFICIENTS = {terms: _series_coefficients(terms) for terms, _ in (_ERF_PRECISE,
                                                                         _ERF_SINGLE)}


def erf(x: np.ndarray, precise: bool = True) -> np.ndarray:
    """erf of a float64 array, as a fresh float64 array (see the module docstring)."""
    terms, depth = _ERF_PRECISE if precise else _ERF_SINGLE
    shape = x.shape
    x = x.reshape(-1)  # 1-D: boolean masks on a 0-d array would give numpy scalars
    a = np.abs(x)
    out = np.empty_like(a)
    with np.errstate(all="ignore"):
        small = a < _ERF_SERIES_LIMIT
        t = a[small]
        z = t * t
        acc = np.full_like(t, _ERF_COEFFICIENTS[terms][0])
        for c in _ERF_COEFFICIENTS[terms][1:]:  # Horner over the series terms, not elements
            acc *= z
            acc += c
        acc *= t
        acc *= np.exp(-z)
        acc *= 2.0 / math.sqrt(math.pi)
        out[small] = acc
        # erfc(t) = e^(-t^2) / (sqrt(pi) (t + (1/2)/(t + 1/(t + (3/2)/(t + ...))))), t >= 2;
        # NaN lands here too and stays NaN, +inf gives 1.
        t = a[~small]
        f = t.copy()
        for k in range(depth, 0, -1):  # evaluated bottom-up over a fixed depth
            np.divide(k / 2.0, f, out=f)
            f += t
        out[~small] = 1.0 - np.exp(-t * t) / (math.sqrt(math.pi) * f)
    return np.copysign(out, x).reshape(shape)


@register(na.NODE_TYPE_ERF)
class Erf(Unary):
    def compute(self, x: np.ndarray) -> np.ndarray:
        return erf(x.astype(np.float64, copy=False), precise=self.dtype == np.float64)
