"""The ONNX import of operators through their function body, of parameters fed at run time,
and the conformance test's float16 comparison: refusals name the operator a body node came
from, run-time parameters give the answers numpy gives for several values of one compiled
model, and the float16 rule holds two ULPs (no more)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from nnrt.client.onnx_backend import NnrtBackend
from nnrt.client.onnx_import import OnnxImportError, import_onnx

from tests.client.capi.util_capi import use_runtime
from tests.conftest import start_driver
from tests.client.onnx.test_backend import assert_similar

pytestmark = pytest.mark.multiprocess


@pytest.fixture(scope="module")
def cpu_driver(tmp_path_factory):
    runtime = tmp_path_factory.mktemp("onnx_functions") / "rt"
    driver = start_driver(runtime, "cpu")
    with pytest.MonkeyPatch.context() as mp, use_runtime(mp, runtime):
        yield runtime
    driver.stop()


def _model(nodes, inputs, outputs, opset=23):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(*i) for i in inputs],
                              [helper.make_tensor_value_info(*o) for o in outputs])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _attention(q_shape, kv_shape, **attrs):
    node = helper.make_node("Attention", ["Q", "K", "V"], ["Y"], **attrs)
    return _model([node], [("Q", TensorProto.FLOAT, q_shape), ("K", TensorProto.FLOAT, kv_shape),
                           ("V", TensorProto.FLOAT, kv_shape)], [("Y", TensorProto.FLOAT, None)])


def test_attention_body_refusal_names_the_operator():
    """A body node that cannot be mapped is refused naming the operator it came from."""
    with pytest.raises(OnnxImportError, match=r"'Attention/ConstantOfShape'.*must be constant"):
        import_onnx(_attention([None, 2, 3, 4], [1, 2, 5, 4]))  # a dynamic batch
    with pytest.raises(OnnxImportError, match=r"'Attention/"):
        import_onnx(_attention([1, 3, 8], [1, 5, 8]))  # 3-D without q_num_heads


def test_attention_through_its_body_matches_numpy(cpu_driver):
    rng = np.random.default_rng(7)
    q = rng.standard_normal((1, 2, 3, 4)).astype(np.float32)
    k = rng.standard_normal((1, 2, 5, 4)).astype(np.float32)
    v = rng.standard_normal((1, 2, 5, 4)).astype(np.float32)
    (y,) = NnrtBackend.run_model(_attention([1, 2, 3, 4], [1, 2, 5, 4], is_causal=1), [q, k, v])
    s = (q.astype(np.float64) @ k.transpose(0, 1, 3, 2)) / 2.0
    s = np.where(np.tril(np.ones((3, 5), bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    np.testing.assert_allclose(y, (p / p.sum(-1, keepdims=True)) @ v, rtol=1e-5, atol=1e-6)


def test_run_time_parameters_are_read_at_each_run(cpu_driver):
    """Trilu's k, Tile's repeats, an Unsqueeze axis and CumSum's axis fed as inputs: one
    compiled model, several values, numpy's answers."""
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    trilu = _model([helper.make_node("Trilu", ["x", "k"], ["y"], upper=0)],
                   [("x", TensorProto.FLOAT, [3, 4]), ("k", TensorProto.INT64, [])],
                   [("y", TensorProto.FLOAT, [3, 4])], 14)
    tile = _model([helper.make_node("Tile", ["x", "r"], ["y"])],
                  [("x", TensorProto.FLOAT, [3, 4]), ("r", TensorProto.INT64, [2])],
                  [("y", TensorProto.FLOAT, None)], 13)
    unsqueeze = _model([helper.make_node("Unsqueeze", ["x", "a"], ["y"])],
                       [("x", TensorProto.FLOAT, [3, 4]), ("a", TensorProto.INT64, [1])],
                       [("y", TensorProto.FLOAT, None)], 13)
    cumsum = _model([helper.make_node("CumSum", ["x", "a"], ["y"], reverse=1)],
                    [("x", TensorProto.FLOAT, [3, 4]), ("a", TensorProto.INT32, [])],
                    [("y", TensorProto.FLOAT, [3, 4])], 14)
    with NnrtBackend.prepare(trilu) as rep:
        for k in (-1, 0, 2):
            np.testing.assert_array_equal(rep.run([x, np.int64(k)])[0], np.tril(x, k))
    with NnrtBackend.prepare(tile) as rep:
        for reps in ((1, 2), (3, 1)):
            np.testing.assert_array_equal(rep.run([x, np.asarray(reps, np.int64)])[0],
                                          np.tile(x, reps))
    with NnrtBackend.prepare(unsqueeze) as rep:
        for axis in (0, 2, -1):
            assert rep.run([x, np.asarray([axis], np.int64)])[0].shape == \
                np.expand_dims(x, axis).shape
    with NnrtBackend.prepare(cumsum) as rep:
        for axis in (0, 1, -2):
            want = np.flip(np.cumsum(np.flip(x, axis), axis), axis)
            np.testing.assert_array_equal(rep.run([x, np.int32(axis)])[0], want)


def test_run_time_parameters_refused_where_no_operation_reads_them():
    unsqueeze = _model([helper.make_node("Unsqueeze", ["x", "a"], ["y"])],
                       [("x", TensorProto.FLOAT, [3, 4]), ("a", TensorProto.INT64, [2])],
                       [("y", TensorProto.FLOAT, None)], 13)
    with pytest.raises(OnnxImportError, match="several must be constants"):
        import_onnx(unsqueeze)
    expand = _model([helper.make_node("Expand", ["x", "s"], ["y"])],
                    [("x", TensorProto.FLOAT, [3, 1]), ("s", TensorProto.INT64, [2])],
                    [("y", TensorProto.FLOAT, None)], 13)
    with pytest.raises(OnnxImportError, match="BroadcastTo takes its shape as a parameter"):
        import_onnx(expand)
    constant_of_shape = _model([helper.make_node("ConstantOfShape", ["s"], ["y"])],
                               [("s", TensorProto.INT64, [2])], [("y", TensorProto.FLOAT, None)],
                               13)
    with pytest.raises(OnnxImportError, match=r"the shape \(input 0\) must be constants"):
        import_onnx(constant_of_shape)


def test_float16_outputs_are_held_to_two_ulps():
    want = np.asarray([0.4949, 1.0, -3.0], np.float16)
    one_ulp = np.nextafter(want, np.float16(np.inf))
    assert_similar([want], [one_ulp], 1e-5, 0.0)  # within two ULPs, beyond rtol 1e-5
    four_ulps = want
    for _ in range(4):
        four_ulps = np.nextafter(four_ulps, np.float16(np.inf))
    with pytest.raises(AssertionError):
        assert_similar([want], [four_ulps], 1e-5, 0.0)
    with pytest.raises(AssertionError):  # the dtype is checked, as onnx's runner checks it
        assert_similar([want], [want.astype(np.float32)], 1e-3, 0.0)
    with pytest.raises(AssertionError):  # float32 keeps the case's tolerance
        assert_similar([want.astype(np.float32)], [one_ulp.astype(np.float32)], 1e-5, 0.0)
