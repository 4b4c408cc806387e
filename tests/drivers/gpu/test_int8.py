"""int8 / uint8 on the GPU (drivers/gpu/ops/op_quantized.py, PoCL in CI): every quantised
kernel against two references —

* the CPU driver's numpy engine (dequantise to float32, compute, requantise): within one
  quantisation step per output value (semantics.md);
* an independent int64 reference written here (exact integer sums, one float64
  requantisation, ties to even, saturation): equal value for value (PoCL has cl_khr_fp64).

QuantDTypeCast is bit-exact with the CPU's float64 quantisation. Then the int8 models
(tests/drivers/accel/int8_models.py, tests/drivers/cpu/ort/int8_models.py) on the GPU alone,
and what the GPU refuses, with the code and the reason."""

from __future__ import annotations

import numpy as np
import pytest

from nnrt.common.dtypes import hdi_data_type
from nnrt.common.errors import DriverError
from nnrt.drivers.gpu.kernel import create_op
from nnrt.drivers.gpu.ops.op_quantized import QuantBinary, QuantConv2D
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import QuantParam
from tests.drivers.accel.int8_models import int8_cnn, int8_mlp
from tests.drivers.gpu.util import graph_of, node_graph, run_cpu, run_gpu
from tests.hdi.reference.util import Const, make_node, tensor_spec
from tests.drivers.cpu.ort import int8_models

ALL = ht.QUANT_TYPE_ALL
RELU, RELU6 = ht.ACTIVATION_TYPE_RELU, ht.ACTIVATION_TYPE_RELU6
RANGES = {np.dtype(np.int8): (-128, 127), np.dtype(np.uint8): (0, 255)}


def params(scale: float, zero: int) -> list[QuantParam]:
    return [QuantParam(8, zero, scale)]


def q_input(rng, shape, dtype=np.int8, scale=0.05, zero=3):
    """A run-time quantised input (its array and its TensorSpec)."""
    lo, hi = RANGES[np.dtype(dtype)]
    x = rng.integers(lo, hi + 1, shape).astype(dtype)
    return x, tensor_spec(0, dtype, shape, quant=params(scale, zero))


def requantise(real: np.ndarray, act: int, scale: float, zero: int, dtype) -> np.ndarray:
    """The exact reference's one requantisation (float64, ties to even, saturated)."""
    if act == RELU:
        real = np.maximum(real, 0.0)
    elif act == RELU6:
        real = np.clip(real, 0.0, 6.0)
    lo, hi = RANGES[np.dtype(dtype)]
    return np.clip(np.rint(real / scale) + zero, lo, hi).astype(dtype)


def steps(a: np.ndarray, b: np.ndarray) -> int:
    return int(np.abs(a.astype(np.int64) - b.astype(np.int64)).max(initial=0))


def check(node, inputs: list[np.ndarray], exact: np.ndarray) -> np.ndarray:
    """The node on the GPU: equal to `exact`, within one step of the numpy engine."""
    graph = node_graph(node)
    (gpu,), (cpu,) = run_gpu(graph, inputs), run_cpu(graph, inputs)
    assert gpu.dtype == cpu.dtype == exact.dtype and gpu.shape == cpu.shape == exact.shape
    np.testing.assert_array_equal(gpu, exact)
    assert steps(gpu, cpu) <= 1
    return gpu


# -- QuantDTypeCast ----------------------------------------------------------------------

def cast_node(x, spec_in, dst, out_quant, axis=None):
    attrs = (na.QuantDTypeCast(srcT=hdi_data_type(x.dtype), dstT=hdi_data_type(dst))
             if axis is None else
             na.QuantDTypeCastV2(srcT=hdi_data_type(x.dtype), dstT=hdi_data_type(dst),
                                 axis=axis))
    node_type = na.NODE_TYPE_QUANT_DTYPE_CAST if axis is None else \
        na.NODE_TYPE_QUANT_DTYPE_CAST_V2
    return make_node(node_type, attrs, [spec_in], out_dtype=dst, out_shape=x.shape,
                     out_quant=out_quant)


SPECIALS = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 0.025, -0.025, 0.075, 1e9, -1e9,
                     6.35, 6.4, -6.45, 12.7, 3e-8], np.float32)


@pytest.mark.parametrize("dst", [np.int8, np.uint8])
@pytest.mark.parametrize("src", [np.float32, np.float16])
def test_quantise_per_tensor_is_bit_exact(src, dst) -> None:
    with np.errstate(over="ignore"):  # 1e9 is inf in float16
        x = np.concatenate([SPECIALS, np.random.default_rng(1).normal(0, 4, 200)]).astype(src)
    node = cast_node(x, tensor_spec(0, src, x.shape), np.dtype(dst), params(0.05, 7))
    (gpu,), (cpu,) = run_gpu(node_graph(node), [x]), run_cpu(node_graph(node), [x])
    np.testing.assert_array_equal(gpu, cpu)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_quantise_and_dequantise_per_channel(axis: int) -> None:
    rng = np.random.default_rng(2)
    x = rng.normal(0, 2, (3, 4, 5)).astype(np.float32)
    count = x.shape[axis]
    quant = [QuantParam(8, int(z), float(s)) for z, s in
             zip(rng.integers(-5, 5, count), rng.uniform(0.01, 0.1, count))]
    node = cast_node(x, tensor_spec(0, np.float32, x.shape), np.dtype(np.int8), quant, axis)
    (q,), (cpu,) = run_gpu(node_graph(node), [x]), run_cpu(node_graph(node), [x])
    np.testing.assert_array_equal(q, cpu)
    back = cast_node(q, tensor_spec(0, np.int8, q.shape, quant=quant), np.dtype(np.float32),
                     (), axis)
    (gpu,), (cpu,) = run_gpu(node_graph(back), [q]), run_cpu(node_graph(back), [q])
    np.testing.assert_array_equal(gpu, cpu)


@pytest.mark.parametrize("dst", [np.float32, np.float16, np.uint8])
def test_dequantise_and_requantise_are_bit_exact(dst) -> None:
    q = np.arange(-128, 128, dtype=np.int8)
    quant_out = params(0.07, 100) if dst == np.uint8 else ()
    node = cast_node(q, tensor_spec(0, np.int8, q.shape, quant=params(0.0331, -9)),
                     np.dtype(dst), quant_out)
    (gpu,), (cpu,) = run_gpu(node_graph(node), [q]), run_cpu(node_graph(node), [q])
    np.testing.assert_array_equal(gpu, cpu)


def test_scale_zero_quantises_to_the_zero_point() -> None:
    x = SPECIALS.copy()
    node = cast_node(x, tensor_spec(0, np.float32, x.shape), np.dtype(np.int8), params(0.0, 4))
    (gpu,), (cpu,) = run_gpu(node_graph(node), [x]), run_cpu(node_graph(node), [x])
    np.testing.assert_array_equal(gpu, cpu)
    assert (gpu == 4).all()


# -- Conv2D ------------------------------------------------------------------------------

def conv_int64(x, xzero, w, wzero, stride, dilation, pads, group) -> np.ndarray:
    """Σ (x - xzero)(w - wzero[o]) over each window, NHWC, grouped, in int64."""
    n, h, wd, c = x.shape
    oc, kh, kw, gc = w.shape
    top, bottom, left, right = pads
    padded = np.zeros((n, h + top + bottom, wd + left + right, c), np.int64)
    padded[:, top:top + h, left:left + wd] = x.astype(np.int64) - xzero
    oh = (h + top + bottom - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wd + left + right - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    wc = w.astype(np.int64) - np.asarray(wzero, np.int64).reshape(-1, 1, 1, 1)
    out = np.zeros((n, oh, ow, oc), np.int64)
    og = oc // group
    for i in range(kh):
        for j in range(kw):
            hs, ws = i * dilation[0], j * dilation[1]
            window = padded[:, hs:hs + stride[0] * (oh - 1) + 1:stride[0],
                            ws:ws + stride[1] * (ow - 1) + 1:stride[1]]  # [N, OH, OW, C]
            for g in range(group):
                out[..., g * og:(g + 1) * og] += (window[..., g * gc:(g + 1) * gc]
                                                  @ wc[g * og:(g + 1) * og, i, j].T)
    return out


CONV_CASES = {
    # name: (x shape, out channels, kernel, stride, dilation, pads, group, act, x dtype)
    "3x3": ((2, 7, 6, 5), 8, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 1, RELU, np.int8),
    "strided-dilated": ((1, 9, 10, 4), 6, (3, 2), (2, 1), (2, 2), (2, 1, 0, 1), 1, 0,
                        np.int8),
    "grouped-uint8": ((2, 5, 5, 6), 9, (3, 3), (1, 2), (1, 1), (1, 1, 1, 1), 3, RELU6,
                      np.uint8),
    "depthwise": ((2, 8, 8, 8), 8, (3, 3), (2, 2), (1, 1), (0, 1, 0, 1), 8, RELU6, np.int8),
    "depthwise-multiplier": ((1, 6, 6, 3), 6, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 3, RELU,
                             np.int8),
    "pointwise": ((3, 4, 4, 16), 12, (1, 1), (1, 1), (1, 1), (0, 0, 0, 0), 1, 0, np.int8),
}


@pytest.mark.parametrize("case", list(CONV_CASES))
def test_conv2d(case: str) -> None:
    shape, oc, kernel, stride, dilation, pads, group, act, dtype = CONV_CASES[case]
    rng = np.random.default_rng(len(case))
    xzero = 100 if dtype == np.uint8 else -3
    x, xs = q_input(rng, shape, dtype, 0.04, xzero)
    gc = shape[3] // group
    w = rng.integers(-127, 128, (oc, *kernel, gc)).astype(np.int8)
    wscales = rng.uniform(0.002, 0.01, oc)
    wzeros = rng.integers(-2, 3, oc)
    bias = rng.integers(-3000, 3000, oc).astype(np.int32)
    wspec = tensor_spec(1, np.int8, w.shape, constant=w,
                        quant=[QuantParam(8, int(z), float(s)) for z, s in zip(wzeros, wscales)])
    acc = conv_int64(x, xzero, w, wzeros, stride, dilation, pads, group) + bias
    out_scale, out_zero = 0.09, -20
    exact = requantise(acc * (0.04 * wscales), act, out_scale, out_zero, np.int8)
    node = make_node(na.NODE_TYPE_CONV2D_FUSION,
                     na.Conv2DFusion(kernelSize=list(kernel), stride=list(stride),
                                     dilation=list(dilation), padMode=ht.PAD_MODE_PAD,
                                     padList=list(pads), group=group, inChannel=shape[3],
                                     outChannel=oc, activationType=act),
                     [xs, wspec, Const(bias)], out_dtype=np.int8, out_shape=exact.shape,
                     quant_type=ALL, out_quant=params(out_scale, out_zero))
    assert isinstance(create_op(node), QuantConv2D)
    check(node, [x], exact)


# -- FullConnection and MatMul -----------------------------------------------------------

def test_full_connection_per_channel_relu() -> None:
    rng = np.random.default_rng(5)
    x, xs = q_input(rng, (6, 40), np.int8, 0.03, 5)
    w = rng.integers(-127, 128, (24, 40)).astype(np.int8)
    wscales = rng.uniform(0.002, 0.01, 24)
    bias = rng.integers(-4000, 4000, 24).astype(np.int32)
    wspec = tensor_spec(1, np.int8, w.shape, constant=w,
                        quant=[QuantParam(8, 0, float(s)) for s in wscales])
    acc = (x.astype(np.int64) - 5) @ w.astype(np.int64).T + bias
    exact = requantise(acc * (0.03 * wscales), RELU, 0.2, -128, np.int8)
    node = make_node(na.NODE_TYPE_FULL_CONNECTION,
                     na.FullConnection(hasBias=True, activationType=RELU),
                     [xs, wspec, Const(bias)], out_dtype=np.int8, out_shape=exact.shape,
                     quant_type=ALL, out_quant=params(0.2, -128))
    check(node, [x], exact)


@pytest.mark.parametrize("a_shape,b_shape,ta,tb", [
    ((5, 7), (7, 3), False, False),
    ((2, 7, 5), (2, 3, 7), True, True),
    ((3, 4, 6), (6, 5), False, False),
])
def test_matmul(a_shape, b_shape, ta, tb) -> None:
    rng = np.random.default_rng(6)
    a = rng.integers(-128, 128, a_shape).astype(np.int8)
    b = rng.integers(0, 256, b_shape).astype(np.uint8)
    sa, za, sb, zb = 0.05, -4, 0.02, 128
    a_spec = tensor_spec(0, np.int8, a_shape, quant=params(sa, za))
    b_spec = tensor_spec(1, np.uint8, b_shape, quant=params(sb, zb))
    a64 = a.astype(np.int64) - za
    b64 = b.astype(np.int64) - zb
    acc = (np.swapaxes(a64, -1, -2) if ta else a64) @ (np.swapaxes(b64, -1, -2) if tb else b64)
    exact = requantise(acc * (sa * sb), 0, 0.3, 2, np.int8)
    node = make_node(na.NODE_TYPE_MATMUL_FUSION,
                     na.MatMulFusion(transposeA=ta, transposeB=tb), [a_spec, b_spec],
                     out_dtype=np.int8, out_shape=exact.shape, quant_type=ALL,
                     out_quant=params(0.3, 2))
    check(node, [a, b], exact)


# -- Add / Mul ---------------------------------------------------------------------------

@pytest.mark.parametrize("node_type,act", [(na.NODE_TYPE_ADD_FUSION, RELU),
                                           (na.NODE_TYPE_ADD_FUSION, 0),
                                           (na.NODE_TYPE_MUL_FUSION, 0)])
def test_add_mul_with_broadcast(node_type, act) -> None:
    rng = np.random.default_rng(7)
    a = rng.integers(-128, 128, (2, 3, 4, 5)).astype(np.int8)
    b = rng.integers(-128, 128, (4, 1)).astype(np.int8)
    a_spec = tensor_spec(0, np.int8, a.shape, quant=params(0.05, 3))
    b_spec = tensor_spec(1, np.int8, b.shape, quant=params(0.08, -7))
    ra = (a.astype(np.float64) - 3) * 0.05
    rb = (b.astype(np.float64) + 7) * 0.08
    is_add = node_type == na.NODE_TYPE_ADD_FUSION
    real = ra + rb if is_add else ra * rb
    scale = 0.07 if is_add else 0.2
    exact = requantise(real, act, scale, -10, np.int8)
    attrs = na.AddFusion(activationType=act) if is_add else na.MulFusion(activationType=act)
    node = make_node(node_type, attrs, [a_spec, b_spec], out_dtype=np.int8,
                     out_shape=exact.shape, quant_type=ALL, out_quant=params(scale, -10))
    assert isinstance(create_op(node), QuantBinary)
    check(node, [a, b], exact)


# -- pooling -----------------------------------------------------------------------------

def pool_int64(x, xzero, kernel, stride, pads, is_max):
    """Per window: the max of q, or the exact sum of q - xzero and the real-cell count."""
    n, h, w, c = x.shape
    top, bottom, left, right = pads
    oh = (h + top + bottom - kernel[0]) // stride[0] + 1
    ow = (w + left + right - kernel[1]) // stride[1] + 1
    values = np.zeros((n, oh, ow, c), np.int64)
    counts = np.zeros((oh, ow, 1), np.int64)
    for i in range(oh):
        for j in range(ow):
            h0, w0 = i * stride[0] - top, j * stride[1] - left
            cells = x[:, max(h0, 0):min(h0 + kernel[0], h), max(w0, 0):min(w0 + kernel[1], w)]
            cells = cells.astype(np.int64)
            values[:, i, j] = cells.max(axis=(1, 2)) if is_max else (cells - xzero).sum(
                axis=(1, 2))
            counts[i, j] = cells.shape[1] * cells.shape[2]
    return values, counts


@pytest.mark.parametrize("is_max", [True, False])
@pytest.mark.parametrize("same_params", [True, False])
def test_pooling(is_max: bool, same_params: bool) -> None:
    rng = np.random.default_rng(8)
    x, xs = q_input(rng, (2, 7, 6, 5), np.int8, 0.05, 3)
    kernel, stride, pads = (3, 3), (2, 2), (1, 1, 1, 0)
    out_scale, out_zero = (0.05, 3) if same_params else (0.03, -11)
    values, counts = pool_int64(x, 3, kernel, stride, pads, is_max)
    real = (values - 3) * 0.05 if is_max else values * 0.05 / counts
    exact = requantise(real, RELU6, out_scale, out_zero, np.int8)
    attrs_type = na.MaxPoolFusion if is_max else na.AvgPoolFusion
    node = make_node(na.NODE_TYPE_MAX_POOL_FUSION if is_max else na.NODE_TYPE_AVGPOOL_FUSION,
                     attrs_type(kernelSize=list(kernel), strides=list(stride),
                                padMode=ht.PAD_MODE_PAD, pad=list(pads),
                                format=ht.FORMAT_NHWC, activationType=RELU6),
                     [xs], out_dtype=np.int8, out_shape=exact.shape, quant_type=ALL,
                     out_quant=params(out_scale, out_zero))
    check(node, [x], exact)


def test_global_average_pooling() -> None:
    rng = np.random.default_rng(9)
    x, xs = q_input(rng, (2, 5, 5, 7), np.int8, 0.05, 3)
    values, counts = pool_int64(x, 3, (5, 5), (1, 1), (0, 0, 0, 0), False)
    exact = requantise(values * 0.05 / counts, 0, 0.01, 1, np.int8)
    node = make_node(na.NODE_TYPE_AVGPOOL_FUSION,
                     na.AvgPoolFusion(**{"global": True}, format=ht.FORMAT_NHWC),
                     [xs], out_dtype=np.int8, out_shape=exact.shape, quant_type=ALL,
                     out_quant=params(0.01, 1))
    check(node, [x], exact)


# -- data movement -----------------------------------------------------------------------

def test_quantised_movement_keeps_its_bytes() -> None:
    """Reshape, Transpose, Concat as QUANT_TYPE_ALL nodes with one set of parameters run as
    the plain movement kernels: the bytes move unchanged."""
    rng = np.random.default_rng(10)
    q = params(0.05, 3)
    x = rng.integers(-128, 128, (2, 3, 4)).astype(np.int8)
    xs = tensor_spec(0, np.int8, x.shape, quant=q)
    cases = [
        (na.NODE_TYPE_RESHAPE, na.Reshape(), [xs, Const(np.array([4, 6], np.int64))],
         [x], x.reshape(4, 6)),
        (na.NODE_TYPE_TRANSPOSE, na.Transpose(), [xs, Const(np.array([2, 0, 1], np.int32))],
         [x], x.transpose(2, 0, 1)),
        (na.NODE_TYPE_CONCAT, na.Concat(axis=1), [xs, tensor_spec(1, np.int8, x.shape,
                                                                  quant=q)],
         [x, x[::-1].copy()], np.concatenate([x, x[::-1]], axis=1)),
    ]
    for node_type, attrs, specs, inputs, want in cases:
        node = make_node(node_type, attrs, specs, out_dtype=np.int8, out_shape=want.shape,
                         quant_type=ALL, out_quant=q)
        assert create_op(node).node.quant_type == ht.QUANT_TYPE_NONE
        (gpu,) = run_gpu(node_graph(node), inputs)
        np.testing.assert_array_equal(gpu, want)


# -- models ------------------------------------------------------------------------------

@pytest.mark.parametrize("make", [int8_cnn, int8_mlp], ids=lambda m: m.__name__)
def test_accel_int8_models(make) -> None:
    builder, x, shape = make()
    graph = graph_of(builder)
    (gpu,), (cpu,) = run_gpu(graph, [x]), run_cpu(graph, [x])
    assert gpu.shape == shape and steps(gpu, cpu) <= 1


@pytest.mark.parametrize("name", list(int8_models.MODELS))
def test_ort_int8_models(name: str) -> None:
    model = int8_models.MODELS[name]()
    gpu, cpu = run_gpu(model.graph, model.inputs), run_cpu(model.graph, model.inputs)
    assert int8_models.steps_apart(gpu, cpu) <= 1


def test_deep_cnn_equals_the_int64_reference() -> None:
    model, layers = int8_models.deep_cnn()
    (gpu,) = run_gpu(model.graph, model.inputs)
    np.testing.assert_array_equal(gpu, int8_models.exact_deep_cnn(layers, model.inputs[0]))


# -- refusals ----------------------------------------------------------------------------

def _conv_node(x_spec, act=RELU, **attrs):
    w = np.ones((4, 3, 3, 4), np.int8)
    return make_node(na.NODE_TYPE_CONV2D_FUSION,
                     na.Conv2DFusion(kernelSize=[3, 3], padMode=ht.PAD_MODE_SAME, group=1,
                                     inChannel=4, outChannel=4, activationType=act, **attrs),
                     [x_spec, tensor_spec(1, np.int8, w.shape, constant=w,
                                          quant=params(0.01, 0))],
                     out_dtype=np.int8, out_shape=(1, 5, 5, 4), quant_type=ALL,
                     out_quant=params(0.1, 0))


@pytest.mark.parametrize("node,reason", [
    (lambda: _conv_node(tensor_spec(0, np.int8, (1, 5, 5, 4), quant=params(0.05, 0)),
                        ht.ACTIVATION_TYPE_SIGMOID), "fused activation"),
    (lambda: _conv_node(tensor_spec(0, np.int8, (1, 5, 5, 4),
                                    quant=[QuantParam(8, 0, 0.1)] * 4)), "per-channel"),
    (lambda: make_node(na.NODE_TYPE_SOFTMAX, na.Softmax(axis=[-1]),
                       [tensor_spec(0, np.int8, (2, 8), quant=params(0.1, 0))],
                       out_dtype=np.int8, out_shape=(2, 8), quant_type=ALL,
                       out_quant=params(1 / 256, -128)), "quantised NODE_TYPE_SOFTMAX has no GPU kernel"),
], ids=["sigmoid", "per-channel-activation", "softmax"])
def test_refused_with_the_reason(node, reason: str) -> None:
    with pytest.raises(DriverError, match=reason) as info:
        create_op(node())
    assert info.value.code == ht.NNRT_UNSUPPORTED_OP


# -- through the driver process ----------------------------------------------------------

@pytest.fixture(scope="module")
def drivers(tmp_path_factory):
    from tests.conftest import start_driver

    runtime = tmp_path_factory.mktemp("int8") / "rt"
    cpu = start_driver(runtime, "cpu")
    gpu = start_driver(runtime, "gpu", "--cl-device", "any")
    yield cpu, gpu
    for driver in (gpu, cpu):
        driver.stop()


@pytest.mark.parametrize("make", [int8_cnn, int8_mlp], ids=lambda m: m.__name__)
def test_int8_models_through_the_gpu_driver(drivers, make) -> None:
    """A real GPU driver (PoCL) accepts every node of the int8 models and answers what the
    CPU driver answers, within one step."""
    from tests.helpers.hdi_models import run_int8

    cpu_driver, gpu_driver = drivers
    builder, x, shape = make()
    with gpu_driver.client() as gpu, cpu_driver.client() as cpu:
        with builder.packed(gpu) as model:
            assert all(gpu.get_supported_operation(model).ops)
        (got,) = run_int8(gpu, builder, x, shape)
        (want,) = run_int8(cpu, builder, x, shape)
    assert steps(got, want) <= 1
