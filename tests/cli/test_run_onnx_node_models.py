"""`nnrt run` on onnx's node test models (a sample, as a user would run them): each either
gives onnx's expected outputs or exits 2 with the reason on stderr, never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import numpy as np
import onnx
import pytest
from onnx.backend.test.runner import Runner

from nnrt.client.onnx_refusals import case_operators, expected_refusal
from tests.conftest import start_driver

pytestmark = pytest.mark.multiprocess
CLI_TIMEOUT = 120
# Mapped (one per family the importer composes) and refused ones (training, sequences, a
# model of constants only, a parameter fed at run time, an empty tensor)
SAMPLE = ["test_elu", "test_mod_mixed_sign_int32", "test_layer_normalization_4d_axis1",
          "test_argmax_keepdims_random", "test_reduce_log_sum_exp_keepdims_random",
          "test_triu", "test_tril_neg", "test_cumsum_2d_axis_0", "test_depthtospace_example",
          "test_attention_4d_causal", "test_clip_example",  # rank-0 inputs (k, axis, bounds)
          "test_sce_none", "test_identity_sequence", "test_constant", "test_slice",
          "test_castlike_FLOAT_to_FLOAT16"]


def _array(value: object) -> np.ndarray:
    return onnx.numpy_helper.to_array(value) if isinstance(value, onnx.TensorProto) \
        else np.asarray(value)


@pytest.fixture(scope="module")
def runtime(tmp_path_factory):
    runtime = tmp_path_factory.mktemp("onnx_cli") / "rt"
    driver = start_driver(runtime, "cpu")
    yield runtime
    driver.stop()


def test_nnrt_run_on_node_test_models(runtime, tmp_path):
    from onnx.backend.test.case import node

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = {c.name: c for c in node.collect_testcases()}
    operators = case_operators(list(cases.values()))
    env = {**os.environ, "NNRT_RUNTIME_DIR": str(runtime), "NNRT_NO_EMBEDDED": "1"}
    for name in SAMPLE:
        case = cases[name]
        model = tmp_path / f"{name}.onnx"
        onnx.save(case.model, model)
        inputs, expected = case.data_sets[0]
        initializers = {t.name for t in case.model.graph.initializer}
        names = [i.name for i in case.model.graph.input if i.name not in initializers]
        feeds = tmp_path / f"{name}.npz"
        np.savez(feeds, **{n: _array(x) for n, x in zip(names, inputs)})
        out = tmp_path / f"{name}.out.npz"
        proc = subprocess.run([sys.executable, "-m", "nnrt.client.cli", "run", str(model),
                               "-i", str(feeds), "-o", str(out)], env=env, text=True,
                              capture_output=True, timeout=CLI_TIMEOUT)
        assert "Traceback" not in proc.stderr, f"{name}: {proc.stderr}"
        refused = expected_refusal(name, operators[name])
        if refused is None:
            assert proc.returncode == 0, f"{name}: {proc.stderr}"
            with np.load(out) as got:
                outputs = [got[o.name] for o in case.model.graph.output]
            Runner.assert_similar_outputs([_array(y) for y in expected],
                                          [g.reshape(np.shape(_array(y))) for g, y in
                                           zip(outputs, expected)], case.rtol, case.atol)
        else:
            assert proc.returncode == 2, f"{name}: exit {proc.returncode}: {proc.stderr}"
            assert proc.stderr.strip(), f"{name}: no reason given"
