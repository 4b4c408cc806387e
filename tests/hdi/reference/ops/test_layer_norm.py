"""LayerNormFusion against onnx's reference LayerNormalization (beginParamsAxis ==
beginNormAxis) and a closed form over flattened rows (other beginParamsAxis): axes,
negative axes, no affine step, dtypes, errors."""

from __future__ import annotations

import numpy as np
import pytest

from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from tests.hdi.reference.util import (
    NNRT_INVALID_NODE,
    NNRT_INVALID_SHAPE,
    NNRT_UNSUPPORTED_OP,
    Const,
    Declared,
    expect_error,
    expect_refused,
    make_node,
    onnx_reference,
    randn,
    run_node,
    run_op,
)

LN = na.NODE_TYPE_LAYER_NORM_FUSION


def onnx_layer_norm(x, gamma, beta, axis, eps):
    return onnx_reference("LayerNormalization", [x, gamma, beta], opset=17, axis=axis,
                          epsilon=eps)


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -2])
def test_against_onnx(axis: int) -> None:
    x = randn(2, 3, 4, seed=1) * np.float32(3) + np.float32(1)
    shape = x.shape[axis:]
    g, b = randn(*shape, seed=2), randn(*shape, seed=3)
    attrs = na.LayerNormFusion(beginNormAxis=axis, beginParamsAxis=axis, epsilon=1e-5,
                               elementwiseAffine=True)
    out = run_op(LN, attrs, [x, Const(g), Const(b)])
    np.testing.assert_allclose(out, onnx_layer_norm(x, g, b, axis, 1e-5), rtol=1e-4, atol=1e-5)


def _closed_form(x, norm_axis, eps):
    x = x.astype(np.float64)
    rows = x.reshape(int(np.prod(x.shape[:norm_axis])), -1)
    out = np.empty_like(rows)
    for i, row in enumerate(rows):
        out[i] = (row - row.mean()) / np.sqrt(((row - row.mean()) ** 2).mean() + eps)
    return out.reshape(x.shape)


@pytest.mark.parametrize("norm_axis,params_axis", [(1, 2), (2, 1), (1, 0)])
def test_params_axis_differs(norm_axis: int, params_axis: int) -> None:
    x = randn(2, 3, 4, seed=4)
    g, b = randn(*x.shape[params_axis:], seed=5), randn(*x.shape[params_axis:], seed=6)
    attrs = na.LayerNormFusion(beginNormAxis=norm_axis, beginParamsAxis=params_axis,
                               epsilon=1e-6, elementwiseAffine=True)
    out = run_op(LN, attrs, [x, g, b])
    want = _closed_form(x, norm_axis, 1e-6) * g + b
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)


def test_no_affine_and_unset_flag() -> None:
    x = randn(3, 5, seed=7)
    out = run_op(LN, na.LayerNormFusion(beginNormAxis=1, epsilon=1e-5), [x])
    np.testing.assert_allclose(out, _closed_form(x, 1, 1e-5), rtol=1e-4, atol=1e-5)
    # gamma and beta given with elementwiseAffine unset (false) are applied all the same.
    g, b = randn(5, seed=8), randn(5, seed=9)
    out = run_op(LN, na.LayerNormFusion(beginNormAxis=-1, beginParamsAxis=-1, epsilon=1e-5),
                 [x, g, b])
    np.testing.assert_allclose(out, _closed_form(x, 1, 1e-5) * g + b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype,tol", [(np.float16, 1e-2), (np.float64, 1e-12)])
def test_dtypes(dtype, tol) -> None:
    x = randn(4, 6, dtype=dtype, seed=10)
    g, b = randn(6, dtype=dtype, seed=11), randn(6, dtype=dtype, seed=12)
    attrs = na.LayerNormFusion(beginNormAxis=1, beginParamsAxis=1, epsilon=1e-5,
                               elementwiseAffine=True)
    out = run_op(LN, attrs, [x, g, b])
    assert out.dtype == dtype
    want = onnx_layer_norm(*(a.astype(np.float64) for a in (x, g, b)), 1, 1e-5)
    np.testing.assert_allclose(out.astype(np.float64), want, rtol=tol, atol=tol)


def test_rank1_and_dynamic() -> None:
    x = np.array([1.0, 2.0, 3.0], np.float32)
    out = run_op(LN, na.LayerNormFusion(), [x])
    np.testing.assert_allclose(out, [-1.2247449, 0.0, 1.2247449], rtol=1e-6)
    x = randn(2, 3, 4, seed=13)
    g, b = randn(4, seed=14), randn(4, seed=15)
    attrs = na.LayerNormFusion(beginNormAxis=2, beginParamsAxis=2, epsilon=1e-5)
    node = make_node(LN, attrs, [Declared(x, (-1, -1, 4)), g, b])
    (out,) = run_node(node, [x, g, b])
    np.testing.assert_allclose(out, onnx_layer_norm(x, g, b, 2, 1e-5), rtol=1e-4, atol=1e-5)
    node = make_node(LN, attrs, [Declared(x, (-1, -1, -1)), g, b])
    expect_error(NNRT_INVALID_SHAPE, lambda: run_node(node, [x[..., :3], g, b]))


def test_error_paths() -> None:
    x = np.zeros((2, 3), np.float32)
    g = np.ones(3, np.float32)
    ok = na.LayerNormFusion(beginNormAxis=1, beginParamsAxis=1, epsilon=1e-5,
                            elementwiseAffine=True)
    expect_refused(NNRT_INVALID_NODE, LN, ok, [x, g])
    expect_refused(NNRT_INVALID_NODE, LN, ok, [x])  # elementwiseAffine without gamma/beta
    expect_refused(NNRT_INVALID_NODE, LN, ok, [x, g, g], n_outputs=2)
    expect_refused(NNRT_INVALID_NODE, LN, na.LayerNormFusion(beginNormAxis=2), [x])
    expect_refused(NNRT_INVALID_NODE, LN, na.LayerNormFusion(beginNormAxis=-3), [x])
    expect_refused(NNRT_INVALID_NODE, LN, na.LayerNormFusion(beginNormAxis=1, beginParamsAxis=2),
                   [x, g, g])
    expect_refused(NNRT_INVALID_NODE, LN, ok, [x, np.ones(2, np.float32), g])
    expect_refused(NNRT_INVALID_NODE, LN, ok, [x, g.reshape(1, 3), g])
    expect_refused(NNRT_INVALID_NODE, LN, na.LayerNormFusion(epsilon=-1.0), [x])
    expect_refused(NNRT_INVALID_NODE, LN, na.LayerNormFusion(), [np.array(1.0, np.float32)])
    expect_refused(NNRT_UNSUPPORTED_OP, LN, na.LayerNormFusion(), [x.astype(np.int32)])
    expect_refused(NNRT_UNSUPPORTED_OP, LN, ok, [x, g.astype(np.float64), g])
    expect_refused(NNRT_UNSUPPORTED_OP, LN, na.LayerNormFusion(), [x],
                   quant_type=ht.QUANT_TYPE_ALL)


@pytest.mark.parametrize("shape,norm_axis", [((5, 1024), 1), ((3, 1100), 1), ((2, 3, 400), 1),
                                             ((64, 256), 1), ((7, 1), 1)])
@pytest.mark.parametrize("constant_params", [True, False])
def test_row_lengths_and_params(shape, norm_axis: int, constant_params: bool) -> None:
    """Rows of up to 1024 values (sums by matrix products), longer ones (numpy's sums),
    rows made of several dimensions; gamma / beta constant (converted once) or run-time;
    rows whose mean is far from 0 relative to their spread."""
    x = randn(*shape, seed=16) * np.float32(2) + np.float32(50)
    params = shape[norm_axis:]
    g, b = randn(*params, seed=17), randn(*params, seed=18)
    attrs = na.LayerNormFusion(beginNormAxis=norm_axis, beginParamsAxis=norm_axis,
                               epsilon=1e-5, elementwiseAffine=True)
    inputs = [x, Const(g), Const(b)] if constant_params else [x, g, b]
    out = run_op(LN, attrs, inputs)
    want = _closed_form(x, norm_axis, 1e-5) * g.astype(np.float64) + b
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)


def test_constant_rows_empty_input_and_dynamic_row_length() -> None:
    x = np.full((3, 6), 7.5, np.float32)
    g, b = randn(6, seed=19), randn(6, seed=20)
    attrs = na.LayerNormFusion(beginNormAxis=1, beginParamsAxis=1, epsilon=1e-5,
                               elementwiseAffine=True)
    out = run_op(LN, attrs, [x, Const(g), Const(b)])  # x - mean = 0: beta exactly
    np.testing.assert_array_equal(out, np.broadcast_to(b, x.shape))
    out = run_op(LN, attrs, [np.zeros((0, 6), np.float32), Const(g), Const(b)])
    assert out.shape == (0, 6)
    # The row length known only at run time.
    x = randn(4, 9, seed=21)
    g, b = randn(9, seed=22), randn(9, seed=23)
    node = make_node(LN, attrs, [Declared(x, (-1, -1)), Declared(g, (-1,)),
                                 Declared(b, (-1,))])
    (out,) = run_node(node, [x, g, b])
    np.testing.assert_allclose(out, onnx_layer_norm(x, g, b, 1, 1e-5), rtol=1e-4, atol=1e-5)


def test_runs_in_an_arena() -> None:
    from nnrt.hdi.reference import arena
    from nnrt.hdi.reference.kernel import create_kernel

    g, b = randn(16, seed=24), randn(16, seed=25)
    attrs = na.LayerNormFusion(beginNormAxis=1, beginParamsAxis=1, epsilon=1e-5,
                               elementwiseAffine=True)
    node = make_node(LN, attrs, [randn(8, 16), Const(g), Const(b)])
    kernel = create_kernel(node)
    pool = arena.ArenaPool(frozenset())
    for seed in (26, 27):  # the second run reuses the first one's output buffer
        x = randn(8, 16, seed=seed) * np.float32(seed)
        with pool.use():
            (out,) = run_node(node, [x, g, b], kernel)
        np.testing.assert_allclose(out, onnx_layer_norm(x, g, b, 1, 1e-5), rtol=1e-4,
                                   atol=1e-5)
