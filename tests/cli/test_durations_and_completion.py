"""The command line's small promises: one unit for durations (seconds; `200ms` everywhere a
duration is given), TERM=dumb honoured by the progress bar, shell completion generated from
the parser, and the typed client library (py.typed installed)."""

from __future__ import annotations

import argparse
import io
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

from nnrt.client import cli
from nnrt.client.commands import common
from nnrt.client.commands.bench import ProgressBar
from nnrt.client.commands.completion import bash_script, paths

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("text, seconds", [
    ("1.5", 1.5), ("200ms", 0.2), ("2s", 2.0), ("2m", 120.0), ("1h", 3600.0), (" 3 s ", 3.0),
    ("0.5MS", 0.0005), ("10", 10.0)])
def test_durations_are_seconds_unless_a_unit_says_otherwise(text, seconds):
    assert common.duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "soon", "-1", "0", "0ms", "nan", "inf", "5 parsecs",
                                  "ms", "1e400"])
def test_bad_durations_are_refused_with_the_accepted_forms(text):
    with pytest.raises(argparse.ArgumentTypeError) as info:
        common.duration(text)
    assert "must be positive" in str(info.value) or "200ms" in str(info.value)


def _walk(parser: argparse.ArgumentParser, prefix: str = "nnrt"):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from _walk(child, f"{prefix} {name}")
        else:
            yield prefix, action


def test_every_duration_option_takes_a_duration():
    """Options of time (a timeout, an interval, a measuring time) parse `duration`; the only
    others carry their unit in their name (the driver's --fault-*-ms)."""
    timed = [(where, action) for where, action in _walk(cli.build_parser())
             if any(word in action.dest for word in ("timeout", "interval", "seconds"))]
    assert {where for where, _ in timed} >= {"nnrt demo", "nnrt run", "nnrt bench",
                                             "nnrt status", "nnrt devmgr restart"}
    for where, action in timed:
        assert action.type is common.duration, (where, action.option_strings)
        assert action.metavar == "DURATION", (where, action.option_strings)
    for where, action in _walk(cli.build_parser()):
        assert action.metavar not in ("S", "MS"), (where, action.option_strings)
    parser = cli.build_parser()
    assert parser.parse_args(["run", "m.nnrt", "--timeout", "200ms"]).timeout == 0.2
    assert parser.parse_args(["bench", "m.nnrt", "--seconds", "1m"]).seconds == 60
    assert parser.parse_args(["devmgr", "stop", "cpu", "--timeout", "2"]).timeout == 2
    assert parser.parse_args(["demo", "--timeout", "1.5s"]).timeout == 1.5


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_only_on_a_terminal_that_is_not_dumb(monkeypatch):
    monkeypatch.setenv("TERM", "xterm")
    assert ProgressBar.wanted(_Terminal())
    assert not ProgressBar.wanted(io.StringIO())
    monkeypatch.setenv("TERM", "dumb")
    assert not ProgressBar.wanted(_Terminal())
    monkeypatch.delenv("TERM")
    assert ProgressBar.wanted(_Terminal())


def test_completion_covers_every_command_and_option():
    parser = cli.build_parser()
    script = bash_script(parser)
    found = {path: (words, options) for path, words, options, _ in paths(parser)}
    assert set(found["nnrt"][0]) >= {"demo", "devmgr", "status", "run", "bench", "completion"}
    assert {"--watch", "--wide", "--interval", "--json"} <= set(found["nnrt status"][1])
    assert "nnrt devmgr restart" in found and found["nnrt completion"][0] == ["bash"]
    assert "complete -o default -F _nnrt nnrt" in script


@pytest.mark.multiprocess
@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
@pytest.mark.parametrize("words, expected", [
    (["nnrt", "st"], "status"),
    (["nnrt", "status", "--w"], "--watch --wide"),
    (["nnrt", "devmgr", "re"], "restart"),
    (["nnrt", "-v", "status", "--runtime-dir", "/pro"], "/proc"),
    (["nnrt", "run", "--log-level", "DE"], "DEBUG"),
    (["nnrt", "completion", ""], "bash"),
    (["nnrt", "demo", "--rec"], "--recovery"),
])
def test_the_bash_script_completes_in_bash(words, expected, tmp_path):
    script = tmp_path / "nnrt.bash"
    done = subprocess.run([cli.sys.executable, "-m", "nnrt.client.cli", "completion", "bash"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    script.write_text(done.stdout)
    quoted = " ".join(f"'{w}'" for w in words)
    probe = (f"source {script}; COMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1}; "
             'COMPREPLY=(); _nnrt; echo "${COMPREPLY[*]}"')
    answer = subprocess.run(["bash", "--norc", "--noprofile", "-c", probe],
                            capture_output=True, text=True, timeout=30)
    assert answer.returncode == 0 and answer.stderr == "", answer.stderr
    assert answer.stdout.strip() == expected


def test_py_typed_is_shipped_with_the_client():
    assert (ROOT / "client" / "py.typed").is_file()
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"]
    assert "py.typed" in package_data["nnrt.client"]


def test_help_lists_the_environment_with_its_defaults(capsys):
    from nnrt.client.core.driver import DEFAULT_SPIN_US
    from nnrt.client.core.embedded import DEFAULT_WAIT

    with pytest.raises(SystemExit) as info:
        cli.main(["--help"])
    assert info.value.code == 0
    text = " ".join(capsys.readouterr().out.split())  # the epilog is wrapped
    for name in ("NNRT_RUNTIME_DIR", "NNRT_NO_EMBEDDED", "NNRT_EMBEDDED_WAIT",
                 "NNRT_CLIENT_SPIN_US", "NNRT_RUN_MAILBOX"):
        assert name in text
    assert f"(default {DEFAULT_WAIT:g})" in text and f"(default {DEFAULT_SPIN_US};" in text
    assert "200ms" in text
