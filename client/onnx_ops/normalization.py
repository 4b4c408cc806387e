"""Normalisations composed from OH_NN operations, as their definitions compute them:
RMSNormalization (x / sqrt(mean(x^2) + epsilon) * scale over the axes from `axis`),
LpNormalization (x / ||x||_p along one axis, p 1 or 2)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..onnx_import.importer import _handles, _Importer
from ..onnx_import.loading import OnnxImportError
from ..onnx_import.values import _Attrs, _axis


@_handles("RMSNormalization")
def _rms_norm(im: _Importer, node: Any, a: _Attrs) -> None:
    from onnx import TensorProto

    x, scale = im.need(node, 0), im.need(node, 1)
    if x.dtype.kind != "f":
        raise OnnxImportError(f"input of type {x.dtype}", node)
    if x.dtype != np.float32 and int(a.get("stash_type", 1)) == TensorProto.FLOAT:
        raise OnnxImportError(f"stash_type float32 statistics of a {x.dtype} input (OH_NN "
                              f"computes them in the input's type)", node)
    rank = len(x.shape)
    axis = _axis(int(a.get("axis", -1)), rank, node)
    epsilon = float(a.get("epsilon", 1e-5))
    shape = tuple(x.shape)
    kept = tuple(1 if i >= axis else d for i, d in enumerate(shape))
    m, operand = im.m, im.view(x)
    square = m.op("MUL", operand, operand, shape=shape, activationType=0)
    mean = m.op("REDUCE_MEAN", square, np.arange(axis, rank, dtype=np.int64), shape=kept,
                keepDims=True)
    inv = m.op("RSQRT", m.op("ADD", mean, np.asarray(epsilon, x.dtype), shape=kept,
                             activationType=0), shape=kept)
    normed = m.op("MUL", operand, inv, shape=shape, activationType=0)
    scale_operand = m.constant(scale.const.astype(x.dtype)) if scale.const is not None \
        else im.view(scale)
    im.op(node, "MUL", [normed, scale_operand], node.output[0], None, activationType=0)


@_handles("LpNormalization")
def _lp_norm(im: _Importer, node: Any, a: _Attrs) -> None:
    x = im.need(node, 0)
    if x.dtype.kind != "f":
        raise OnnxImportError(f"input of type {x.dtype}", node)
    rank = len(x.shape)
    axis = _axis(int(a.get("axis", -1)), rank, node)
    p = int(a.get("p", 2))
    if p not in (1, 2):
        raise OnnxImportError(f"p {p} (1 or 2)", node)
    shape = tuple(x.shape)
    kept = tuple(1 if i == axis else d for i, d in enumerate(shape))
    m, operand = im.m, im.view(x)
    axes = np.asarray([axis], np.int64)
    if p == 1:
        norm = m.op("REDUCE_SUM", m.op("ABS", operand, shape=shape), axes, shape=kept,
                    keepDims=True)
    else:
        norm = m.op("REDUCE_L2", operand, axes, shape=kept, keepDims=True)
    # onnx's definition: 0 where the norm is 0
    zero = m.op("EQUAL", norm, np.asarray(0, x.dtype), shape=kept, dtype=np.bool_)
    quotient = m.op("DIV", operand, norm, shape=shape, activationType=0)
    zeros = m.constant(np.zeros((1,) * rank, x.dtype))
    im.op(node, "WHERE", [zero, zeros, quotient], node.output[0], None)
