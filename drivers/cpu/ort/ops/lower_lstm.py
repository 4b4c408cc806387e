"""LSTM as one ONNX LSTM per layer (forward or bidirectional), gate blocks re-ordered.

Ours (op_lstm.py) keeps PyTorch's layout: weightIh [D*L, 4H, in], weightHh [D*L, 4H, H],
bias [D*L, 8H] = [b_ih | b_hh], gate blocks i, f, g, o, entry k = layer * D + direction.
ONNX's LSTM takes W [D, 4H, in], R [D, 4H, H], B [D, 8H] = [Wb | Rb] with blocks i, o, f, c:
the constant weights are permuted once here (block q of ONNX's takes our block
[0, 3, 1, 2][q]). Layer l reads layer l-1's [seq, batch, D*H] output; ONNX's Y
[seq, D, batch, H] is transposed and reshaped to it; hN and cN are the layers' Y_h / Y_c
concatenated.

Lowered: float32, constant finite weights and bias, no zoneout (ONNX has none), a static
hidden size (always). Stay on numpy: float64 / float16, run-time weights (their NaN and
infinities would reach every step), non-finite constant weights, zoneout, a static
sequence length or batch of 0.

Where onnxruntime's LSTM is not ours, the lowering compensates:

* NaN: onnxruntime's activations clamp their argument, so a NaN gate becomes a number and
  the run goes on; ours propagates it (a NaN gate of unit u at step t makes h[t, u] NaN —
  and c[t, u] for gates i, f, g — and every unit of that batch row NaN from the next step
  on). The lowering computes the NaN-ness of the gate pre-activations that can be NaN (the
  input part x·W_ihᵀ + b at every step, plus h0·W_hhᵀ at the first step, and c0's NaNs at
  the first step — later recurrent parts are finite while no NaN came before), follows it
  along the sequence (an exclusive CumSum) and writes NaN where ours has it. That
  bookkeeping (about 25 operators a direction) runs only when the inputs could make a NaN:
  an If on x and h0 finite and small enough that no pre-activation can overflow, and c0
  without NaN, takes the plain LSTM otherwise (`_nothing_can_be_nan`; the benchmark's
  LSTM 0.38 -> 0.26 ms).
* A run-time sequence length of 0: onnxruntime leaves Y_h / Y_c unset; ours returns h0 and
  c0. A run-time batch of 0 aborts onnxruntime's process: a DYNAMIC batch is padded with
  one zero row, cut off afterwards.

Left as a documented difference: an infinite c0 with a forget gate that ours rounds to
exactly 0 (pre-activation below about -18: ours gives NaN, onnxruntime infinity), and
pre-activations that overflow float32 (|x| near 1e38).
"""

from __future__ import annotations

import numpy as np

from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import DYNAMIC
from nnrt.hdi.reference.kernel import Kernel
from ..lowering import F32, NodeEmitter, NotLowerable, lowers

PERM = (0, 3, 1, 2)  # ONNX block q (i, o, f, c) takes our block PERM[q] (i, f, g, o)
INT64_MAX = np.iinfo(np.int64).max


def _blocks(a: np.ndarray, perm: tuple[int, ...], axis: int) -> np.ndarray:
    parts = np.split(a, len(perm), axis=axis)
    return np.concatenate([parts[p] for p in perm], axis=axis)


@lowers(na.NODE_TYPE_LSTM)
def lstm(k: Kernel, e: NodeEmitter) -> None:
    e.require_float32()
    if k.zoneout != (0.0, 0.0):
        raise NotLowerable("zoneout (ONNX's LSTM has none)")
    specs = [e.spec(i) for i in (1, 2, 3)]
    if not all(s.is_constant for s in specs):
        raise NotLowerable("run-time weights or bias")
    w_ih, w_hh, bias = (np.asarray(s.constant, np.float32) for s in specs)
    if not k.has_bias:
        bias = np.zeros_like(bias)
    if not all(np.isfinite(a).all() for a in (w_ih, w_hh, bias)):
        raise NotLowerable("non-finite weights or bias")
    seq, batch = e.spec(0).shape[:2]
    if 0 in (seq, batch):
        raise NotLowerable("an empty sequence or batch")
    hid, dirs = k.hidden, k.dirs
    pad_batch = batch == DYNAMIC

    x = e.input(0)
    h0_all, c0_all = e.input(4), e.input(5)
    if pad_batch:  # onnxruntime's LSTM aborts the process on a batch of 0
        zero = e.const(0.0, F32, "zero")
        x = e.op("Pad", [x, e.int64s([0, 0, 0, 0, 1, 0], "pads"), zero])
        pads = e.int64s([0, 0, 0, 0, 1, 0], "pads")
        h0_all = e.op("Pad", [h0_all, pads, zero])
        c0_all = e.op("Pad", [c0_all, pads, zero])

    # the step selectors: [seq, 1, 1] float 0 / 1 at the first and last step of a direction
    if seq == DYNAMIC:
        n = e.op("Squeeze", [e.op("Shape", [x], start=0, end=1)])
        steps = e.op("Range", [e.const(0, np.int64, "zero"), n, e.const(1, np.int64, "one")])
        steps = e.op("Unsqueeze", [steps, e.int64s([1, 2], "axes")])
        last = e.op("Sub", [n, e.const(1, np.int64, "one")])
        at_start = e.op("Equal", [steps, e.const(0, np.int64, "zero")])
        at_end = e.op("Equal", [steps, last])
        empty = e.op("Equal", [n, e.const(0, np.int64, "zero")])
    else:
        t = np.arange(seq).reshape(seq, 1, 1)
        at_start = e.const(t == 0, np.bool_, "start")
        at_end = e.const(t == seq - 1, np.bool_, "end")
        empty = None
    zero_f = e.const(0.0, F32, "zero")
    one_f = e.const(1.0, F32, "one")
    nan = e.const(np.nan, F32, "nan")

    def as_float(b: str) -> str:
        return e.op("Cast", [b], to=1)

    def nan_masks(layer: int, layer_in: str, h0: str, c0: str) -> tuple[str, str, str]:
        """Where ours is NaN in a layer's Y [seq, D, batch, H], h_n and c_n (0 / 1)."""
        m_h, last_h, last_c = [], [], []
        for d in range(dirs):
            kk = layer * dirs + d
            first, final = (at_start, at_end) if d == 0 else (at_end, at_start)
            pre = e.op("Add", [e.op("MatMul", [layer_in, e.const(w_ih[kk].T, F32, "WT")]),
                               e.const(bias[kk, :4 * hid] + bias[kk, 4 * hid:], F32, "b")])
            dsel = [e.int64s([d], "starts"), e.int64s([d + 1], "ends"), e.int64s([0], "axes")]
            h0_d = e.op("Squeeze", [e.op("Slice", [h0, *dsel]), e.int64s([0], "axes")])
            c0_d = e.op("Squeeze", [e.op("Slice", [c0, *dsel]), e.int64s([0], "axes")])
            rec = e.op("MatMul", [h0_d, e.const(w_hh[kk].T, F32, "RT")])  # [batch, 4H]
            pre = e.op("Add", [pre, e.op("Where", [first, rec, zero_f])])
            gates = as_float(e.op("IsNaN", [pre]))
            gates = e.op("Reshape", [gates, e.int64s([0, 0, 4, hid], "shape")])
            on_c = e.op("ReduceMax", [e.op("Slice", [gates, e.int64s([0], "starts"),
                                                     e.int64s([3], "ends"),
                                                     e.int64s([2], "axes")]),
                                      e.int64s([2], "axes")], keepdims=0)
            c0_nan = e.op("Where", [first, as_float(e.op("IsNaN", [c0_d])), zero_f])
            on_c = e.op("Max", [on_c, c0_nan])
            on_h = e.op("Max", [e.op("ReduceMax", [gates, e.int64s([2], "axes")], keepdims=0),
                                on_c])
            any_h = e.op("ReduceMax", [on_h, e.int64s([2], "axes")], keepdims=1)
            before = e.op("CumSum", [any_h, e.const(0, np.int64, "axis")], exclusive=1,
                          reverse=int(d == 1))
            mask_h = e.op("Min", [e.op("Add", [on_h, before]), one_f])  # 0 / 1
            mask_c = e.op("Min", [e.op("Add", [on_c, before]), one_f])
            m_h.append(mask_h)
            take = e.op("Where", [final, one_f, zero_f])
            for m, out in ((mask_h, last_h), (mask_c, last_c)):
                out.append(e.op("ReduceSum", [e.op("Mul", [m, take]), e.int64s([0], "axes")],
                                keepdims=1))  # [1, batch, H]; 0 when the sequence is empty
        if dirs == 1:
            return e.op("Unsqueeze", [m_h[0], e.int64s([1], "axes")]), last_h[0], last_c[0]
        return (e.op("Concat", [e.op("Unsqueeze", [m, e.int64s([1], "axes")]) for m in m_h],
                     axis=1),
                e.op("Concat", last_h, axis=0), e.op("Concat", last_c, axis=0))

    def nan_where(mask: str, value: str) -> str:
        return e.op("Where", [e.op("Cast", [mask], to=9), nan, value])

    def layers(masked: bool) -> tuple[str, str, str]:
        """The layers' Y, h_n and c_n; `masked`: with ours' NaNs written in."""
        hs, cs = [], []
        layer_in = x
        for layer in range(k.layers):
            rows = slice(layer * dirs, (layer + 1) * dirs)
            w = e.const(_blocks(w_ih[rows], PERM, 1), F32, "W")
            r = e.const(_blocks(w_hh[rows], PERM, 1), F32, "R")
            b = e.const(_blocks(bias[rows], PERM + tuple(p + 4 for p in PERM), 1), F32, "B")
            sl = [e.int64s([rows.start], "starts"), e.int64s([rows.stop], "ends"),
                  e.int64s([0], "axes")]
            h0 = e.op("Slice", [h0_all, *sl])
            c0 = e.op("Slice", [c0_all, *sl])
            y, y_h, y_c = e.op("LSTM", [layer_in, w, r, b, "", h0, c0], n_out=3,
                               hidden_size=hid,
                               direction="bidirectional" if dirs == 2 else "forward")
            if masked:
                mask_y, mask_hn, mask_cn = nan_masks(layer, layer_in, h0, c0)
                y = nan_where(mask_y, y)  # [seq, D, batch, H]
                y_h, y_c = nan_where(mask_hn, y_h), nan_where(mask_cn, y_c)
            if empty is not None:
                y_h = e.op("Where", [empty, h0, y_h])
                y_c = e.op("Where", [empty, c0, y_c])
            hs.append(y_h)
            cs.append(y_c)
            if dirs == 1:
                layer_in = e.op("Squeeze", [y, e.int64s([1], "axes")])
            else:
                layer_in = e.op("Reshape", [e.op("Transpose", [y], perm=[0, 2, 1, 3]),
                                            e.int64s([0, 0, dirs * hid], "shape")])
        h_n = hs[0] if len(hs) == 1 else e.op("Concat", hs, axis=0)
        c_n = cs[0] if len(cs) == 1 else e.op("Concat", cs, axis=0)
        return layer_in, h_n, c_n

    guard = _nothing_can_be_nan(e, k, w_ih, w_hh, bias, x, h0_all, c0_all)
    if guard is None:
        layer_in, h_n, c_n = layers(masked=True)
    else:  # the bookkeeping only when the inputs could make a NaN
        layer_in, h_n, c_n = e.op("If", [guard], n_out=3,
                                  then_branch=e.subgraph(lambda: layers(False), "plain"),
                                  else_branch=e.subgraph(lambda: layers(True), "masked"))
    if pad_batch:
        cut = [e.int64s([0], "starts"), e.int64s([-1], "ends"), e.int64s([1], "axes")]
        e.op("Slice", [layer_in, *cut], out=e.output(0))
        e.op("Slice", [h_n, *cut], out=e.output(1))
        e.op("Slice", [c_n, *cut], out=e.output(2))
        return
    e.op("Identity", [layer_in], out=e.output(0))
    e.op("Identity", [h_n], out=e.output(1))
    e.op("Identity", [c_n], out=e.output(2))


# Inputs this far below float32's largest value keep every gate pre-activation finite.
_HEADROOM = 1e30


def _nothing_can_be_nan(e: NodeEmitter, k: Kernel, w_ih: np.ndarray, w_hh: np.ndarray,
                        bias: np.ndarray, x: str, h0: str, c0: str) -> str | None:
    """A bool scalar: no NaN can arise in ours for this run, so the NaN bookkeeping would
    change nothing — x and h0 finite and small enough that no pre-activation overflows
    (|x·Wᵀ + h·Rᵀ + b| <= |x|·max row sum |W| + |h|·max row sum |R| + |b|, and |h| <= 1
    after the first step), c0 without NaN. None when the weights allow no such bound
    (a later layer whose pre-activations could overflow from inputs of at most 1)."""
    row_w = np.abs(w_ih.astype(np.float64)).sum(axis=2).max(axis=1)  # per layer*direction
    row_r = np.abs(w_hh.astype(np.float64)).sum(axis=2).max(axis=1)
    row_b = np.abs(bias.astype(np.float64)).max(axis=1)
    dirs = k.dirs
    first = slice(0, dirs)
    if np.any(row_w[dirs:] + row_r[dirs:] + row_b[dirs:] > _HEADROOM) or \
            np.any(row_r + row_b > _HEADROOM):
        return None
    x_bound = _HEADROOM / (float(row_w[first].max()) + 1.0)
    h_bound = _HEADROOM / (float(row_r.max()) + 1.0)
    one = e.const([1.0], F32, "one")
    checks = [one]  # never empty: a sequence or batch of 0 reads as nothing to fear
    for value, bound in ((x, x_bound), (h0, h_bound)):
        small = e.op("LessOrEqual", [e.op("Abs", [value]), e.const(bound, F32, "bound")])
        checks.append(e.op("Reshape", [e.op("Cast", [small], to=1), e.int64s([-1], "flat")]))
    number = e.op("Not", [e.op("IsNaN", [c0])])
    checks.append(e.op("Reshape", [e.op("Cast", [number], to=1), e.int64s([-1], "flat")]))
    lowest = e.op("ReduceMin", [e.op("Concat", checks, axis=0)], keepdims=0)
    return e.op("Equal", [lowest, e.const(1.0, F32, "one")])
