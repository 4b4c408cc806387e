"""Shape and data movement: Transpose (a recorded permutation), Reshape, Flatten,
Squeeze, Unsqueeze, Concat, Split, Slice, Gather, Pad, Expand, Tile."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..importer import _handles, _Importer
from ..loading import OnnxImportError
from ..values import (_Attrs, _axis, _identity, _INT64_MAX, _inverse, _permuted, _physical_axis,
                      _reshape_target, _Value)
from .elementwise import _common_perm, _operands_in


@_handles("Transpose")
def _transpose(im: _Importer, node: Any, a: _Attrs) -> None:
    x = im.need(node, 0)
    rank = len(x.shape)
    q = a.ints("perm", list(reversed(range(rank))))
    if sorted(q) != list(range(rank)):
        raise OnnxImportError(f"perm {q} is not a permutation of {rank} axes", node)
    im.values[node.output[0]] = _transposed(x, q, im.shape(node.output[0], node))


def _transposed(x: _Value, q: Sequence[int], shape: tuple[int, ...]) -> _Value:
    """x.transpose(q) as the same operand in another recorded layout (no operation); a
    DequantizeLinear's result not yet converted stays one, of the transposed tensor."""
    if x.deq is not None and x.operand is None and x.const is None:
        src = x.deq
        quant = src.quant if src.quant.axis is None else src.quant.moved(
            list(q).index(src.quant.axis))
        moved = _transposed(src, q, shape)
        moved.quant = quant
        return _Value(shape, x.dtype, perm=moved.perm, deq=moved)
    rank = len(q)
    # out = onnx_x.transpose(q); the operand holds onnx_x.transpose(p) = out.transpose(r).
    p = x.perm if x.perm is not None else tuple(range(rank))
    inv_q = _inverse(q)
    r = tuple(inv_q[p[i]] for i in range(rank))
    v = _Value(shape, x.dtype, operand=x.operand, perm=None if _identity(r) else r,
               quant=x.quant)
    v.views[v.perm] = x.operand
    return v


@_handles("Reshape")
def _reshape(im: _Importer, node: Any, a: _Attrs) -> None:
    x, shape_v = im.need(node, 0), im.need(node, 1)
    out_shape = im.shape(node.output[0], node)
    allowzero = int(a.get("allowzero", 0))
    if shape_v.const is not None:
        target = [int(d) for d in np.asarray(shape_v.const).reshape(-1)]
        if allowzero and 0 in target:
            raise OnnxImportError("allowzero with a 0 in the shape (an empty tensor)", node)
        if all(d >= 0 for d in out_shape):
            target = list(out_shape)
        im.op(node, "RESHAPE", [im.view(x), np.asarray(target, np.int64)], node.output[0],
              None)
        return
    # A shape computed at run time (from a Shape of a dynamic tensor): the inferred shape
    # where it has at most one unknown dimension, else the shape tensor itself (OH_NN's
    # Reshape reads a run-time shape; 0 copies a dimension, -1 infers one, as in ONNX).
    if allowzero:
        raise OnnxImportError("allowzero with a shape computed at run time (a 0 would copy a "
                              "dimension in OH_NN)", node)
    target = _reshape_target(out_shape)
    shape_in = np.asarray(target, np.int64) if target is not None else im.view(shape_v)
    im.op(node, "RESHAPE", [im.view(x), shape_in], node.output[0], None)


@_handles("Flatten")
def _flatten(im: _Importer, node: Any, a: _Attrs) -> None:
    x = im.need(node, 0)
    axis = int(a.get("axis", 1))
    rank = len(x.shape)
    if not -rank <= axis <= rank:
        raise OnnxImportError(f"axis {axis} is outside [-{rank}, {rank}]", node)
    target = _reshape_target(im.shape(node.output[0], node))
    if target is not None and im.plan is not None:  # a Reshape, which the C API quantises
        im.op(node, "RESHAPE", [im.view(x), np.asarray(target, np.int64)], node.output[0],
              None)
        return
    im.op(node, "FLATTEN", [im.view(x)], node.output[0], None, axis=axis + rank
          if axis < 0 else axis)


@_handles("Squeeze")
def _squeeze(im: _Importer, node: Any, a: _Attrs) -> None:
    x = im.need(node, 0)
    rank = len(x.shape)
    given = im.const(node, 1, "axes")
    if given is None:
        axes = [i for i, d in enumerate(x.shape) if d == 1]
        if any(d < 0 for d in x.shape):
            raise OnnxImportError("Squeeze without axes on a tensor with dynamic dimensions",
                                  node)
    else:
        axes = sorted({_axis(int(v), rank, node) for v in np.asarray(given).reshape(-1)})
    if not axes:
        im.alias(node.output[0], x)
        return
    perm = x.perm
    phys = [_physical_axis(ax, perm) for ax in axes]
    out_perm = None if perm is None else tuple(
        p - sum(ax < p for ax in axes) for p in perm if p not in axes)
    im.op(node, "SQUEEZE", [im.view(x, perm)], node.output[0], out_perm, axis=phys)


@_handles("Unsqueeze")
def _unsqueeze(im: _Importer, node: Any, a: _Attrs) -> None:
    x = im.need(node, 0)
    axes_v = im.need(node, 1) if len(node.input) > 1 else None
    if axes_v is not None and axes_v.const is None:
        # one axis fed at run time: OH_NN's ExpandDims reads it at each run (negative
        # counting from the end of the output, as ONNX's)
        if axes_v.shape != (1,):
            raise OnnxImportError(f"run-time axes of shape {list(axes_v.shape)} (one axis is "
                                  f"read at run time; several must be constants)", node)
        im.run_time_shape(node.output[0], (-1,) * (len(x.shape) + 1))
        im.op(node, "EXPAND_DIMS", [im.view(x), im.view(axes_v)], node.output[0], None)
        return
    given = im.const(node, 1, "axes")
    out_shape = im.shape(node.output[0], node)
    rank = len(out_shape)
    axes = sorted({_axis(int(v), rank, node) for v in np.asarray(given).reshape(-1)})
    target = _reshape_target(out_shape)
    if target is not None:
        im.op(node, "RESHAPE", [im.view(x), np.asarray(target, np.int64)], node.output[0],
              None)
        return
    source = im.view(x)
    shape = list(x.shape)
    for k, ax in enumerate(axes):
        shape.insert(ax, 1)
        if k == len(axes) - 1:
            im.op(node, "EXPAND_DIMS", [source, np.asarray([ax], np.int64)], node.output[0],
                  None)
        else:
            source = im.m.op("EXPAND_DIMS", source, np.asarray([ax], np.int64),
                             shape=tuple(shape), dtype=x.dtype)


@_handles("Concat")
def _concat(im: _Importer, node: Any, a: _Attrs) -> None:
    values = [im.need(node, k) for k in range(len(node.input))]
    # an empty constant adds nothing to a concatenation
    values = [v for v in values if v.const is None or v.const.size] or values[:1]
    out = node.output[0]
    rank = len(im.shape(out, node))
    axis = _axis(int(a.get("axis")), rank, node)
    perm = _common_perm(values, rank)
    operands = _operands_in(im, values, perm, rank)
    if len(operands) == 1:
        im.alias(out, values[0])
        return
    im.op(node, "CONCAT", operands, out, perm, axis=_physical_axis(axis, perm))


@_handles("Split")
def _split(im: _Importer, node: Any, a: _Attrs) -> None:
    x = im.need(node, 0)
    rank = len(x.shape)
    axis = _axis(int(a.get("axis", 0)), rank, node)
    outs = list(node.output)
    sizes = im.const(node, 1, "split")
    a.get("num_outputs")
    if sizes is not None:
        sizes = [int(s) for s in np.asarray(sizes).reshape(-1)]
    else:
        sizes = [im.shape(o, node)[axis] for o in outs]
        if any(s < 0 for s in sizes):
            sizes = []
    perm = x.perm
    shapes = [_permuted(im.shape(o, node), perm) for o in outs]
    results = im.m.op("SPLIT", im.view(x, perm), outputs=len(outs), shapes=shapes,
                      dtype=x.dtype, axis=_physical_axis(axis, perm), outputNum=len(outs),
                      sizeSplits=sizes or None,
                      names=[o if im.name_outputs and o in im.outputs and perm is None else ""
                             for o in outs])
    results = results if isinstance(results, tuple) else (results,)
    for o, r in zip(outs, results):
        if o:
            im.put(o, r, perm, node, x.dtype)


@_handles("Slice")
def _slice(im: _Importer, node: Any, a: _Attrs) -> None:
    x = im.need(node, 0)
    rank = len(x.shape)
    starts = [int(v) for v in np.asarray(im.const(node, 1, "starts")).reshape(-1)]
    ends = [int(v) for v in np.asarray(im.const(node, 2, "ends")).reshape(-1)]
    axes_c = im.const(node, 3, "axes")
    steps_c = im.const(node, 4, "steps")
    axes = list(range(len(starts))) if axes_c is None else \
        [_axis(int(v), rank, node) for v in np.asarray(axes_c).reshape(-1)]
    steps = [1] * len(starts) if steps_c is None else \
        [int(v) for v in np.asarray(steps_c).reshape(-1)]
    if 0 in steps:
        raise OnnxImportError("a step of 0", node)
    perm = x.perm
    begin, end, stride = [0] * rank, [0] * rank, [1] * rank
    begin_mask = end_mask = (1 << rank) - 1
    for s, e, ax, st in zip(starts, ends, axes, steps):
        j = _physical_axis(ax, perm)
        begin[j] = max(min(s, _INT64_MAX // 2), -_INT64_MAX // 2)
        end[j] = max(min(e, _INT64_MAX // 2), -_INT64_MAX // 2)
        stride[j] = st
        begin_mask &= ~(1 << j)
        end_mask &= ~(1 << j)
    im.op(node, "STRIDED_SLICE", [im.view(x, perm), np.asarray(begin, np.int64),
                                  np.asarray(end, np.int64), np.asarray(stride, np.int64)],
          node.output[0], perm, beginMask=begin_mask, endMask=end_mask, ellipsisMask=0,
          newAxisMask=0, shrinkAxisMask=0)


@_handles("Gather")
def _gather(im: _Importer, node: Any, a: _Attrs) -> None:
    x, idx = im.need(node, 0), im.need(node, 1)
    axis = _axis(int(a.get("axis", 0)), len(x.shape), node)
    if idx.dtype not in (np.dtype(np.int32), np.dtype(np.int64)):
        raise OnnxImportError(f"indices of type {idx.dtype}", node)
    if idx.const is not None:
        size = x.shape[axis]
        if size >= 0 and ((idx.const < -size) | (idx.const >= size)).any():
            raise OnnxImportError(f"an index outside [-{size}, {size})", node)
    if idx.const is not None and idx.const.ndim == 0:
        # A scalar index (Shape -> Gather(0) in PyTorch's exports): a rank-0 constant is a
        # [1] tensor in OH_NN, so Gather [k], then Squeeze the gathered axis.
        kept = tuple(1 if i == axis else d for i, d in enumerate(x.shape))
        gathered = im.m.op("GATHER", im.view(x), idx.const.reshape(1),
                           np.asarray([axis], np.int64), shape=kept, dtype=x.dtype)
        im.op(node, "SQUEEZE", [gathered], node.output[0], None, axis=[axis])
        return
    im.op(node, "GATHER", [im.view(x), im.view(idx), np.asarray([axis], np.int64)],
          node.output[0], None)


@_handles("Pad")
def _pad(im: _Importer, node: Any, a: _Attrs) -> None:
    x = im.need(node, 0)
    rank = len(x.shape)
    mode = a.get("mode", "constant")
    codes = {"constant": 0, "reflect": 1}
    if mode not in codes:
        raise OnnxImportError(f"mode {mode!r} (OH_NN pads constant or reflect; 'edge' has "
                              f"no OH_NN form)", node)
    pads = [int(v) for v in np.asarray(im.const(node, 1, "pads")).reshape(-1)]
    value = im.const(node, 2, "constant_value")
    axes_c = im.const(node, 3, "axes")
    axes = list(range(rank)) if axes_c is None else \
        [_axis(int(v), rank, node) for v in np.asarray(axes_c).reshape(-1)]
    if len(pads) != 2 * len(axes):
        raise OnnxImportError(f"pads {pads} need 2 x {len(axes)} entries", node)
    if min(pads, default=0) < 0:
        raise OnnxImportError(f"negative pads {pads} (cropping)", node)
    perm = x.perm
    amounts = [[0, 0] for _ in range(rank)]
    for k, ax in enumerate(axes):
        amounts[_physical_axis(ax, perm)] = [pads[k], pads[k + len(axes)]]
    fill = 0.0 if value is None or not np.asarray(value).size else \
        float(np.asarray(value).reshape(-1)[0])
    im.op(node, "PAD", [im.view(x, perm), np.asarray(amounts, np.int64)], node.output[0], perm,
          constantValue=fill, paddingMode=codes[mode])


@_handles("Expand")
def _expand(im: _Importer, node: Any, a: _Attrs) -> None:
    x = im.need(node, 0)
    shape_v = im.need(node, 1)
    if shape_v.const is None:
        raise OnnxImportError("shape (input 1) must be a constant: OH_NN's BroadcastTo takes "
                              "its shape as a parameter, not a tensor", node)
    target = shape_v.const
    out_shape = im.shape(node.output[0], node)
    if any(d < 0 for d in out_shape) and -1 not in x.shape:
        # inference lost the shape (a function body's): the broadcast itself tells it
        try:
            out_shape = tuple(np.broadcast_shapes(
                tuple(x.shape), tuple(int(d) for d in np.asarray(target).reshape(-1))))
        except ValueError:
            raise OnnxImportError(f"shape {np.asarray(target).tolist()} does not broadcast "
                                  f"with the input's {list(x.shape)}", node) from None
        im.shapes[node.output[0]] = out_shape
    if any(d < 0 for d in out_shape):
        raise OnnxImportError("Expand to a shape with dynamic dimensions", node)
    im.op(node, "BROADCAST_TO", [im.view(x)], node.output[0], None,
          OH_NN_BROADCAST_TO_SHAPE=list(out_shape))


@_handles("Tile")
def _tile(im: _Importer, node: Any, a: _Attrs) -> None:
    x = im.need(node, 0)
    reps = im.need(node, 1)
    if reps.const is not None:
        im.op(node, "TILE", [im.view(x), np.asarray(reps.const, np.int64).reshape(-1)],
              node.output[0], None)
        return
    # repeats fed at run time: OH_NN's Tile reads its multiples at each run
    if reps.shape != (len(x.shape),):
        raise OnnxImportError(f"repeats of shape {list(reps.shape)}, not [{len(x.shape)}]", node)
    im.run_time_shape(node.output[0], (-1,) * len(x.shape))
    im.op(node, "TILE", [im.view(x), im.view(reps)], node.output[0], None)
