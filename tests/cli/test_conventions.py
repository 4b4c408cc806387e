"""`nnrt` behaves like its peers (issue 15): --version, -v/--log-level before or after the
subcommand, Ctrl-C ends any command with 130 and one line, one exit code table shared by
the commands, `nnrt --help` and docs/operations.md, help texts that name only what a pip-installed
user has, the embedded-driver notice said once, the demo's and Executor.run's deadlines;
and nnrt-driver's log lines carry journald priorities when stderr is the journal."""

from __future__ import annotations

import fcntl
import inspect
import os
import re
import signal
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path

import numpy as np
import pytest

from nnrt.client import Model, api, cli

from nnrt.common import model_file
from nnrt.client.commands import common
from nnrt.client.commands.common import EXIT_CODES, probe_driver
from tests.conftest import start_driver, wait_until
from tests.helpers.cli import SOURCE_NAMES

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = ("demo", "devmgr", "devices", "status", "run", "bench", "compile", "convert")
BOUND = 60  # s, a bound on every process a test waits for


def nnrt_process(*args: str | Path, runtime_dir: Path, **env: str) -> subprocess.Popen:
    environment = {**os.environ, "NNRT_RUNTIME_DIR": str(runtime_dir), **env}
    return subprocess.Popen([sys.executable, "-m", "nnrt.client.cli", *map(str, args)],
                            env=environment, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def nnrt(*args: str | Path, runtime_dir: Path, **env: str) -> subprocess.CompletedProcess:
    proc = nnrt_process(*args, runtime_dir=runtime_dir, **env)
    out, err = proc.communicate(timeout=BOUND)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@pytest.fixture(scope="module")
def mlp(tmp_path_factory) -> tuple[Path, Path]:
    """A saved MLP and an input for it."""
    directory = tmp_path_factory.mktemp("model")
    rng = np.random.default_rng(0)
    with Model() as model:
        x = model.input([2, 8], name="x")
        model.outputs(model.softmax(model.fully_connected(
            x, rng.standard_normal((4, 8)).astype(np.float32))))
        path = model_file.save_model(model.handle, directory / "mlp.nnrt")
    np.save(directory / "x.npy", np.ones((2, 8), np.float32))
    return path, directory / "x.npy"


# -- --version and logging options ------------------------------------------------------------


@pytest.mark.multiprocess
def test_version_is_the_installed_distributions(runtime_dir):
    proc = nnrt("--version", runtime_dir=runtime_dir)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, f"nnrt {version('nnrt')}\n", "")


@pytest.mark.parametrize("argv, level", [
    (["devices"], "WARNING"),
    (["devices", "-v"], "INFO"),
    (["-v", "devices"], "INFO"),
    (["-v", "devices", "-v"], "DEBUG"),  # the -v's of both places add up
    (["devices", "-vvv"], "DEBUG"),
    (["devices", "--log-level", "error"], "ERROR"),
    (["--log-level", "DEBUG", "status", "--log-level", "warning"], "WARNING"),  # after wins
    (["--log-level", "error", "status", "-v"], "ERROR"),  # a level beats a count
    (["run", "m.nnrt", "-i", "x.npy", "-v"], "INFO"),
    (["devmgr"], "INFO"),  # a daemon logs its events by default
    (["devmgr", "-v"], "DEBUG"),
    (["-v", "devmgr"], "DEBUG"),
    (["--log-level", "WARNING", "devmgr"], "WARNING"),
    (["devmgr", "--log-level", "ERROR"], "ERROR"),
])
def test_logging_options_before_and_after_the_subcommand(argv, level):
    args = cli.build_parser().parse_args(argv)
    assert cli._level(args) == level


def test_a_bad_log_level_is_bad_usage(capsys):
    for argv in (["devices", "--log-level", "loud"], ["--log-level", "loud", "devices"]):
        with pytest.raises(SystemExit) as exit_:
            cli.main(argv)
        assert exit_.value.code == 2
        assert "invalid choice: 'LOUD'" in capsys.readouterr().err


# -- Ctrl-C -------------------------------------------------------------------------------------


def interrupt_when(proc: subprocess.Popen, ready) -> tuple[str, str]:
    """SIGINT once `ready()`; then stdout and the stderr that came after the signal."""
    assert wait_until(lambda: ready() or proc.poll() is not None, BOUND)
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(signal.SIGINT)
    return proc.communicate(timeout=BOUND)


@pytest.mark.multiprocess
@pytest.mark.parametrize("command", ["demo", "run", "bench", "devices-json-run"])
def test_ctrl_c_while_waiting_for_a_starting_driver(command, tmp_path, mlp):
    """A driver that has claimed its name (a held lock file) but does not serve yet: the
    command waits for it (client/core/embedded.py) until Ctrl-C."""
    runtime_dir = tmp_path / "rt"
    runtime_dir.mkdir(mode=0o700)
    model, x = mlp
    argv = {"demo": ["demo"], "run": ["run", model, "-i", x],
            "bench": ["bench", model, "--runs", "5"],
            "devices-json-run": ["run", model, "-i", x, "--json"]}[command]
    with open(runtime_dir / "cpu.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        proc = nnrt_process(*argv, "-v", runtime_dir=runtime_dir, NNRT_NO_EMBEDDED="",
                            NNRT_EMBEDDED_WAIT="60")
        first = proc.stderr.readline()  # -v after the subcommand: the INFO line of the wait
        assert "a driver or device manager is starting (cpu.lock); waiting up to 60.0 s" \
            in first, first
        out, err = interrupt_when(proc, lambda: True)
    assert proc.returncode == 130, err
    assert err == "nnrt: interrupted\n"  # one line, no traceback
    if command == "devices-json-run":  # run and bench also answer --json with the error
        assert out.replace(" ", "").replace("\n", "") == \
            '{"ok":false,"exit_code":130,"error":"interrupted"}'
    else:
        assert out == ""


@pytest.mark.multiprocess
@pytest.mark.parametrize("command", ["run", "bench", "demo"])
def test_ctrl_c_while_a_run_hangs(command, tmp_path, mlp):
    """The demo's run goes through the Pythonic API (its executor's runtime thread): the
    teardown of that abandoned run says nothing more either."""
    runtime_dir = tmp_path / "rt"
    driver = start_driver(runtime_dir, "cpu", "--fault-run-hang", "--stall-timeout", "0")
    try:
        model, x = mlp
        argv = ["demo"] if command == "demo" else [command, model, "-i", x]
        proc = nnrt_process(*argv, runtime_dir=runtime_dir)

        def in_flight() -> bool:
            probe = probe_driver(runtime_dir, "cpu", admin=True)
            return probe.admin is not None and probe.admin.inFlightRuns > 0

        started = time.monotonic()
        out, err = interrupt_when(proc, in_flight)
        assert time.monotonic() - started < 30  # not the run's 60 s deadline
    finally:
        driver.stop(signal.SIGKILL)
    assert (proc.returncode, out, err) == (130, "", "nnrt: interrupted\n")


def test_ctrl_c_needs_no_command_of_its_own_to_say_one_line(monkeypatch, capsys):
    """Any command: KeyboardInterrupt out of its function ends `main` with 130, one line."""
    from nnrt.client.commands import status

    def interrupted(_args):
        raise KeyboardInterrupt

    monkeypatch.setattr(status, "run", interrupted)
    before = signal.getsignal(signal.SIGINT)
    assert cli.main(["status"]) == 130
    assert capsys.readouterr().err == "nnrt: interrupted\n"
    assert signal.getsignal(signal.SIGINT) is before  # main() puts the handler back


# -- exit codes -----------------------------------------------------------------------------------


def readme_exit_codes() -> dict[int, str]:
    text = (ROOT / "docs" / "operations.md").read_text()  # the README links to its table
    section = text[text.index("### Exit codes"):]
    section = section[:section.index("\n#")]
    return {int(m.group(1)): m.group(2) for m in
            re.finditer(r"^\| `?(\d+)`? \| (.+?) \|", section, re.MULTILINE)}


def test_one_exit_code_table_in_code_help_and_readme(capsys):
    assert set(EXIT_CODES) == {0, 1, 2, 3, 130}
    assert (common.EXIT_OK, common.EXIT_FAILURE, common.EXIT_USAGE, common.EXIT_UNREACHABLE,
            common.EXIT_INTERRUPTED) == (0, 1, 2, 3, 130)
    assert cli.EXIT_INTERRUPTED == common.EXIT_INTERRUPTED
    assert set(readme_exit_codes()) == set(EXIT_CODES)
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    help_text = capsys.readouterr().out
    for code in EXIT_CODES:
        assert re.search(rf"^  {code}\s", help_text, re.MULTILINE), code


def test_commands_use_only_the_codes_of_the_table():
    """Every exit code a command returns is one of the table's, by its name."""
    names = {name for name in dir(common) if name.startswith("EXIT_") and name != "EXIT_CODES"}
    assert {getattr(common, n) for n in names} == set(EXIT_CODES)
    for path in [*sorted((ROOT / "client" / "commands").glob("*.py")), ROOT / "client" / "cli.py"]:
        source = path.read_text()
        used = set(re.findall(r"\bEXIT_[A-Z]+\b", source)) - {"EXIT_CODES"}
        assert used <= names, (path.name, used - names)
        bare = re.findall(r"^\s*return (\d+)\b", source, re.MULTILINE)
        assert {int(n) for n in bare} <= set(EXIT_CODES), (path.name, bare)


@pytest.mark.multiprocess
def test_no_device_is_3_for_the_demo_too(runtime_dir):
    proc = nnrt("demo", runtime_dir=runtime_dir, NNRT_NO_EMBEDDED="1")
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr.strip() == (f"nnrt: demo: no device: no driver in {runtime_dir} and "
                                   "NNRT_NO_EMBEDDED is set")


# -- help texts -----------------------------------------------------------------------------------


@pytest.mark.parametrize("argv", [[]] + [[c] for c in COMMANDS])
def test_help_names_nothing_a_pip_install_lacks(argv, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main([*argv, "--help"])
    assert exit_.value.code == 0
    text = capsys.readouterr().out
    assert text.startswith("usage: nnrt")
    assert not SOURCE_NAMES.search(text), SOURCE_NAMES.search(text)


# -- the embedded-driver notice --------------------------------------------------------------


ONCE_APP = """
from nnrt.client.core.embedded import find_or_start
for _ in range(2):
    directory, embedded = find_or_start()
    embedded.stop()
"""


@pytest.mark.multiprocess
def test_the_embedded_notice_is_said_once_per_process(runtime_dir):
    env = {**os.environ, "NNRT_RUNTIME_DIR": str(runtime_dir)}
    env.pop("NNRT_NO_EMBEDDED", None)
    proc = subprocess.run([sys.executable, "-c", ONCE_APP], env=env, capture_output=True,
                          text=True, timeout=BOUND)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("started the embedded default driver(s)") == 1, proc.stderr


@pytest.mark.multiprocess
def test_nnrt_run_says_the_embedded_driver_once(runtime_dir, mlp, tmp_path):
    model, x = mlp
    proc = nnrt("run", model, "-i", x, "--output-dir", tmp_path / "out",
                runtime_dir=runtime_dir, NNRT_NO_EMBEDDED="")
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if "embedded" in line]
    assert len(lines) == 1 and "started an embedded cpu driver" in lines[0], proc.stderr


@pytest.mark.multiprocess
def test_the_demo_says_it_in_its_report_only(runtime_dir):
    proc = nnrt("demo", runtime_dir=runtime_dir, NNRT_NO_EMBEDDED="")
    assert proc.returncode == 0, proc.stderr
    assert "embedded driver started for this run" in proc.stdout
    assert "embedded" not in proc.stderr


# -- deadlines --------------------------------------------------------------------------------


def test_executor_run_has_a_default_deadline():
    timeout = inspect.signature(api.Executor.run).parameters["timeout"]
    assert timeout.default == api.DEFAULT_RUN_TIMEOUT == 60.0


@pytest.mark.multiprocess
def test_the_demo_ends_at_its_deadline(tmp_path):
    runtime_dir = tmp_path / "rt"
    driver = start_driver(runtime_dir, "cpu", "--fault-run-hang", "--stall-timeout", "0")
    try:
        started = time.monotonic()
        proc = nnrt("demo", "--timeout", "1.5", runtime_dir=runtime_dir)
        took = time.monotonic() - started
    finally:
        driver.stop(signal.SIGKILL)
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout == ""
    assert len(proc.stderr.splitlines()) == 1, proc.stderr
    assert "did not finish within 1.5 s" in proc.stderr or "OH_NN_TIMEOUT" in proc.stderr
    assert took < 15


# -- nnrt-driver and the journal ---------------------------------------------------------------


def _driver_log_lines(tmp_path, journal_stream, *args: str) -> list[str]:
    """Start a CPU driver with stderr into a file and JOURNAL_STREAM set to what
    `journal_stream(file)` says, stop it once it serves; its log lines."""
    runtime_dir = tmp_path / "rt"
    runtime_dir.mkdir()
    log_path = tmp_path / "log"
    with open(log_path, "wb") as log:
        env = {**os.environ, "JOURNAL_STREAM": journal_stream(log)}
        proc = subprocess.Popen([sys.executable, "-m", "nnrt.server", "cpu", "--runtime-dir",
                                 str(runtime_dir), *args],
                                env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    try:
        assert wait_until(lambda: (runtime_dir / "cpu.session").exists(), BOUND)
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(BOUND) == 0
    return log_path.read_text().splitlines()


def _this_file(log) -> str:
    st = os.fstat(log.fileno())
    return f"{st.st_dev}:{st.st_ino}"


@pytest.mark.multiprocess
def test_driver_lines_carry_journald_priorities_when_stderr_is_the_journal(tmp_path):
    lines = _driver_log_lines(tmp_path, _this_file, "--fault-injection")
    assert lines, "no log line"
    assert all(re.match(r"<[2-7]>nnrt-driver\[cpu\] \S+: ", line) for line in lines), lines
    assert any(line.startswith("<4>") and "FAULT INJECTION ENABLED" in line for line in lines)
    assert any(line.startswith("<6>") for line in lines)
    assert not re.search(r"\d\d:\d\d:\d\d", "\n".join(lines))  # journald stamps them


@pytest.mark.multiprocess
def test_driver_lines_keep_timestamps_elsewhere(tmp_path):
    """JOURNAL_STREAM inherited, stderr somewhere else (a file): no priorities."""
    lines = _driver_log_lines(tmp_path, lambda log: "1:1")
    assert lines and not any(line.startswith("<") for line in lines)
    assert all(re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ nnrt-driver\[cpu\] [A-Z]+ ", line)
               for line in lines), lines
