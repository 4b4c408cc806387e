"""Operations built into small models through the C API, prepared and run by a real CPU driver
and checked against numpy: a few networks end to end, then every operation the CPU driver
computes (their AddOperation checks and lowering: test_operations_lowering.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from nnrt.client.capi import enums as E
from nnrt.client.capi.enums import OH_NN_BOOL, OH_NN_INT8, OH_NN_INT32, OH_NN_INT64, OH_NN_SUCCESS
from nnrt.client.capi.model import OH_NNModel_GetAvailableOperations
from nnrt.client.capi.operation_table import OPERATIONS
from nnrt.client.core.device import registry
from nnrt.hdi.reference import ops as _cpu_ops  # noqa: F401  (registers the kernels)
from nnrt.hdi.reference.kernel import KERNELS
from tests.client.capi.conftest import run_lowered
from tests.client.capi.util_capi import NP_TYPES, Graph
from tests.client.capi.test_operations_lowering import F32, O, op_id


# -- end to end: built through the C API, run by a real CPU driver ---------------------------

RNG = np.random.default_rng(7)


def f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def conv_nhwc(x, w, b, stride=1, pad=(0, 0, 0, 0)):
    """Independent reference: NHWC input, weight [outC, kH, kW, inC], explicit loops."""
    x = np.pad(x, ((0, 0), (pad[0], pad[1]), (pad[2], pad[3]), (0, 0)))
    n, h, wd, _ = x.shape
    oc, kh, kw, _ = w.shape
    oh, ow = (h - kh) // stride + 1, (wd - kw) // stride + 1
    out = np.zeros((n, oh, ow, oc), np.float64)
    for i in range(oh):
        for j in range(ow):
            patch = x[:, i * stride:i * stride + kh, j * stride:j * stride + kw, :]
            out[:, i, j, :] = np.tensordot(patch, w, axes=([1, 2, 3], [1, 2, 3]))
    return (out + b).astype(np.float32)


def pool_nhwc(x, k, stride, fn):
    n, h, w, c = x.shape
    oh, ow = (h - k) // stride + 1, (w - k) // stride + 1
    out = np.zeros((n, oh, ow, c), np.float32)
    for i in range(oh):
        for j in range(ow):
            out[:, i, j, :] = fn(x[:, i * stride:i * stride + k, j * stride:j * stride + k, :],
                                 axis=(1, 2))
    return out


@pytest.fixture(scope="module")
def client(capi_runtime_module):
    return registry().get(0).client()


def test_conv_relu_then_pooling(client):
    g = Graph()
    x = g.tensor(F32, [1, 6, 6, 2])
    w_val, b_val = f32(3, 3, 3, 2), f32(3)
    w, b = g.constant(w_val), g.constant(b_val)
    conv_params = [g.param(E.OH_NN_CONV2D_STRIDES, OH_NN_INT64, [1, 1]),
                   g.param(E.OH_NN_CONV2D_PAD, OH_NN_INT64, [1, 1, 1, 1]),
                   g.param(E.OH_NN_CONV2D_DILATION, OH_NN_INT64, [1, 1]),
                   g.param(E.OH_NN_CONV2D_ACTIVATION_TYPE, OH_NN_INT8, [E.OH_NN_FUSED_RELU]),
                   g.param(E.OH_NN_CONV2D_GROUP, OH_NN_INT64, [1])]
    c = g.tensor(F32, [1, 6, 6, 3])
    g.add_op(O.OH_NN_OPS_CONV2D, [x, w, b], [c], conv_params)
    mx = g.tensor(F32, [1, 3, 3, 3])
    g.add_op(O.OH_NN_OPS_MAX_POOL, [c], [mx],
             [g.param(E.OH_NN_MAX_POOL_KERNEL_SIZE, OH_NN_INT64, [2, 2]),
              g.param(E.OH_NN_MAX_POOL_STRIDE, OH_NN_INT64, [2, 2]),
              g.param(E.OH_NN_MAX_POOL_PAD_MODE, OH_NN_INT8, [1])])  # 'valid'
    av = g.tensor(F32, [1, 2, 2, 3])
    g.add_op(O.OH_NN_OPS_AVG_POOL, [mx], [av],
             [g.param(E.OH_NN_AVG_POOL_KERNEL_SIZE, OH_NN_INT64, [2, 2]),
              g.param(E.OH_NN_AVG_POOL_STRIDE, OH_NN_INT64, [1, 1])])
    model = g.finish([x], [mx, av])
    assert OH_NNModel_GetAvailableOperations(model, 0) == (OH_NN_SUCCESS, [True] * 3)
    xv = f32(1, 6, 6, 2)
    got_max, got_avg = run_lowered(client, model, [xv])
    ref_conv = np.maximum(conv_nhwc(xv, w_val, b_val, pad=(1, 1, 1, 1)), 0)
    ref_max = pool_nhwc(ref_conv, 2, 2, np.max)
    np.testing.assert_allclose(got_max, ref_max, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got_avg, pool_nhwc(ref_max, 2, 1, np.mean), rtol=1e-5, atol=1e-5)


def test_depthwise_convolution(client):
    g = Graph()
    x = g.tensor(F32, [1, 5, 5, 2])
    w_val, b_val = f32(4, 3, 3, 1), f32(4)  # channel multiplier 2
    y = g.tensor(F32, [1, 3, 3, 4])
    g.add_op(O.OH_NN_OPS_DEPTHWISE_CONV2D_NATIVE, [x, g.constant(w_val), g.constant(b_val)], [y])
    model = g.finish([x], [y])
    xv = f32(1, 5, 5, 2)
    (got,) = run_lowered(client, model, [xv])
    ref = np.zeros((1, 3, 3, 4), np.float32)
    for c in range(2):
        for k in range(2):
            oc = c * 2 + k  # TensorFlow's order (semantics.md)
            ref[..., oc] = conv_nhwc(xv[..., c:c + 1], w_val[oc:oc + 1], b_val[oc:oc + 1])[..., 0]
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


def test_full_connection_softmax(client):
    g = Graph()
    x = g.tensor(F32, [4, 5])
    w_val, b_val = f32(3, 5), f32(3)
    h = g.tensor(F32, [4, 3])
    g.add_op(O.OH_NN_OPS_FULL_CONNECTION, [x, g.constant(w_val), g.constant(b_val)], [h],
             [g.param(E.OH_NN_FULL_CONNECTION_ACTIVATIONTYPE, OH_NN_INT8, [E.OH_NN_FUSED_RELU6])])
    y = g.tensor(F32, [4, 3])
    g.add_op(O.OH_NN_OPS_SOFTMAX, [h], [y], [g.param(E.OH_NN_SOFTMAX_AXIS, OH_NN_INT64, [1])])
    model = g.finish([x], [y])
    xv = f32(4, 5) * 3
    (got,) = run_lowered(client, model, [xv])
    hv = np.clip(xv @ w_val.T + b_val, 0, 6)
    e = np.exp(hv - hv.max(axis=1, keepdims=True))
    np.testing.assert_allclose(got, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)


def test_reshape_transpose_concat(client):
    g = Graph()
    x = g.tensor(F32, [2, 6])
    r = g.tensor(F32, [2, 3, 2])
    g.add_op(O.OH_NN_OPS_RESHAPE, [x, g.constant(np.array([2, 3, 2], np.int64), OH_NN_INT64)], [r])
    t = g.tensor(F32, [3, 2, 2])
    g.add_op(O.OH_NN_OPS_TRANSPOSE, [r, g.constant(np.array([1, 0, 2], np.int32), OH_NN_INT32)], [t])
    other = g.tensor(F32, [3, 2, 1])
    y = g.tensor(F32, [3, 2, 3])
    g.add_op(O.OH_NN_OPS_CONCAT, [t, other], [y], [g.param(E.OH_NN_CONCAT_AXIS, OH_NN_INT64, [2])])
    model = g.finish([x, other], [y])
    xv, ov = f32(2, 6), f32(3, 2, 1)
    (got,) = run_lowered(client, model, [xv, ov])
    ref = np.concatenate([xv.reshape(2, 3, 2).transpose(1, 0, 2), ov], axis=2)
    np.testing.assert_array_equal(got, ref)


def test_matmul_and_binary_ops_with_fused_activations(client):
    g = Graph()
    a, b = g.tensor(F32, [2, 3]), g.tensor(F32, [4, 3])
    m = g.tensor(F32, [2, 4])
    g.add_op(O.OH_NN_OPS_MATMUL, [a, b], [m],
             [g.param(E.OH_NN_MATMUL_TRANSPOSE_B, OH_NN_BOOL, [True])])
    c = g.constant(f32(2, 4))
    s = g.tensor(F32, [2, 4])
    g.add_op(O.OH_NN_OPS_SUB, [m, c], [s], [g.param(E.OH_NN_SUB_ACTIVATIONTYPE, OH_NN_INT8, [1])])
    p = g.tensor(F32, [2, 4])
    g.add_op(O.OH_NN_OPS_MUL, [s, m], [p], [g.param(E.OH_NN_MUL_ACTIVATION_TYPE, OH_NN_INT8, [2])])
    d = g.tensor(F32, [2, 4])
    g.add_op(O.OH_NN_OPS_DIV, [p, c], [d])
    model = g.finish([a, b], [d])
    av, bv = f32(2, 3), f32(4, 3)
    (got,) = run_lowered(client, model, [av, bv])
    cv = model.tensors[c].data
    mv = av @ bv.T
    ref = np.clip(np.maximum(mv - cv, 0) * mv, 0, 6) / cv
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


ACTIVATIONS = [
    (O.OH_NN_OPS_RELU, [], lambda x: np.maximum(x, 0)),
    (O.OH_NN_OPS_RELU6, [], lambda x: np.clip(x, 0, 6)),
    (O.OH_NN_OPS_SIGMOID, [], lambda x: 1 / (1 + np.exp(-x))),
    (O.OH_NN_OPS_TANH, [], np.tanh),
    (O.OH_NN_OPS_ABS, [], np.abs),
    (O.OH_NN_OPS_HSWISH, [], lambda x: x * np.clip(x + 3, 0, 6) / 6),
    (O.OH_NN_OPS_SWISH, [], lambda x: x / (1 + np.exp(-x))),
    (O.OH_NN_OPS_LEAKY_RELU, [(E.OH_NN_LEAKY_RELU_NEGATIVE_SLOPE, F32, 0.25)],
     lambda x: np.where(x >= 0, x, 0.25 * x)),
]


@pytest.mark.parametrize("op, params, ref", ACTIVATIONS, ids=[op_id(a[0]) for a in ACTIVATIONS])
def test_activation_operations(client, op, params, ref):
    g = Graph()
    x, y = g.tensor(F32, [3, 4]), g.tensor(F32, [3, 4])
    g.add_op(op, [x], [y], [g.param(t, dt, [v]) for t, dt, v in params])
    model = g.finish([x], [y])
    xv = f32(3, 4) * 4
    (got,) = run_lowered(client, model, [xv])
    np.testing.assert_allclose(got, ref(xv.astype(np.float64)), rtol=1e-5, atol=1e-6)


def test_reduce_mean_coeff_defaults_to_one(client):
    g = Graph()
    x, y = g.tensor(F32, [2, 3, 4]), g.tensor(F32, [2, 1, 4])
    axes = g.constant(np.array([1], np.int32), OH_NN_INT32)
    g.add_op(O.OH_NN_OPS_REDUCE_MEAN, [x, axes], [y],
             [g.param(E.OH_NN_REDUCE_MEAN_KEEP_DIMS, OH_NN_BOOL, [True])])
    model = g.finish([x], [y])
    xv = f32(2, 3, 4)
    supported = OH_NNModel_GetAvailableOperations(model, 0)
    if supported != (OH_NN_SUCCESS, [True]):
        pytest.skip(f"the CPU driver does not compute this ReduceFusion: {supported}")
    (got,) = run_lowered(client, model, [xv])
    np.testing.assert_allclose(got, xv.mean(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)


# -- every operation the CPU driver computes: built through the C API, run, compared --------

OH_OF_NP = {np.dtype(v): k for k, v in NP_TYPES.items()}
R = np.random.default_rng(11)


def rnd(*shape, lo=-3.0, hi=3.0):
    return R.uniform(lo, hi, shape).astype(np.float32)


def inp(a):
    return ("in", np.asarray(a))


def const(a):
    return ("const", np.asarray(a))


def p(tensor_type, values, data_type=None, shape=...):
    values = np.asarray(values)
    dt = data_type if data_type is not None else OH_OF_NP[values.dtype]
    return tensor_type, dt, values.reshape(-1).tolist(), shape


def f64(fn):
    """A reference computed in float64 from the float32 inputs."""
    return lambda *xs: [np.asarray(r) for r in fn(*[np.asarray(x, np.float64) if x.dtype == np.float32 else x
                                                     for x in xs])]


_erf = np.vectorize(math.erf)


def lstm_ref(x, w_ih, w_hh, b, h0, c0):
    h, c = h0[0, 0].astype(np.float64), c0[0, 0].astype(np.float64)
    H = h.size
    ys = []
    for t in range(x.shape[0]):
        gates = w_ih[0] @ x[t, 0] + b[0, :4 * H] + w_hh[0] @ h + b[0, 4 * H:]
        i, f, g, o = (gates[k * H:(k + 1) * H] for k in range(4))
        sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
        c = sig(f) * c + sig(i) * np.tanh(g)
        h = sig(o) * np.tanh(c)
        ys.append(h.copy())
    return [np.array(ys)[:, None, :], h[None, None, :], c[None, None, :]]


def deconv_nhwc(x, w, b, stride):
    """Transposed convolution, NHWC, weight [outC, kH, kW, inC], no padding: explicit loops."""
    n, h, wd, _ = x.shape
    oc, kh, kw, _ = w.shape
    out = np.zeros((n, (h - 1) * stride + kh, (wd - 1) * stride + kw, oc))
    for i in range(h):
        for j in range(wd):
            out[:, i * stride:i * stride + kh, j * stride:j * stride + kw, :] += \
                np.einsum("nc,okjc->nkjo", x[:, i, j, :], w)
    return out + b


X23 = rnd(2, 3)
Y23 = rnd(2, 3)
POS = rnd(2, 3, lo=0.5, hi=3.0)
X4 = rnd(1, 4, 4, 2)
B23 = np.array([[True, False, True], [False, False, True]])
LSTM_IN = [rnd(2, 1, 3), rnd(1, 8, 3, lo=-1, hi=1), rnd(1, 8, 2, lo=-1, hi=1), rnd(1, 16, lo=-1, hi=1),
           rnd(1, 1, 2, lo=-1, hi=1), rnd(1, 1, 2, lo=-1, hi=1)]

# (operation, inputs, outputs [(numpy dtype, shape)], parameters, reference or None: run only)
CPU_CASES: list[tuple] = [
    (O.OH_NN_OPS_ADD, [inp(X23), const(Y23[0])], [(np.float32, [2, 3])],
     [p(E.OH_NN_ADD_ACTIVATIONTYPE, np.int8([2]))], f64(lambda a, b: [np.clip(a + b, 0, 6)])),
    (O.OH_NN_OPS_MAXIMUM, [inp(X23), inp(Y23)], [(np.float32, [2, 3])], [], f64(lambda a, b: [np.maximum(a, b)])),
    (O.OH_NN_OPS_MINIMUM, [inp(X23), inp(Y23)], [(np.float32, [2, 3])], [], f64(lambda a, b: [np.minimum(a, b)])),
    (O.OH_NN_OPS_SQUARED_DIFFERENCE, [inp(X23), inp(Y23)], [(np.float32, [2, 3])], [],
     f64(lambda a, b: [(a - b) ** 2])),
    (O.OH_NN_OPS_MOD, [inp(X23), const(np.float32([1.5]))], [(np.float32, [2, 3])], [],
     f64(lambda a, b: [np.fmod(a, b)])),
    (O.OH_NN_OPS_ELTWISE, [inp(X23), inp(Y23)], [(np.float32, [2, 3])],
     [p(E.OH_NN_ELTWISE_MODE, np.int8([1]))], f64(lambda a, b: [a + b])),
    (O.OH_NN_OPS_POW, [inp(POS), const(np.float32([2.0]))], [(np.float32, [2, 3])],
     [p(E.OH_NN_POW_SCALE, np.float32([2.0])), p(E.OH_NN_POW_SHIFT, np.float32([1.0]))],
     f64(lambda a, e: [(2 * a + 1) ** e])),
    (O.OH_NN_OPS_BIAS_ADD, [inp(X23), const(Y23[1])], [(np.float32, [2, 3])], [],
     f64(lambda a, b: [a + b])),
    (O.OH_NN_OPS_PRELU, [inp(X23), const(np.float32([0.1, 0.2, 0.3]))], [(np.float32, [2, 3])], [],
     f64(lambda a, s: [np.where(a >= 0, a, a * s)])),
    (O.OH_NN_OPS_SCALE, [inp(rnd(2, 3, 4)), const(rnd(3)), const(rnd(3))], [(np.float32, [2, 3, 4])],
     [p(E.OH_NN_SCALE_AXIS, np.int64([1]))], f64(lambda a, s, b: [a * s[:, None] + b[:, None]])),
    (O.OH_NN_OPS_SQRT, [inp(POS)], [(np.float32, [2, 3])], [], f64(lambda a: [np.sqrt(a)])),
    (O.OH_NN_OPS_RSQRT, [inp(POS)], [(np.float32, [2, 3])], [], f64(lambda a: [1 / np.sqrt(a)])),
    (O.OH_NN_OPS_LOG, [inp(POS)], [(np.float32, [2, 3])], [], f64(lambda a: [np.log(a)])),
    (O.OH_NN_OPS_SIN, [inp(X23)], [(np.float32, [2, 3])], [], f64(lambda a: [np.sin(a)])),
    (O.OH_NN_OPS_COS, [inp(X23)], [(np.float32, [2, 3])], [], f64(lambda a: [np.cos(a)])),
    (O.OH_NN_OPS_NEG, [inp(X23)], [(np.float32, [2, 3])], [], f64(lambda a: [-a])),
    (O.OH_NN_OPS_RECIPROCAL, [inp(POS)], [(np.float32, [2, 3])], [], f64(lambda a: [1 / a])),
    (O.OH_NN_OPS_FLOOR, [inp(X23)], [(np.float32, [2, 3])], [], f64(lambda a: [np.floor(a)])),
    (O.OH_NN_OPS_CEIL, [inp(X23)], [(np.float32, [2, 3])], [], f64(lambda a: [np.ceil(a)])),
    (O.OH_NN_OPS_ROUND, [inp(np.float32([[0.5, 1.5, 2.5], [-0.5, 2.4, -2.6]]))], [(np.float32, [2, 3])],
     [], f64(lambda a: [np.rint(a)])),
    (O.OH_NN_OPS_SQUARE, [inp(X23)], [(np.float32, [2, 3])], [], f64(lambda a: [a * a])),
    (O.OH_NN_OPS_ERF, [inp(X23)], [(np.float32, [2, 3])], [], f64(lambda a: [_erf(a)])),
    (O.OH_NN_OPS_EXP, [inp(X23)], [(np.float32, [2, 3])],
     [p(E.OH_NN_EXP_SCALE, np.float32([0.5])), p(E.OH_NN_EXP_SHIFT, np.float32([0.25]))],
     f64(lambda a: [np.exp(0.5 * a + 0.25)])),
    (O.OH_NN_OPS_GELU, [inp(X23)], [(np.float32, [2, 3])], [],
     f64(lambda a: [0.5 * a * (1 + _erf(a / math.sqrt(2)))])),
    (O.OH_NN_OPS_HARD_SIGMOID, [inp(X23 * 2)], [(np.float32, [2, 3])], [],
     f64(lambda a: [np.clip((a + 3) / 6, 0, 1)])),
    (O.OH_NN_OPS_CLIP, [inp(X23)], [(np.float32, [2, 3])], [p(E.OH_NN_CLIP_MAX, np.float32([0.5]))],
     f64(lambda a: [np.minimum(a, 0.5)])),  # no min: unbounded below (semantics.md)
    (O.OH_NN_OPS_EQUAL, [inp(np.int32([1, 2, 3])), inp(np.int32([1, 0, 3]))], [(np.bool_, [3])], [],
     lambda a, b: [a == b]),
    (O.OH_NN_OPS_NOT_EQUAL, [inp(X23), inp(Y23)], [(np.bool_, [2, 3])], [], lambda a, b: [a != b]),
    (O.OH_NN_OPS_LESS, [inp(X23), inp(Y23)], [(np.bool_, [2, 3])], [], lambda a, b: [a < b]),
    (O.OH_NN_OPS_LESS_EQUAL, [inp(X23), inp(Y23)], [(np.bool_, [2, 3])], [], lambda a, b: [a <= b]),
    (O.OH_NN_OPS_GREATER, [inp(X23), inp(Y23)], [(np.bool_, [2, 3])], [], lambda a, b: [a > b]),
    (O.OH_NN_OPS_GREATER_EQUAL, [inp(X23), inp(Y23)], [(np.bool_, [2, 3])], [], lambda a, b: [a >= b]),
    (O.OH_NN_OPS_LOGICAL_AND, [inp(B23), inp(~B23[::-1])], [(np.bool_, [2, 3])], [],
     lambda a, b: [a & b]),
    (O.OH_NN_OPS_LOGICAL_OR, [inp(B23), inp(~B23[::-1])], [(np.bool_, [2, 3])], [], lambda a, b: [a | b]),
    (O.OH_NN_OPS_LOGICAL_NOT, [inp(B23)], [(np.bool_, [2, 3])], [], lambda a: [~a]),
    (O.OH_NN_OPS_WHERE, [inp(B23), inp(X23), inp(Y23)], [(np.float32, [2, 3])], [],
     lambda c, a, b: [np.where(c, a, b)]),
    (O.OH_NN_OPS_SELECT, [inp(B23), inp(X23), inp(Y23)], [(np.float32, [2, 3])], [],
     lambda c, a, b: [np.where(c, a, b)]),
    (O.OH_NN_OPS_SQUEEZE, [inp(rnd(2, 1, 3))], [(np.float32, [2, 3])],
     [p(E.OH_NN_SQUEEZE_AXIS, np.int64([1]))], lambda a: [a[:, 0]]),
    (O.OH_NN_OPS_UNSQUEEZE, [inp(X23)], [(np.float32, [2, 1, 3])], [p(E.OH_NN_UNSQUEEZE_AXIS, np.int64([1]))],
     lambda a: [a[:, None]]),
    (O.OH_NN_OPS_EXPAND_DIMS, [inp(X23), const(np.int32([0]))], [(np.float32, [1, 2, 3])], [],
     lambda a, _: [a[None]]),
    (O.OH_NN_OPS_FLATTEN, [inp(rnd(2, 3, 4))], [(np.float32, [2, 12])], [], lambda a: [a.reshape(2, 12)]),
    (O.OH_NN_OPS_TILE, [inp(X23), const(np.int64([2, 1]))], [(np.float32, [4, 3])], [],
     lambda a, m: [np.tile(a, (2, 1))]),  # TILE_DIMS omitted: upstream's [0] default
    (O.OH_NN_OPS_SLICE, [inp(X23), const(np.int32([0, 1])), const(np.int32([2, 2]))],
     [(np.float32, [2, 2])], [], lambda a, *_: [a[0:2, 1:3]]),
    (O.OH_NN_OPS_STRIDED_SLICE, [inp(rnd(3, 4)), const(np.int32([0, 0])), const(np.int32([3, 4])),
                                 const(np.int32([2, 2]))], [(np.float32, [2, 2])],
     [p(E.OH_NN_STRIDED_SLICE_BEGIN_MASK, np.int64([0]))], lambda a, *_: [a[0:3:2, 0:4:2]]),
    (O.OH_NN_OPS_CROP, [inp(rnd(3, 4)), const(np.int64([2, 2]))], [(np.float32, [2, 2])],
     [p(E.OH_NN_CROP_AXIS, np.int64([0])), p(E.OH_NN_CROP_OFFSET, np.int64([1, 1]))],
     lambda a, _: [a[1:3, 1:3]]),
    (O.OH_NN_OPS_BROADCAST_TO, [inp(rnd(1, 3))], [(np.float32, [2, 3])],
     [p(E.OH_NN_BROADCAST_TO_SHAPE, np.int64([2, 3]))], lambda a: [np.broadcast_to(a, (2, 3))]),
    (O.OH_NN_OPS_GATHER, [inp(X23), const(np.int32([1, 0, 1])), const(np.int32([0]))],
     [(np.float32, [3, 3])], [], lambda a, i, _: [a[i]]),
    (O.OH_NN_OPS_GATHER_ND, [inp(X23), const(np.int32([[1, 2], [0, 0]]))], [(np.float32, [2])], [],
     lambda a, _: [np.array([a[1, 2], a[0, 0]])]),
    (O.OH_NN_OPS_STACK, [inp(X23), inp(Y23)], [(np.float32, [2, 2, 3])], [p(E.OH_NN_STACK_AXIS, np.int64([1]))],
     lambda a, b: [np.stack([a, b], axis=1)]),
    (O.OH_NN_OPS_UNSTACK, [inp(X23)], [(np.float32, [3]), (np.float32, [3])], [],
     lambda a: [a[0], a[1]]),
    (O.OH_NN_OPS_SPLIT, [inp(rnd(2, 4))], [(np.float32, [2, 1]), (np.float32, [2, 3])],
     [p(E.OH_NN_SPLIT_AXIS, np.int64([1])), p(E.OH_NN_SPLIT_OUTPUT_NUM, np.int64([2])),
      p(E.OH_NN_SPLIT_SIZE_SPLITS, np.int64([1, 3]))], lambda a: [a[:, :1], a[:, 1:]]),
    (O.OH_NN_OPS_PAD, [inp(X23), const(np.int32([[0, 1], [2, 0]]))], [(np.float32, [3, 5])],
     [p(E.OH_NN_PAD_CONSTANT_VALUE, np.float32([0.5]))],
     lambda a, _: [np.pad(a, ((0, 1), (2, 0)), constant_values=0.5)]),
    (O.OH_NN_OPS_SPACE_TO_DEPTH, [inp(X4)], [(np.float32, [1, 2, 2, 8])],
     [p(E.OH_NN_SPACE_TO_DEPTH_BLOCK_SIZE, np.int64([2]))],
     lambda a: [a.reshape(1, 2, 2, 2, 2, 2).transpose(0, 1, 3, 2, 4, 5).reshape(1, 2, 2, 8)]),
    (O.OH_NN_OPS_DEPTH_TO_SPACE, [inp(rnd(1, 2, 2, 8))], [(np.float32, [1, 4, 4, 2])],
     [p(E.OH_NN_DEPTH_TO_SPACE_BLOCK_SIZE, np.int64([2]))],  # mode omitted: DCR
     lambda a: [a.reshape(1, 2, 2, 2, 2, 2).transpose(0, 1, 3, 2, 4, 5).reshape(1, 4, 4, 2)]),
    (O.OH_NN_OPS_SPACE_TO_BATCH_ND, [inp(X4)], [(np.float32, [4, 2, 2, 2])],
     [p(E.OH_NN_SPACE_TO_BATCH_ND_BLOCK_SHAPE, np.int64([2, 2])),
      p(E.OH_NN_SPACE_TO_BATCH_ND_PADDINGS, np.int64([0, 0, 0, 0]), shape=[2, 2])],
     lambda a: [a.reshape(1, 2, 2, 2, 2, 2).transpose(2, 4, 0, 1, 3, 5).reshape(4, 2, 2, 2)]),
    (O.OH_NN_OPS_BATCH_TO_SPACE_ND, [inp(rnd(4, 2, 2, 2))], [(np.float32, [1, 4, 4, 2])],
     [p(E.OH_NN_BATCH_TO_SPACE_ND_BLOCKSIZE, np.int64([2, 2]))],
     lambda a: [a.reshape(2, 2, 1, 2, 2, 2).transpose(2, 3, 0, 4, 1, 5).reshape(1, 4, 4, 2)]),
    (O.OH_NN_OPS_SHAPE, [inp(rnd(2, 3, 4))], [(np.int32, [3])], [], lambda a: [np.int32([2, 3, 4])]),
    (O.OH_NN_OPS_RANK, [inp(rnd(2, 3, 4))], [(np.int32, [])], [], lambda a: [np.int32(3)]),
    (O.OH_NN_OPS_REDUCE_SUM, [inp(rnd(2, 3, 4)), const(np.int32([1]))], [(np.float32, [2, 4])], [],
     f64(lambda a, _: [a.sum(axis=1)])),  # coeff omitted: 1.0 (semantics.md)
    (O.OH_NN_OPS_REDUCE_MAX, [inp(rnd(2, 3, 4)), const(np.int32([2]))], [(np.float32, [2, 3, 1])],
     [p(E.OH_NN_REDUCE_MAX_KEEP_DIMS, np.bool_([True]))], f64(lambda a, _: [a.max(axis=2, keepdims=True)])),
    (O.OH_NN_OPS_REDUCE_MIN, [inp(rnd(2, 3, 4)), const(np.int32([0]))], [(np.float32, [3, 4])], [],
     f64(lambda a, _: [a.min(axis=0)])),
    (O.OH_NN_OPS_REDUCE_PROD, [inp(rnd(2, 3)), const(np.int32([1]))], [(np.float32, [2])],
     [p(E.OH_NN_REDUCE_PROD_COEFF, np.float32([2.0]))], f64(lambda a, _: [2 * a.prod(axis=1)])),
    (O.OH_NN_OPS_REDUCE_L2, [inp(rnd(2, 3)), const(np.int32([1]))], [(np.float32, [2])], [],
     f64(lambda a, _: [np.sqrt((a * a).sum(axis=1))])),
    (O.OH_NN_OPS_REDUCE_ALL, [inp(B23), const(np.int32([1]))], [(np.bool_, [2])], [],
     lambda a, _: [a.all(axis=1)]),
    (O.OH_NN_OPS_ALL, [inp(B23), const(np.int32([0]))], [(np.bool_, [3])], [], lambda a, _: [a.all(axis=0)]),
    (O.OH_NN_OPS_ARG_MAX, [inp(X23)], [(np.int32, [2])], [], lambda a: [np.argmax(a, axis=-1).astype(np.int32)]),
    (O.OH_NN_OPS_TOP_K, [inp(rnd(2, 5)), const(np.int32([2]))], [(np.float32, [2, 2]), (np.int32, [2, 2])], [],
     lambda a, _: [np.sort(a, axis=-1)[:, ::-1][:, :2], np.argsort(-a, axis=-1)[:, :2].astype(np.int32)]),
    (O.OH_NN_OPS_SOFTMAX, [inp(X23)], [(np.float32, [2, 3])], [],  # no axis: the last
     f64(lambda a: [np.exp(a) / np.exp(a).sum(axis=-1, keepdims=True)])),
    (O.OH_NN_OPS_LOG_SOFTMAX, [inp(X23)], [(np.float32, [2, 3])], [p(E.OH_NN_LOG_SOFTMAX_AXIS, np.int64([-1]))],
     f64(lambda a: [a - np.log(np.exp(a).sum(axis=-1, keepdims=True))])),
    (O.OH_NN_OPS_BATCH_NORM, [inp(X23), const(rnd(3)), const(rnd(3)), const(rnd(3)), const(rnd(3, lo=0.5))],
     [(np.float32, [2, 3])], [], f64(lambda x, s, o, m, v: [(x - m) / np.sqrt(v + 1e-4) * s + o])),
    (O.OH_NN_OPS_LAYER_NORM, [inp(rnd(2, 3, 4)), const(rnd(3, 4)), const(rnd(3, 4))], [(np.float32, [2, 3, 4])],
     [], f64(lambda x, g, b: [(x - x.mean(axis=(1, 2), keepdims=True))
                              / np.sqrt(x.var(axis=(1, 2), keepdims=True) + 1e-7) * g + b])),
    (O.OH_NN_OPS_INSTANCE_NORM, [inp(rnd(1, 2, 2, 3)), const(rnd(3)), const(rnd(3))], [(np.float32, [1, 2, 2, 3])],
     [p(E.OH_NN_INSTANCE_NORM_EPSILON, np.float32([1e-5]))],
     f64(lambda x, s, b: [(x - x.mean(axis=(1, 2), keepdims=True))
                          / np.sqrt(x.var(axis=(1, 2), keepdims=True) + 1e-5) * s + b])),
    (O.OH_NN_OPS_L2_NORMALIZE, [inp(X23)], [(np.float32, [2, 3])], [p(E.OH_NN_L2_NORMALIZE_AXIS, np.int64([1]))],
     f64(lambda a: [a / np.sqrt((a * a).sum(axis=1, keepdims=True))])),
    (O.OH_NN_OPS_LRN, [inp(rnd(1, 2, 2, 4))], [(np.float32, [1, 2, 2, 4])],
     [p(E.OH_NN_LRN_DEPTH_RADIUS, np.int64([1])), p(E.OH_NN_LRN_BIAS, np.float32([1.0])),
      p(E.OH_NN_LRN_ALPHA, np.float32([0.5])), p(E.OH_NN_LRN_BETA, np.float32([0.75]))],
     f64(lambda a: [a / (1 + 0.5 * sum(np.pad(a * a, ((0, 0), (0, 0), (0, 0), (1, 1)))[..., k:k + 4]
                                       for k in range(3))) ** 0.75])),
    (O.OH_NN_OPS_CAST, [inp(np.float32([1.7, -2.5, 3.2])), const(np.int32([E.OH_NN_INT32]))], [(np.int32, [3])],
     [], lambda a, _: [np.int32([1, -2, 3])]),
    (O.OH_NN_OPS_ONE_HOT, [inp(np.int32([0, 2, 1])), const(np.int32([4])), const(np.float32([1.0])),
                           const(np.float32([0.0]))], [(np.float32, [3, 4])], [],
     lambda i, *_: [np.eye(4, dtype=np.float32)[i]]),
    (O.OH_NN_OPS_FILL, [inp(np.float32(2.5)), const(np.int64([2, 3]))], [(np.float32, [2, 3])], [],
     lambda v, _: [np.full((2, 3), 2.5, np.float32)]),
    (O.OH_NN_OPS_RANGE, [inp(np.int32([0]))], [(np.int32, [4])],
     [p(E.OH_NN_RANGE_START, np.int64([1])), p(E.OH_NN_RANGE_LIMIT, np.int64([9])),
      p(E.OH_NN_RANGE_DELTA, np.int64([2]))], lambda _: [np.int32([1, 3, 5, 7])]),
    (O.OH_NN_OPS_CONSTANT_OF_SHAPE, [inp(np.int64([2, 2]))], [(np.float32, [2, 2])],
     [p(E.OH_NN_CONSTANT_OF_SHAPE_DATA_TYPE, np.int64([F32])), p(E.OH_NN_CONSTANT_OF_SHAPE_VALUE, np.float32([4.0]))],
     lambda _: [np.full((2, 2), 4.0, np.float32)]),
    (O.OH_NN_OPS_SCATTER_ND, [const(np.int32([[1], [3]])), inp(np.float32([5, 7])), const(np.int32([5]))],
     [(np.float32, [5])], [], lambda i, u, s: [np.float32([0, 5, 0, 7, 0])]),
    (O.OH_NN_OPS_SPARSE_TO_DENSE, [const(np.int32([[0, 1], [1, 2]])), inp(np.float32([5, 7])),
                                   const(np.int32([2, 3]))], [(np.float32, [2, 3])], [],
     lambda *_: [np.float32([[0, 5, 0], [0, 0, 7]])]),
    (O.OH_NN_OPS_ASSERT, [inp(np.bool_([True, True])), inp(X23)], [(np.bool_, [2])], [],
     lambda c, _: [c]),
    (O.OH_NN_OPS_QUANT_DTYPE_CAST, [inp(np.float32([0.2, 0.75, -1.0, 100.0]))], [(np.int8, [4])],
     [p(E.OH_NN_QUANT_DTYPE_CAST_SRC_T, np.int64([F32])), p(E.OH_NN_QUANT_DTYPE_CAST_DST_T, np.int64([OH_NN_INT8]))],
     lambda a: [np.clip(np.rint(a.astype(np.float64) / 0.5 + 1), -128, 127).astype(np.int8)]),
    (O.OH_NN_OPS_LSTM, [inp(a) for a in LSTM_IN], [(np.float32, [2, 1, 2]), (np.float32, [1, 1, 2]),
                                                    (np.float32, [1, 1, 2])],
     [p(E.OH_NN_LSTM_HAS_BIAS, np.bool_([True])), p(E.OH_NN_LSTM_INPUT_SIZE, np.int64([3])),
      p(E.OH_NN_LSTM_HIDDEN_SIZE, np.int64([2])), p(E.OH_NN_LSTM_NUM_LAYERS, np.int64([1])),
      p(E.OH_NN_LSTM_NUM_DIRECTIONS, np.int64([1]))], f64(lstm_ref)),
    (O.OH_NN_OPS_DETECTION_POST_PROCESS,
     [inp(np.zeros((1, 3, 4), np.float32)), inp(np.float32([[[0, 0.9], [0, 0.8], [0, 0.3]]])),
      const(np.float32([[0.5, 0.5, 1, 1], [0.5, 0.5, 1, 1], [0.2, 0.2, 0.2, 0.2]]))],
     [(np.float32, [1, 3, 4]), (np.float32, [1, 3]), (np.float32, [1, 3]), (np.float32, [1])],
     [p(E.OH_NN_DETECTION_POST_PROCESS_SCALE, np.float32([10, 10, 5, 5])),
      p(E.OH_NN_DETECTION_POST_PROCESS_NMS_IOU_THRESHOLD, np.float32([0.5])),
      p(E.OH_NN_DETECTION_POST_PROCESS_NMS_SCORE_THRESHOLD, np.float32([0.1])),
      p(E.OH_NN_DETECTION_POST_PROCESS_MAX_DETECTIONS, np.int64([3])),
      p(E.OH_NN_DETECTION_POST_PROCESS_MAX_CLASSES_PER_DETECTION, np.int64([1])),
      p(E.OH_NN_DETECTION_POST_PROCESS_NUM_CLASSES, np.int64([1])),
      p(E.OH_NN_DETECTION_POST_PROCESS_USE_REGULAR_NMS, np.bool_([False]))],
     lambda *_: [np.float32([[[0, 0, 1, 1], [0.1, 0.1, 0.3, 0.3], [0, 0, 0, 0]]]),
                 np.float32([[0, 0, 0]]), np.float32([[0.9, 0.3, 0]]), np.float32([2])]),
    (O.OH_NN_OPS_CONV2D_TRANSPOSE, [inp(rnd(1, 3, 3, 2)), const(rnd(2, 2, 2, 2)), const(rnd(2))],
     [(np.float32, [1, 6, 6, 2])], [p(E.OH_NN_CONV2D_TRANSPOSE_STRIDES, np.int64([2, 2]))],
     f64(lambda x, w, b: [deconv_nhwc(x, w, b, 2)])),
    (O.OH_NN_OPS_RESIZE_BILINEAR, [inp(rnd(1, 2, 2, 1))], [(np.float32, [1, 3, 3, 1])],
     [p(E.OH_NN_RESIZE_BILINEAR_NEW_HEIGHT, np.int64([3])), p(E.OH_NN_RESIZE_BILINEAR_NEW_WIDTH, np.int64([3])),
      p(E.OH_NN_RESIZE_BILINEAR_COORDINATE_TRANSFORM_MODE, np.int8([1]))],  # align corners
     f64(lambda a: [np.array([[[[a[0, 0, 0, 0]], [(a[0, 0, 0, 0] + a[0, 0, 1, 0]) / 2], [a[0, 0, 1, 0]]],
                              [[(a[0, 0, 0, 0] + a[0, 1, 0, 0]) / 2], [a[0].mean()],
                               [(a[0, 0, 1, 0] + a[0, 1, 1, 0]) / 2]],
                              [[a[0, 1, 0, 0]], [(a[0, 1, 0, 0] + a[0, 1, 1, 0]) / 2], [a[0, 1, 1, 0]]]]])])),
]
QUANT_OUTPUT = {O.OH_NN_OPS_QUANT_DTYPE_CAST: [(8, 1, 0.5)]}


@pytest.mark.parametrize("case", CPU_CASES, ids=[op_id(c[0]) for c in CPU_CASES])
def test_operation_runs_on_the_cpu_driver(client, case):
    op, inputs, outputs, params, ref = case
    if OPERATIONS[op].node_type not in KERNELS:
        pytest.skip("the CPU driver has no kernel for it (yet)")
    g = Graph()
    in_idx, model_inputs, values = [], [], []
    for kind, array in inputs:
        dt = OH_OF_NP[array.dtype]
        shape = list(array.shape) if array.shape else None
        if kind == "const":
            in_idx.append(g.tensor(dt, shape, array))
        else:
            in_idx.append(g.tensor(dt, shape))
            model_inputs.append(in_idx[-1])
        values.append(array)
    param_idx = [g.param(t, dt, v, shape) for t, dt, v, shape in params]
    out_idx = [g.tensor(OH_OF_NP[np.dtype(dt)], shape or None, quant=QUANT_OUTPUT.get(op))
               for dt, shape in outputs]
    g.add_op(op, in_idx, out_idx, param_idx)
    model = g.finish(model_inputs, out_idx)
    assert OH_NNModel_GetAvailableOperations(model, 0) == (OH_NN_SUCCESS, [True])
    got = run_lowered(client, model, [a for (kind, a) in inputs if kind == "in"])
    for have, (dt, shape) in zip(got, outputs):
        assert have.dtype == np.dtype(dt) and list(have.shape) == list(shape)
    if ref is None:
        return
    for have, want in zip(got, ref(*values)):
        if have.dtype.kind == "f":
            np.testing.assert_allclose(have, np.asarray(want, np.float64), rtol=2e-5, atol=2e-5)
        else:
            np.testing.assert_array_equal(have, want)
