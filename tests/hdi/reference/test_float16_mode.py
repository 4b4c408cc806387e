"""Float16 mode as semantics.md "Float16 mode" decides.

* Sums of products, reductions and normalisation statistics accumulate in float32 and round
  to float16 once per output value. Each kernel case runs the CPU kernel on float16 tensors
  and compares it with float32 numpy written here from the same float16 inputs, rounded to
  float16 once at the end: at most one float16 ulp apart (float32 summation orders differ),
  nearly always equal. Every case also checks that float16 accumulation (products rounded
  and summed sequentially in float16, emulated here) lands several ulps away, so the case
  fails if the kernel accumulated in float16; an intermediate rounding (a float16 mean in a
  normalisation, a float16 sum before a division) shows the same way, and an unrounded
  float32 result fails the dtype check of `run_node`.
* The graph rewrite (hdi/reference/float16.py) keeps int8 and integer tensors and makes every
  data type code that names a rewritten tensor say FLOAT16: a model mixing int8 and float32
  tensors prepares and runs in float16 mode through a real driver with its int8 results
  bit-exact with float32 mode.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pytest

from nnrt.common.hdi_model import HdiModelBuilder
from nnrt.drivers.cpu.device import CpuDevice
from nnrt.hdi.reference.float16 import to_float16
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.device import PrepareConfig
from nnrt.common.dtypes import numpy_dtype
from nnrt.common.errors import NNRT_SUCCESS
from nnrt.hdi.model_validation import build_graph
from tests.hdi.reference.util import Const, make_node, run_node

F16, F32 = np.dtype(np.float16), np.dtype(np.float32)
NHWC = ht.FORMAT_NHWC


# ----------------------------------------------------------------------------- helpers


def _line(a: np.ndarray) -> np.ndarray:
    """float16 values on the integer line of their bit patterns (monotone; ±0 both 0)."""
    bits = np.asarray(a, F16).view(np.int16).astype(np.int64)
    return np.where(bits < 0, -(bits & 0x7FFF), bits)


def ulps(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Distance between float16 arrays in float16 units in the last place."""
    return np.abs(_line(a) - _line(b))


def half(rng: np.random.Generator, low: float, high: float, *shape: int) -> np.ndarray:
    return rng.uniform(low, high, shape).astype(F16)


def once(values: np.ndarray) -> np.ndarray:
    """A float32 result rounded to float16: the one rounding per output value."""
    assert values.dtype == F32, values.dtype  # the reference really is float32
    return values.astype(F16)


def f16_dot(products: np.ndarray, axis: int = -1) -> np.ndarray:
    """What float16 accumulation gives: the products rounded to float16, summed one after
    the other with every partial sum rounded to float16 (numpy's float16 add.accumulate
    rounds each step; its float16 `sum` does not, so it is not used)."""
    with np.errstate(over="ignore"):
        return np.add.accumulate(products.astype(F16), axis=axis, dtype=F16).take(-1, axis=axis)


def check(got: np.ndarray, expected: np.ndarray, float16_accumulated: np.ndarray,
          min_gap: int = 4) -> None:
    """got (the kernel's float16 output) within 1 ulp of `expected` and equal nearly
    everywhere; `float16_accumulated` (the same sums accumulated in float16) at least
    `min_gap` ulps away somewhere, so that this check tells the two apart."""
    assert got.dtype == F16 and got.shape == expected.shape, (got.dtype, got.shape)
    distance = ulps(got, expected)
    assert distance.max() <= 1, f"{distance.max()} ulps from float32 accumulation"
    assert (distance == 0).mean() >= 0.95, f"{(distance != 0).mean():.1%} differ by an ulp"
    gap = ulps(float16_accumulated.reshape(expected.shape), expected).max()
    assert gap >= min_gap, f"float16 accumulation is only {gap} ulps away: not a test"


def run(node_type: int, attrs: object, inputs: Sequence[np.ndarray | Const],
        n_outputs: int = 1) -> list[np.ndarray]:
    node = make_node(node_type, attrs, inputs, n_outputs=n_outputs)
    arrays = [i.array if isinstance(i, Const) else i for i in inputs]
    return run_node(node, arrays)


def wide(*arrays: np.ndarray) -> list[np.ndarray]:
    return [a.astype(F32) for a in arrays]


# ----------------------------------------------------------------------------- GEMMs


def test_matmul_accumulates_in_float32() -> None:
    rng = np.random.default_rng(1)
    a, b = half(rng, 0, 1, 3, 2048), half(rng, 0, 1, 2048, 5)
    (got,) = run(na.NODE_TYPE_MATMUL_FUSION, na.MatMulFusion(), [a, b])
    a32, b32 = wide(a, b)
    expected = once((a32[:, :, None] * b32[None]).sum(axis=1, dtype=F32))
    check(got, expected, f16_dot(a[:, :, None] * b[None], axis=1))


def test_matmul_transposed_batched() -> None:
    rng = np.random.default_rng(2)
    a, b = half(rng, -1, 1, 2, 1024, 3), half(rng, 0, 1, 2, 4, 1024)  # [2, K, M], [2, N, K]
    (got,) = run(na.NODE_TYPE_MATMUL_FUSION, na.MatMulFusion(transposeA=True, transposeB=True),
                 [a, Const(b)])
    a32, b32 = wide(a, b)
    products = a32.transpose(0, 2, 1)[:, :, None, :] * b32[:, None, :, :]  # [2, M, N, K]
    expected = once(products.sum(axis=-1, dtype=F32))
    check(got, expected, f16_dot(products))


@pytest.mark.parametrize("activation", [ht.ACTIVATION_TYPE_NO_ACTIVATION,
                                        ht.ACTIVATION_TYPE_SIGMOID])
def test_full_connection_rounds_once_after_bias_and_activation(activation: int) -> None:
    # Sums near 50 that the bias brings down to [0.5, 5] (not to 0, where the float32
    # summation order alone would show): the bias and the activation apply to the float32
    # sum and the output is rounded once; a sum rounded to float16 (spacing 1/32 there)
    # before the bias would be off by many ulps of the result.
    rng = np.random.default_rng(3)
    x, w = half(rng, 0, 1, 4, 1024), half(rng, 0, 0.2, 6, 1024)
    x32, w32 = wide(x, w)
    sums = (x32[:, None, :] * w32[None]).sum(axis=-1, dtype=F32)
    bias = (0.5 - sums.min(axis=0)).astype(F16)
    (got,) = run(na.NODE_TYPE_FULL_CONNECTION,
                 na.FullConnection(hasBias=True, activationType=activation),
                 [x, Const(w), Const(bias)])
    total = sums + bias.astype(F32)
    rounded_sum = sums.astype(F16) + bias
    if activation == ht.ACTIVATION_TYPE_SIGMOID:
        total = _sigmoid(total)
        rounded_sum = _sigmoid(rounded_sum.astype(F32))
    check(got, once(total), f16_dot(x[:, None, :] * w[None]) + bias)
    gap = ulps(rounded_sum.astype(F16), once(total)).max()
    assert gap >= 4, f"rounding the sum before the bias is only {gap} ulps away"


# ----------------------------------------------------------------------------- convolutions


def conv_reference(x: np.ndarray, w: np.ndarray, bias: np.ndarray, stride: int, pad: int,
                   group: int) -> tuple[np.ndarray, np.ndarray]:
    """NHWC convolution of float16 x [N, H, W, C], w [O, kH, kW, C/group]: (float32 sums
    rounded once, float16-accumulated sums), from explicit windows."""
    n, h, wd, c = x.shape
    o, kh, kw, gc = w.shape
    og = o // group
    xp = np.zeros((n, h + 2 * pad, wd + 2 * pad, c), F16)
    xp[:, pad:pad + h, pad:pad + wd] = x
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    sums32 = np.zeros((n, oh, ow, o), F32)
    sums16 = np.zeros((n, oh, ow, o), F16)
    for g in range(group):
        # every window's taps in (i, j, channel) order: [N, OH, OW, kH*kW*gc]
        taps = np.stack([xp[:, i:i + stride * oh:stride, j:j + stride * ow:stride,
                            g * gc:(g + 1) * gc]
                         for i in range(kh) for j in range(kw)], axis=3).reshape(n, oh, ow, -1)
        weights = w[g * og:(g + 1) * og].reshape(og, -1)  # [og, kH*kW*gc], same order
        products = taps[..., None, :].astype(F32) * weights.astype(F32)  # [N, OH, OW, og, K]
        sums32[..., g * og:(g + 1) * og] = products.sum(axis=-1, dtype=F32)
        sums16[..., g * og:(g + 1) * og] = f16_dot(products)
    return once(sums32 + bias.astype(F32)), sums16 + bias


@pytest.mark.parametrize("size,stride,pad", [
    pytest.param(16, 1, 1, id="row-gemms"),  # one GEMM per kernel row (blas.gemm, beta 1)
    pytest.param(9, 2, 1, id="im2col"),
    pytest.param(6, 1, 0, id="small"),
])
def test_conv2d_accumulates_in_float32(size: int, stride: int, pad: int) -> None:
    rng = np.random.default_rng(4)
    x, w, b = half(rng, 0, 1, 1, size, size, 64), half(rng, 0, 1, 4, 3, 3, 64), half(rng, -1, 1, 4)
    attrs = na.Conv2DFusion(stride=[stride, stride], padMode=ht.PAD_MODE_PAD,
                            padList=[pad] * 4, group=1)
    (got,) = run(na.NODE_TYPE_CONV2D_FUSION, attrs, [x, Const(w), Const(b)])
    expected, accumulated16 = conv_reference(x, w, b, stride, pad, 1)
    check(got, expected, accumulated16)


def test_conv2d_pointwise() -> None:
    rng = np.random.default_rng(5)
    x, w, b = half(rng, 0, 1, 2, 4, 4, 1024), half(rng, 0, 1, 3, 1, 1, 1024), half(rng, -1, 1, 3)
    (got,) = run(na.NODE_TYPE_CONV2D_FUSION, na.Conv2DFusion(padMode=ht.PAD_MODE_VALID),
                 [x, Const(w), Const(b)])
    expected, accumulated16 = conv_reference(x, w, b, 1, 0, 1)
    check(got, expected, accumulated16)


@pytest.mark.parametrize("stride,multiplier", [(1, 1), (2, 1), (1, 2)])
def test_depthwise_conv2d_accumulates_in_float32(stride: int, multiplier: int) -> None:
    rng = np.random.default_rng(6)
    c = 8
    x = half(rng, 0.5, 1, 1, 16, 16, c)
    w, b = half(rng, 0.5, 1, c * multiplier, 7, 7, 1), half(rng, -1, 1, c * multiplier)
    attrs = na.Conv2DFusion(stride=[stride, stride], padMode=ht.PAD_MODE_PAD, padList=[3] * 4,
                            group=c)
    (got,) = run(na.NODE_TYPE_CONV2D_FUSION, attrs, [x, Const(w), Const(b)])
    expected, accumulated16 = conv_reference(x, w, b, stride, 3, c)
    check(got, expected, accumulated16, min_gap=2)


# ----------------------------------------------------------------------------- reductions


@pytest.mark.parametrize("axis", [1, 0])
def test_reduce_sum_and_mean_accumulate_in_float32(axis: int) -> None:
    rng = np.random.default_rng(7)
    x = half(rng, 0, 1, 4096, 3) if axis == 0 else half(rng, 0, 1, 3, 4096)
    axes = Const(np.array([axis], np.int32))
    (total,) = run(na.NODE_TYPE_REDUCE_FUSION, na.ReduceFusion(mode=ht.REDUCE_MODE_SUM), [x, axes])
    (mean,) = run(na.NODE_TYPE_REDUCE_FUSION, na.ReduceFusion(mode=ht.REDUCE_MODE_MEAN), [x, axes])
    sums = x.astype(F32).sum(axis=axis, dtype=F32)
    check(total, once(sums), f16_dot(x, axis=axis))
    check(mean, once(sums / F32.type(4096)), f16_dot(x, axis=axis) / F16.type(4096))


def test_avg_pool_sums_in_float32() -> None:
    rng = np.random.default_rng(8)
    x = half(rng, 0, 1, 1, 64, 64, 4)
    attrs = na.AvgPoolFusion(kernelSize=[32, 32], strides=[32, 32], padMode=ht.PAD_MODE_VALID,
                             format=NHWC)
    (got,) = run(na.NODE_TYPE_AVGPOOL_FUSION, attrs, [x])
    cells = x.reshape(1, 2, 32, 2, 32, 4).transpose(0, 1, 3, 5, 2, 4).reshape(1, 2, 2, 4, 1024)
    expected = once(cells.astype(F32).sum(axis=-1, dtype=F32) / F32.type(1024))
    check(got, expected, f16_dot(cells) / F16.type(1024))


def test_global_avg_pool_sums_in_float32() -> None:
    rng = np.random.default_rng(9)
    x = half(rng, 0, 1, 2, 32, 32, 3)
    attrs = na.AvgPoolFusion(padMode=ht.PAD_MODE_VALID, format=NHWC, **{"global": True})
    (got,) = run(na.NODE_TYPE_AVGPOOL_FUSION, attrs, [x])
    cells = x.reshape(2, 1024, 3).transpose(0, 2, 1)
    expected = once(cells.astype(F32).sum(axis=-1, dtype=F32) / F32.type(1024))
    check(got, expected.reshape(2, 1, 1, 3), f16_dot(cells) / F16.type(1024))


def _softmax_parts(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(shifted x, exps, their float32 sum, their float16-accumulated sum), float32 but the
    last, along the last axis."""
    shifted = x.astype(F32) - x.astype(F32).max(axis=-1, keepdims=True)
    exps = np.exp(shifted)
    return (shifted, exps, exps.sum(axis=-1, keepdims=True, dtype=F32),
            f16_dot(exps)[..., None])


def test_softmax_sums_exponentials_in_float32() -> None:
    rng = np.random.default_rng(10)
    x = half(rng, -1, 1, 3, 4096)
    (got,) = run(na.NODE_TYPE_SOFTMAX, na.Softmax(axis=[-1]), [x])
    _, exps, total, total16 = _softmax_parts(x)
    check(got, once(exps / total), exps.astype(F16) / total16)


def test_log_softmax_sums_exponentials_in_float32() -> None:
    rng = np.random.default_rng(11)
    x = half(rng, -1, 1, 3, 4096)
    (got,) = run(na.NODE_TYPE_LOG_SOFTMAX, na.LogSoftmax(axis=-1), [x])
    shifted, _, total, total16 = _softmax_parts(x)
    check(got, once(shifted - np.log(total)),
          shifted.astype(F16) - np.log(total16.astype(F32)).astype(F16))


# ----------------------------------------------------------------------------- normalisations


def _normalised(x32: np.ndarray, axis: int | tuple[int, ...], eps: float) -> np.ndarray:
    mean = x32.mean(axis=axis, keepdims=True, dtype=F32)
    centred = x32 - mean
    var = (centred * centred).mean(axis=axis, keepdims=True, dtype=F32)
    return centred / np.sqrt(var + F32.type(eps))


def test_layer_norm_statistics_in_float32() -> None:
    # Values near 100: a float16 mean (or a float16 sum of 1024 of them, which overflows)
    # is far off against a spread of 2.
    rng = np.random.default_rng(12)
    x, gamma, beta = half(rng, 98, 102, 4, 1024), half(rng, 0.5, 2, 1024), half(rng, -1, 1, 1024)
    attrs = na.LayerNormFusion(beginNormAxis=-1, beginParamsAxis=-1, epsilon=1e-5,
                               elementwiseAffine=True)
    (got,) = run(na.NODE_TYPE_LAYER_NORM_FUSION, attrs, [x, Const(gamma), Const(beta)])
    x32, g32, b32 = wide(x, gamma, beta)
    expected = once(_normalised(x32, -1, 1e-5) * g32 + b32)
    # the statistics rounded to float16 (the mean accumulated in float16 overflows; the
    # mean rounded to float16 once is the milder intermediate rounding)
    mean16 = x32.mean(axis=-1, keepdims=True, dtype=F32).astype(F16).astype(F32)
    centred = x32 - mean16
    var = (centred * centred).mean(axis=-1, keepdims=True, dtype=F32)
    rounded_mean = centred / np.sqrt(var + F32.type(1e-5)) * g32 + b32
    check(got, expected, rounded_mean)
    assert np.isinf(f16_dot(x)).all()  # float16 accumulation overflows outright


def test_instance_norm_statistics_in_float32() -> None:
    rng = np.random.default_rng(13)
    x, scale, bias = half(rng, 98, 102, 2, 32, 32, 3), half(rng, 0.5, 2, 3), half(rng, -1, 1, 3)
    (got,) = run(na.NODE_TYPE_INSTANCE_NORM, na.InstanceNorm(epsilon=1e-5),
                 [x, Const(scale), Const(bias)])
    x32, s32, b32 = wide(x, scale, bias)
    expected = once(_normalised(x32, (1, 2), 1e-5) * s32 + b32)
    mean16 = x32.mean(axis=(1, 2), keepdims=True, dtype=F32).astype(F16).astype(F32)
    centred = x32 - mean16
    var = (centred * centred).mean(axis=(1, 2), keepdims=True, dtype=F32)
    check(got, expected, centred / np.sqrt(var + F32.type(1e-5)) * s32 + b32)


def test_l2_normalize_sums_squares_in_float32() -> None:
    rng = np.random.default_rng(14)
    x = half(rng, 0, 1, 3, 4096)
    (got,) = run(na.NODE_TYPE_L2_NORMALIZE_FUSION, na.L2NormalizeFusion(axis=[-1], epsilon=1e-6),
                 [x])
    x32 = x.astype(F32)
    norm = np.sqrt((x32 * x32).sum(axis=-1, keepdims=True, dtype=F32))
    norm16 = np.sqrt(f16_dot(x * x))[:, None]
    check(got, once(x32 / norm), x / norm16)


# ----------------------------------------------------------------------------- LSTM


def _sigmoid(v: np.ndarray) -> np.ndarray:
    return (1 / (1 + np.exp(-v.astype(np.float64)))).astype(v.dtype)


def lstm_reference(x: np.ndarray, w_ih: np.ndarray, w_hh: np.ndarray, bias: np.ndarray,
                   h0: np.ndarray, c0: np.ndarray,
                   gemm: Callable[[np.ndarray, np.ndarray], np.ndarray]
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One forward layer, every value float32 but what `gemm` (a @ bᵀ) returns."""
    hidden = w_hh.shape[-1]
    h, c = h0[0].astype(F32), c0[0].astype(F32)
    ys = []
    for t in range(x.shape[0]):
        gates = (gemm(x[t], w_ih[0]).astype(F32) + gemm(h, w_hh[0]).astype(F32)
                 + bias[0, :4 * hidden].astype(F32) + bias[0, 4 * hidden:].astype(F32))
        i, f, g, o = (gates[:, k * hidden:(k + 1) * hidden] for k in range(4))
        c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
        h = _sigmoid(o) * np.tanh(c)
        ys.append(h)
    return np.stack(ys), h[None], c[None]


def test_lstm_gemms_accumulate_in_float32() -> None:
    rng = np.random.default_rng(15)
    seq, batch, n_in, hidden = 4, 2, 1024, 8
    x = half(rng, 0, 1, seq, batch, n_in)
    w_ih = half(rng, -0.05, 0.05, 1, 4 * hidden, n_in)  # gates around 0: not saturated
    w_hh = half(rng, -0.5, 0.5, 1, 4 * hidden, hidden)
    bias = half(rng, -0.5, 0.5, 1, 8 * hidden)
    h0, c0 = half(rng, -1, 1, 1, batch, hidden), half(rng, -1, 1, 1, batch, hidden)
    attrs = na.LSTM(hasBias=True, inputSize=n_in, hiddenSize=hidden, numLayers=1,
                    numDirections=1)
    got = run(na.NODE_TYPE_LSTM, attrs, [x, Const(w_ih), Const(w_hh), Const(bias), h0, c0],
              n_outputs=3)

    def gemm32(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return (a.astype(F32)[:, None, :] * b.astype(F32)[None]).sum(axis=-1, dtype=F32)

    def gemm16(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return f16_dot(a.astype(F16)[:, None, :] * b.astype(F16)[None])

    expected = lstm_reference(x, w_ih, w_hh, bias, h0, c0, gemm32)
    accumulated16 = lstm_reference(x, w_ih, w_hh, bias, h0, c0, gemm16)
    for out, want, alternative in zip(got, expected, accumulated16):
        check(out, once(want), alternative, min_gap=2)


# ----------------------------------------------------------------------------- the rewrite


def graph_of(builder: HdiModelBuilder):
    """The host's validated Graph of a built model (constants read from a local blob)."""
    blob = b"".join(builder.constants[i].tobytes() for i in sorted(builder.constants))
    model = builder.model(ht.SharedBuffer(bufferId=1, bufferSize=len(blob)))
    return build_graph(model, lambda s: blob[s.offset:s.offset + s.dataSize])


def run_in_process(builder: HdiModelBuilder, inputs: Sequence[np.ndarray],
                   float16: bool) -> list[np.ndarray]:
    device = CpuDevice()
    prepared = device.prepare(graph_of(builder), PrepareConfig(enable_float16=float16))
    return prepared.run(inputs, lambda: False)


def test_rewrite_names_float16_in_data_type_attributes() -> None:
    b = HdiModelBuilder("codes")
    x = b.input("x", np.float32, [4])
    q = b.tensor("q", np.int8, [4], quant=[(8, 0, 0.25)])
    y = b.tensor("y", np.float32, [4])
    b.node(na.NODE_TYPE_QUANT_DTYPE_CAST, [x], [q],
           na.QuantDTypeCast(srcT=ht.DATA_TYPE_FLOAT32, dstT=ht.DATA_TYPE_INT8))
    b.node(na.NODE_TYPE_QUANT_DTYPE_CAST_V2, [q], [y],
           na.QuantDTypeCastV2(srcT=ht.DATA_TYPE_INT8, dstT=ht.DATA_TYPE_FLOAT32))
    b.mark_outputs(q, y)
    graph = graph_of(b)
    half_graph = to_float16(graph)
    first, second = half_graph.nodes
    assert (first.attrs.srcT, first.attrs.dstT) == (ht.DATA_TYPE_FLOAT16, ht.DATA_TYPE_INT8)
    assert (second.attrs.srcT, second.attrs.dstT) == (ht.DATA_TYPE_INT8, ht.DATA_TYPE_FLOAT16)
    assert first.outputs[0].dtype == np.int8 and first.outputs[0].quant_params
    # the validated graph itself (kept for the model cache) is left as it was
    assert graph.nodes[0].attrs.srcT == ht.DATA_TYPE_FLOAT32
    assert graph.nodes[1].attrs.dstT == ht.DATA_TYPE_FLOAT32
    values = np.array([0.25, -1.5, 3.0, 100.0], np.float32)  # exact in float16
    for float16 in (False, True):
        q_out, y_out = run_in_process(b, [values], float16)
        assert q_out.dtype == np.int8 and q_out.tolist() == [1, -6, 12, 127]
        assert y_out.dtype == np.float32 and y_out.tolist() == [0.25, -1.5, 3.0, 31.75]


def test_rewrite_cast_target_constant_follows_the_output() -> None:
    b = HdiModelBuilder("cast")
    x = b.input("x", np.int32, [3])
    code = b.constant("to", np.array([ht.DATA_TYPE_FLOAT32], np.int64))
    y = b.tensor("y", np.float32, [3])
    z = b.tensor("z", np.int64, [1])  # a second reader of the code constant, as an integer
    b.node(na.NODE_TYPE_CAST, [x, code], [y])
    b.node(na.NODE_TYPE_ADD_FUSION, [code, b.constant("zero", np.zeros(1, np.int64))], [z])
    b.mark_outputs(y, z)
    half_graph = to_float16(graph_of(b))
    cast_node, add_node = half_graph.nodes
    target = cast_node.inputs[1]
    assert target.index != code and half_graph.tensors[target.index] is target
    assert target.constant.tolist() == [ht.DATA_TYPE_FLOAT16]
    assert add_node.inputs[0].constant.tolist() == [ht.DATA_TYPE_FLOAT32]  # unchanged
    values = np.array([2049, -3, 70000], np.int32)
    y_out, z_out = run_in_process(b, [values], True)
    assert y_out.dtype == np.float32
    assert y_out.tolist() == [2048.0, -3.0, float("inf")]  # through float16
    assert z_out.tolist() == [ht.DATA_TYPE_FLOAT32]
    y32, _ = run_in_process(b, [values], False)
    assert y32.tolist() == [2049.0, -3.0, 70000.0]


def test_rewrite_cast_run_time_target() -> None:
    b = HdiModelBuilder("cast")
    x = b.input("x", np.int32, [2])
    code = b.input("to", np.int64, [1])
    y = b.tensor("y", np.float32, [2])
    b.node(na.NODE_TYPE_CAST, [x, code], [y])
    b.mark_outputs(y)
    values = np.array([2049, 5], np.int32)
    target = np.array([ht.DATA_TYPE_FLOAT32], np.int64)
    (y_out,) = run_in_process(b, [values, target], True)
    assert y_out.tolist() == [2048.0, 5.0]


def test_rewrite_constant_of_shape_and_range_data_types() -> None:
    b = HdiModelBuilder("fill")
    shape = b.constant("shape", np.array([2], np.int64))
    filled = b.tensor("filled", np.float32, [2])
    ramp = b.tensor("ramp", np.float32, [3])
    x = b.input("x", np.float32, [3])
    total = b.tensor("total", np.float32, [3])
    b.node(na.NODE_TYPE_CONSTANT_OF_SHAPE, [shape], [filled],
           na.ConstantOfShape(dataType=ht.DATA_TYPE_FLOAT32, value=[0.1]))
    b.node(na.NODE_TYPE_RANGE, [], [ramp],
           na.Range(dataType=ht.DATA_TYPE_FLOAT32, start=0, limit=3, delta=1))
    b.node(na.NODE_TYPE_ADD_FUSION, [x, ramp], [total])
    b.mark_outputs(filled, total)
    nodes = to_float16(graph_of(b)).nodes
    assert nodes[0].attrs.dataType == nodes[1].attrs.dataType == ht.DATA_TYPE_FLOAT16
    filled_out, total_out = run_in_process(b, [np.full(3, 2048, np.float32)], True)
    assert filled_out.tolist() == [float(np.float16(0.1))] * 2
    assert total_out.tolist() == [2048.0, 2048.0, 2050.0]  # 2049 is not a float16


# ----------------------------------------------------------------------------- a real driver


def run_model(client, builder: HdiModelBuilder, config: ht.ModelConfig,
              inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Prepare with `config` and run once: inputs and outputs in their declared types."""
    model_id = builder.prepare(client, config)
    memories, ins, outs = [], [], []
    for array, index in zip(inputs, builder.inputs):
        tensor = builder.tensors[index]
        _, memory = client.allocate_buffer(array.nbytes)
        memory.array(array.dtype, array.shape)[:] = array
        memories.append(memory)
        ins.append(ht.IOTensor(dataType=tensor.dataType, dimensions=array.shape,
                               format=tensor.format, data=memory.descriptor()))
    shapes = []
    for index in builder.outputs:
        tensor = builder.tensors[index]
        dtype = numpy_dtype(tensor.dataType)
        _, memory = client.allocate_buffer(int(np.prod(tensor.dims)) * dtype.itemsize)
        memories.append(memory)
        shapes.append((dtype, tuple(tensor.dims)))
        outs.append(ht.IOTensor(dataType=tensor.dataType, dimensions=tensor.dims,
                                format=tensor.format, data=memory.descriptor()))
    reply = client.run(model_id, ins, outs, timeout=30)
    assert reply.returnCode == NNRT_SUCCESS, reply
    results = [m.array(dtype, shape).copy()
               for m, (dtype, shape) in zip(memories[len(inputs):], shapes)]
    for memory in memories:
        memory.close()
    return results


def mixed_model(rng: np.random.Generator) -> HdiModelBuilder:
    """float32 x -> QuantDTypeCast -> int8 Conv2D (QUANT_TYPE_ALL, per-channel weights,
    INT32 bias) -> int8 FullConnection (QUANT_TYPE_ALL) -> QuantDTypeCast -> float32
    -> + a float32 constant. Outputs: the int8 logits, their dequantised float32 values and
    the float32 sum."""
    sx, s1, so = 0.03, 0.0625, 0.125  # output scales powers of two: dequantised values exact
    w1 = rng.integers(-127, 128, (4, 3, 3, 3)).astype(np.int8)
    w1_s = rng.uniform(0.002, 0.01, 4)
    b1 = rng.integers(-500, 500, 4).astype(np.int32)
    wf = rng.integers(-127, 128, (5, 64)).astype(np.int8)
    wf_s = rng.uniform(0.001, 0.004, 5)
    bf = rng.integers(-1000, 1000, 5).astype(np.int32)
    b = HdiModelBuilder("mixed")
    x = b.input("x", np.float32, [1, 4, 4, 3], fmt=NHWC)
    xq = b.tensor("xq", np.int8, [1, 4, 4, 3], fmt=NHWC, quant=[(8, 3, sx)])
    c1 = b.tensor("c1", np.int8, [1, 4, 4, 4], fmt=NHWC, quant=[(8, -10, s1)])
    flat = b.tensor("flat", np.int8, [1, 64], quant=[(8, -10, s1)])
    logits = b.tensor("logits", np.int8, [1, 5], quant=[(8, 2, so)])
    real = b.tensor("real", np.float32, [1, 5])
    shifted = b.tensor("shifted", np.float32, [1, 5])
    b.node(na.NODE_TYPE_QUANT_DTYPE_CAST, [x], [xq],
           na.QuantDTypeCast(srcT=ht.DATA_TYPE_FLOAT32, dstT=ht.DATA_TYPE_INT8))
    w1i = b.tensor("w1", np.int8, w1.shape, data=w1, fmt=NHWC,
                   quant=[(8, 0, float(s)) for s in w1_s])
    b.node(na.NODE_TYPE_CONV2D_FUSION, [xq, w1i, b.constant("b1", b1)], [c1],
           na.Conv2DFusion(kernelSize=[3, 3], padMode=ht.PAD_MODE_SAME, group=1,
                           activationType=ht.ACTIVATION_TYPE_RELU), quant_type=ht.QUANT_TYPE_ALL)
    b.node(na.NODE_TYPE_RESHAPE, [c1, b.constant("shape", np.array([1, 64], np.int64))], [flat])
    wfi = b.tensor("wf", np.int8, wf.shape, data=wf, quant=[(8, 0, float(s)) for s in wf_s])
    b.node(na.NODE_TYPE_FULL_CONNECTION, [flat, wfi, b.constant("bf", bf)], [logits],
           na.FullConnection(hasBias=True), quant_type=ht.QUANT_TYPE_ALL)
    b.node(na.NODE_TYPE_QUANT_DTYPE_CAST, [logits], [real],
           na.QuantDTypeCast(srcT=ht.DATA_TYPE_INT8, dstT=ht.DATA_TYPE_FLOAT32))
    b.node(na.NODE_TYPE_ADD_FUSION, [real, b.constant("offset", np.full((1, 5), 0.1,
                                                                        np.float32))], [shifted])
    b.mark_outputs(logits, real, shifted)
    return b


def test_mixed_int8_float32_model_in_float16_mode(client) -> None:
    rng = np.random.default_rng(16)
    builder = mixed_model(rng)
    # inputs exact in float16 (multiples of 1/256 below 4): the conversion on entry loses
    # nothing, so the int8 part sees the same values in both modes
    x = (rng.integers(-512, 512, (1, 4, 4, 3)) / 256).astype(np.float32)
    assert np.array_equal(x.astype(F16).astype(F32), x)
    full = run_model(client, builder, ht.ModelConfig(enableFloat16=False), [x])
    halved = run_model(client, builder, ht.ModelConfig(enableFloat16=True), [x])
    logits32, real32, shifted32 = full
    logits16, real16, shifted16 = halved
    assert logits16.dtype == np.int8 and real16.dtype == shifted16.dtype == np.float32
    np.testing.assert_array_equal(logits16, logits32)  # the int8 part is unchanged
    assert len(np.unique(logits32)) > 2  # neither saturated nor constant
    np.testing.assert_array_equal(real16, real32)  # multiples of 1/8: exact in float16
    np.testing.assert_array_equal(shifted32, real32 + np.float32(0.1))
    expected16 = (real32.astype(F16) + F16.type(0.1)).astype(F32)  # the add in float16
    np.testing.assert_array_equal(shifted16, expected16)
    assert not np.array_equal(shifted16, shifted32)  # float16 mode is really float16
