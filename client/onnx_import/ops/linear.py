"""Linear algebra: Gemm (a FullConnection where it can be) and MatMul."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..importer import _handles, _Importer
from ..values import _Attrs, _FUSE


@_handles("Gemm")
def _gemm(im: _Importer, node: Any, a: _Attrs) -> None:
    x, wv = im.need(node, 0), im.need(node, 1)
    c = im.get(node, 2)
    alpha, beta = float(a.get("alpha", 1.0)), float(a.get("beta", 1.0))
    trans_a, trans_b = int(a.get("transA", 0)), int(a.get("transB", 0))
    out = node.output[0]
    shape = im.shape(out, node)
    x_op = im.view(x, (1, 0) if trans_a else None)
    bias = None
    if c is not None and c.const is not None and c.const.ndim <= 2 and \
            c.const.size in (1, shape[1]) and (c.const.ndim < 2 or c.const.shape[0] == 1):
        bias = np.ascontiguousarray(np.broadcast_to(
            c.const.reshape(-1) * np.asarray(beta, c.dtype), (shape[1],)).astype(c.dtype))
        c = None
    if c is None and wv.const is not None:
        if alpha != 1.0:
            weight = wv.const if trans_b else wv.const.T  # [N, K]
            weight = (weight * np.asarray(alpha, weight.dtype)).astype(weight.dtype)
            w_op = im.m.constant(np.ascontiguousarray(weight))
        else:
            w_op = im.weight(wv, None if trans_b else (1, 0))
        activation, out = im.fused_activation(out)
        inputs = [x_op, w_op]
        if bias is not None:
            given = im.get(node, 2)
            inputs.append(im.bias(given if beta == 1.0 and given.const.shape == bias.shape
                                  else None, bias, x, w_op))
        im.op(node, "FULL_CONNECTION", inputs, out, None, hasBias=bias is not None,
              activationType=_FUSE[activation])
        return
    # The general form: MatMul, then alpha, then beta * C.
    steps: list[tuple[str, list[Any], dict[str, Any]]] = [
        ("MATMUL", [x_op, im.view(wv)], {"transposeA": False, "transposeB": bool(trans_b)})]
    if alpha != 1.0:
        steps.append(("MUL", [np.asarray(alpha, x.dtype)], {}))
    if bias is not None:
        steps.append(("ADD", [bias], {}))
    if c is not None:
        term = im.view(c) if beta == 1.0 else im.m.op(
            "MUL", im.view(c), np.asarray(beta, c.dtype), shape=c.shape, dtype=c.dtype)
        steps.append(("ADD", [term], {}))
    result = None
    for k, (op_type, args, params) in enumerate(steps):
        inputs = args if result is None else [result, *args]
        if k == len(steps) - 1:
            im.op(node, op_type, inputs, out, None, **params)
        else:
            result = im.m.op(op_type, *inputs, shape=shape, dtype=x.dtype, **params)


@_handles("MatMul")
def _matmul(im: _Importer, node: Any, a: _Attrs) -> None:
    x, wv = im.need(node, 0), im.need(node, 1)
    out = node.output[0]
    if wv.const is not None and wv.const.ndim == 2 and len(x.shape) >= 2 and \
            x.dtype.kind == "f":
        # A constant 2-D weight: FullConnection over the last axis, taking an Add of a
        # constant [N] bias that only this MatMul feeds.
        n_cols = wv.const.shape[1]
        bias = None
        add = im.sole_consumer(out)
        if add is not None and add.op_type == "Add":
            other = add.input[1] if add.input[0] == out else add.input[0]
            ov = im.values.get(other)
            if ov is not None and ov.const is not None and ov.const.dtype == x.dtype and \
                    ov.const.shape in ((n_cols,), (1, n_cols)) and not add.attribute:
                bias = ov.const.reshape(-1)
                im.skip.add(id(add))
                out = add.output[0]
        activation, out = im.fused_activation(out)
        inputs = [im.view(x), im.weight(wv, (1, 0))]
        if bias is not None:
            inputs.append(im.m.constant(np.ascontiguousarray(bias)))
        im.op(node, "FULL_CONNECTION", inputs, out, None, hasBias=bias is not None,
              useAxis=True, axis=len(x.shape) - 1, activationType=_FUSE[activation])
        return
    activation, out = im.fused_activation(out)
    im.op(node, "MATMUL", [im.view(x), im.view(wv)], out, None, transposeA=False,
          transposeB=False, activationType=_FUSE[activation])
