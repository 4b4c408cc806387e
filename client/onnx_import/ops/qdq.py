"""QuantizeLinear and DequantizeLinear (the QDQ plan is in quant_plan.py)."""

from __future__ import annotations

from typing import Any

import numpy as np

from nnrt.client.api.dtypes import _OH_TYPES

from ..importer import _handles, _Importer
from ..loading import OnnxImportError
from ..quant_plan import _qparams
from ..values import _Attrs, _physical_axis, _Value


@_handles("QuantizeLinear")
def _quantize(im: _Importer, node: Any, a: _Attrs) -> None:
    """A float tensor quantised: one QuantDTypeCast whose result carries the parameters; a
    DequantizeLinear's result quantised again with its own parameters is that tensor."""
    x = im.need(node, 0)
    q = _qparams(im, node, a, len(x.shape), True)
    if x.dtype != np.float32:
        raise OnnxImportError(f"an input of type {x.dtype} (float32 only)", node)
    out = node.output[0]
    if x.deq is not None and x.const is None and q.same(x.deq.quant):
        im.alias(out, x.deq)
        return
    operand = im.view(x, x.perm)
    axis = 0 if q.axis is None else _physical_axis(q.axis, x.perm)
    result = im.op(node, "QUANT_DTYPE_CAST", [operand], out, x.perm, dtype=q.dtype,
                   srcT=int(_OH_TYPES[x.dtype]), dstT=int(_OH_TYPES[q.dtype]), axis=axis)
    im.set_quant(result, q)
    im.values[out].quant = q


@_handles("DequantizeLinear")
def _dequantize(im: _Importer, node: Any, a: _Attrs) -> None:
    """No operation by itself: the result remembers the quantised tensor, which a quantised
    node reads as it is; a float reader gets it converted (Importer.dequantised)."""
    x = im.need(node, 0)
    q = _qparams(im, node, a, len(x.shape), False)
    if x.dtype != q.dtype:
        raise OnnxImportError(f"an input of type {x.dtype}, the zero point's is {q.dtype}",
                              node)
    out = node.output[0]
    dtype = im.dtype(out, node)
    if x.const is not None:
        src = _Value(x.shape, x.dtype, const=x.const, quant=q)
        im.values[out] = _Value(x.shape, dtype, const=q.real(x.const, dtype), deq=src)
        return
    if q.dtype == np.int32:
        raise OnnxImportError("an int32 tensor computed at run time (OH_NN converts int8 / "
                              "uint8 only)", node)
    if x.quant is None and x.deq is None and x.operand is not None:
        # a quantised model input (or a tensor nothing labelled): it takes the parameters
        for operand in {id(o): o for o in [x.operand, *x.views.values()]}.values():
            im.set_quant(operand, q)
        x.quant = q
    elif not q.same(x.quant):
        # Other parameters than the tensor carries: an identity copy that carries them.
        source = im.view(x, x.perm)
        copy = im.m.op("TRANSPOSE", source, np.arange(len(source.shape), dtype=np.int64),
                       shape=source.shape, dtype=x.dtype)
        im.set_quant(copy, q)
        x = _Value(x.shape, x.dtype, operand=copy, perm=x.perm, quant=q)
        x.views[x.perm] = copy
    im.values[out] = _Value(im.shape(out, node), dtype, perm=x.perm, deq=x)
