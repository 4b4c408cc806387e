"""int8 quantized execution (QUANT_TYPE_ALL) against the float computation of the same
network: a CNN with per-channel int8 weights must agree within one output quantization step."""

from __future__ import annotations

import numpy as np

from nnrt.common.hdi_model import HdiModelBuilder
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from tests.helpers.hdi_models import NHWC, conv_nhwc_reference, run_int8

ALL = ht.QUANT_TYPE_ALL


def quantize(r, scale, zero_point, dtype=np.int8):
    info = np.iinfo(dtype)
    return np.clip(np.rint(r / scale + zero_point), info.min, info.max).astype(dtype)


def per_channel(w):
    """Symmetric int8 per-output-channel quantization of a weight [outC, ...]."""
    scales = np.abs(w.reshape(len(w), -1)).max(axis=1) / 127
    q = np.stack([quantize(w[c], scales[c], 0) for c in range(len(w))])
    return q, scales


def run_quantized(client, b, x_q, shape):
    (out,) = run_int8(client, b, x_q, shape)
    return out


def test_quantized_cnn_agrees_with_float_within_one_step(client):
    rng = np.random.default_rng(5)
    x = rng.uniform(-1, 1, (2, 6, 6, 3)).astype(np.float32)
    w1 = rng.uniform(-0.5, 0.5, (4, 3, 3, 3)).astype(np.float32)
    b1 = rng.uniform(-0.1, 0.1, 4).astype(np.float32)
    wf = rng.uniform(-0.5, 0.5, (5, 36)).astype(np.float32)
    bf = rng.uniform(-0.1, 0.1, 5).astype(np.float32)

    sx = 1 / 127
    x_q = quantize(x, sx, 0)
    w1_q, w1_s = per_channel(w1)
    wf_q, wf_s = per_channel(wf)
    # Calibrate the activation ranges on the float network of the real values (below).
    xr = x_q.astype(np.float64) * sx
    w1r = w1_q * w1_s[:, None, None, None]
    wfr = wf_q * wf_s[:, None]
    conv = np.maximum(conv_nhwc_reference(xr, w1r, b1, 1, [1, 1, 1, 1]), 0)
    s1 = sp = conv.max() / 255  # ReLU output: [0, max] onto [-128, 127]
    y_float = conv.reshape(2, 3, 2, 3, 2, 4).max(axis=(2, 4)).reshape(2, 36) @ wfr.T + bf
    so = np.abs(y_float).max() / 127  # the full int8 range: one step is the error budget
    b1_q = np.rint(b1 / (sx * w1_s)).astype(np.int32)
    bf_q = np.rint(bf / (sp * wf_s)).astype(np.int32)

    b = HdiModelBuilder("qcnn")
    xi = b.tensor("x", np.int8, [2, 6, 6, 3], fmt=NHWC, quant=[(8, 0, sx)])
    b.inputs.append(xi)
    c1 = b.tensor("c1", np.int8, [2, 6, 6, 4], fmt=NHWC, quant=[(8, -128, s1)])
    p1 = b.tensor("p1", np.int8, [2, 3, 3, 4], fmt=NHWC, quant=[(8, -128, sp)])
    flat = b.tensor("flat", np.int8, [2, 36], quant=[(8, -128, sp)])
    y = b.tensor("y", np.int8, [2, 5], quant=[(8, 0, so)])
    w1i = b.tensor("w1", np.int8, w1_q.shape, data=w1_q, fmt=NHWC,
                   quant=[(8, 0, float(s)) for s in w1_s])
    wfi = b.tensor("wf", np.int8, wf_q.shape, data=wf_q, quant=[(8, 0, float(s)) for s in wf_s])
    b.node(na.NODE_TYPE_CONV2D_FUSION, [xi, w1i, b.constant("b1", b1_q)], [c1],
           na.Conv2DFusion(kernelSize=[3, 3], stride=[1, 1], dilation=[1, 1],
                           padMode=ht.PAD_MODE_SAME, group=1, inChannel=3, outChannel=4,
                           activationType=ht.ACTIVATION_TYPE_RELU), quant_type=ALL)
    b.node(na.NODE_TYPE_MAX_POOL_FUSION, [c1], [p1],
           na.MaxPoolFusion(kernelSize=[2, 2], strides=[2, 2], padMode=ht.PAD_MODE_VALID,
                            format=NHWC), quant_type=ALL)
    b.node(na.NODE_TYPE_RESHAPE, [p1, b.constant("shape", np.array([2, 36], np.int64))], [flat])
    b.node(na.NODE_TYPE_FULL_CONNECTION, [flat, wfi, b.constant("bf", bf_q)], [y],
           na.FullConnection(hasBias=True), quant_type=ALL)
    b.mark_outputs(y)
    out_q = run_quantized(client, b, x_q, (2, 5))

    # The float network on the real values the int8 tensors (and int32 biases) stand for.
    conv = np.maximum(conv_nhwc_reference(xr, w1r, b1_q * sx * w1_s, 1, [1, 1, 1, 1]), 0)
    pooled = conv.reshape(2, 3, 2, 3, 2, 4).max(axis=(2, 4))
    expected = pooled.reshape(2, 36) @ wfr.T + bf_q * sp * wf_s
    got = out_q.astype(np.float64) * so
    assert np.max(np.abs(got - expected)) <= so + 1e-9
    assert len(np.unique(out_q)) > 3  # not saturated into a constant


def test_quantized_add_rounds_half_to_even_and_saturates(client):
    b = HdiModelBuilder("qadd")
    xi = b.tensor("x", np.int8, [6], quant=[(8, 0, 1.0)])
    b.inputs.append(xi)
    y = b.tensor("y", np.int8, [6], quant=[(8, 0, 2.0)])
    b.node(na.NODE_TYPE_ADD_FUSION, [xi, b.tensor("k", np.int8, [6], data=np.zeros(6, np.int8),
                                                  quant=[(8, 0, 1.0)])], [y],
           na.AddFusion(), quant_type=ALL)
    b.mark_outputs(y)
    x_q = np.array([1, 3, 5, -1, 127, -128], np.int8)
    model_id = b.prepare(client)
    _, xin = client.allocate_buffer(6)
    _, yout = client.allocate_buffer(6)
    xin.array(np.int8, [6])[:] = x_q
    io = lambda m: ht.IOTensor(dataType=ht.DATA_TYPE_INT8, dimensions=[6],  # noqa: E731
                               format=ht.FORMAT_NONE, data=m.descriptor())
    assert client.run(model_id, [io(xin)], [io(yout)]).returnCode == 0
    # x / 2: 0.5→0, 1.5→2, 2.5→2, -0.5→-0, 63.5→64, -64→-64 (ties to even)
    assert yout.array(np.int8, [6]).tolist() == [0, 2, 2, 0, 64, -64]
