"""The template driver (examples/template-driver) as a vendor would ship it: pip-installed as
its own package, found through its `nnrt.drivers` entry point, served by `nnrt-driver
template`, listed by `nnrt devices --kinds`, and answering the HDI truthfully.

The package is installed with pip into a private directory (`--target`, on PYTHONPATH for
the processes started here), not into the project's environment that other tests share.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from nnrt.common.errors import (NNRT_INVALID_MODEL_CACHE, NNRT_NOT_SUPPORT, NNRT_OUT_OF_MEMORY,
                                NNRT_SUCCESS, NNRT_UNSUPPORTED_OP)
from nnrt.common.hdi_model import HdiModelBuilder
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from tests.client.capi.util_capi import use_runtime
from tests.conftest import RunningDriver, start_driver
from tests.helpers.model_cache import exported_blob, prepare_from

ROOT = Path(__file__).resolve().parents[3]
TEMPLATE = ROOT / "examples" / "template-driver"
INSTALL_TIMEOUT = 180
COMMAND_TIMEOUT = 60

pytestmark = pytest.mark.multiprocess


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Iterator[Path]:
    """`pip install examples/template-driver` into a private directory, on PYTHONPATH for
    every process this module starts. Built from a copy: pip builds in the source tree."""
    base = tmp_path_factory.mktemp("template")
    source, target = base / "src", base / "site"
    shutil.copytree(TEMPLATE, source, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps",
                           "--no-build-isolation", "--no-compile", "--no-input", "--quiet",
                           "--disable-pip-version-check", "--target", str(target), str(source)],
                          capture_output=True, text=True, timeout=INSTALL_TIMEOUT)
    assert done.returncode == 0, done.stderr[-3000:]
    previous = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(target), previous]))
    try:
        yield target
    finally:
        if previous is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = previous


def nnrt(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "import sys; from nnrt.client.cli import main; "
                                                 "sys.exit(main())", *args],
                          capture_output=True, text=True, timeout=COMMAND_TIMEOUT)


def nnrt_driver(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nnrt.server", *args], capture_output=True,
                          text=True, timeout=COMMAND_TIMEOUT)


@pytest.fixture(scope="module")
def template(installed, tmp_path_factory) -> Iterator[RunningDriver]:
    running = start_driver(tmp_path_factory.mktemp("served") / "rt", "template")
    yield running
    assert running.stop() == 0


def test_the_installed_package_is_listed_as_a_kind(installed):
    done = nnrt("devices", "--kinds", "--json")
    assert done.returncode == 0, done.stderr
    kinds = {k["kind"]: k for k in json.loads(done.stdout)["kinds"]}
    assert {"cpu", "gpu", "accel", "template"} <= set(kinds)
    assert kinds["template"]["origin"] == "nnrt-template-driver 0.1.0"
    assert kinds["template"]["target"] == "nnrt_template_driver.kind:KIND"
    assert kinds["template"]["usable"] and "Softmax" in kinds["template"]["summary"]
    table = nnrt("devices", "--kinds").stdout
    assert any(line.split()[:3] == ["template", "nnrt-template-driver", "0.1.0"]
               for line in table.splitlines()), table


def test_nnrt_devices_lists_the_served_device(template):
    done = nnrt("devices", "--json", "--runtime-dir", str(template.runtime_dir))
    assert done.returncode == 0, done.stderr
    (device,) = json.loads(done.stdout)["devices"]
    assert (device["driver"], device["device_name"], device["vendor"], device["status"]) == \
        ("template", "nnrt-template", "example", "available")
    assert device["details"]["device_memory"] == "256 MiB"


def test_its_help_shows_its_own_options_beside_the_hosts(installed):
    done = nnrt_driver("template", "--help")
    assert done.returncode == 0, done.stderr
    assert "template driver (nnrt_template_driver.kind:KIND, nnrt-template-driver 0.1.0)" \
        in done.stdout
    assert "--memory-mb N" in done.stdout and "--max-session-memory-mb" in done.stdout
    assert "--engine" not in done.stdout  # the CPU driver's, not this one's
    bad = nnrt_driver("template", "--memory-mb", "0", "--runtime-dir", "/nonexistent")
    assert bad.returncode == 2 and "--memory-mb must be > 0" in bad.stderr
    other = nnrt_driver("cpu", "--memory-mb", "4", "--runtime-dir", "/nonexistent")
    assert other.returncode == 2 and "--memory-mb is an option of the template driver" \
        in other.stderr


@pytest.fixture
def in_this_process(installed, monkeypatch) -> Iterator[None]:
    """The installed package visible to this process too (its kinds looked up again)."""
    from nnrt.hdi.plugin import forget_kinds

    monkeypatch.syspath_prepend(str(installed))
    forget_kinds()
    yield
    monkeypatch.undo()
    forget_kinds()
    for name in [n for n in sys.modules if n.startswith("nnrt_template_driver")]:
        del sys.modules[name]


def test_the_device_manager_checks_its_options(in_this_process):
    from nnrt.devmgr.config import ConfigError, parse_config

    config = parse_config("[drivers.t]\nkind = 'template'\noptions = { memory-mb = 64 }\n")
    assert config.driver("t").option_args() == ["--memory-mb", "64"]
    with pytest.raises(ConfigError, match="nnrt-driver template refuses --memory-mb -1: "
                                          "--memory-mb must be > 0"):
        parse_config("[drivers.t]\nkind = 'template'\noptions = { memory-mb = -1 }\n")


def supported_model() -> tuple[HdiModelBuilder, object]:
    """x[2,3] @ w[3,4] + b, ReLU, * s, Reshape [4,2], Softmax: every operator it has."""
    rng = np.random.default_rng(28)
    w = rng.standard_normal((3, 4)).astype(np.float32)
    bias = rng.standard_normal(4).astype(np.float32)
    scale = np.float32(1.5)
    b = HdiModelBuilder("template-ops")
    x = b.input("x", np.float32, [2, 3])
    mm = b.tensor("mm", np.float32, [2, 4])
    add = b.tensor("add", np.float32, [2, 4])
    act = b.tensor("act", np.float32, [2, 4])
    mul = b.tensor("mul", np.float32, [2, 4])
    shaped = b.tensor("shaped", np.float32, [4, 2])
    y = b.tensor("y", np.float32, [4, 2])
    b.node(na.NODE_TYPE_MATMUL_FUSION, [x, b.constant("w", w)], [mm], na.MatMulFusion())
    b.node(na.NODE_TYPE_ADD_FUSION, [mm, b.constant("bias", bias)], [add], na.AddFusion())
    b.node(na.NODE_TYPE_ACTIVATION, [add], [act],
           na.Activation(activationType=ht.ACTIVATION_TYPE_RELU))
    b.node(na.NODE_TYPE_MUL_FUSION, [act, b.constant("s", np.full(4, scale, np.float32))],
           [mul], na.MulFusion())
    b.node(na.NODE_TYPE_RESHAPE, [mul, b.constant("shape", np.array([4, 2], np.int64))],
           [shaped])
    b.node(na.NODE_TYPE_SOFTMAX, [shaped], [y], na.Softmax(axis=[-1]))
    b.mark_outputs(y)

    def expected(xv: np.ndarray) -> np.ndarray:
        h = (np.maximum(xv @ w + bias, 0) * scale).reshape(4, 2)
        e = np.exp(h - h.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    return b, expected


def run_once(client, model_id: int, x: np.ndarray) -> np.ndarray:
    _, xin = client.allocate_buffer(x.nbytes)
    _, yout = client.allocate_buffer(4 * 2 * 4)
    xin.array(np.float32, x.shape)[:] = x

    def io(memory, shape):
        return ht.IOTensor(dataType=ht.DATA_TYPE_FLOAT32, dimensions=shape,
                           format=ht.FORMAT_NONE, data=memory.descriptor())

    try:
        reply = client.run(model_id, [io(xin, [2, 3])], [io(yout, [4, 2])], timeout=30)
        assert reply.returnCode == NNRT_SUCCESS, reply
        return yout.array(np.float32, [4, 2]).copy()
    finally:
        for memory in (xin, yout):
            memory.close()
            client.release_buffer(memory.descriptor())


def test_its_operators_give_the_reference_answer_over_the_hdi(template):
    builder, expected = supported_model()
    x = np.array([[1, -2, 3], [0.5, 0.25, -1]], np.float32)
    with template.client() as client:
        with builder.packed(client) as model:
            reply = client.get_supported_operation(model)
        assert list(reply.ops) == [True] * 6
        model_id = builder.prepare(client)
        np.testing.assert_allclose(run_once(client, model_id, x), expected(x), rtol=1e-6)
        # truthful capabilities: what it declares is what the host lets through
        assert client.is_model_cache_supported().isSupported
        assert client.is_dynamic_input_supported().isSupported
        assert not client.is_float16_precision_supported().isSupported
        assert not client.is_priority_supported().isSupported
        assert not client.is_performance_mode_supported().isSupported
        with builder.packed(client) as model:
            refused = client.prepare_model(model, ht.ModelConfig(enableFloat16=True))
        assert refused.returnCode == NNRT_NOT_SUPPORT


def test_a_model_runs_through_the_pythonic_api(template, monkeypatch):
    from nnrt.client import Model

    rng = np.random.default_rng(3)
    w = rng.standard_normal((5, 3)).astype(np.float32)
    x = rng.standard_normal((2, 5)).astype(np.float32)
    with use_runtime(monkeypatch, template.runtime_dir):
        m = Model()
        xin = m.input([2, 5], name="x")
        m.outputs(m.softmax(m.relu(m.add(m.matmul(xin, w), np.ones(3, np.float32)))))
        compiled = m.compile()
        try:
            got = compiled.run(x)
        finally:
            compiled.close()
            m.close()
    h = np.maximum(x @ w + 1, 0)
    e = np.exp(h - h.max(axis=-1, keepdims=True))
    np.testing.assert_allclose(np.asarray(got), e / e.sum(axis=-1, keepdims=True), rtol=1e-6)


def test_dynamic_input_is_true_to_its_word(template):
    b = HdiModelBuilder("dynamic")
    x = b.input("x", np.float32, [-1, 3])
    y = b.tensor("y", np.float32, [-1, 3])
    b.node(na.NODE_TYPE_MUL_FUSION, [x, b.constant("k", np.full(3, 3, np.float32))], [y],
           na.MulFusion(activationType=ht.ACTIVATION_TYPE_RELU))
    b.mark_outputs(y)
    with template.client() as client:
        model_id = b.prepare(client)
        for rows in (1, 5):
            x_value = np.linspace(-1, 1, rows * 3, dtype=np.float32).reshape(rows, 3)
            _, xin = client.allocate_buffer(x_value.nbytes)
            _, yout = client.allocate_buffer(x_value.nbytes)
            xin.array(np.float32, x_value.shape)[:] = x_value
            tensors = [ht.IOTensor(dataType=ht.DATA_TYPE_FLOAT32, dimensions=[rows, 3],
                                   format=ht.FORMAT_NONE, data=m.descriptor())
                       for m in (xin, yout)]
            reply = client.run(model_id, tensors[:1], tensors[1:], timeout=30)
            assert reply.returnCode == NNRT_SUCCESS
            assert [list(d.values) for d in reply.outputDims] == [[rows, 3]]
            np.testing.assert_array_equal(yout.array(np.float32, [rows, 3]),
                                          np.maximum(x_value * 3, 0))
            for memory in (xin, yout):
                memory.close()
                client.release_buffer(memory.descriptor())


def test_an_unsupported_operator_is_said_and_refused(template):
    b = HdiModelBuilder("with-sub")
    x = b.input("x", np.float32, [4])
    added = b.tensor("added", np.float32, [4])
    y = b.tensor("y", np.float32, [4])
    b.node(na.NODE_TYPE_ADD_FUSION, [x, b.constant("one", np.ones(4, np.float32))], [added])
    b.node(na.NODE_TYPE_SUB_FUSION, [added, b.constant("two", np.full(4, 2, np.float32))], [y])
    b.mark_outputs(y)
    sigmoid_in_add = HdiModelBuilder("add-sigmoid")
    xs = sigmoid_in_add.input("x", np.float32, [4])
    ys = sigmoid_in_add.tensor("y", np.float32, [4])
    sigmoid_in_add.node(na.NODE_TYPE_ADD_FUSION, [xs, xs], [ys],
                        na.AddFusion(activationType=ht.ACTIVATION_TYPE_SIGMOID))
    sigmoid_in_add.mark_outputs(ys)
    with template.client() as client:
        with b.packed(client) as model:
            reply = client.get_supported_operation(model)
            assert list(reply.ops) == [True, False]
            assert "is not one of the template driver's operators" in reply.reasons[1]
            refused = client.prepare_model(model)
        assert refused.returnCode == NNRT_UNSUPPORTED_OP
        assert "node 1" in refused.reason
        with sigmoid_in_add.packed(client) as model:
            assert list(client.get_supported_operation(model).ops) == [False]
            assert client.prepare_model(model).returnCode == NNRT_UNSUPPORTED_OP
    assert "NNRT_UNSUPPORTED_OP" in template.log() or "node 1" in template.log()


def test_its_cache_prepares_again_and_a_damaged_one_is_refused(template):
    builder, expected = supported_model()
    x = np.ones((2, 3), np.float32)
    with template.client() as client:
        model_id = builder.prepare(client)
        blob = exported_blob(client, model_id)
        again = prepare_from(client, [blob])
        assert again.returnCode == NNRT_SUCCESS
        np.testing.assert_allclose(run_once(client, again.preparedModelId, x), expected(x),
                                   rtol=1e-6)
        damaged = bytearray(blob)
        damaged[-1] ^= 0xFF
        assert prepare_from(client, [bytes(damaged)]).returnCode == NNRT_INVALID_MODEL_CACHE
        assert prepare_from(client, [blob, blob]).returnCode == NNRT_INVALID_MODEL_CACHE


def test_its_device_memory_is_a_limit(installed, tmp_path):
    small = start_driver(tmp_path / "rt", "template", "--memory-mb", "1")
    try:
        with small.client() as client:
            code, held = client.allocate_buffer(768 << 10)
            assert code == NNRT_SUCCESS
            code, refused = client.allocate_buffer(512 << 10)
            assert code == NNRT_OUT_OF_MEMORY and refused is None
            client.release_buffer(held.descriptor())
            held.close()
            code, fits = client.allocate_buffer(512 << 10)  # given back: it fits now
            assert code == NNRT_SUCCESS
            fits.close()
        assert "of 1048576 free" in small.log()
    finally:
        assert small.stop() == 0


def test_it_passes_conformance(installed):
    """The template is what a vendor starts from: it certifies as it is."""
    proc = subprocess.run([sys.executable, "-m", "nnrt.client.cli", "conformance", "--driver",
                           "template", "--quick", "--json"], capture_output=True, text=True,
                          timeout=INSTALL_TIMEOUT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    assert report["passed"] is True
    assert report["sections"]["operators"]["pass"] > 0
