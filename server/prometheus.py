"""Prometheus series of a driver, built from its admin DriverStatus, and the HTTP endpoint
that serves them: for the device manager over all its drivers (devmgr/metrics.py) and for a
driver on its own (`nnrt-driver --metrics-address`, `DriverCollector`).

Every driver series is labelled `driver` (its socket name) and `kind`; a few add one label
of a bounded set: `outcome` (completed / failed / abandoned), `code` (a failed run's
NNRT_ReturnCode name: ~40 at most), `model` (the prepared model's name, the first
MAX_MODEL_LABELS names a driver saw and "other" for the rest: server/stats.py), `uid`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, ProcessCollector, start_http_server
from prometheus_client.core import (CounterMetricFamily, GaugeMetricFamily,
                                    HistogramMetricFamily)
from prometheus_client.registry import Collector

from nnrt.protos import admin_pb2 as admin_pb

log = logging.getLogger("nnrt.metrics")

LABELS = ("driver", "kind")
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


class DriverFamilies:
    """The series of one or more drivers' DriverStatus replies (`add` each, then
    `families`)."""

    def __init__(self) -> None:
        self.runs = CounterMetricFamily("nnrt_driver_runs", "Runs answered by the driver's "
                                        "current process, by outcome",
                                        labels=(*LABELS, "outcome"))
        self.failures = CounterMetricFamily("nnrt_driver_run_failures", "failed Runs by the "
                                            "driver's return code", labels=(*LABELS, "code"))
        self.model_runs = CounterMetricFamily("nnrt_driver_model_runs", "Runs by prepared "
                                              "model (its name; 'other' past the first 32) and "
                                              "outcome", labels=(*LABELS, "model", "outcome"))
        self.in_flight = GaugeMetricFamily("nnrt_driver_runs_in_flight", "Runs in flight",
                                           labels=LABELS)
        self.latency = HistogramMetricFamily("nnrt_driver_run_latency_seconds", "latency of "
                                             "the completed Runs (driver side)", labels=LABELS)
        self.sessions = GaugeMetricFamily("nnrt_driver_sessions", "open client sessions",
                                          labels=LABELS)
        self.buffers = GaugeMetricFamily("nnrt_driver_buffers", "shared buffers the sessions "
                                         "hold", labels=LABELS)
        self.buffer_bytes = GaugeMetricFamily("nnrt_driver_buffer_bytes", "bytes of shared "
                                              "memory the sessions hold", labels=LABELS)
        self.prepared = GaugeMetricFamily("nnrt_driver_prepared_models", "prepared models the "
                                          "sessions hold", labels=LABELS)
        self.budget = GaugeMetricFamily("nnrt_driver_shared_memory_budget_bytes", "shared "
                                        "memory all sessions of the driver may hold "
                                        "(--max-driver-memory-mb or its default)", labels=LABELS)
        self.session_budget = GaugeMetricFamily("nnrt_driver_session_memory_budget_bytes",
                                                "shared memory one session may hold",
                                                labels=LABELS)
        self.model_limit = GaugeMetricFamily("nnrt_driver_model_memory_limit_bytes", "memory "
                                             "one run of a prepared model may write",
                                             labels=LABELS)
        self.uid_budget = GaugeMetricFamily("nnrt_driver_uid_memory_budget_bytes", "shared "
                                            "memory the sessions of one peer uid may hold "
                                            "together (--max-uid-memory-mb or its default)",
                                            labels=LABELS)
        self.uid_memory = GaugeMetricFamily("nnrt_driver_uid_shared_memory_bytes", "shared "
                                            "memory the sessions of one peer uid hold now",
                                            labels=(*LABELS, "uid"))
        self.uid_sessions = GaugeMetricFamily("nnrt_driver_uid_sessions", "sessions one peer "
                                              "uid has open now", labels=(*LABELS, "uid"))
        self.queue = [kind(name, text, labels=LABELS)
                      for name, kind, text, _ in RUN_QUEUE_METRICS]

    def add(self, labels: list[str], status: admin_pb.DriverStatus) -> None:
        for outcome, value in (("completed", status.runsCompleted),
                               ("failed", status.runsFailed),
                               ("abandoned", status.runsAbandoned)):
            self.runs.add_metric([*labels, outcome], value)
        for code, value in sorted(status.runsFailedByCode.items()):
            self.failures.add_metric([*labels, code], value)
        for model in status.modelRuns:
            for outcome, value in (("completed", model.completed), ("failed", model.failed),
                                   ("abandoned", model.abandoned)):
                self.model_runs.add_metric([*labels, model.model, outcome], value)
        self.in_flight.add_metric(labels, status.inFlightRuns)
        self.latency.add_metric(labels, cumulative(status.runLatency),
                                status.runLatency.sumSeconds)
        self.sessions.add_metric(labels, len(status.sessions))
        self.buffers.add_metric(labels, sum(s.buffers for s in status.sessions))
        self.buffer_bytes.add_metric(labels, sum(s.bufferBytes for s in status.sessions))
        self.prepared.add_metric(labels, sum(s.preparedModels for s in status.sessions))
        if status.sharedMemoryBudgetBytes:  # 0: a driver from before budgets were reported
            self.budget.add_metric(labels, status.sharedMemoryBudgetBytes)
            self.session_budget.add_metric(labels, status.sessionMemoryBudgetBytes)
            self.model_limit.add_metric(labels, status.modelMemoryLimitBytes)
        if status.uidMemoryBudgetBytes:
            self.uid_budget.add_metric(labels, status.uidMemoryBudgetBytes)
        for account in status.uids:
            self.uid_memory.add_metric([*labels, str(account.uid)], account.sharedMemoryBytes)
            self.uid_sessions.add_metric([*labels, str(account.uid)], account.sessions)
        if status.HasField("runQueue"):
            for family, (*_, field) in zip(self.queue, RUN_QUEUE_METRICS):
                family.add_metric(labels, getattr(status.runQueue, field))

    def families(self) -> list:
        return [self.runs, self.failures, self.model_runs, self.in_flight, self.latency,
                self.sessions, self.buffers, self.buffer_bytes, self.prepared, self.budget,
                self.session_budget, self.model_limit, self.uid_budget, self.uid_memory,
                self.uid_sessions, *self.queue]


def cumulative(histogram: admin_pb.RunLatency) -> list[tuple[str, float]]:
    """Per-bucket counts -> Prometheus' cumulative (le, count) pairs, +Inf last."""
    bounds = [*(repr(float(b)) for b in histogram.upperBoundsSeconds), "+Inf"]
    counts = list(histogram.counts) or [0]
    if len(counts) != len(bounds):  # a driver of another version: only the total is sure
        return [("+Inf", float(sum(counts)))]
    total, pairs = 0, []
    for bound, count in zip(bounds, counts):
        total += count
        pairs.append((bound, float(total)))
    return pairs


class DriverCollector(Collector):
    """A driver's own series (`nnrt-driver --metrics-address`), read from its admin status
    at each scrape."""

    def __init__(self, status: Callable[[], admin_pb.DriverStatus], name: str,
                 kind: str) -> None:
        self.status = status
        self.labels = [name, kind]

    def collect(self) -> Iterator:
        started = time.monotonic()
        families = DriverFamilies()
        families.add(self.labels, self.status())
        yield from families.families()
        took = GaugeMetricFamily("nnrt_driver_scrape_duration_seconds", "seconds this scrape "
                                 "took to read the driver's status", labels=LABELS)
        took.add_metric(self.labels, time.monotonic() - started)
        yield took


class MetricsServer:
    """An HTTP endpoint serving `collector` and the process's own metrics (`process_*`):
    started by the constructor, stopped by `close` (joins its thread)."""

    def __init__(self, collector: Collector, host: str, port: int) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.collector = collector
        self.registry.register(collector)
        ProcessCollector(registry=self.registry)
        self._server, self._thread = start_http_server(port, host, self.registry)
        self.host, self.port = self._server.server_address[:2]
        log.info("metrics: serving Prometheus metrics on http://%s/metrics",
                 f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}")

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)
        close = getattr(self.collector, "close", None)
        if close is not None:
            close()
