"""`nnrt status` as a person reads it: a default table of 100 columns, `--wide` for every
column, `--watch` refreshing (bounded by --count here; Ctrl-C leaves with exit 0), and
`--json` unchanged by either."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from nnrt.client import cli
from nnrt.client.commands.status import CLEAR, HEADERS, NARROW_HEADERS, WIDTH

BOUND = 60  # s, every process a test waits for


def nnrt(capsys, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = cli.main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_the_default_fits_100_columns_and_wide_shows_everything(shared_driver, capsys):
    rt = str(shared_driver.runtime_dir)
    with shared_driver.client():  # a session: its line in --wide
        code, out, _ = nnrt(capsys, "status", "--runtime-dir", rt)
        assert code == 0
        lines = out.splitlines()
        assert max(map(len, lines)) <= WIDTH, out
        header, row = lines[3:5]
        assert header.split("  ")[0] == "DRIVER" and "BUDGET" not in header
        assert [h for h in NARROW_HEADERS if h in header] == list(NARROW_HEADERS)
        assert "STANDBY" not in header  # no driver has a spare
        assert row.split()[:5] == ["cpu", "cpu", str(shared_driver.proc.pid), "running",
                                   "SERVING"]
        assert "session" not in out  # per-session lines are --wide's
        code, wide, _ = nnrt(capsys, "status", "--runtime-dir", rt, "--wide")
        assert code == 0
        header = wide.splitlines()[3]
        assert [h for h in HEADERS if h in header] == list(HEADERS)
        assert " budgets: shared memory " in wide and " session " in wide


def test_json_is_the_same_with_or_without_wide(shared_driver, capsys):
    rt = str(shared_driver.runtime_dir)
    _, plain, _ = nnrt(capsys, "status", "--runtime-dir", rt, "--json")
    _, wide, _ = nnrt(capsys, "status", "--runtime-dir", rt, "--json", "--wide")
    assert set(json.loads(plain)) == set(json.loads(wide)) == \
        {"runtime_dir", "devmgr", "drivers", "clients", "healthy"}


def test_watch_refreshes_count_times_without_terminal_codes_into_a_pipe(shared_driver,
                                                                        capsys):
    rt = str(shared_driver.runtime_dir)
    started = time.monotonic()
    code, out, err = nnrt(capsys, "status", "--runtime-dir", rt, "--watch", "--count", "3",
                          "--interval", "50ms")
    assert code == 0 and err == ""
    assert time.monotonic() - started < 20
    frames = [line for line in out.splitlines() if line.startswith("nnrt status   every 0.05 s")]
    assert len(frames) == 3
    assert out.count("runtime:  ") == 3 and CLEAR not in out and "\x1b" not in out
    code, out, _ = nnrt(capsys, "status", "--runtime-dir", rt, "--watch", "--json",
                        "--count", "2", "--interval", "0.05")
    assert code == 0
    documents = [json.loads(line) for line in out.splitlines()]
    assert len(documents) == 2 and all(d["healthy"] for d in documents)
    assert set(documents[0]) == {"runtime_dir", "devmgr", "drivers", "clients", "healthy"}


def test_watch_of_nothing_keeps_watching_and_says_so(runtime_dir, capsys):
    code, out, err = nnrt(capsys, "status", "--runtime-dir", str(runtime_dir), "--watch",
                          "--count", "2", "--interval", "10ms")
    assert code == 3  # the last refresh's code: nothing running
    assert out.count("nothing running: no device manager and no driver in") == 2
    assert err == ""


def test_watch_redraws_on_a_terminal_but_not_with_term_dumb(shared_driver, monkeypatch,
                                                            capsys):
    """A terminal gets the screen cleared at each refresh; TERM=dumb gets plain frames."""
    rt = str(shared_driver.runtime_dir)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True, raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    _, out, _ = nnrt(capsys, "status", "--runtime-dir", rt, "--watch", "--count", "2",
                     "--interval", "10ms")
    assert out.count(CLEAR) == 2
    monkeypatch.setenv("TERM", "dumb")
    _, out, _ = nnrt(capsys, "status", "--runtime-dir", rt, "--watch", "--count", "2",
                     "--interval", "10ms")
    assert "\x1b" not in out


@pytest.mark.parametrize("bad", [["--interval", "0"], ["--interval", "soon"],
                                 ["--count", "0"], ["--count", "-2"]])
def test_watch_options_are_checked(bad, capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["status", "--watch", *bad])
    assert info.value.code == 2


@pytest.mark.multiprocess
def test_ctrl_c_leaves_a_watch_cleanly_with_exit_0(shared_driver):
    env = {**os.environ, "NNRT_RUNTIME_DIR": str(shared_driver.runtime_dir)}
    proc = subprocess.Popen([sys.executable, "-m", "nnrt.client.cli", "status", "--watch",
                             "--interval", "100ms"], env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = proc.stdout.readline()  # the first frame's header: the loop runs
        assert first.startswith("nnrt status   every 0.1 s"), first
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=BOUND)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    assert proc.returncode == 0, err
    assert err == ""  # no traceback, no "interrupted": leaving a watch is not a failure
