"""Example models built with the Pythonic API, in five families that real workloads are made
of: an MLP, a ResNet-style and a MobileNet-style CNN, a transformer encoder block and an
LSTM. Weights are drawn from a seeded generator, so the same arguments give the same model.

They are what the tests and benchmarks run on every device kind (the CPU and GPU drivers
must agree on them), and a quick way to try a device with a realistic graph:

    from nnrt.client.api import Model
    from nnrt.client import zoo
    model, x = zoo.build("resnet", batch=4)
    y = model.compile("gpu").executor().run(x)
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from .api import Model, Operand

FAMILIES = ("mlp", "resnet", "mobilenet", "encoder", "lstm")


class _Weights:
    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def __call__(self, *shape: int, scale: float = 1.0) -> np.ndarray:
        return (self.rng.standard_normal(shape) * scale).astype(np.float32)

    def conv(self, out_c: int, k: int, in_c: int, gain: float = 1.0) -> tuple[np.ndarray,
                                                                             np.ndarray]:
        """A weight [out, k, k, in] and a bias (a folded batch norm's shift)."""
        return self(out_c, k, k, in_c, scale=gain / math.sqrt(k * k * in_c)), \
            self(out_c, scale=0.05)


def _classifier(m: Model, w: _Weights, h: Operand, batch: int, spatial: int,
                channels: int) -> Operand:
    """A CNN's head: global average pool, flatten, fully connected to 10 classes."""
    pooled = m.avg_pool(h, spatial, 1)
    return m.fully_connected(m.reshape(pooled, [batch, channels]),
                             w(10, channels, scale=1 / math.sqrt(channels)), w(10, scale=0.1))


def mlp(m: Model, w: _Weights, batch: int, width: int = 256) -> tuple[Operand, np.ndarray]:
    sizes = (width, 2 * width, 2 * width, 10)
    x = m.input((batch, sizes[0]))
    h = x
    for k, (n_in, n_out) in enumerate(zip(sizes, sizes[1:])):
        last = k == len(sizes) - 2
        h = m.fully_connected(h, w(n_out, n_in, scale=1 / math.sqrt(n_in)),
                              w(n_out, scale=0.1), activation=None if last else "relu")
    m.outputs(m.softmax(h))
    return x, w(batch, sizes[0])


def resnet(m: Model, w: _Weights, batch: int, size: int = 32) -> tuple[Operand, np.ndarray]:
    """Conv stem, max pool, residual blocks (identity and strided 1x1 projection
    shortcuts) at 32, 64 and 128 channels, global average pool, fully connected."""
    x = m.input((batch, size, size, 3))
    h = m.conv2d(x, *w.conv(32, 3, 3, 1.4), stride=1, padding=[1] * 4, activation="relu")
    h = m.max_pool(h, 3, 2, padding=[1] * 4)
    channels = 32
    for out_c, stride in ((32, 1), (64, 2), (128, 2)):
        y = m.conv2d(h, *w.conv(out_c, 3, channels, 1.4), stride=stride, padding=[1] * 4,
                     activation="relu")
        y = m.conv2d(y, *w.conv(out_c, 3, out_c, 0.5), stride=1, padding=[1] * 4)
        shortcut = h if stride == 1 and out_c == channels else \
            m.conv2d(h, *w.conv(out_c, 1, channels), stride=stride, padding=[0] * 4)
        h = m.add(y, shortcut, activation="relu")
        channels = out_c
    m.outputs(_classifier(m, w, h, batch, size // 8, channels))
    return x, w(batch, size, size, 3)


def mobilenet(m: Model, w: _Weights, batch: int, size: int = 32) -> tuple[Operand, np.ndarray]:
    """Conv stem, depthwise-separable blocks (3x3 depthwise + ReLU6, 1x1 pointwise + ReLU6)."""
    x = m.input((batch, size, size, 3))
    h = m.conv2d(x, *w.conv(16, 3, 3, 1.4), stride=2, padding=[1] * 4, activation="relu6")
    channels = 16
    for out_c, stride in ((32, 1), (64, 2), (64, 1), (128, 2)):
        h = m.conv2d(h, *w.conv(channels, 3, 1, 1.4), stride=stride, padding=[1] * 4,
                     activation="relu6", group=channels)
        h = m.conv2d(h, *w.conv(out_c, 1, channels, 1.4), stride=1, padding=[0] * 4,
                     activation="relu6")
        channels = out_c
    m.outputs(_classifier(m, w, h, batch, size // 8, channels))
    return x, w(batch, size, size, 3)


def encoder(m: Model, w: _Weights, batch: int, seq: int = 32, d: int = 64,
            heads: int = 4) -> tuple[Operand, np.ndarray]:
    """A transformer encoder block over [batch * seq, d]: projections, scaled dot-product
    attention per sequence and head (MatMul, Softmax), residuals, LayerNorm, GELU, FFN 4d."""
    hd, ffn = d // heads, 4 * d
    s = 1 / math.sqrt(d)
    x = m.input((batch * seq, d))

    def heads_first(t: Operand) -> Operand:  # [batch*seq, d] -> [batch*heads, seq, hd]
        split = m.transpose(m.reshape(t, [batch, seq, heads, hd]), [0, 2, 1, 3])
        return m.reshape(split, [batch * heads, seq, hd])

    def layer_norm(t: Operand) -> Operand:
        return m.op("LAYER_NORM", t, 1 + w(d, scale=0.1), w(d, scale=0.1), beginNormAxis=1,
                    epsilon=1e-5, beginParamsAxis=1)

    q = heads_first(m.fully_connected(x, w(d, d, scale=s), w(d, scale=0.02)))
    k = heads_first(m.fully_connected(x, w(d, d, scale=s), w(d, scale=0.02)))
    v = heads_first(m.fully_connected(x, w(d, d, scale=s), w(d, scale=0.02)))
    scores = m.mul(m.matmul(q, k, transpose_b=True), np.float32(1 / math.sqrt(hd)))
    context = m.matmul(m.softmax(scores), v)  # [batch*heads, seq, hd]
    merged = m.reshape(m.transpose(m.reshape(context, [batch, heads, seq, hd]), [0, 2, 1, 3]),
                       [batch * seq, d])
    h = layer_norm(m.add(x, m.fully_connected(merged, w(d, d, scale=s), w(d, scale=0.02))))
    f = m.fully_connected(m.op("GELU", m.fully_connected(h, w(ffn, d, scale=s),
                                                         w(ffn, scale=0.02))),
                          w(d, ffn, scale=1 / math.sqrt(ffn)), w(d, scale=0.02))
    m.outputs(layer_norm(m.add(h, f)))
    return x, w(batch * seq, d)


def lstm(m: Model, w: _Weights, batch: int, seq: int = 16, n_in: int = 32,
         hidden: int = 64) -> tuple[Operand, np.ndarray]:
    """One LSTM layer over [seq, batch, n_in], then a classifier on the last hidden state."""
    x = m.input((seq, batch, n_in))
    s = 1 / math.sqrt(hidden)
    zeros = np.zeros((1, batch, hidden), np.float32)
    y, h_n, _ = m.op("LSTM", x, w(1, 4 * hidden, n_in, scale=s), w(1, 4 * hidden, hidden, scale=s),
                     w(1, 8 * hidden, scale=s), zeros, zeros, bidirectional=False, hasBias=True,
                     inputSize=n_in, hiddenSize=hidden, numLayers=1, numDirections=1,
                     shapes=[(seq, batch, hidden), (1, batch, hidden), (1, batch, hidden)],
                     outputs=3)
    last = m.reshape(h_n, [batch, hidden])
    m.outputs(m.fully_connected(last, w(10, hidden, scale=s), w(10, scale=0.1)), y)
    return x, w(seq, batch, n_in)


BUILDERS: dict[str, Callable[..., tuple[Operand, np.ndarray]]] = {
    "mlp": mlp, "resnet": resnet, "mobilenet": mobilenet, "encoder": encoder, "lstm": lstm}


def build(family: str, batch: int = 1, seed: int = 7, **sizes: int) -> tuple[Model, np.ndarray]:
    """A finished model of a family and an input for it (same seed, same model)."""
    model = Model()
    weights = _Weights(seed)
    _, x = BUILDERS[family](model, weights, batch, **sizes)
    return model, x
