"""common/cpus.py's SpareCpu: the condition under which client and driver poll at all
(nobody waits for a CPU), read from /proc/loadavg at most every refresh."""

from __future__ import annotations

import time

import pytest

from nnrt.common import cpus


def _loadavg(tmp_path, running: int, total: int = 80):
    path = tmp_path / "loadavg"
    path.write_text(f"0.46 1.00 1.16 {running}/{total} 6780\n")
    return path


@pytest.mark.parametrize("text, expected", [(b"0.46 1.00 1.16 2/79 6780\n", 2),
                                            (b"0.00 0.00 0.00 17/1024 1", 17)])
def test_the_runnable_count_is_loadavgs_fourth_field(text, expected):
    assert cpus.runnable_tasks(text) == expected


@pytest.mark.parametrize("text", [b"", b"0.46 1.00 1.16", b"0.46 1.00 1.16 x/79 1",
                                  b"0.46 1.00 1.16 279 1"])
def test_anything_else_is_refused(text):
    with pytest.raises(ValueError):
        cpus.runnable_tasks(text)


@pytest.mark.parametrize("running, spare", [(1, True), (2, True), (3, False), (9, False)])
def test_a_cpu_is_spare_while_nobody_waits_for_one(tmp_path, monkeypatch, running, spare):
    monkeypatch.setattr(cpus, "usable_cores", lambda: 2)
    probe = cpus.SpareCpu(str(_loadavg(tmp_path, running)), cpus=2)
    try:
        assert probe.now() is spare
    finally:
        probe.close()


@pytest.fixture
def idle_probe(tmp_path, monkeypatch):
    """A SpareCpu of two CPUs over a loadavg file saying one task runs: (probe, file)."""
    monkeypatch.setattr(cpus, "usable_cores", lambda: 2)
    path = _loadavg(tmp_path, 1)
    made = []

    def make(refresh_s: float):
        made.append(cpus.SpareCpu(str(path), refresh_s=refresh_s, cpus=2))
        assert made[-1].now()
        return made[-1], path

    yield make
    for probe in made:
        probe.close()


def test_the_count_is_read_again_only_after_the_refresh(idle_probe):
    probe, path = idle_probe(0.2)
    path.write_text("0.46 1.00 1.16 5/80 6780\n")  # the machine got busy
    assert probe.now()  # within the refresh: the reading before
    time.sleep(0.25)
    assert not probe.now()


def test_one_cpu_of_its_own_never_spares_one(tmp_path, monkeypatch):
    """A process confined to one CPU (taskset, a cpuset) never polls, at start or after
    its affinity narrowed: a poller would only keep its peer from that CPU."""
    monkeypatch.setattr(cpus, "usable_cores", lambda: 1)
    assert not cpus.SpareCpu(str(_loadavg(tmp_path, 1)), cpus=2).now()
    monkeypatch.setattr(cpus, "usable_cores", lambda: 2)
    probe = cpus.SpareCpu(str(_loadavg(tmp_path, 1)), refresh_s=0.0, cpus=2)
    try:
        assert probe.now()
        monkeypatch.setattr(cpus, "usable_cores", lambda: 1)
        assert not probe.now()
    finally:
        probe.close()


def test_without_a_count_nobody_polls(tmp_path, monkeypatch, caplog):
    """No /proc/loadavg (not Linux), or a text not in its format: never spare, said once."""
    monkeypatch.setattr(cpus, "usable_cores", lambda: 2)
    caplog.set_level("INFO", logger="nnrt.common.cpus")
    assert not cpus.SpareCpu(str(tmp_path / "absent"), cpus=2).now()
    bad = tmp_path / "bad"
    bad.write_text("nonsense\n")
    assert not cpus.SpareCpu(str(bad), cpus=2).now()
    assert caplog.text.count("never poll") == 2


def test_a_reading_that_fails_later_is_not_spare(idle_probe):
    probe, path = idle_probe(0.0)
    path.write_text("garbage\n")
    assert not probe.now()


def test_the_real_count_is_read_on_linux():
    """This machine's own /proc/loadavg parses (the test process itself is runnable)."""
    with open(cpus.LOADAVG, "rb") as f:
        assert cpus.runnable_tasks(f.read()) >= 1


def test_a_fresh_reading_skips_the_refresh(idle_probe):
    """What decides for a whole run (the CPU driver's pool) reads the count now."""
    probe, path = idle_probe(10.0)
    path.write_text("0.46 1.00 1.16 5/80 6780\n")
    assert probe.runnable() == 1  # the reading before, within the refresh
    assert probe.runnable(fresh=True) == 5
    assert not probe.now()  # and it is kept
