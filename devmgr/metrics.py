"""Prometheus metrics of the device manager and its drivers (`nnrt devmgr --metrics-address`).

    nnrt devmgr --metrics-address 127.0.0.1:9720      # then: curl http://127.0.0.1:9720/metrics

Decisions:

* **Off by default**; `--metrics-address HOST:PORT` turns it on (`HOST` alone: port
  `DEFAULT_PORT`, 9720; `:PORT`: 127.0.0.1; an IPv6 host in brackets, `[::1]:9720`). The
  device manager binds it before it claims its control socket and exits 1 when it cannot
  (address in use, a bad host). Plain HTTP, `prometheus_client`'s own server on a
  thread of its own: `/metrics` (any path answers the same), OpenMetrics when asked.
* **Read at scrape time, nothing kept**: a custom collector takes the device manager's
  driver snapshots (state, restarts, uptime: what `nnrt status` shows) and asks each live
  driver's admin `GetStatus` (protos/admin.proto) for its run counters, run latency
  histogram, sessions, buffers, bytes held, prepared models, memory budgets and run queue
  (CPU driver: `nnrt_driver_cores`, `_cores_in_use`, `nnrt_driver_runs_queued`, and the
  counters `nnrt_driver_run_queue_waits_total`, `_wait_seconds_total`, `_gave_up_total`:
  their rate's ratio is the mean wait for cores) — in parallel, each bounded
  by `SCRAPE_TIMEOUT`, so a wedged driver costs a scrape at most that long and shows as
  `nnrt_driver_status_up 0` instead of failing the scrape. A driver's run counters and
  histogram are its process's: they restart from zero when the driver restarts, which
  Prometheus' `rate()` / `increase()` treat as a counter reset.
* Every driver series is labelled `driver` (its socket name) and `kind`. Names follow
  Prometheus' conventions (`_total` counters, `_seconds`, `_bytes`); the state is one
  series per state, 1 for the current one (`nnrt_driver_state{state="ready"}`, as
  kube-state-metrics does phases), so alerts need no string matching.
* Warm standby: `nnrt_driver_standby_takeovers_total` counts the restarts done by promoting
  the spare (the device manager's count, kept across an operator's `nnrt devmgr restart`);
  `nnrt_driver_standby_ready` is 1 while a loaded spare waits (only for standby drivers), so
  "the next crash gets a cold start" is an alert on 0.
* The device manager's own process metrics (`process_*`: CPU, RSS, fds) come with it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

import grpc
from google.protobuf import empty_pb2
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from nnrt.protos import admin_pb2 as admin_pb
from nnrt.protos import admin_pb2_grpc
from .states import STATES
from nnrt.server.prometheus import LABELS, DriverFamilies, MetricsServer
from nnrt.common.devmgr_cli import parse_address
from nnrt.common.runtime_dir import admin_metadata, grpc_socket

if TYPE_CHECKING:
    from .manager import DeviceManager

log = logging.getLogger("nnrt.devmgr.metrics")

SCRAPE_TIMEOUT = 2.0  # s one driver's GetStatus may take during a scrape


def driver_status(directory: Path, name: str,
                  timeout: float = SCRAPE_TIMEOUT) -> admin_pb.DriverStatus | None:
    """One driver's admin GetStatus (with its admin token where this process may read it),
    or None when it does not answer in time."""
    path = grpc_socket(directory, name)
    try:
        with grpc.insecure_channel(f"unix:{path}") as channel:
            status = admin_pb2_grpc.NnrtAdminStub(channel).GetStatus(
                empty_pb2.Empty(), timeout=timeout, metadata=admin_metadata(directory, name))
    except grpc.RpcError as exc:
        log.debug("metrics: GetStatus of %s: %s", path, exc.code())
        return None
    return status if status.returnCode == 0 else None


class DevmgrCollector(Collector):
    """Reads the device manager and its drivers at each scrape (see the module docstring)."""

    def __init__(self, manager: DeviceManager, timeout: float = SCRAPE_TIMEOUT) -> None:
        self.manager = manager
        self.timeout = timeout
        # At most a few drivers per device manager: a small pool, reused between scrapes.
        self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="devmgr-metrics")

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def collect(self) -> Iterator:
        started = time.monotonic()
        drivers = self.manager.snapshots()
        live = [d for d in drivers if d["pid"] is not None]
        futures = {d["name"]: self._pool.submit(
            driver_status, self.manager.runtime_dir, d["name"], self.timeout)
            for d in live}
        statuses = {name: future.result() for name, future in futures.items()}

        up = GaugeMetricFamily("nnrt_devmgr_up", "1 while the device manager runs")
        up.add_metric([], 1)
        yield up
        uptime = GaugeMetricFamily("nnrt_devmgr_uptime_seconds", "seconds since the device "
                                   "manager started")
        # The manager's start time (monotonic), as its control socket's status reports it.
        uptime.add_metric([], time.monotonic() - self.manager._started)
        yield uptime

        state = GaugeMetricFamily("nnrt_driver_state", "1 for the device manager's state of "
                                  "the driver, 0 for the others", labels=(*LABELS, "state"))
        restarts = CounterMetricFamily("nnrt_driver_restarts", "restarts of the driver by the "
                                       "device manager", labels=LABELS)
        driver_uptime = GaugeMetricFamily("nnrt_driver_uptime_seconds", "seconds the driver's "
                                          "current process has run", labels=LABELS)
        status_up = GaugeMetricFamily("nnrt_driver_status_up", "1 when the driver answered its "
                                      "admin GetStatus in this scrape", labels=LABELS)
        takeovers = CounterMetricFamily("nnrt_driver_standby_takeovers", "restarts done by "
                                        "promoting the warm spare (standby = true)",
                                        labels=LABELS)
        standby_ready = GaugeMetricFamily("nnrt_driver_standby_ready", "1 while a warm spare "
                                          "is loaded and ready to take over (drivers with "
                                          "standby = true only)", labels=LABELS)
        families = DriverFamilies()
        for d in drivers:
            labels = [d["name"], d["kind"]]
            for name in STATES:
                state.add_metric([*labels, name], 1 if d["state"] == name else 0)
            restarts.add_metric(labels, d["restarts"])
            takeovers.add_metric(labels, d.get("takeovers") or 0)
            if d.get("standby") is not None:
                standby_ready.add_metric(labels, 1 if d["standby"]["state"] == "ready" else 0)
            if d["uptime"] is not None:
                driver_uptime.add_metric(labels, d["uptime"])
            status = statuses.get(d["name"])
            status_up.add_metric(labels, 1 if status is not None else 0)
            if status is not None:
                families.add(labels, status)
        yield from (state, restarts, takeovers, standby_ready, driver_uptime, status_up,
                    *families.families())

        took = GaugeMetricFamily("nnrt_devmgr_scrape_duration_seconds", "seconds this scrape "
                                 "took to read the drivers")
        took.add_metric([], time.monotonic() - started)
        yield took


def serve(manager: DeviceManager, address: str) -> MetricsServer:
    """Serve the metrics of `manager` on `address` (parse_address); OSError / ValueError
    when it cannot."""
    host, port = parse_address(address)
    return MetricsServer(DevmgrCollector(manager), host, port)

