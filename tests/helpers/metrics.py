"""The device manager's Prometheus metrics: its logged port, a scrape, one sample's value."""

from __future__ import annotations

import re
import time
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from tests.devmgr.util import WAIT


def scrape(port: int) -> dict[tuple[str, frozenset], float]:
    """Every sample of /metrics: (name, labels) -> value."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
        assert reply.status == 200
        text = reply.read().decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(samples, name: str, **labels) -> float:
    return samples[(name, frozenset(labels.items()))]


def metrics_port(devmgr) -> int:
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        found = re.search(r"Prometheus metrics on http://127\.0\.0\.1:(\d+)/metrics", devmgr.log())
        if found:
            return int(found.group(1))
        assert devmgr.proc.poll() is None, devmgr.log()
        time.sleep(0.05)
    raise AssertionError(f"no metrics address logged:\n{devmgr.log()}")
