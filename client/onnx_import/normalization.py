"""Softmax, LogSoftmax and LayerNormalization."""

from __future__ import annotations

from typing import Any

import numpy as np

from .importer import _handles, _Importer
from .loading import OnnxImportError
from .values import _Attrs, _axis, _physical_axis, _Value


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
