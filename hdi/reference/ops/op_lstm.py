"""LSTM: a stack of numLayers (uni- or bidirectional) LSTM layers over a sequence.

Inputs (hdi_ops.json): x [seqLen, batch, inputSize]; weightIh [D*L, 4H, inputSize];
weightHh [D*L, 4H, H]; bias [D*L, 8H]; h0 [D*L, batch, H]; c0 [D*L, batch, H], with D = 2
when bidirectional else 1, L = numLayers, H = hiddenSize. Entry k = layer * D + direction
(direction 0 forward, 1 backward; PyTorch's order). Outputs: y [seqLen, batch, D*H] (the last
layer's hidden states, forward then backward), hN and cN [D*L, batch, H].

Per step (semantics.md: gate order i, f, g, o in every 4H block; bias [b_ih | b_hh]):
  gates = x_t · W_ihᵀ + b_ih + h · W_hhᵀ + b_hh
  i, f, o = sigmoid(...), g = tanh(...); c' = f * c + i * g; h' = o * tanh(c')
The backward direction walks the sequence from the end; its outputs are stored at their own
time steps. Layer l > 0 takes the previous layer's [seqLen, batch, D*H] output.

Decisions where the spec is silent:

* numLayers 0 (unset) means 1; numDirections 0 (unset) follows `bidirectional`, otherwise it
  must agree with it. inputSize / hiddenSize 0 (unset) are taken from the weights,
  otherwise they must match.
* The weight layout holds one input width for every layer, so numLayers > 1 needs
  inputSize == D * H (the width of a deeper layer's input); otherwise the node is invalid.
* hasBias false: the bias input (still one of the 6) is not used (zeros), as upstream.
* dropout is a training-time operation: ignored at inference (it must lie in [0, 1]).
* zoneoutCell / zoneoutHidden (in [0, 1]) are applied in their inference form, the
  expectation of the random mask: c = z_c * c_prev + (1 - z_c) * c', h = z_h * h_prev +
  (1 - z_h) * h' (MindSpore Lite's LSTM kernel); y_t is that h.
* projSize > 0 (a projection of the hidden state) needs a projection weight that the HDI
  input list does not carry: unsupported.
* Float dtypes, one for every input and output. float16 (semantics.md "Float16 mode"):
  the whole operator is computed in float32 — the GEMMs accumulate in float32 and the
  gates, the cell and hidden states stay float32 from step to step — and each output
  value (y, hN, cN) is rounded to float16 once, at the end. Weight
  and bias tensors must have static shapes; seqLen and batch may be DYNAMIC.

Each layer and direction does one GEMM over the whole sequence for the input part, then a
loop over the time steps (inherently sequential), each a [batch, H] x [H, 4H] GEMM.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from nnrt.hdi.reference.kernel import Kernel, invalid, register, unsupported
from nnrt.hdi.reference.ops._common import (
    FLOAT_DTYPES,
    bad_shape,
    cast,
    check_declared_shapes,
    common_dtype,
    compute_dtype,
    require_unquantised,
    same_dim,
)
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import DYNAMIC, NodeSpec, Shape

_NAMES = ("x", "weightIh", "weightHh", "bias", "h0", "c0")


def _sigmoid(x: np.ndarray) -> np.ndarray:
    """1 / (1 + e^-x) as (1 + tanh(x / 2)) / 2: no overflow anywhere."""
    return 0.5 * (1.0 + np.tanh(0.5 * x))


@register(na.NODE_TYPE_LSTM)
class LSTM(Kernel):
    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        self.expect_counts(6, 3)
        require_unquantised(node)
        self.dtype = common_dtype(node, node.inputs, FLOAT_DTYPES, "inputs")
        for out in node.outputs[1:]:
            if out.dtype != self.dtype:
                raise invalid(node, f"output dtype {out.dtype} differs from the inputs' "
                                    f"{self.dtype}")
        self.work = compute_dtype(self.dtype)
        attrs = node.attrs
        self.dirs = 2 if attrs.bidirectional else 1
        if attrs.numDirections not in (0, self.dirs):
            raise invalid(node, f"numDirections {attrs.numDirections} contradicts "
                                f"bidirectional={attrs.bidirectional}")
        self.layers = int(attrs.numLayers) or 1
        if self.layers < 1:
            raise invalid(node, f"numLayers {attrs.numLayers} is negative")
        if attrs.projSize < 0:
            raise invalid(node, f"projSize {attrs.projSize} is negative")
        if attrs.projSize > 0:
            raise unsupported(node, "projSize > 0: the projection weight is not an HDI input")
        for name in ("dropout", "zoneoutCell", "zoneoutHidden"):
            value = float(getattr(attrs, name))
            if not (math.isfinite(value) and 0.0 <= value <= 1.0):
                raise invalid(node, f"{name} {value} is not in [0, 1]")
        self.zoneout = (float(attrs.zoneoutCell), float(attrs.zoneoutHidden))
        self.has_bias = bool(attrs.hasBias)
        shapes = [t.shape for t in node.inputs]
        for name, shape, rank in zip(_NAMES, shapes, (3, 3, 3, 2, 3, 3)):
            if len(shape) != rank:
                raise invalid(node, f"{name} must be {rank}-D, has shape {list(shape)}")
        if any(DYNAMIC in s for s in shapes[1:4]):
            raise unsupported(node, "weights or bias of dynamic shape")
        k, gates, self.input_size = shapes[1]
        self.hidden = shapes[2][2]
        h = self.hidden
        if k != self.dirs * self.layers or gates != 4 * h or h < 1:
            raise invalid(node, f"weightIh shape {list(shapes[1])} is not "
                                f"[{self.dirs * self.layers}, 4*hidden, inputSize]")
        if shapes[2] != (k, 4 * h, h):
            raise invalid(node, f"weightHh shape {list(shapes[2])} is not [{k}, {4 * h}, {h}]")
        if shapes[3] != (k, 8 * h):
            raise invalid(node, f"bias shape {list(shapes[3])} is not [{k}, {8 * h}]")
        if attrs.hiddenSize and attrs.hiddenSize != h:
            raise invalid(node, f"hiddenSize {attrs.hiddenSize} does not match the weights' {h}")
        if attrs.inputSize and attrs.inputSize != self.input_size:
            raise invalid(node, f"inputSize {attrs.inputSize} does not match the weights' "
                                f"{self.input_size}")
        if self.layers > 1 and self.input_size != self.dirs * h:
            raise invalid(node, f"numLayers {self.layers} needs inputSize == "
                                f"{self.dirs}*hidden: deeper layers' weights share the layout")
        check_declared_shapes(self)
        self.weights = None
        if all(t.is_constant for t in node.inputs[1:4]):
            self.weights = self._prepare([t.constant for t in node.inputs[1:4]])

    def _prepare(self, tensors: Sequence[np.ndarray]) -> tuple[np.ndarray, ...]:
        """W_ihᵀ [k, in, 4H], W_hhᵀ [k, H, 4H], b_ih + b_hh [k, 4H] in the compute dtype."""
        w_ih, w_hh, bias = (t.astype(self.work, copy=False) for t in tensors)
        b = bias[:, :4 * self.hidden] + bias[:, 4 * self.hidden:] if self.has_bias else \
            np.zeros((w_ih.shape[0], 4 * self.hidden), self.work)
        return (np.ascontiguousarray(w_ih.transpose(0, 2, 1)),
                np.ascontiguousarray(w_hh.transpose(0, 2, 1)), b)

    def infer_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        node = self.node
        x, h0, c0 = (tuple(input_shapes[i]) for i in (0, 4, 5))
        if len(x) != 3:
            raise bad_shape(node, f"x must be 3-D, has shape {list(x)}")
        same_dim(node, x[2], self.input_size, "x feature size vs inputSize")
        batch = x[1]
        k = self.dirs * self.layers
        for name, state in (("h0", h0), ("c0", c0)):
            if len(state) != 3:
                raise bad_shape(node, f"{name} must be 3-D, has shape {list(state)}")
            same_dim(node, state[0], k, f"{name} first dimension vs directions*layers")
            same_dim(node, state[2], self.hidden, f"{name} last dimension vs hidden")
            batch = same_dim(node, batch, state[1], f"{name} batch vs x's batch")
        states = (k, batch, self.hidden)
        return [(x[0], batch, self.dirs * self.hidden), states, states]

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        self.infer_shapes([a.shape for a in inputs])
        w_ih, w_hh, bias = self.weights if self.weights is not None else \
            self._prepare(inputs[1:4])
        seq, batch = inputs[0].shape[:2]
        h_dim = self.hidden
        h_n = inputs[4].astype(self.work)  # fresh copies, filled layer by layer
        c_n = inputs[5].astype(self.work)
        zc, zh = self.zoneout
        layer_in = inputs[0].astype(self.work, copy=False)
        for layer in range(self.layers):
            y = np.empty((seq, batch, self.dirs * h_dim), self.work)
            for d in range(self.dirs):
                k = layer * self.dirs + d
                pre = layer_in @ w_ih[k]  # [seq, batch, 4H]: the input part, every step
                pre += bias[k]
                h, c = h_n[k], c_n[k]
                steps = range(seq) if d == 0 else range(seq - 1, -1, -1)
                for t in steps:  # sequential recurrence; [batch, 4H] vectorised per step
                    gates = pre[t] + h @ w_hh[k]
                    i = _sigmoid(gates[:, :h_dim])
                    f = _sigmoid(gates[:, h_dim:2 * h_dim])
                    g = np.tanh(gates[:, 2 * h_dim:3 * h_dim])
                    o = _sigmoid(gates[:, 3 * h_dim:])
                    c_new = f * c + i * g
                    h_new = o * np.tanh(c_new)
                    c = c_new if zc == 0 else zc * c + (1 - zc) * c_new
                    h = h_new if zh == 0 else zh * h + (1 - zh) * h_new
                    y[t, :, d * h_dim:(d + 1) * h_dim] = h
                h_n[k], c_n[k] = h, c
            layer_in = y
        return [cast(layer_in, self.dtype), cast(h_n, self.dtype), cast(c_n, self.dtype)]
