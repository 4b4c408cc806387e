"""The NPU simulator's one queue (drivers/accel/scheduler.py), in process: the order in which
runs of each priority take the device at node boundaries and the nodes each run waited for,
with nodes of no simulated duration (the order alone, no timing)."""

from __future__ import annotations

import threading

from nnrt.drivers.accel.scheduler import DeviceQueue, Run
from nnrt.drivers.accel.spec import load_spec
from nnrt.protos import hdi_types_pb2 as ht

BOUND_S = 10.0  # every thread of a test ends within this


def _run_nodes(queue: DeviceQueue, run: Run, log: list[str], name: str) -> threading.Thread:
    """A thread taking the device for each node of `run`, then finishing it."""

    def body() -> None:
        for position in range(len(run.durations)):
            with run.node(position):
                log.append(f"{name}{position}")
        queue.finish(run)

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    return thread


def test_high_goes_at_the_next_node_boundary_and_the_nodes_waited_for_are_counted():
    queue = DeviceQueue(load_spec(None))
    mode = ht.PERFORMANCE_NONE
    log: list[str] = []
    low_a = queue.admit(ht.PRIORITY_LOW, mode, [0.0, 0.0, 0.0])
    with low_a.node(0):  # A's first node in progress while B (LOW) and H (HIGH) arrive
        log.append("a0")
        low_b = queue.admit(ht.PRIORITY_LOW, mode, [0.0])
        later_b = _run_nodes(queue, low_b, log, "b")
        high = queue.admit(ht.PRIORITY_HIGH, mode, [0.0, 0.0])
        later_h = _run_nodes(queue, high, log, "h")
    for position in (1, 2):  # A's next nodes wait for H's whole run, then keep B behind
        with low_a.node(position):
            log.append(f"a{position}")
    queue.finish(low_a)
    for thread in (later_h, later_b):
        thread.join(BOUND_S)
        assert not thread.is_alive()

    assert log == ["a0", "h0", "h1", "a1", "a2", "b0"]
    assert (high.overtaken, low_a.overtaken, low_b.overtaken) == (0, 2, 4)
    status = queue.status()
    assert status["sim_wait_high_max_nodes"] == "0"
    assert status["sim_wait_low_max_nodes"] == "4"
    assert status["sim_wait_high_runs"] == "1" and status["sim_wait_low_runs"] == "2"
    assert status["sim_runs_completed"] == "3" and status["sim_runs_in_flight"] == "0"


def test_medium_before_low_and_first_come_first_served_within_one_priority():
    queue = DeviceQueue(load_spec(None))
    mode = ht.PERFORMANCE_NONE
    log: list[str] = []
    first = queue.admit(ht.PRIORITY_NONE, mode, [0.0])  # NONE counts as MEDIUM
    threads = []
    with first.node(0):
        log.append("n0")
        for name, priority in (("l", ht.PRIORITY_LOW), ("m", ht.PRIORITY_MEDIUM),
                               ("x", ht.PRIORITY_MEDIUM)):
            threads.append(_run_nodes(queue, queue.admit(priority, mode, [0.0]), log, name))
    queue.finish(first)
    for thread in threads:
        thread.join(BOUND_S)
        assert not thread.is_alive()
    assert log == ["n0", "m0", "x0", "l0"]
    assert queue.status()["sim_wait_medium_max_nodes"] == "1"  # x waited for m's node
    assert queue.status()["sim_wait_low_max_nodes"] == "2"
