"""Small int8 models (QUANT_TYPE_ALL, per-channel int8 weights, int32 biases) for comparing
drivers bit for bit: (builder, int8 input, output shape), inputs NHWC as
tests/drivers/cpu/test_quantized.run_int8 sends them."""

from __future__ import annotations

import numpy as np

from nnrt.common.hdi_model import HdiModelBuilder
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na

ALL = ht.QUANT_TYPE_ALL
NHWC = ht.FORMAT_NHWC


def _weights(rng, shape):
    w = rng.integers(-127, 128, shape).astype(np.int8)
    scales = rng.uniform(0.002, 0.01, shape[0])
    return w, [(8, 0, float(s)) for s in scales], scales


def int8_mlp(seed: int = 11) -> tuple[HdiModelBuilder, np.ndarray, tuple[int, ...]]:
    rng = np.random.default_rng(seed)
    sx, sh, so = 0.02, 0.05, 0.08
    b = HdiModelBuilder("int8-mlp")
    x = b.tensor("x", np.int8, [4, 32], fmt=NHWC, quant=[(8, 3, sx)])
    b.inputs.append(x)
    h = b.tensor("h", np.int8, [4, 48], quant=[(8, -128, sh)])
    y = b.tensor("y", np.int8, [4, 10], quant=[(8, 5, so)])
    w1, q1, s1 = _weights(rng, (48, 32))
    w2, q2, s2 = _weights(rng, (10, 48))
    b1 = rng.integers(-2000, 2000, 48).astype(np.int32)
    b2 = rng.integers(-2000, 2000, 10).astype(np.int32)
    b.node(na.NODE_TYPE_FULL_CONNECTION, [x, b.tensor("w1", np.int8, w1.shape, data=w1,
                                                      quant=q1), b.constant("b1", b1)], [h],
           na.FullConnection(hasBias=True, activationType=ht.ACTIVATION_TYPE_RELU),
           quant_type=ALL)
    b.node(na.NODE_TYPE_FULL_CONNECTION, [h, b.tensor("w2", np.int8, w2.shape, data=w2,
                                                      quant=q2), b.constant("b2", b2)], [y],
           na.FullConnection(hasBias=True), quant_type=ALL)
    b.mark_outputs(y)
    return b, rng.integers(-128, 128, (4, 32)).astype(np.int8), (4, 10)


def int8_cnn(seed: int = 12) -> tuple[HdiModelBuilder, np.ndarray, tuple[int, ...]]:
    rng = np.random.default_rng(seed)
    sx, sc, sd, so = 0.02, 0.04, 0.05, 0.1
    b = HdiModelBuilder("int8-cnn")
    x = b.tensor("x", np.int8, [2, 8, 8, 3], fmt=NHWC, quant=[(8, 0, sx)])
    b.inputs.append(x)
    c = b.tensor("c", np.int8, [2, 8, 8, 8], fmt=NHWC, quant=[(8, -128, sc)])
    d = b.tensor("d", np.int8, [2, 4, 4, 8], fmt=NHWC, quant=[(8, -128, sd)])
    p = b.tensor("p", np.int8, [2, 1, 1, 8], fmt=NHWC, quant=[(8, -128, sd)])
    flat = b.tensor("flat", np.int8, [2, 8], quant=[(8, -128, sd)])
    y = b.tensor("y", np.int8, [2, 5], quant=[(8, 0, so)])
    wc, qc, _ = _weights(rng, (8, 3, 3, 3))
    wd, qd, _ = _weights(rng, (8, 3, 3, 1))
    wf, qf, _ = _weights(rng, (5, 8))
    b.node(na.NODE_TYPE_CONV2D_FUSION,
           [x, b.tensor("wc", np.int8, wc.shape, data=wc, fmt=NHWC, quant=qc),
            b.constant("bc", rng.integers(-500, 500, 8).astype(np.int32))], [c],
           na.Conv2DFusion(kernelSize=[3, 3], stride=[1, 1], dilation=[1, 1],
                           padMode=ht.PAD_MODE_SAME, group=1, inChannel=3, outChannel=8,
                           activationType=ht.ACTIVATION_TYPE_RELU), quant_type=ALL)
    b.node(na.NODE_TYPE_CONV2D_FUSION,  # depthwise, stride 2
           [c, b.tensor("wd", np.int8, wd.shape, data=wd, fmt=NHWC, quant=qd),
            b.constant("bd", rng.integers(-500, 500, 8).astype(np.int32))], [d],
           na.Conv2DFusion(kernelSize=[3, 3], stride=[2, 2], dilation=[1, 1],
                           padMode=ht.PAD_MODE_SAME, group=8, inChannel=8, outChannel=8,
                           activationType=ht.ACTIVATION_TYPE_RELU6), quant_type=ALL)
    b.node(na.NODE_TYPE_AVGPOOL_FUSION, [d], [p],
           na.AvgPoolFusion(kernelSize=[4, 4], strides=[1, 1], padMode=ht.PAD_MODE_VALID,
                            format=NHWC), quant_type=ALL)
    b.node(na.NODE_TYPE_RESHAPE, [p, b.constant("shape", np.array([2, 8], np.int64))], [flat])
    b.node(na.NODE_TYPE_FULL_CONNECTION,
           [flat, b.tensor("wf", np.int8, wf.shape, data=wf, quant=qf),
            b.constant("bf", rng.integers(-500, 500, 5).astype(np.int32))], [y],
           na.FullConnection(hasBias=True), quant_type=ALL)
    b.mark_outputs(y)
    return b, rng.integers(-128, 128, (2, 8, 8, 3)).astype(np.int8), (2, 5)
