"""A driver's own Prometheus metrics (`nnrt-driver --metrics-address`): its runs by outcome,
its failed runs by return code, its runs by model (a bounded label set), its budgets and
sessions — the series the device manager exports for all its drivers (server/prometheus.py)."""

from __future__ import annotations

import re
import socket
import subprocess
import sys

import numpy as np
import pytest

from nnrt.common.errors import NNRT_SUCCESS
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.server.stats import MAX_MODEL_LABELS, OTHER_MODEL, RunStats
from tests.conftest import start_driver, wait_until
from tests.helpers.hdi_models import add_model, io
from tests.helpers.metrics import scrape, value


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.multiprocess
def test_a_driver_serves_its_own_metrics(tmp_path):
    port = free_port()
    driver = start_driver(tmp_path / "rt", "cpu", "--metrics-address", f"127.0.0.1:{port}")
    labels = {"driver": "cpu", "kind": "cpu"}
    try:
        assert wait_until(lambda: f"127.0.0.1:{port}/metrics" in driver.log(), 10)
        with driver.client() as client:
            model_id = add_model().prepare(client)
            _, x = client.allocate_buffer(16)
            _, y = client.allocate_buffer(16)
            x.array(np.float32, (4,))[:] = 1
            for _ in range(2):
                assert client.run(model_id, [io(x, 4)], [io(y, 4)], timeout=10).returnCode \
                    == NNRT_SUCCESS
            wrong = ht.IOTensor(dataType=ht.DATA_TYPE_FLOAT32, dimensions=[3],
                                format=ht.FORMAT_NONE, data=x.descriptor())
            refused = client.run(model_id, [wrong], [io(y, 4)], timeout=10)
            assert refused.returnCode != NNRT_SUCCESS
            samples = scrape(port)
            x.close(), y.close()
        code = next(dict(labels_)["code"] for name, labels_ in samples
                    if name == "nnrt_driver_run_failures_total")
        assert code.startswith("NNRT_INVALID_")
        assert value(samples, "nnrt_driver_runs_total", outcome="completed", **labels) == 2
        assert value(samples, "nnrt_driver_runs_total", outcome="failed", **labels) == 1
        assert value(samples, "nnrt_driver_run_failures_total", code=code, **labels) == 1
        assert value(samples, "nnrt_driver_model_runs_total", model="add", outcome="completed",
                     **labels) == 2
        assert value(samples, "nnrt_driver_model_runs_total", model="add", outcome="failed",
                     **labels) == 1
        assert value(samples, "nnrt_driver_sessions", **labels) == 1
        assert value(samples, "nnrt_driver_shared_memory_budget_bytes", **labels) > 0
        assert ("process_resident_memory_bytes", frozenset()) in samples
    finally:
        assert driver.stop() == 0


@pytest.mark.multiprocess
def test_a_metrics_address_in_use_stops_the_driver_with_the_reason(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run([sys.executable, "-m", "nnrt.server", "cpu", "--runtime-dir",
                               str(tmp_path / "rt"), "--metrics-address", f"127.0.0.1:{port}"],
                              capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert re.search(rf"cannot serve metrics on 127\.0\.0\.1:{port}: .*in use", done.stderr)
    assert not list((tmp_path / "rt").glob("cpu.*"))  # its sockets and token removed
    bad = subprocess.run([sys.executable, "-m", "nnrt.server", "cpu", "--metrics-address",
                          "[::1", "--runtime-dir", str(tmp_path / "rt")],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--metrics-address" in bad.stderr


def test_the_model_label_set_is_bounded():
    """The first MAX_MODEL_LABELS names a driver sees are counted apart, the rest together."""
    stats = RunStats()
    for k in range(MAX_MODEL_LABELS + 8):
        stats.started()
        stats.finished(succeeded=True, abandoned=False, model=f"m{k}")
    stats.started()
    stats.finished(succeeded=False, abandoned=False, code=3, model="m0")
    counts = stats.snapshot()
    assert len(counts.by_model) == MAX_MODEL_LABELS + 1
    assert counts.by_model[OTHER_MODEL] == (8, 0, 0)
    assert counts.by_model["m0"] == (1, 1, 0)
    assert counts.failed_by_code == {"NNRT_INVALID_PARAMETER": 1}
