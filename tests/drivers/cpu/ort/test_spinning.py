"""onnxruntime's pool threads spin within a run given every core and on after it (`--ort-spin
auto`, the default: a run takes the pool only while the CPUs it needs are free; `on`: always;
`off`: they sleep at its end). Issue 32: "spinning is allowed only where it costs no other
process a core" — spinning on after each run, one client on a ~1 ms model kept both cores of
a 2-vCPU machine busy; sleeping, a run after an idle pause woke them on a cold CPU."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np
import pytest

from nnrt.drivers.cpu.ort import engine, pool_spinning
from nnrt.hdi.graph import Graph
from nnrt.protos import node_attrs_pb2 as na
from tests.conftest import admin_details, start_driver
from tests.hdi.reference.util import GraphBuilder, randn

SPIN_KEYS = ("session.intra_op.allow_spinning", "session.force_spinning_stop",
             "session.inter_op.allow_spinning")
CORES = len(os.sched_getaffinity(0))


@pytest.fixture
def spinning(monkeypatch):
    """Set the pool's spinning mode for the sessions a test makes (restored after)."""
    def configure(mode: str) -> None:
        monkeypatch.setattr(pool_spinning, "_mode", "off")  # restored by monkeypatch
        monkeypatch.setattr(pool_spinning, "_spinning", {})
        pool_spinning.configure(mode)
    return configure


def wide_matmul() -> tuple[Graph, np.ndarray]:
    """One FullConnection big enough that onnxruntime splits it over its pool."""
    g = GraphBuilder()
    x = g.tensor((64, 256))
    y = g.node(na.NODE_TYPE_FULL_CONNECTION, na.FullConnection(),
               [x, g.tensor((256, 256), randn(256, 256, seed=1))], (64, 256))
    return g.graph([x], [y]), randn(64, 256, seed=2)


def one_segment(graph: Graph) -> engine.OrtSegment:
    from nnrt.hdi.reference.kernel import create_kernel

    kernels = {i: create_kernel(node) for i, node in enumerate(graph.nodes)}
    segment = engine.partition(graph, kernels).single_segment
    assert segment is not None
    return segment


def session_spin(segment: engine.OrtSegment, narrow: bool) -> list[str]:
    session = segment._narrow_session() if narrow else segment.session
    options = session.get_session_options()
    return [options.get_session_config_entry(key) for key in SPIN_KEYS]


@pytest.mark.parametrize("mode, stop", [("auto", "0"), ("on", "0"), ("off", "1")])
def test_the_session_options_spin_on_after_a_run_unless_off(spinning, mode, stop):
    spinning(mode)
    assert pool_spinning.mode() == mode
    # a pool spins within a run; it stops at its end only when off
    assert [engine._session_options(True, 2).get_session_config_entry(k)
            for k in SPIN_KEYS] == ["1", stop, "0"]
    # one thread has no pool to spin, whatever the option
    assert engine._session_options(True, 1).get_session_config_entry(SPIN_KEYS[0]) == "0"


@pytest.mark.skipif(CORES < 2, reason="one core: no pool")
@pytest.mark.parametrize("mode", ["on", "off"])
def test_a_segments_sessions_spin_on_unless_off(spinning, mode):
    spinning(mode)
    segment = one_segment(wide_matmul()[0])
    assert segment.threads > 1
    assert session_spin(segment, narrow=False) == ["1", "1" if mode == "off" else "0", "0"]
    assert session_spin(segment, narrow=True)[0] == "0"


class _Count:
    """A stand-in for common/cpus.SpareCpu: the machine's runnable tasks, set by the test."""

    def __init__(self, runnable: int | None, cpus: int = 2) -> None:
        self.value, self.cpus = runnable, cpus

    def runnable(self, fresh: bool = False) -> int | None:
        return self.value


@pytest.mark.parametrize("mode, runnable, pools_now, wide", [
    ("auto", 1, 0, True),      # only this run's thread: both CPUs free
    ("auto", 2, 0, False),     # another task runs: the pool would take its CPU
    ("auto", 2, 1, True),      # ... unless that task is our own pool, still spinning
    ("auto", 3, 2, True),      # two pools of ours (two segments of one model)
    ("auto", 3, 1, False),     # our pool and another task
    ("auto", None, 0, False),  # no count (not Linux), or one CPU of our own
    ("on", 9, 0, True),        # a driver that owns the machine: always
    ("off", 9, 0, True),       # sleeping pools: a run may always take them
])
def test_a_run_takes_the_pool_only_while_the_cpus_it_needs_are_free(
        spinning, monkeypatch, mode, runnable, pools_now, wide):
    spinning(mode)
    monkeypatch.setattr(pool_spinning, "spare_cpu", lambda: _Count(runnable))
    pools = [object() for _ in range(pools_now)]
    for pool in pools:
        pool_spinning.went_wide(pool, 2)
    assert pool_spinning.may_go_wide(2) is wide


def test_a_pool_stops_counting_as_ours_once_it_has_spun_out(spinning, monkeypatch):
    spinning("auto")
    monkeypatch.setattr(pool_spinning, "POOL_SPIN_S", 0.05)
    pool = object()
    pool_spinning.went_wide(pool, 2)
    assert pool_spinning.pools_spinning() == 1
    pool_spinning.went_wide(pool, 2)  # the same pool again: still one
    assert pool_spinning.pools_spinning() == 1
    time.sleep(0.06)
    assert pool_spinning.pools_spinning() == 0


@pytest.mark.skipif(CORES < 2, reason="one core: no pool")
def test_a_busy_machine_computes_on_one_thread_in_auto(spinning, monkeypatch):
    """auto: a run allowed every core computes on the single-threaded session while another
    task needs a CPU, on the pool once the CPUs are free again; the answers are the same."""
    spinning("auto")
    count = _Count(3)
    monkeypatch.setattr(pool_spinning, "spare_cpu", lambda: count)
    graph, x = wide_matmul()
    segment = one_segment(graph)
    segment.width.narrow = False  # its runs alone go wide when they may
    busy = segment.execute([x], narrow=False)[0]
    assert segment.pick(False)[1] is True  # narrow
    count.value = 1
    monkeypatch.setattr(pool_spinning, "_spinning", {})
    assert segment.pick(False)[1] is False  # the pool
    np.testing.assert_allclose(segment.execute([x], narrow=False)[0], busy, rtol=1e-6)


def process_cpu_s() -> float:
    """On-CPU seconds of every thread of this process (schedstat: ns, not ticks)."""
    total = 0
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/schedstat") as f:
                total += int(f.read().split()[0])
        except OSError:
            pass  # a thread that ended meanwhile
    return total / 1e9


def cpu_while_idle(segment: engine.OrtSegment, x: np.ndarray, idle_s: float = 0.05) -> float:
    """CPU seconds this process burns in `idle_s` after a few runs on the wide session."""
    for _ in range(5):
        segment.execute([x], narrow=False)
    before = process_cpu_s()
    time.sleep(idle_s)
    return process_cpu_s() - before


@pytest.mark.skipif(CORES < 2, reason="one core: no pool")
def test_a_pool_that_is_off_burns_no_cpu_between_runs(spinning):
    graph, x = wide_matmul()
    spinning("off")
    asleep = one_segment(graph)
    asleep.width.narrow = False  # runs alone: the pool's session
    # measured before a spinning pool exists (its threads spin from their start)
    idle_cpu = min(cpu_while_idle(asleep, x) for _ in range(3))
    spinning("on")
    spinning_segment = one_segment(graph)
    spinning_segment.width.narrow = False
    # onnxruntime's pool spins for a while after a run: what a spinning one burns in 50 ms
    # idle shows the measurement sees it; a pool that is off sleeps at once.
    spun_cpu = max(cpu_while_idle(spinning_segment, x) for _ in range(3))
    assert idle_cpu < 0.003, f"{idle_cpu * 1e3:.1f} ms of CPU in 50 ms idle"
    assert spun_cpu > 0.006, f"a spinning pool burnt only {spun_cpu * 1e3:.1f} ms"
    np.testing.assert_allclose(asleep.execute([x], narrow=False)[0],
                               spinning_segment.execute([x], narrow=False)[0], rtol=1e-6)


@pytest.mark.multiprocess
@pytest.mark.parametrize("args, env, reported, logged", [
    ((), {}, "auto", "spin on after a run while the CPUs are spare (--ort-spin auto)"),
    (("--ort-spin",), {}, "on", "spin on after a run (--ort-spin on)"),
    (("--ort-spin", "off"), {"NNRT_ORT_SPIN": "on"}, "off", "sleep between runs (--ort-spin off)"),
    ((), {"NNRT_ORT_SPIN": "1"}, "on", "spin on after a run (--ort-spin on)"),
    ((), {"NNRT_ORT_SPIN": "0"}, "off", "sleep between runs (--ort-spin off)"),
])
def test_the_driver_reports_how_its_pool_spins(tmp_path, monkeypatch, args, env, reported,
                                               logged):
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    driver = start_driver(tmp_path / "rt", "cpu", "--engine", "ort", *args)
    try:
        assert admin_details(driver)["ort_spin"] == reported
    finally:
        assert driver.stop() == 0
    assert "onnxruntime's pool threads " + logged in driver.log()


@pytest.mark.multiprocess
@pytest.mark.parametrize("argv, env, message", [
    ((), {"NNRT_ORT_SPIN": "yes"}, "$NNRT_ORT_SPIN='yes' is not one of auto, on, off (or 1, 0)"),
    (("--ort-spin", "sometimes"), {}, "argument --ort-spin: invalid choice: 'sometimes'"),
])
def test_a_bad_spin_setting_is_refused_at_start(tmp_path, argv, env, message):
    proc = subprocess.run([sys.executable, "-m", "nnrt.server", "cpu", *argv, "--runtime-dir",
                           str(tmp_path)], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, **env))
    assert proc.returncode == 2 and message in proc.stderr


@pytest.mark.skipif(CORES < 2, reason="one core: no pool")
def test_a_segment_on_one_thread_never_asks_for_the_count(spinning, monkeypatch):
    """The count is read only where the pool would compute: a segment whose runs alone are
    faster on one thread (ThreadWidth) pays nothing for the rule (a tiny Run paid ~7 µs of
    CPU a run for a fresh count, a yield and another before)."""
    spinning("auto")
    asked = []
    monkeypatch.setattr(pool_spinning, "may_go_wide", lambda threads: asked.append(1) or True)
    graph, x = wide_matmul()
    segment = one_segment(graph)
    segment.width.narrow = True
    for _ in range(10):
        segment.execute([x], narrow=False)
    assert not asked
    segment.width.narrow = False
    segment.execute([x], narrow=False)
    assert asked == [1]
