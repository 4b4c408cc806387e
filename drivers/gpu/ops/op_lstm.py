"""LSTM on the GPU (reference: nnrt.hdi.reference.ops.op_lstm), float32: every variant the
reference computes with constant weights — uni- and bidirectional, numLayers >= 1, hasBias
on/off, zoneout (inference form), h0 / c0 given at run time or constant.

At prepare the constant weights go to the device once, in the kernels' layout (the
reference's own prepared arrays, `ref.weights`): W_ih transposed with both directions side
by side, [layers, inputSize, dirs*4H]; the summed biases [layers, dirs*4H]; W_hh transposed,
[layers*dirs, H, 4H].

Per layer (cl/lstm.cl): one tiled GEMM (`lstm_project`, 16x64 tiles through local memory)
computes the input projection of every time step and both directions plus the bias,
[seq*batch, dirs*4H]; then one `lstm_step` launch per time step, both directions in it
(the backward one at time seq-1-s), does the recurrent [batch, H] x [H, 4H] product tiled
through local memory, the gates (i, f, g, o: sigmoid as the reference's (1 + tanh(x/2)) / 2,
tanh), c and h (with zoneout), writing h into the layer's output at its time step (the next
step reads h_{t-1} from there), c in place in cN and, at the last step, h into hN. The
first step of each layer reads that layer's h0 / c0. Deeper layers read the previous
layer's output from a scratch buffer. An empty sequence copies h0 / c0 to hN / cN.

Refused: any dtype but float32 and float16 (half storage, cl/common.cl), and weights or
bias that are not constants (the kernels' layout is made once at prepare).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..kernel import (
    WORK_GROUP,
    Builder,
    DeviceTensor,
    Epilogue,
    GpuOp,
    Launch,
    Preparer,
    register,
    require_dtypes,
)
from nnrt.hdi.reference.kernel import Kernel, unsupported
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import NodeSpec

PROJECT_LOCAL = (16, 16)  # lstm_project's work-group: 16 rows x 64 columns per tile
PROJECT_ROWS, PROJECT_COLS = 16, 64
STEP_LOCAL = (16, 8, 1)  # lstm_step's work-group: 16 hidden units x 8 batch rows


@register(na.NODE_TYPE_LSTM)
class Lstm(GpuOp):
    own_constants = frozenset({1, 2, 3})

    def __init__(self, node: NodeSpec, ref: Kernel) -> None:
        super().__init__(node, ref)
        require_dtypes(node)
        if ref.weights is None:
            raise unsupported(node, "LSTM weights and bias must be constants on the GPU")
        self.dirs, self.layers, self.hidden = ref.dirs, ref.layers, ref.hidden
        self.input_size = ref.input_size
        zc, zh = ref.zoneout
        # as the reference: z * prev + (1 - z) * new in float32, (1 - z) rounded once
        self.zoneout = [np.float32(zc), np.float32(1.0 - zc), np.float32(zh),
                        np.float32(1.0 - zh)]
        self.w_ih = self.w_hh = self.bias = None

    def load(self, prep: Preparer) -> None:
        w_ih, w_hh, bias = self.ref.weights  # [k, in, 4H], [k, H, 4H], [k, 4H]
        layers, dirs, gates = self.layers, self.dirs, 4 * self.hidden
        w_cat = w_ih.astype(self.storage).reshape(layers, dirs, self.input_size, gates)
        w_cat = np.ascontiguousarray(w_cat.transpose(0, 2, 1, 3)).reshape(
            layers, self.input_size, dirs * gates)
        self.w_ih = prep.upload(w_cat, "LSTM input weights")
        self.w_hh = prep.upload(np.ascontiguousarray(w_hh, dtype=self.storage),
                                "LSTM recurrent weights")
        self.bias = prep.upload(np.ascontiguousarray(bias, dtype=self.storage).reshape(
            layers, dirs * gates), "LSTM bias")

    def build(self, b: Builder, inputs: Sequence[DeviceTensor | None],
              outputs: Sequence[DeviceTensor], post: Epilogue) -> list[Launch]:
        x, h0, c0 = inputs[0], inputs[4], inputs[5]
        y, hn, cn = outputs
        seq, batch = int(x.shape[0]), int(x.shape[1])
        program = b.program("lstm")
        if batch == 0:
            return []
        if seq == 0:
            return [b.launch(program, "lstm_copy", [src.buffer, dst.buffer, np.int32(dst.size)],
                             [dst.size], [WORK_GROUP]) for src, dst in ((h0, hn), (c0, cn))]
        hidden, dirs = self.hidden, self.dirs
        rows, cols = seq * batch, dirs * 4 * hidden
        pre = b.scratch(rows * cols * 4, "LSTM input projection")
        between = [b.scratch(seq * batch * dirs * hidden * self.storage.itemsize,
                             f"LSTM layer output {k}")
                   for k in range(min(self.layers - 1, 2))]
        state = dirs * batch * hidden  # elements of one layer's h0 / c0 / hN / cN
        launches = []
        layer_in, width = x.buffer, self.input_size
        for layer in range(self.layers):
            layer_out = y.buffer if layer == self.layers - 1 else between[layer % 2]
            launches.append(b.launch(
                program, "lstm_project",
                [layer_in, self.w_ih, np.int32(layer * width * cols), self.bias,
                 np.int32(layer * cols), pre, np.int32(rows), np.int32(cols), np.int32(width)],
                [-(-cols // PROJECT_COLS) * PROJECT_LOCAL[0],
                 -(-rows // PROJECT_ROWS) * PROJECT_LOCAL[1]], PROJECT_LOCAL,
                label=f"lstm_project layer {layer}"))
            for s in range(seq):
                first, last = s == 0, s == seq - 1
                launches.append(b.launch(
                    program, "lstm_step",
                    [pre, self.w_hh, np.int32(layer * dirs * hidden * 4 * hidden), h0.buffer,
                     (c0 if first else cn).buffer, cn.buffer, np.int32(layer * state),
                     layer_out, hn.buffer, np.int32(seq), np.int32(batch), np.int32(hidden),
                     np.int32(s), np.int32(first), np.int32(last), *self.zoneout],
                    [hidden, batch, dirs], STEP_LOCAL, label=f"lstm_step layer {layer}"))
            layer_in, width = layer_out, dirs * hidden
        return launches
