"""Prometheus metrics of the device manager (`nnrt devmgr --metrics-address`, issue 15):
the address option, the run latency histogram a driver keeps (server/stats.py) and a real
device manager scraped over HTTP while its driver runs, fails runs and restarts."""

from __future__ import annotations

import os
import signal
import socket
import subprocess

import numpy as np
import pytest

from nnrt.client.cli import build_parser
from nnrt.client.core.driver import DriverClient
from nnrt.common import devmgr_cli
from nnrt.common.errors import NNRT_SUCCESS
from nnrt.server.stats import LATENCY_BUCKETS, RunStats
from tests.devmgr.util import WAIT, config_text, start_devmgr
from tests.helpers.hdi_models import add_model, io
from tests.helpers.metrics import metrics_port, scrape, value


# -- no processes ---------------------------------------------------------------------------


@pytest.mark.parametrize("text, expected", [
    ("127.0.0.1:9100", ("127.0.0.1", 9100)),
    ("0.0.0.0", ("0.0.0.0", devmgr_cli.DEFAULT_PORT)),
    (":0", ("127.0.0.1", 0)),
    ("localhost:9720", ("localhost", 9720)),
    ("[::1]:9721", ("::1", 9721)),
    ("[::]", ("::", devmgr_cli.DEFAULT_PORT)),
])
def test_metrics_addresses(text, expected):
    assert devmgr_cli.parse_address(text) == expected


@pytest.mark.parametrize("text", ["", "::1:9720", "host:http", "host:70000", "[::1", "[x]:1"])
def test_bad_metrics_addresses_are_usage_errors(text, capsys):
    with pytest.raises(ValueError):
        devmgr_cli.parse_address(text)
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["devmgr", "--metrics-address", text])
    assert exc.value.code == 2 and "--metrics-address" in capsys.readouterr().err


def test_metrics_are_off_by_default():
    assert build_parser().parse_args(["devmgr"]).metrics_address is None


def test_run_latency_histogram_counts_completed_runs_into_fixed_buckets(monkeypatch):
    stats = RunStats()
    clock = [0.0]
    monkeypatch.setattr("nnrt.server.stats.time.monotonic", lambda: clock[0])
    for took, ok in ((0.0002, True), (0.001, True), (0.003, True), (20.0, True),
                     (0.5, False)):  # a failed run is counted, not timed
        stats.started()
        clock[0] += took
        stats.finished(succeeded=ok, abandoned=False)
    snap = stats.snapshot()
    assert len(snap.latency_counts) == len(LATENCY_BUCKETS) + 1
    expected = [0] * (len(LATENCY_BUCKETS) + 1)
    expected[0] += 1  # 0.2 ms <= 0.5 ms
    expected[LATENCY_BUCKETS.index(0.001)] += 1  # a bound is inclusive (le)
    expected[LATENCY_BUCKETS.index(0.005)] += 1
    expected[-1] += 1  # +Inf
    assert list(snap.latency_counts) == expected
    assert snap.latency_sum == pytest.approx(0.0002 + 0.001 + 0.003 + 20.0)
    assert (snap.completed, snap.failed) == (4, 1)


# -- a device manager scraped over HTTP -------------------------------------------------------


def test_devmgr_serves_per_driver_metrics(tmp_path, devmgrs):
    devmgr = start_devmgr(tmp_path, config_text("""
        [drivers.cpu]
        kind = "cpu"
        [drivers.other]
        kind = "cpu"
        restart = "never"
    """), args=("--metrics-address", "127.0.0.1:0"))  # port 0: a free one, logged
    devmgrs.append(devmgr)
    port = metrics_port(devmgr)
    drivers = devmgr.wait_ready("cpu", "other")
    cpu = {"driver": "cpu", "kind": "cpu"}

    with DriverClient.connect("cpu", devmgr.runtime_dir) as client:
        model = add_model().prepare(client)
        _, x = client.allocate_buffer(16)
        _, y = client.allocate_buffer(4096)
        for k in range(25):
            x.array(np.float32, [4])[:] = k
            assert client.run(model, [io(x, 4)], [io(y, 4)], timeout=10).returnCode == \
                NNRT_SUCCESS
        assert client.run(model + 99, [io(x, 4)], [io(y, 4)], timeout=10).returnCode != \
            NNRT_SUCCESS  # an unknown prepared model: a failed run
        samples = scrape(port)
        x.close(), y.close()

    assert value(samples, "nnrt_devmgr_up") == 1
    assert value(samples, "nnrt_driver_state", state="ready", **cpu) == 1
    assert value(samples, "nnrt_driver_state", state="failed", **cpu) == 0
    assert value(samples, "nnrt_driver_restarts_total", **cpu) == 0
    assert value(samples, "nnrt_driver_status_up", **cpu) == 1
    assert value(samples, "nnrt_driver_runs_total", outcome="completed", **cpu) == 25
    assert value(samples, "nnrt_driver_runs_total", outcome="failed", **cpu) == 1
    assert value(samples, "nnrt_driver_runs_total", outcome="abandoned", **cpu) == 0
    assert value(samples, "nnrt_driver_runs_in_flight", **cpu) == 0
    assert value(samples, "nnrt_driver_run_latency_seconds_count", **cpu) == 25
    assert value(samples, "nnrt_driver_run_latency_seconds_bucket", le="+Inf", **cpu) == 25
    assert 0 < value(samples, "nnrt_driver_run_latency_seconds_sum", **cpu) < 25 * 1.0
    buckets = [value(samples, "nnrt_driver_run_latency_seconds_bucket", le=repr(b), **cpu)
               for b in LATENCY_BUCKETS]
    assert buckets == sorted(buckets)  # cumulative
    assert value(samples, "nnrt_driver_sessions", **cpu) == 1
    assert value(samples, "nnrt_driver_buffers", **cpu) == 2
    assert value(samples, "nnrt_driver_buffer_bytes", **cpu) == 16 + 4096
    assert value(samples, "nnrt_driver_prepared_models", **cpu) == 1
    assert value(samples, "nnrt_driver_sessions", driver="other", kind="cpu") == 0
    assert value(samples, "nnrt_driver_uptime_seconds", **cpu) > 0
    if os.environ.get("NNRT_CPU_ENGINE", "ort") == "ort":  # a core budget, its run queue
        assert value(samples, "nnrt_driver_cores", **cpu) == len(os.sched_getaffinity(0))
        assert value(samples, "nnrt_driver_cores_in_use", **cpu) == 0
        assert value(samples, "nnrt_driver_runs_queued", **cpu) == 0
        assert value(samples, "nnrt_driver_run_queue_waits_total", **cpu) == 0  # one at a time
        assert value(samples, "nnrt_driver_run_queue_wait_seconds_total", **cpu) == 0
        assert value(samples, "nnrt_driver_run_queue_gave_up_total", **cpu) == 0
    else:  # the numpy engine has none
        assert ("nnrt_driver_cores", frozenset(cpu.items())) not in samples
    assert value(samples, "process_open_fds") > 0  # the device manager's own

    # A restarted driver: restarts counted, its process's run counters start again; one
    # not restarted (restart = "never": failed) is no longer read (status_up 0).
    os.kill(drivers["cpu"]["pid"], signal.SIGKILL)
    os.kill(drivers["other"]["pid"], signal.SIGKILL)
    devmgr.wait_drivers(lambda ds: ds["cpu"]["state"] == "ready" and ds["cpu"]["restarts"] == 1
                        and ds["other"]["state"] == "failed", "cpu restarted, other failed")
    samples = scrape(port)
    assert value(samples, "nnrt_driver_restarts_total", **cpu) == 1
    assert value(samples, "nnrt_driver_runs_total", outcome="completed", **cpu) == 0
    assert value(samples, "nnrt_driver_sessions", **cpu) == 0
    other = {"driver": "other", "kind": "cpu"}
    assert value(samples, "nnrt_driver_state", state="failed", **other) == 1
    assert value(samples, "nnrt_driver_state", state="ready", **other) == 0
    assert value(samples, "nnrt_driver_status_up", **other) == 0
    assert ("nnrt_driver_runs_total", frozenset({**other, "outcome": "completed"}.items())) \
        not in samples

    assert devmgr.stop() == 0
    with pytest.raises(OSError):  # the endpoint is gone with the device manager
        socket.create_connection(("127.0.0.1", port), timeout=2).close()


def test_a_metrics_address_in_use_exits_1(tmp_path, devmgrs):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        port = taken.getsockname()[1]
        devmgr = start_devmgr(tmp_path, config_text("[drivers.cpu]\nkind = \"cpu\"\n"),
                              args=("--metrics-address", f"127.0.0.1:{port}"))
        devmgrs.append(devmgr)
        try:
            assert devmgr.proc.wait(WAIT) == 1
        except subprocess.TimeoutExpired:
            raise AssertionError(devmgr.log()) from None
        assert f"cannot serve metrics on 127.0.0.1:{port}" in devmgr.log()
        assert not list(devmgr.runtime_dir.glob("*.sock"))  # no driver was started
    finally:
        taken.close()
