"""Whole models across processes: prepared and run by a CPU driver, checked against numpy
computed independently here (explicit loops for the convolution and the pooling)."""

from __future__ import annotations

import numpy as np

from nnrt.common.hdi_model import HdiModelBuilder
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from nnrt.common.errors import NNRT_SUCCESS
from tests.helpers.hdi_models import conv_nhwc_reference, f32, mlp, run


def test_mlp_matches_numpy(client):
    builder, reference = mlp(batch=8, sizes=(20, 64, 5))
    x = f32(8, 20)
    (probs,) = run(client, builder, [x], [(8, 5)])
    np.testing.assert_allclose(probs, reference(x), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(probs.sum(axis=1), 1, rtol=1e-5)


def test_mlp_with_a_dynamic_batch(client):
    w = f32(3, 6)
    b = HdiModelBuilder("dyn")
    x = b.input("x", np.float32, [-1, 6])
    y = b.tensor("y", np.float32, [-1, 3])
    b.node(na.NODE_TYPE_FULL_CONNECTION, [x, b.constant("w", w)], [y], na.FullConnection())
    b.mark_outputs(y)
    for batch in (1, 5):
        inputs = f32(batch, 6)
        (out,) = run(client, b, [inputs], [(batch, 3)])
        expected = np.array([[sum(float(inputs[n, k]) * float(w[o, k]) for k in range(6))
                              for o in range(3)] for n in range(batch)])
        np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


def test_small_cnn_matches_loops(client):
    # conv 3x3 (pad 1) + relu -> max pool 2x2 -> conv 3x3 stride 2 -> flatten -> FC -> softmax
    x_val = f32(2, 8, 8, 3)
    w1, b1 = f32(4, 3, 3, 3, scale=0.5), f32(4, scale=0.1)
    w2, b2 = f32(6, 3, 3, 4, scale=0.5), f32(6, scale=0.1)
    wf, bf = f32(5, 6), f32(5, scale=0.1)
    nhwc = ht.FORMAT_NHWC
    b = HdiModelBuilder("cnn")
    x = b.input("x", np.float32, [2, 8, 8, 3], fmt=nhwc)
    c1 = b.tensor("c1", np.float32, [2, 8, 8, 4], fmt=nhwc)
    p1 = b.tensor("p1", np.float32, [2, 4, 4, 4], fmt=nhwc)
    c2 = b.tensor("c2", np.float32, [2, 1, 1, 6], fmt=nhwc)
    flat = b.tensor("flat", np.float32, [2, 6])
    logits = b.tensor("logits", np.float32, [2, 5])
    probs = b.tensor("probs", np.float32, [2, 5])
    b.node(na.NODE_TYPE_CONV2D_FUSION,
           [x, b.constant("w1", w1, fmt=nhwc), b.constant("b1", b1)], [c1],
           na.Conv2DFusion(kernelSize=[3, 3], stride=[1, 1], dilation=[1, 1],
                           padMode=ht.PAD_MODE_PAD, padList=[1, 1, 1, 1], group=1, inChannel=3,
                           outChannel=4, activationType=ht.ACTIVATION_TYPE_RELU))
    b.node(na.NODE_TYPE_MAX_POOL_FUSION, [c1], [p1],
           na.MaxPoolFusion(kernelSize=[2, 2], strides=[2, 2], pad=[0, 0, 0, 0],
                            padMode=ht.PAD_MODE_VALID, format=nhwc))
    b.node(na.NODE_TYPE_CONV2D_FUSION,
           [p1, b.constant("w2", w2, fmt=nhwc), b.constant("b2", b2)], [c2],
           na.Conv2DFusion(kernelSize=[3, 3], stride=[2, 2], dilation=[1, 1],
                           padMode=ht.PAD_MODE_VALID, padList=[0, 0, 0, 0], group=1, inChannel=4,
                           outChannel=6))
    b.node(na.NODE_TYPE_RESHAPE, [c2, b.constant("shape", np.array([2, 6], np.int64))], [flat])
    b.node(na.NODE_TYPE_FULL_CONNECTION, [flat, b.constant("wf", wf), b.constant("bf", bf)],
           [logits], na.FullConnection(hasBias=True))
    b.node(na.NODE_TYPE_SOFTMAX, [logits], [probs], na.Softmax(axis=[1]))
    b.mark_outputs(probs)
    (out,) = run(client, b, [x_val], [(2, 5)])

    r1 = np.maximum(conv_nhwc_reference(x_val, w1, b1, 1, [1, 1, 1, 1]), 0)
    pooled = np.array([[[[max(r1[n, 2 * i + a, 2 * j + bb, c] for a in (0, 1) for bb in (0, 1))
                          for c in range(4)] for j in range(4)] for i in range(4)] for n in range(2)])
    r2 = conv_nhwc_reference(pooled, w2, b2, 2, [0, 0, 0, 0]).reshape(2, 6)
    z = r2 @ wf.T.astype(np.float64) + bf
    expected = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-6)


def test_a_model_with_two_outputs_and_transpose_concat(client):
    a_val, c_val = f32(2, 3), f32(3, 2)
    b = HdiModelBuilder("multi")
    a = b.input("a", np.float32, [2, 3])
    c = b.input("c", np.float32, [3, 2])
    at = b.tensor("at", np.float32, [3, 2])
    cat = b.tensor("cat", np.float32, [3, 4])
    act = b.tensor("act", np.float32, [3, 4])
    b.node(na.NODE_TYPE_TRANSPOSE, [a, b.constant("perm", np.array([1, 0], np.int32))], [at])
    b.node(na.NODE_TYPE_CONCAT, [at, c], [cat], na.Concat(axis=-1))
    b.node(na.NODE_TYPE_ACTIVATION, [cat], [act],
           na.Activation(activationType=ht.ACTIVATION_TYPE_SIGMOID))
    b.mark_outputs(cat, act)
    cat_out, act_out = run(client, b, [a_val, c_val], [(3, 4), (3, 4)])
    expected = np.array([[a_val[j, i] for j in range(2)] + list(c_val[i]) for i in range(3)])
    np.testing.assert_allclose(cat_out, expected)
    np.testing.assert_allclose(act_out, 1 / (1 + np.exp(-expected.astype(np.float64))), rtol=1e-6)


def test_float16_mode_really_computes_in_float16(client):
    # 2048 + 1: float32 keeps 2049, float16 has no 2049 (spacing 2 there) and rounds to even.
    b = HdiModelBuilder("half")
    x = b.input("x", np.float32, [3])
    y = b.tensor("y", np.float32, [3])
    b.node(na.NODE_TYPE_ADD_FUSION, [x, b.constant("one", np.ones(3, np.float32))], [y])
    b.mark_outputs(y)
    values = np.array([2048, 0.1, 1e-8], np.float32)
    outputs = {}
    for enable in (False, True):
        model_id = b.prepare(client, ht.ModelConfig(enableFloat16=enable))
        _, xin = client.allocate_buffer(12)
        _, yout = client.allocate_buffer(12)
        xin.array(np.float32, [3])[:] = values
        io = lambda m: ht.IOTensor(dataType=ht.DATA_TYPE_FLOAT32, dimensions=[3],  # noqa: E731
                                   format=ht.FORMAT_NONE, data=m.descriptor())
        assert client.run(model_id, [io(xin)], [io(yout)]).returnCode == NNRT_SUCCESS
        outputs[enable] = yout.array(np.float32, [3]).copy()
        xin.close(), yout.close()
    np.testing.assert_array_equal(outputs[False], [2049, np.float32(1.1), 1])
    half = [float(np.float16(2048) + np.float16(1)), float(np.float16(np.float16(0.1) + 1)), 1.0]
    np.testing.assert_array_equal(outputs[True], np.array(half, np.float32))
    assert outputs[True][0] == 2048


def test_float16_mode_mlp_stays_close_to_float32(client):
    builder, reference = mlp(batch=4, sizes=(16, 32, 10))
    x = f32(4, 16)
    model_id = builder.prepare(client, ht.ModelConfig(enableFloat16=True))
    _, xin = client.allocate_buffer(x.nbytes)
    _, yout = client.allocate_buffer(4 * 10 * 4)
    xin.array(np.float32, x.shape)[:] = x
    io = lambda m, s: ht.IOTensor(dataType=ht.DATA_TYPE_FLOAT32, dimensions=s,  # noqa: E731
                                  format=ht.FORMAT_NONE, data=m.descriptor())
    assert client.run(model_id, [io(xin, [4, 16])], [io(yout, [4, 10])]).returnCode == 0
    got = yout.array(np.float32, [4, 10])
    np.testing.assert_allclose(got, reference(x), atol=2e-3)
    assert not np.array_equal(got, reference(x).astype(np.float32))
    xin.close(), yout.close()
