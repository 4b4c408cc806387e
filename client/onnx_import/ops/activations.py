"""Element-wise activations composed from OH_NN operations, each the ONNX definition:
Elu, Selu, Celu, Softplus, Softsign, ThresholdedRelu, PRelu, Mish, Shrink."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..importer import _handles, _Importer
from ..loading import OnnxImportError
from ..values import _Attrs


def _float_input(im: _Importer, node: Any) -> Any:
    x = im.need(node, 0)
    if x.dtype.kind != "f":
        raise OnnxImportError(f"input of type {x.dtype} (a float type is required)", node)
    return x


def _c(x: Any, value: float) -> np.ndarray:
    return np.asarray(value, x.dtype)


def _elu_of(im: _Importer, x: Any, operand: Any, alpha: float, shape: tuple) -> Any:
    """x if x > 0 else alpha * (exp(x) - 1)."""
    m = im.m
    positive = m.op("GREATER", operand, _c(x, 0.0), shape=shape, dtype=np.bool_)
    expm1 = m.op("SUB", m.op("EXP", operand, shape=shape), _c(x, 1.0), shape=shape)
    negative = m.op("MUL", expm1, _c(x, alpha), shape=shape)
    return positive, negative


@_handles("Elu", "Selu", "Celu")
def _elu_family(im: _Importer, node: Any, a: _Attrs) -> None:
    x = _float_input(im, node)
    shape, operand, m = tuple(x.shape), im.view(x), im.m
    if node.op_type == "Elu":
        positive, negative = _elu_of(im, x, operand, float(a.get("alpha", 1.0)), shape)
        im.op(node, "WHERE", [positive, operand, negative], node.output[0], None)
    elif node.op_type == "Selu":
        alpha, gamma = float(a.get("alpha", 1.67326319217681884765625)), \
            float(a.get("gamma", 1.05070102214813232421875))
        positive, negative = _elu_of(im, x, operand, alpha, shape)
        inner = m.op("WHERE", positive, operand, negative, shape=shape, dtype=x.dtype)
        im.op(node, "MUL", [inner, _c(x, gamma)], node.output[0], None, activationType=0)
    else:  # Celu: max(0, x) + min(0, alpha * (exp(x / alpha) - 1))
        alpha = float(a.get("alpha", 1.0))
        if alpha == 0:
            raise OnnxImportError("alpha 0 divides by zero", node)
        scaled = m.op("DIV", operand, _c(x, alpha), shape=shape, activationType=0)
        expm1 = m.op("SUB", m.op("EXP", scaled, shape=shape), _c(x, 1.0), shape=shape)
        low = m.op("MINIMUM", m.op("MUL", expm1, _c(x, alpha), shape=shape), _c(x, 0.0),
                   shape=shape)
        high = m.op("MAXIMUM", operand, _c(x, 0.0), shape=shape)
        im.op(node, "ADD", [high, low], node.output[0], None, activationType=0)


@_handles("Softplus", "Softsign")
def _soft(im: _Importer, node: Any, a: _Attrs) -> None:
    x = _float_input(im, node)
    shape, operand, m = tuple(x.shape), im.view(x), im.m
    if node.op_type == "Softplus":  # log(exp(x) + 1), as the definition (and onnx) computes
        grown = m.op("ADD", m.op("EXP", operand, shape=shape), _c(x, 1.0), shape=shape)
        im.op(node, "LOG", [grown], node.output[0], None)
    else:  # x / (1 + |x|)
        den = m.op("ADD", m.op("ABS", operand, shape=shape), _c(x, 1.0), shape=shape)
        im.op(node, "DIV", [operand, den], node.output[0], None, activationType=0)


@_handles("ThresholdedRelu")
def _thresholded_relu(im: _Importer, node: Any, a: _Attrs) -> None:
    x = _float_input(im, node)
    shape, operand = tuple(x.shape), im.view(x)
    above = im.m.op("GREATER", operand, _c(x, float(a.get("alpha", 1.0))), shape=shape,
                    dtype=np.bool_)
    zeros = im.m.constant(np.zeros((1,) * len(shape) or (1,), x.dtype))
    im.op(node, "WHERE", [above, operand, zeros], node.output[0], None)


@_handles("PRelu")
def _prelu(im: _Importer, node: Any, a: _Attrs) -> None:
    """x if x >= 0 else slope * x, slope broadcast to x (unidirectionally)."""
    x, slope = _float_input(im, node), im.need(node, 1)
    if slope.dtype != x.dtype:
        raise OnnxImportError(f"slope of type {slope.dtype}, input {x.dtype}", node)
    shape, operand = tuple(x.shape), im.view(x)
    slope_operand = im.m.constant(slope.const) if slope.const is not None else im.view(slope)
    scaled = im.m.op("MUL", operand, slope_operand, shape=shape, activationType=0)
    negative = im.m.op("LESS", operand, _c(x, 0.0), shape=shape, dtype=np.bool_)
    im.op(node, "WHERE", [negative, scaled, operand], node.output[0], None)


@_handles("Mish")
def _mish(im: _Importer, node: Any, a: _Attrs) -> None:
    """x * tanh(softplus(x)), softplus as log(exp(x) + 1)."""
    x = _float_input(im, node)
    shape, operand, m = tuple(x.shape), im.view(x), im.m
    soft = m.op("LOG", m.op("ADD", m.op("EXP", operand, shape=shape), _c(x, 1.0), shape=shape),
                shape=shape)
    im.op(node, "MUL", [operand, m.op("TANH", soft, shape=shape)], node.output[0], None,
          activationType=0)


@_handles("Shrink")
def _shrink(im: _Importer, node: Any, a: _Attrs) -> None:
    """x + bias if x < -lambd, x - bias if x > lambd, else 0."""
    x = im.need(node, 0)
    lambd, bias = float(a.get("lambd", 0.5)), float(a.get("bias", 0.0))
    if x.dtype.kind != "f" and (lambd != int(lambd) or bias != int(bias)):
        raise OnnxImportError("fractional lambd / bias on an integer input", node)
    shape, operand, m = tuple(x.shape), im.view(x), im.m
    low = m.op("LESS", operand, _c(x, -lambd), shape=shape, dtype=np.bool_)
    high = m.op("GREATER", operand, _c(x, lambd), shape=shape, dtype=np.bool_)
    zeros = m.constant(np.zeros((1,) * len(shape) or (1,), x.dtype))
    up = m.op("SUB", operand, _c(x, bias), shape=shape, activationType=0)
    down = m.op("ADD", operand, _c(x, bias), shape=shape, activationType=0)
    inner = m.op("WHERE", high, up, zeros, shape=shape, dtype=x.dtype)
    im.op(node, "WHERE", [low, down, inner], node.output[0], None)
