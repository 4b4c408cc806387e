"""LSTM as one OH_NN LSTM layer (the gate blocks reordered, reverse as forward over
the sequence reversed in time)."""

from __future__ import annotations

from typing import Any

import numpy as np

from nnrt.client.api.operand import Operand

from ..importer import _handles, _Importer
from ..loading import OnnxImportError
from ..values import _Attrs


_LSTM_ACTIVATIONS = ["sigmoid", "tanh", "tanh"]


def _lstm_gates(a: np.ndarray, axis: int) -> np.ndarray:
    """ONNX's gate blocks i, o, f, c along `axis` in OH_NN's order i, f, g (= c), o."""
    i, o, f, c = np.split(a, 4, axis=axis)
    return np.ascontiguousarray(np.concatenate([i, f, c, o], axis=axis))


def _reversed_in_time(im: _Importer, operand: Operand) -> Operand:
    """operand[::-1] along axis 0 (a StridedSlice of stride -1, begin/end masked)."""
    rank = len(operand.shape)
    mask = (1 << rank) - 1
    zeros = np.zeros(rank, np.int64)
    return im.m.op("STRIDED_SLICE", operand, zeros, zeros,
                   np.asarray([-1] + [1] * (rank - 1), np.int64), beginMask=mask,
                   endMask=mask, ellipsisMask=0, newAxisMask=0, shrinkAxisMask=0,
                   shape=operand.shape, dtype=operand.dtype)


@_handles("LSTM")
def _lstm(im: _Importer, node: Any, a: _Attrs) -> None:
    """One OH_NN LSTM layer (numLayers 1): forward, reverse (the sequence reversed around a
    forward layer) or bidirectional. Weights reordered from ONNX's gates i, o, f, c to
    OH_NN's i, f, g, o; Y [seq, batch, D*H] is reshaped to [seq, batch, D, H], which is
    ONNX's Y [seq, D, batch, H] in layout (0, 2, 1, 3) (layout=1: batch first)."""
    x, w, r = im.need(node, 0), im.need(node, 1), im.need(node, 2)
    b, lens, h0, c0, peep = (im.get(node, k) for k in range(3, 8))
    direction = a.get("direction", "forward")
    if direction not in ("forward", "reverse", "bidirectional"):
        raise OnnxImportError(f"direction {direction!r}", node)
    dirs = 2 if direction == "bidirectional" else 1
    activations = a.get("activations")
    if activations is not None:
        names = [v.decode() if isinstance(v, bytes) else str(v) for v in activations]
        if [n.lower() for n in names] != _LSTM_ACTIVATIONS * dirs:
            raise OnnxImportError(f"activations {names}: OH_NN's LSTM computes Sigmoid, Tanh, "
                                  f"Tanh only", node)
    for name in ("activation_alpha", "activation_beta"):
        if a.get(name):
            raise OnnxImportError(f"{name} (the default activations take no parameters)", node)
    if a.get("clip") is not None:
        raise OnnxImportError("clip: OH_NN's LSTM does not clip the gates", node)
    if int(a.get("input_forget", 0)):
        raise OnnxImportError("input_forget (coupled input and forget gates) is not an OH_NN "
                              "LSTM", node)
    layout = int(a.get("layout", 0))
    if layout not in (0, 1):
        raise OnnxImportError(f"layout {layout}", node)
    if len(x.shape) != 3:
        raise OnnxImportError(f"input of rank {len(x.shape)}, not 3", node)
    if x.dtype.kind != "f":
        raise OnnxImportError(f"input of type {x.dtype}", node)
    for v, what in ((w, "W"), (r, "R"), (b, "B")):
        if v is not None and v.const is None:
            raise OnnxImportError(f"{what} must be a constant (its gates are reordered at "
                                  f"import)", node)
    seq, batch = (x.shape[1], x.shape[0]) if layout else (x.shape[0], x.shape[1])
    if w.const.ndim != 3 or r.const.ndim != 3 or w.const.shape[0] != dirs:
        raise OnnxImportError(f"W {list(w.const.shape)} / R {list(r.const.shape)} are not "
                              f"[{dirs}, 4*hidden, ...]", node)
    hidden = r.const.shape[2]
    size = a.get("hidden_size")
    if size is not None and int(size) != hidden:
        raise OnnxImportError(f"hidden_size {size} disagrees with R's {hidden}", node)
    if w.const.shape[1] != 4 * hidden or r.const.shape[:2] != (dirs, 4 * hidden):
        raise OnnxImportError(f"W {list(w.const.shape)} / R {list(r.const.shape)} do not hold "
                              f"4 gates of {hidden}", node)
    if lens is not None:
        full = lens.const is not None and seq >= 0 and bool(np.all(lens.const == seq))
        if not full:
            raise OnnxImportError("sequence_lens shorter than the sequence (or not constant): "
                                  "OH_NN's LSTM runs every step", node)
    if peep is not None and (peep.const is None or np.any(peep.const != 0)):
        raise OnnxImportError("peepholes (P): OH_NN's LSTM has no peephole connections", node)
    dtype = x.dtype
    weight_ih = _lstm_gates(w.const.astype(dtype), 1)
    weight_hh = _lstm_gates(r.const.astype(dtype), 1)
    if b is not None:
        if b.const.shape != (dirs, 8 * hidden):
            raise OnnxImportError(f"B {list(b.const.shape)} is not [{dirs}, {8 * hidden}]", node)
        bias = np.concatenate([_lstm_gates(half, 1) for half in
                               np.split(b.const.astype(dtype), 2, axis=1)], axis=1)
    else:
        bias = np.zeros((dirs, 8 * hidden), dtype)
    states = []
    state_perm = (1, 0, 2) if layout else None
    for v, what in ((h0, "initial_h"), (c0, "initial_c")):
        if v is None:
            if batch < 0:
                raise OnnxImportError(f"{what} absent with a dynamic batch: give it, or fix "
                                      f"the batch with input_shapes=", node)
            states.append(im.m.constant(np.zeros((dirs, batch, hidden), dtype)))
        else:
            states.append(im.view(v, state_perm))
    x_op = im.view(x, (1, 0, 2) if layout else None)
    if direction == "reverse":
        x_op = _reversed_in_time(im, x_op)
    outs = [o if k < len(node.output) else "" for k, o in enumerate(list(node.output)[:3])]
    outs += [""] * (3 - len(outs))
    state_shape = (dirs, batch, hidden)
    y, h_n, c_n = im.m.op(
        "LSTM", x_op, weight_ih, weight_hh, bias, *states, outputs=3,
        shapes=[(seq, batch, dirs * hidden), state_shape, state_shape], dtype=dtype,
        names=["", *(o if im.names(o, state_perm) else "" for o in outs[1:])],
        bidirectional=dirs == 2, hasBias=b is not None, inputSize=int(w.const.shape[2]),
        hiddenSize=hidden, numLayers=1, numDirections=dirs)
    for o, result in ((outs[1], h_n), (outs[2], c_n)):
        if o:
            if im.names(o, state_perm):
                im.named[result.index] = o
            im.put(o, result, state_perm, node, dtype)
    if outs[0]:
        if direction == "reverse":
            y = _reversed_in_time(im, y)
        y_perm = (1, 0, 2, 3) if layout else (0, 2, 1, 3)
        # -1 for one dynamic dimension; with two, 0 copies them (OH_NN's Reshape, as ONNX's)
        target = [seq, batch, dirs, hidden]
        if seq < 0 and batch < 0:
            target[:2] = [0, 0]
        im.op(node, "RESHAPE", [y, np.asarray(target, np.int64)], outs[0], y_perm)
