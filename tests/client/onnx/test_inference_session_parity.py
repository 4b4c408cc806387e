"""onnxruntime parity where users reach for it (client/session.py): io_binding() over nnrt's
shared memory (bound once, run many times, no copy; checked against onnxruntime), RunOptions
with terminate (a run in flight cancelled from another thread), SessionOptions nnrt ignores
said once, and the names importable from nnrt.client."""

from __future__ import annotations

import logging
import threading
import time

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import nnrt.client as client_package
from nnrt.client import (DeviceNotFound, InferenceSession, IOBinding, RunCancelled, RunOptions,
                         SessionOptions, get_available_providers)
from nnrt.client import io_binding as io_binding_module
from nnrt.client import session as session_module
from tests.client.capi.util_capi import use_runtime
from tests.conftest import start_driver
from tests.client.onnx.test_inference_session import feeds, two_output_model

pytestmark = pytest.mark.multiprocess
DELAY_MS = 5000  # every run of the slow driver sleeps this long, honouring cancellation


@pytest.fixture(scope="module")
def drivers(tmp_path_factory):
    runtime = tmp_path_factory.mktemp("users-session") / "rt"
    cpu = start_driver(runtime, "cpu")
    yield runtime
    cpu.stop()


@pytest.fixture
def runtime(drivers, monkeypatch):
    with use_runtime(monkeypatch, drivers):
        yield drivers


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("models") / "two.onnx"
    onnx.save(two_output_model(), path)
    return path


@pytest.fixture(scope="module")
def expected(model_path):
    return ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"]).run(
        None, feeds())


def test_names_importable_from_nnrt_client():
    assert get_available_providers() == ["NnrtExecutionProvider", "CPUExecutionProvider"]
    for name in ("RunOptions", "IOBinding", "get_available_providers", "DeviceNotFound",
                 "RunCancelled", "SharedTensor"):
        assert name in client_package.__all__ and getattr(client_package, name) is not None
    assert issubclass(RunCancelled, client_package.NNRtError)
    assert issubclass(DeviceNotFound, LookupError)


def test_io_binding_runs_many_times_without_a_copy(runtime, model_path, expected, monkeypatch):
    allocations = []
    real_allocate = io_binding_module.allocate
    monkeypatch.setattr(io_binding_module, "allocate",
                        lambda *a: allocations.append(a[1]) or real_allocate(*a))
    with InferenceSession(model_path, providers=["CPUExecutionProvider"]) as session:
        binding = session.io_binding()
        assert isinstance(binding, IOBinding)
        for name, value in feeds().items():
            binding.bind_cpu_input(name, value)
        binding.bind_output("logits")
        binding.bind_output("peak", "cpu")
        session.run_with_iobinding(binding)
        logits, peak = binding.get_outputs()
        assert logits.shape() == [2, 5] and logits.data_type() == "tensor(float)"
        assert logits.device_name() == "cpu"
        for got, want in zip((logits.numpy(), peak.numpy()), expected):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
        first = logits.numpy()
        allocated = len(allocations)
        assert allocated == 4  # two inputs, two outputs: once
        # new data written in place: the next runs read it there, no bind, no allocation
        binding.input_array("scale")[:] = 2.0
        for _ in range(20):
            session.run_with_iobinding(binding)
        np.testing.assert_allclose(first, expected[0] * 4, rtol=1e-4, atol=1e-5)
        (again, _) = binding.get_outputs()
        assert np.shares_memory(again.numpy(), first)  # the same pages, run after run
        copies = binding.copy_outputs_to_cpu()
        assert not np.shares_memory(copies[0], first)
        np.testing.assert_allclose(copies[0], expected[0] * 4, rtol=1e-4, atol=1e-5)
        # binding the same shape again copies into the same tensor
        binding.bind_cpu_input("scale", np.array([0.5], np.float32))
        session.run_with_iobinding(binding)
        np.testing.assert_allclose(binding.copy_outputs_to_cpu()[0], expected[0], rtol=1e-4,
                                   atol=1e-5)
        assert len(allocations) == allocated
        binding.synchronize_inputs()
        binding.synchronize_outputs()
        # an output not bound is still given memory (the device writes it) and not returned
        only = session.io_binding()
        for name, value in feeds().items():
            only.bind_cpu_input(name, value)
        only.bind_output("peak")
        session.run_with_iobinding(only)
        assert only.get_outputs_names() == ["peak"]
        (peak_only,) = only.copy_outputs_to_cpu()
        np.testing.assert_allclose(peak_only, expected[1], rtol=1e-4, atol=1e-5)


def test_io_binding_refuses_what_it_cannot_do(runtime, model_path):
    with InferenceSession(model_path) as session:
        binding = session.io_binding()
        with pytest.raises(ValueError, match="inputs not bound"):
            session.run_with_iobinding(binding)
        with pytest.raises(ValueError, match="no input named 'y'"):
            binding.bind_cpu_input("y", np.zeros(1, np.float32))
        with pytest.raises(ValueError, match=r"shape \(3, 3, 6, 6\)"):
            binding.bind_cpu_input("x", np.zeros((3, 3, 6, 6), np.float32))
        with pytest.raises(ValueError, match="cannot become float32"):
            binding.bind_cpu_input("x", np.zeros((2, 3, 6, 6), np.complex64))
        with pytest.raises(ValueError, match="device_type 'cpu'"):
            binding.bind_output("peak", "cuda")
        with pytest.raises(ValueError, match="without buffer_ptr"):
            binding.bind_output("peak", buffer_ptr=1234)
        with pytest.raises(ValueError, match="is float32, not int32"):
            binding.bind_output("peak", element_type=np.int32)
        with pytest.raises(ValueError, match="not bound"):
            binding.input_array("x")
        binding.bind_output("peak")
        with pytest.raises(ValueError, match="no run since it was bound"):
            binding.get_outputs()
        with InferenceSession(model_path) as other, pytest.raises(ValueError,
                                                                  match="another session"):
            other.run_with_iobinding(binding)
    with pytest.raises(RuntimeError, match="closed"):
        session.io_binding()


def test_io_binding_with_a_dynamic_output_resizes_once(runtime, tmp_path):
    path = tmp_path / "dyn.onnx"
    onnx.save(two_output_model("batch"), path)
    x = np.random.default_rng(3).standard_normal((5, 3, 6, 6)).astype(np.float32)
    feed = {"x": x, "scale": np.array([1.5], np.float32)}
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feed)
    with InferenceSession(path) as session:
        binding = session.io_binding()
        for name, value in feed.items():
            binding.bind_cpu_input(name, value)
        binding.bind_output("logits")  # [batch, 5]: sized for batch 1 until the first run
        binding.bind_output("peak")
        session.run_with_iobinding(binding)
        for got, expected in zip(binding.copy_outputs_to_cpu(), want):
            assert got.shape == expected.shape
            np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


def test_run_with_run_options_matches_and_terminate_refuses(runtime, model_path, expected):
    options = RunOptions()
    options.timeout = 30
    options.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
    assert options.get_run_config_entry("memory.enable_memory_arena_shrinkage") == "cpu:0"
    with InferenceSession(model_path) as session:
        for _ in range(3):  # the pooled binding is reused
            got = session.run(None, feeds(), options)
            for g, e in zip(got, expected):
                np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)
        (peak,) = session.run(["peak"], feeds(), options)
        np.testing.assert_allclose(peak, expected[1], rtol=1e-4, atol=1e-5)
        assert len(session._bindings) == 1
        options.terminate = True
        with pytest.raises(RunCancelled, match="terminate is set"):
            session.run(None, feeds(), options)
        options.terminate = False
        assert len(session.run(None, feeds(), options)) == 2


def test_terminate_cancels_a_run_in_flight(tmp_path, monkeypatch, model_path):
    runtime = tmp_path / "rt"
    slow = start_driver(runtime, "cpu", "--fault-run-delay-ms", str(DELAY_MS))
    try:
        with use_runtime(monkeypatch, runtime), InferenceSession(model_path) as session:
            options = RunOptions()
            outcome: list = []

            def run() -> None:
                try:
                    outcome.append(session.run(None, feeds(), options))
                except BaseException as exc:  # noqa: BLE001 - handed to the test
                    outcome.append(exc)

            thread = threading.Thread(target=run)
            started = time.monotonic()
            thread.start()
            time.sleep(0.5)  # the run is inside the driver's delay
            options.terminate = True
            thread.join(10)
            took = time.monotonic() - started
            assert not thread.is_alive()
            assert isinstance(outcome[0], RunCancelled), outcome
            assert took < DELAY_MS / 1000 - 1  # well before the run would have finished
            assert not options._in_flight
    finally:
        slow.stop()


def test_ignored_session_options_are_said_once(runtime, model_path, caplog, monkeypatch):
    monkeypatch.setattr(session_module, "_warned", set())
    options = SessionOptions(intra_op_num_threads=4, enable_profiling=True)
    options.add_session_config_entry("session.load_model_format", "ONNX")
    options.not_an_option = 1
    with caplog.at_level(logging.WARNING, logger="nnrt.client.session"):
        for _ in range(2):
            InferenceSession(model_path, options).close()
        InferenceSession(model_path, SessionOptions()).close()  # defaults: nothing said
    said = [r.getMessage() for r in caplog.records if r.name == "nnrt.client.session"]
    assert len(said) == 4, said
    assert "SessionOptions.intra_op_num_threads = 4 has no effect in nnrt" in said[0]
    assert any("enable_profiling = True" in m for m in said)
    assert any("'session.load_model_format' has no effect" in m for m in said)
    assert any("not_an_option is not an option" in m for m in said)
