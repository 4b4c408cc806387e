"""Whole models through the client on the NPU simulator in relaxed precision (EnableFloat16)
against the CPU driver in float32: the five zoo families agree within float16 tolerance; in
float32 the NPU refuses to build."""

from __future__ import annotations

import numpy as np
import pytest

from nnrt.client import zoo
from nnrt.client.api import NNRtError
from tests.client.capi.util_capi import use_runtime
from tests.conftest import start_driver


@pytest.fixture(scope="module")
def drivers(tmp_path_factory):
    runtime = tmp_path_factory.mktemp("npu") / "rt"
    running = [start_driver(runtime, "cpu"), start_driver(runtime, "accel")]
    yield runtime
    for driver in running:
        driver.stop()


@pytest.fixture
def runtime(drivers, monkeypatch):
    with use_runtime(monkeypatch, drivers):
        yield drivers


def _outputs(result) -> list[np.ndarray]:
    return list(result) if isinstance(result, (list, tuple)) else [result]


@pytest.mark.parametrize("family", zoo.FAMILIES)
def test_float16_on_the_npu_agrees_with_float32_on_the_cpu(runtime, family):
    model, x = zoo.build(family, batch=2)
    npu = model.compile("accelerator", float16=True)
    cpu = model.compile("cpu")
    try:
        got = _outputs(npu.executor().run(x))
        want = _outputs(cpu.executor().run(x))
        for g, w in zip(got, want):
            assert g.dtype == np.float32 and g.shape == w.shape  # float32 on the wire
            scale = float(np.abs(w).max())
            np.testing.assert_allclose(g, w, rtol=2e-2, atol=1e-2 * scale)
    finally:
        npu.close()
        cpu.close()


def test_float32_without_float16_does_not_build(runtime):
    model, _ = zoo.build("mlp", batch=1)
    with pytest.raises(NNRtError):
        model.compile("accelerator")
