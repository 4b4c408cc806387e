"""ActivationType (hdi.md 6.12): validation and computation, for the Activation operator and
for the `activationType` fused into other operators (AddFusion, Conv2DFusion, ...).

Decisions:

* In a *fused* position only the parameter-free types are computed. The parameters of ELU,
  LEAKY_RELU (alpha), HARD_TANH (minVal, maxVal) and THRESHOLDRELU (alpha, see below) live
  in the Activation struct, which a fused operator does not carry, so these are reported
  unsupported there rather than computed with invented values. GELU fused is the exact
  (erf) form, `approximate` being an Activation field too.
* THRESHOLDRELU follows hdi.md as documented, min(max(0, x), t), and takes t from `alpha`
  (the Activation field MindSpore's converters fill for it).
* SELU uses the fixed constants of hdi.md (alpha = 1.67326324, scale = 1.05070098).
* Integer tensors take only the types that stay exact in integers: NO_ACTIVATION, LINEAR,
  RELU, RELU6, RELU1, ABS, SIGN. float16 is computed in float32 for the transcendental
  types and rounded once at the end.
* ACTIVATION_TYPE_UNKNOWN and values outside the enum are invalid nodes.
* GELU's exact form needs erf, which numpy lacks: the normal CDF is computed here in
  float64 from erf's everywhere-positive series on |t| < 2 and the Laplace continued
  fraction of erfc beyond, both vectorised (relative error below 1e-12 in both tails for
  float64, below 1e-7 with the shorter expansions used for float32/float16; checked against
  math.erfc in tests).
"""

from __future__ import annotations

import math

import numpy as np

from nnrt.drivers.cpu.kernel import invalid, unsupported
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.server.graph import NodeSpec

NEEDS_PARAMETERS = frozenset({
    ht.ACTIVATION_TYPE_ELU,
    ht.ACTIVATION_TYPE_LEAKY_RELU,
    ht.ACTIVATION_TYPE_HARD_TANH,
    ht.ACTIVATION_TYPE_THRESHOLDRELU,
})
INTEGER_SAFE = frozenset({
    ht.ACTIVATION_TYPE_NO_ACTIVATION,
    ht.ACTIVATION_TYPE_LINEAR,
    ht.ACTIVATION_TYPE_RELU,
    ht.ACTIVATION_TYPE_RELU6,
    ht.ACTIVATION_TYPE_RELU1,
    ht.ACTIVATION_TYPE_ABS,
    ht.ACTIVATION_TYPE_SIGN,
})
KNOWN = frozenset(range(ht.ACTIVATION_TYPE_NO_ACTIVATION, ht.ACTIVATION_TYPE_UNKNOWN))
_IDENTITY = frozenset({ht.ACTIVATION_TYPE_NO_ACTIVATION, ht.ACTIVATION_TYPE_LINEAR})
# Types made of comparisons and arithmetic only: computed in the tensor's own dtype, float16
# included (the others, transcendental, take float16 through float32).
_PIECEWISE = INTEGER_SAFE | frozenset({
    ht.ACTIVATION_TYPE_LEAKY_RELU, ht.ACTIVATION_TYPE_HARD_TANH, ht.ACTIVATION_TYPE_THRESHOLDRELU,
    ht.ACTIVATION_TYPE_HSIGMOID, ht.ACTIVATION_TYPE_HSWISH,
})

SELU_ALPHA = 1.67326324
SELU_SCALE = 1.05070098


def activation_name(activation_type: int) -> str:
    try:
        return ht.ActivationType.Name(activation_type)
    except ValueError:
        return str(activation_type)


def check_activation(node: NodeSpec, activation_type: int, fused: bool,
                     dtype: np.dtype | None = None) -> None:
    """Raise invalid() for an undefined type, unsupported() for one not computed here.

    `dtype` is the dtype the activation is applied to (default: the node's first output).
    """
    if activation_type not in KNOWN:
        raise invalid(node, f"activationType {activation_name(activation_type)} is not a "
                            f"defined activation")
    if fused and activation_type in NEEDS_PARAMETERS:
        raise unsupported(node, f"fused {activation_name(activation_type)} needs parameters "
                                f"that only the Activation operator carries")
    dtype = np.dtype(node.outputs[0].dtype if dtype is None else dtype)
    if np.issubdtype(dtype, np.floating):
        return
    if np.issubdtype(dtype, np.integer) and activation_type in INTEGER_SAFE:
        return
    raise unsupported(node, f"{activation_name(activation_type)} on {dtype} is not supported")


def fused_activation(node: NodeSpec, dtype: np.dtype | None = None) -> int:
    """The node's `activationType` attribute, checked as a fused activation."""
    activation_type = int(node.attrs.activationType)
    check_activation(node, activation_type, fused=True, dtype=dtype)
    return activation_type


def apply_activation(x: np.ndarray, activation_type: int, alpha: float = 0.0,
                     min_val: float = 0.0, max_val: float = 0.0, approximate: bool = False,
                     *, inplace: bool = False) -> np.ndarray:
    """activation(x) with x's dtype; x is never modified unless `inplace` says that the
    caller owns it (a fresh result array), in which case it may be reused for the result."""
    if activation_type in _IDENTITY:
        return x
    if x.ndim == 0:
        # numpy ufuncs turn 0-d arrays into scalars, which cannot be written in place.
        return apply_activation(x.reshape(1), activation_type, alpha, min_val, max_val,
                                approximate, inplace=inplace).reshape(())
    if activation_type not in _PIECEWISE and x.dtype == np.float16:
        # Transcendental types in float32, rounded to float16 once.
        wide = _compute(x.astype(np.float32), activation_type, alpha, min_val, max_val,
                        approximate, True)
        with np.errstate(over="ignore"):  # beyond float16's range is ±inf, as IEEE says
            return wide.astype(np.float16)
    return _compute(x, activation_type, alpha, min_val, max_val, approximate, inplace)


def _compute(x: np.ndarray, kind: int, alpha: float, min_val: float, max_val: float,
             approximate: bool, inplace: bool) -> np.ndarray:
    dtype = x.dtype
    out = x if inplace else None  # ufunc out=None allocates a fresh result
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        if kind == ht.ACTIVATION_TYPE_RELU:
            return _max(x, 0, out)
        if kind == ht.ACTIVATION_TYPE_RELU6:
            return _clip(x, 0, 6, out)
        if kind == ht.ACTIVATION_TYPE_RELU1:
            return _clip(x, 0, 1, out)
        if kind == ht.ACTIVATION_TYPE_ABS:
            return np.abs(x, out=out)
        if kind == ht.ACTIVATION_TYPE_SIGN:
            return np.sign(x, out=out)
        if kind == ht.ACTIVATION_TYPE_HARD_TANH:
            return _clip(x, min_val, max_val, out)
        if kind == ht.ACTIVATION_TYPE_THRESHOLDRELU:
            return _clip(x, 0, alpha, out)
        if kind == ht.ACTIVATION_TYPE_LEAKY_RELU:
            scaled = np.multiply(x, dtype.type(alpha))
            return np.where(x >= 0, x, scaled)
        if kind == ht.ACTIVATION_TYPE_HSIGMOID:
            r = np.add(x, dtype.type(3), out=out)
            r /= dtype.type(6)
            return np.clip(r, 0, 1, out=r)
        if kind == ht.ACTIVATION_TYPE_HSWISH:
            r = np.add(x, dtype.type(3))
            np.clip(r, 0, 6, out=r)
            r *= x
            r /= dtype.type(6)
            return r
        if kind == ht.ACTIVATION_TYPE_SIGMOID:
            return _sigmoid(x)
        if kind == ht.ACTIVATION_TYPE_SWISH:
            r = _sigmoid(x)
            r *= x
            return r
        if kind == ht.ACTIVATION_TYPE_TANH:
            return np.tanh(x, out=out)
        if kind == ht.ACTIVATION_TYPE_SOFTSIGN:
            r = np.abs(x)
            r += dtype.type(1)
            return np.divide(x, r, out=r)
        if kind == ht.ACTIVATION_TYPE_SOFTPLUS:
            # log(1 + e^x) = max(x, 0) + log1p(e^-|x|): no overflow for large |x|.
            r = np.abs(x)
            np.negative(r, out=r)
            np.exp(r, out=r)
            np.log1p(r, out=r)
            r += np.maximum(x, 0)
            return r
        if kind == ht.ACTIVATION_TYPE_ELU:
            return _elu(x, dtype.type(alpha), dtype.type(1))
        if kind == ht.ACTIVATION_TYPE_SELU:
            return _elu(x, dtype.type(SELU_ALPHA), dtype.type(SELU_SCALE))
        if kind == ht.ACTIVATION_TYPE_GELU:
            return _gelu_tanh(x) if approximate else _gelu_exact(x)
    raise ValueError(f"activation type {kind} is not computed here")  # check_activation refuses it


def _max(x: np.ndarray, low: int, out: np.ndarray | None) -> np.ndarray:
    return np.maximum(x, x.dtype.type(low), out=out)


def _clip(x: np.ndarray, low: float, high: float, out: np.ndarray | None) -> np.ndarray:
    """min(max(x, low), high), literally (high wins if high < low); NaN stays NaN."""
    r = np.maximum(x, x.dtype.type(low), out=out)
    return np.minimum(r, x.dtype.type(high), out=r)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    """1 / (1 + e^-x) without overflow: e = e^-|x|, then 1/(1+e) or e/(1+e) by sign."""
    e = np.abs(x)
    np.negative(e, out=e)
    np.exp(e, out=e)
    r = np.where(x >= 0, x.dtype.type(1), e)
    e += x.dtype.type(1)
    r /= e
    return r


def _elu(x: np.ndarray, alpha: np.generic, scale: np.generic) -> np.ndarray:
    """scale * (x if x >= 0 else alpha * (e^x - 1)); expm1 only sees x <= 0 (no overflow)."""
    neg = np.minimum(x, x.dtype.type(0))
    np.expm1(neg, out=neg)
    neg *= alpha
    r = np.where(x >= 0, x, neg)
    if scale != 1:
        r *= scale
    return r


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    """0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    t = np.multiply(x, x)
    t *= x
    t *= x.dtype.type(0.044715)
    t += x
    t *= x.dtype.type(math.sqrt(2.0 / math.pi))
    np.tanh(t, out=t)
    t += x.dtype.type(1)
    t *= x
    t *= x.dtype.type(0.5)
    return t


def _gelu_exact(x: np.ndarray) -> np.ndarray:
    """x * Phi(x), Phi computed in float64 (to float32 accuracy for narrower inputs)."""
    r = normal_cdf(x.astype(np.float64, copy=False), precise=x.dtype == np.float64)
    r *= x
    return r.astype(x.dtype, copy=False)


# erf series on |t| < 2 and erfc continued fraction on |t| >= 2: (terms, depth) for a
# relative error of erfc below 1e-13 (float64) or 1e-8 (float32 / float16 results).
_PRECISE = (30, 40)
_SINGLE = (22, 18)
_SERIES_LIMIT = 2.0


def _series_coefficients(terms: int) -> np.ndarray:
    """c_n = 2^n / (2n+1)!! for n = 0..terms, highest first (Horner order)."""
    c, coefficients = 1.0, [1.0]
    for n in range(1, terms + 1):
        c *= 2.0 / (2 * n + 1)
        coefficients.append(c)
    return np.array(coefficients[::-1])


_COEFFICIENTS = {terms: _series_coefficients(terms) for terms, _ in (_PRECISE, _SINGLE)}


def _erf_series(t: np.ndarray, terms: int) -> np.ndarray:
    """erf(t) = 2/sqrt(pi) t e^(-t^2) sum_n c_n t^(2n): every term positive, no cancellation."""
    z = t * t
    coefficients = _COEFFICIENTS[terms]
    acc = np.full_like(t, coefficients[0])
    for c in coefficients[1:]:  # Horner over series terms, not over elements
        acc *= z
        acc += c
    acc *= t
    np.negative(z, out=z)
    np.exp(z, out=z)
    acc *= z
    acc *= 2.0 / math.sqrt(math.pi)
    return acc


def _erfc_fraction(t: np.ndarray, depth: int) -> np.ndarray:
    """erfc(t) for t >= 2: e^(-t^2) / (sqrt(pi) (t + (1/2)/(t + 1/(t + (3/2)/(t + ...)))))."""
    f = t.copy()
    for k in range(depth, 0, -1):
        np.divide(k / 2.0, f, out=f)
        f += t
    return np.exp(-t * t) / (math.sqrt(math.pi) * f)


def normal_cdf(x: np.ndarray, precise: bool = True) -> np.ndarray:
    """Phi(x) = erfc(-x / sqrt(2)) / 2 for a float64 array (a fresh float64 array); relative
    error below 1e-12 in both tails, or below 1e-7 when not `precise`."""
    terms, depth = _PRECISE if precise else _SINGLE
    t = np.negative(x) / math.sqrt(2.0)
    erfc = np.empty_like(t)
    with np.errstate(over="ignore", under="ignore", invalid="ignore", divide="ignore"):
        small = np.abs(t) < _SERIES_LIMIT
        erfc[small] = 1.0 - _erf_series(t[small], terms)
        high = t >= _SERIES_LIMIT
        erfc[high] = _erfc_fraction(t[high], depth)
        low = t <= -_SERIES_LIMIT
        erfc[low] = 2.0 - _erfc_fraction(-t[low], depth)
        erfc[np.isnan(t)] = np.nan
    erfc *= 0.5
    return erfc
