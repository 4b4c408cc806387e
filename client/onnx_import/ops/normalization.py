"""Softmax, LogSoftmax and LayerNormalization; and the normalisations composed from OH_NN
operations, as their definitions compute them: RMSNormalization (x / sqrt(mean(x^2) +
epsilon) * scale over the axes from `axis`), LpNormalization (x / ||x||_p along one axis, p 1
or 2)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..importer import _handles, _Importer
from ..loading import OnnxImportError
from ..values import _Attrs, _axis, _physical_axis, _Value


@_handles("Softmax", "LogSoftmax")
def _softmax(im: _Importer, node: Any, a: _Attrs) -> None:
    x = im.need(node, 0)
    axis = _axis(int(a.get("axis", -1)), len(x.shape), node)
    op_type = "SOFTMAX" if node.op_type == "Softmax" else "LOG_SOFTMAX"
    phys = _physical_axis(axis, x.perm)
    params = {"axis": [phys]} if op_type == "SOFTMAX" else {"axis": phys}
    im.op(node, op_type, [im.view(x, x.perm)], node.output[0], x.perm, **params)


@_handles("LayerNormalization")
def _layer_norm(im: _Importer, node: Any, a: _Attrs) -> None:
    stash = int(a.get("stash_type", 1))
    x = im.need(node, 0)
    rank = len(x.shape)
    axis = _axis(int(a.get("axis", -1)), rank, node)
    stats = [o for o in node.output[1:3] if o]
    if stats:
        _layer_norm_statistics(im, node, x, axis, float(a.get("epsilon", 1e-5)), stash)
    if axis == 0:
        raise OnnxImportError("axis 0 (normalising the whole tensor) is not an OH_NN "
                              "LayerNorm", node)
    param_shape = x.shape[axis:]
    params = []
    for k, fill in ((1, 1.0), (2, 0.0)):
        v = im.get(node, k)
        if v is None:
            params.append(im.m.constant(np.full(param_shape, fill, x.dtype)))
        elif v.const is not None and -1 not in param_shape:
            params.append(im.m.constant(np.ascontiguousarray(
                np.broadcast_to(v.const, param_shape).astype(x.dtype))))
        elif tuple(v.shape) == tuple(param_shape):
            params.append(im.view(v))
        else:
            raise OnnxImportError(f"scale/bias of shape {list(v.shape)}, not "
                                  f"{list(param_shape)}", node)
    im.op(node, "LAYER_NORM", [im.view(x), *params], node.output[0], None,
          beginNormAxis=axis, epsilon=float(a.get("epsilon", 1e-5)), beginParamsAxis=axis)


def _layer_norm_statistics(im: _Importer, node: Any, x: _Value, axis: int, epsilon: float,
                           stash: int) -> None:
    """LayerNormalization's optional outputs: Mean = ReduceMean(x) and InvStdDev =
    1 / sqrt(ReduceMean((x - Mean)^2) + epsilon) over the axes from `axis`, kept (the
    function body's arithmetic, in the input's float type)."""
    from onnx import TensorProto

    if x.dtype != np.float32 and stash == TensorProto.FLOAT:
        raise OnnxImportError(f"stash_type float32 statistics of a {x.dtype} input (OH_NN "
                              f"computes them in the input's type)", node)
    rank = len(x.shape)
    axes = np.asarray(list(range(axis, rank)), np.int64)
    kept = tuple(1 if i >= axis else d for i, d in enumerate(x.shape))
    operand = im.view(x)
    mean_name = node.output[1] if len(node.output) > 1 and node.output[1] else None
    inv_name = node.output[2] if len(node.output) > 2 and node.output[2] else None
    if mean_name:
        mean = im.op(node, "REDUCE_MEAN", [operand, axes], mean_name, None, keepDims=True)
    else:
        mean = im.m.op("REDUCE_MEAN", operand, axes, shape=kept, keepDims=True)
    if inv_name:
        centred = im.m.op("SUB", operand, mean, shape=x.shape)
        square = im.m.op("MUL", centred, centred, shape=x.shape)
        var = im.m.op("REDUCE_MEAN", square, axes, shape=kept, keepDims=True)
        shifted = im.m.op("ADD", var, np.asarray(epsilon, x.dtype), shape=kept)
        im.op(node, "RSQRT", [shifted], inv_name, None)


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
