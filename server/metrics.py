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
from prometheus_client import CollectorRegistry, ProcessCollector, start_http_server
from prometheus_client.core import (CounterMetricFamily, GaugeMetricFamily,
                                    HistogramMetricFamily)
from prometheus_client.registry import Collector

from nnrt.protos import admin_pb2 as admin_pb
from nnrt.protos import admin_pb2_grpc
from nnrt.server.devmgr import STATES
from nnrt.common.devmgr_cli import parse_address
from nnrt.common.runtime_dir import admin_metadata, grpc_socket

if TYPE_CHECKING:
    from nnrt.server.devmgr import DeviceManager

log = logging.getLogger("nnrt.devmgr.metrics")

SCRAPE_TIMEOUT = 2.0  # s one driver's GetStatus may take during a scrape
# The run queue of a driver with a core budget (admin RunQueue): name, type, help, field.
RUN_QUEUE_METRICS = (
    ("nnrt_driver_cores", GaugeMetricFamily, "cores the driver's runs may compute on at "
     "once (its run queue's budget; CPU driver)", "cores"),
    ("nnrt_driver_cores_in_use", GaugeMetricFamily, "cores granted to runs computing now",
     "coresInUse"),
    ("nnrt_driver_runs_queued", GaugeMetricFamily, "runs waiting for cores now", "queued"),
    ("nnrt_driver_run_queue_waits", CounterMetricFamily, "runs whose turn came after "
     "waiting for cores", "waited"),
    ("nnrt_driver_run_queue_wait_seconds", CounterMetricFamily, "time runs waited for "
     "cores, summed", "waitSeconds"),
    ("nnrt_driver_run_queue_gave_up", CounterMetricFamily, "queued runs that never "
     "computed: their callers gave up first", "gaveUp"),
)
LABELS = ("driver", "kind")


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
        runs = CounterMetricFamily("nnrt_driver_runs", "Runs answered by the driver's current "
                                   "process, by outcome", labels=(*LABELS, "outcome"))
        in_flight = GaugeMetricFamily("nnrt_driver_runs_in_flight", "Runs in flight",
                                      labels=LABELS)
        latency = HistogramMetricFamily("nnrt_driver_run_latency_seconds", "latency of the "
                                        "completed Runs (driver side)", labels=LABELS)
        sessions = GaugeMetricFamily("nnrt_driver_sessions", "open client sessions",
                                     labels=LABELS)
        buffers = GaugeMetricFamily("nnrt_driver_buffers", "shared buffers the sessions hold",
                                    labels=LABELS)
        buffer_bytes = GaugeMetricFamily("nnrt_driver_buffer_bytes", "bytes of shared memory "
                                         "the sessions hold", labels=LABELS)
        prepared = GaugeMetricFamily("nnrt_driver_prepared_models", "prepared models the "
                                     "sessions hold", labels=LABELS)
        takeovers = CounterMetricFamily("nnrt_driver_standby_takeovers", "restarts done by "
                                        "promoting the warm spare (standby = true)",
                                        labels=LABELS)
        standby_ready = GaugeMetricFamily("nnrt_driver_standby_ready", "1 while a warm spare "
                                          "is loaded and ready to take over (drivers with "
                                          "standby = true only)", labels=LABELS)
        budget = GaugeMetricFamily("nnrt_driver_shared_memory_budget_bytes", "shared memory "
                                   "all sessions of the driver may hold (--max-driver-memory-mb "
                                   "or its default)", labels=LABELS)
        session_budget = GaugeMetricFamily("nnrt_driver_session_memory_budget_bytes", "shared "
                                           "memory one session may hold", labels=LABELS)
        model_limit = GaugeMetricFamily("nnrt_driver_model_memory_limit_bytes", "memory one "
                                        "run of a prepared model may write", labels=LABELS)
        uid_budget = GaugeMetricFamily("nnrt_driver_uid_memory_budget_bytes", "shared memory "
                                       "the sessions of one peer uid may hold together "
                                       "(--max-uid-memory-mb or its default)", labels=LABELS)
        uid_memory = GaugeMetricFamily("nnrt_driver_uid_shared_memory_bytes", "shared memory "
                                       "the sessions of one peer uid hold now",
                                       labels=[*LABELS, "uid"])
        uid_sessions = GaugeMetricFamily("nnrt_driver_uid_sessions", "sessions one peer uid "
                                         "has open now", labels=[*LABELS, "uid"])
        queue_families = [kind(name, text, labels=LABELS)
                          for name, kind, text, _ in RUN_QUEUE_METRICS]
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
            if status is None:
                continue
            for outcome, value in (("completed", status.runsCompleted),
                                   ("failed", status.runsFailed),
                                   ("abandoned", status.runsAbandoned)):
                runs.add_metric([*labels, outcome], value)
            in_flight.add_metric(labels, status.inFlightRuns)
            latency.add_metric(labels, _cumulative(status.runLatency),
                               status.runLatency.sumSeconds)
            sessions.add_metric(labels, len(status.sessions))
            buffers.add_metric(labels, sum(s.buffers for s in status.sessions))
            buffer_bytes.add_metric(labels, sum(s.bufferBytes for s in status.sessions))
            prepared.add_metric(labels, sum(s.preparedModels for s in status.sessions))
            if status.sharedMemoryBudgetBytes:  # 0: a driver from before budgets were reported
                budget.add_metric(labels, status.sharedMemoryBudgetBytes)
                session_budget.add_metric(labels, status.sessionMemoryBudgetBytes)
                model_limit.add_metric(labels, status.modelMemoryLimitBytes)
            if status.uidMemoryBudgetBytes:
                uid_budget.add_metric(labels, status.uidMemoryBudgetBytes)
            for account in status.uids:
                uid_memory.add_metric([*labels, str(account.uid)], account.sharedMemoryBytes)
                uid_sessions.add_metric([*labels, str(account.uid)], account.sessions)
            if status.HasField("runQueue"):
                for family, (*_, field) in zip(queue_families, RUN_QUEUE_METRICS):
                    family.add_metric(labels, getattr(status.runQueue, field))
        yield from (state, restarts, takeovers, standby_ready, driver_uptime, status_up, runs,
                    in_flight, latency, sessions, buffers, buffer_bytes, prepared, budget,
                    session_budget, model_limit, uid_budget, uid_memory, uid_sessions,
                    *queue_families)

        took = GaugeMetricFamily("nnrt_devmgr_scrape_duration_seconds", "seconds this scrape "
                                 "took to read the drivers")
        took.add_metric([], time.monotonic() - started)
        yield took


def _cumulative(histogram: admin_pb.RunLatency) -> list[tuple[str, float]]:
    """Per-bucket counts -> Prometheus' cumulative (le, count) pairs, +Inf last."""
    bounds = [*(_le(b) for b in histogram.upperBoundsSeconds), "+Inf"]
    counts = list(histogram.counts) or [0]
    if len(counts) != len(bounds):  # a driver of another version: only the total is sure
        return [("+Inf", float(sum(counts)))]
    total, pairs = 0, []
    for bound, count in zip(bounds, counts):
        total += count
        pairs.append((bound, float(total)))
    return pairs


def _le(bound: float) -> str:
    return repr(float(bound))


class MetricsServer:
    """The HTTP endpoint: started by `serve`, stopped by `close` (joins its thread)."""

    def __init__(self, manager: DeviceManager, host: str, port: int) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.collector = DevmgrCollector(manager)
        self.registry.register(self.collector)
        ProcessCollector(registry=self.registry)
        self._server, self._thread = start_http_server(port, host, self.registry)
        self.host, self.port = self._server.server_address[:2]
        log.info("metrics: serving Prometheus metrics on http://%s/metrics",
                 f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}")

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)
        self.collector.close()


def serve(manager: DeviceManager, address: str) -> MetricsServer:
    """Serve the metrics of `manager` on `address` (parse_address); OSError / ValueError
    when it cannot."""
    host, port = parse_address(address)
    return MetricsServer(manager, host, port)

