"""What README.md and docs/*.md show keeps working: every command of their shell code blocks
that starts with `nnrt`, `nnrt-driver` or `./dev` parses with the command's own parser and runs
with `--help` as a real process; the README's quick start and six tasks run for real (the
embedded driver, a small ONNX model of the name shown), except the commands of a reviewed list
that need what a test cannot give them (a device manager, the whole suite); and every link
between the pages resolves, none into the reference outside this repository (`../shared`)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BIN = Path(sys.executable).parent  # this environment's console scripts (nnrt, nnrt-driver)
PROGRAMS = ("nnrt", "nnrt-driver", "./dev")
SHELL_FENCES = {"", "sh", "bash", "shell", "console"}
SEPARATORS = {"|", "||", "&&", ";", "&", ">", ">>"}  # a redirection ends the arguments too
COMMAND_TIMEOUT = 60  # s, a bound on each command (--help takes well under 1 s)
REAL_RUN_TIMEOUT = 120  # s, a command run for real (an embedded driver starts and stops)
# The README's quick start and tasks, run for real: these need what a test cannot give them.
# Each is run for real elsewhere, named in its reason.
NOT_RUN_FOR_REAL = {
    "./dev test": "the test suite itself (this file is part of it)",
    "nnrt status --watch": "needs drivers to watch, and runs until Ctrl-C: "
                           "tests/cli/test_status_view.py runs it under a driver and sends SIGINT",
    "nnrt status --wide": "needs a device manager or drivers in the runtime dir: "
                          "tests/cli/test_status_view.py",
    "nnrt devices": "needs drivers in the runtime dir: tests/cli/test_devices_and_status.py",
    "nnrt conformance --driver template": "certifies the template driver (~5 s): "
                                          "tests/drivers/template/test_template_driver.py runs "
                                          "it --quick",
    "nnrt demo --recovery": "a device manager, two drivers and a warm spare, ~10-30 s: "
                            "tests/cli/test_demo_recovery.py runs it and checks every scenario",
}


# The README's commands that name the template driver (examples/template-driver) see it as
# `pip install examples/template-driver` would install it: through $NNRT_DRIVER_PLUGINS.
TEMPLATE_SOURCE = ROOT / "examples" / "template-driver"
TEMPLATE_PLUGIN = "template=nnrt_template_driver.kind:KIND"


def with_template(env: dict[str, str]) -> dict[str, str]:
    path = os.pathsep.join(filter(None, [str(TEMPLATE_SOURCE), env.get("PYTHONPATH")]))
    return {**env, "NNRT_DRIVER_PLUGINS": TEMPLATE_PLUGIN, "PYTHONPATH": path}


@dataclass(frozen=True)
class ShownCommand:
    where: str  # "docs/operations.md:42"
    section: str  # the "## " heading above it
    text: str  # the command as shown, without prompt, comment or what follows a separator
    argv: tuple[str, ...]  # program first: "nnrt", "nnrt-driver" or "./dev"


def _words(line: str) -> list[str]:
    """The command of one shown line: its words up to a separator, without a leading
    `.venv/bin/`, environment assignments (`NNRT_RUNTIME_DIR=... nnrt ...`) or the brackets
    of an optional part (`[--json]`)."""
    first = [w for w in line.split() if not re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", w)][:1]
    if not first or first[0].removeprefix(".venv/bin/") not in PROGRAMS:
        return []  # output shown, or another program: not ours to run
    words = shlex.split(line, comments=True)
    for index, word in enumerate(words):
        if word in SEPARATORS:
            words = words[:index]
            break
    while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", words[0]):
        words = words[1:]
    if words:
        words[0] = words[0].removeprefix(".venv/bin/")
    return [w[1:-1] if w.startswith("[") and w.endswith("]") else w for w in words]


def shown_commands(pages: list[Path] = PAGES, root: Path = ROOT) -> list[ShownCommand]:
    found = []
    for page in pages:
        fence, section, pending, pending_at = None, "", "", 0
        for number, line in enumerate(page.read_text().splitlines(), 1):
            if line.lstrip().startswith("```"):  # a fence, also indented in a list item
                fence = None if fence is not None else line.lstrip()[3:].strip()
                continue
            if fence is None:
                if line.startswith("## "):
                    section = line[3:].strip()
                continue
            if fence not in SHELL_FENCES:
                continue
            if not pending:
                pending_at = number
            line = line.strip().removeprefix("$ ")
            if line.endswith("\\"):  # continued on the next line
                pending += line[:-1] + " "
                continue
            words, pending = _words(pending + line), ""
            if words and words[0] in PROGRAMS:
                found.append(ShownCommand(f"{page.relative_to(root)}:{pending_at}", section,
                                          shlex.join(words), tuple(words)))
    return found


COMMANDS = shown_commands()
QUICK_START = [c for c in COMMANDS if c.where.startswith("README.md:")
               and c.section in ("Quick start", "Six everyday tasks")]


def dev_is_installed() -> bool:
    """`./dev` runs at once (no pip install first) when its venv is installed and current."""
    stamp = ROOT / ".venv" / ".nnrt-installed"
    return (ROOT / ".venv" / "bin" / "python").exists() and stamp.exists() and \
        stamp.stat().st_mtime >= (ROOT / "pyproject.toml").stat().st_mtime


def process_argv(argv: tuple[str, ...]) -> list[str]:
    """The argv to start for a shown command. `./dev` itself when it would not install first;
    otherwise what it runs (dev's own `case`), in this environment."""
    program, *rest = argv
    if program in ("nnrt", "nnrt-driver"):
        return [str(BIN / program), *rest]
    if dev_is_installed():
        return [str(ROOT / "dev"), *rest]
    action, *args = rest
    if action == "demo":
        return [str(BIN / "nnrt"), "demo", *args]
    if action == "test":
        return [sys.executable, "-m", "pytest", *args]
    if action == "bench":
        return [sys.executable, str(ROOT / "benchmarks" / "transport.py"), *args]
    if action == "python":
        return [sys.executable, *args]
    return process_argv((action, *args)) if action in PROGRAMS else [action, *args]


def parser_argv(argv: tuple[str, ...]) -> tuple[str, list[str]] | None:
    """(program, its arguments) for the in-process parsers; None for what `./dev` hands to
    another program (pytest, the transport benchmark, python)."""
    program, *rest = argv
    if program != "./dev":
        return program, rest
    if rest[0] == "demo":
        return "nnrt", rest
    if rest[0] in ("nnrt", "nnrt-driver"):
        return rest[0], rest[1:]
    return None


def test_the_pages_show_the_commands_a_user_types():
    texts = {c.text for c in COMMANDS}
    assert {"./dev demo", "./dev test", "nnrt demo --recovery", "nnrt status --watch"} <= texts
    assert any(t.startswith("nnrt run ") and t.endswith(".onnx --input x.npy") for t in texts)
    assert any(c.argv[0] == "nnrt-driver" for c in COMMANDS)
    assert len(COMMANDS) >= 40, [c.text for c in COMMANDS]
    # the reviewed list names commands the README shows, so it cannot outlive them
    assert set(NOT_RUN_FOR_REAL) <= {c.text for c in QUICK_START}


def test_the_parsing_of_shown_lines(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("## Here\n\n```sh\n$ nnrt fault show cpu [--json]   # a comment\n"
                    "NNRT_RUNTIME_DIR=/tmp/x nnrt status --watch &\n"
                    ".venv/bin/nnrt-driver cpu \\\n  --name cpu1\n"
                    "curl -s http://x/metrics | grep nnrt\n```\n\n```python\nnnrt = 1\n```\n"
                    "```\nnnrt devices\n```\n")
    found = [(c.where, c.section, c.argv) for c in shown_commands([page], root=tmp_path)]
    assert found == [
        ("page.md:4", "Here", ("nnrt", "fault", "show", "cpu", "--json")),
        ("page.md:5", "Here", ("nnrt", "status", "--watch")),
        ("page.md:6", "Here", ("nnrt-driver", "cpu", "--name", "cpu1")),
        ("page.md:15", "Here", ("nnrt", "devices")),
    ]


@pytest.mark.parametrize("command", [c for c in COMMANDS if parser_argv(c.argv)],
                         ids=lambda c: c.where)
def test_the_command_parses(command, capsys, monkeypatch, request):
    """Every option and value shown exists and is accepted by the command's own parser (a
    renamed option, a dropped choice or a bad duration fails here)."""
    program, args = parser_argv(command.argv)
    from nnrt.hdi.plugin import forget_kinds

    monkeypatch.setenv("NNRT_DRIVER_PLUGINS", TEMPLATE_PLUGIN)
    monkeypatch.syspath_prepend(str(TEMPLATE_SOURCE))
    forget_kinds()
    request.addfinalizer(forget_kinds)  # the kinds seen here are not the next test's
    try:
        if program == "nnrt":
            from nnrt.client.cli import build_parser

            build_parser().parse_args(args)
        else:
            from nnrt.server.main import parse_args

            parse_args(args)
    except SystemExit as exit_:
        assert exit_.code == 0, f"{command.where}: `{command.text}`: {capsys.readouterr().err}"


@pytest.mark.multiprocess
@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c.where)
def test_the_command_runs_with_help(command, runtime_dir):
    argv = [*process_argv(command.argv), "--help"]
    env = with_template({**os.environ, "NNRT_RUNTIME_DIR": str(runtime_dir),
                         "NNRT_NO_EMBEDDED": "1"})
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=COMMAND_TIMEOUT)
    assert done.returncode == 0, f"{command.where}: `{command.text}`: {done.stderr[-2000:]}"
    assert "usage:" in done.stdout.lower(), done.stdout[:500]
    assert list(runtime_dir.iterdir()) == []  # --help starts nothing


# the labels of the demo's output the README shows
README_DEMO_OUTPUT = re.compile(r"^(runtime dir|device|model|compile|numpy check):",
                                re.MULTILINE)


def _small_onnx_model(path: Path) -> None:
    """A model of the README's shape (a convolution network, input `x`), small enough to run
    at once: Conv, Relu, GlobalAveragePool, Flatten, Gemm."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    weights = [numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)
               for name, shape in (("w", (4, 3, 3, 3)), ("fc", (4, 10)))]
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c"], ["r"]),
         helper.make_node("GlobalAveragePool", ["r"], ["g"]),
         helper.make_node("Flatten", ["g"], ["f"]),
         helper.make_node("Gemm", ["f", "fc"], ["logits"])],
        "resnet", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])], weights)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


@pytest.mark.multiprocess
@pytest.mark.parametrize("command", QUICK_START, ids=lambda c: c.where)
def test_the_quick_start_runs_for_real(command, tmp_path):
    """As a new user types it, in a directory of their own, with no driver running: the
    embedded driver serves, and the ONNX model the commands name exists there."""
    if command.text in NOT_RUN_FOR_REAL:
        pytest.skip(NOT_RUN_FOR_REAL[command.text])
    work, runtime_dir = tmp_path / "work", tmp_path / "rt"
    work.mkdir()
    runtime_dir.mkdir()
    for word in command.argv:
        if word.endswith(".onnx"):
            _small_onnx_model(work / word)
    np.save(work / "x.npy", np.random.default_rng(1).random((1, 3, 8, 8), dtype=np.float32))
    env = with_template({**os.environ, "NNRT_RUNTIME_DIR": str(runtime_dir)})
    env.pop("NNRT_NO_EMBEDDED")  # the quick start's user has no driver running
    done = subprocess.run(process_argv(command.argv), cwd=work, env=env, capture_output=True,
                          text=True, timeout=REAL_RUN_TIMEOUT)
    assert done.returncode == 0, f"{command.where}: `{command.text}`: {done.stderr[-2000:]}"
    assert list(runtime_dir.iterdir()) == []  # the embedded driver came and went privately
    if command.argv[1:2] == ("demo",):
        # what the README shows as the demo's output is what it prints
        shown = README_DEMO_OUTPUT.findall((ROOT / "README.md").read_text())
        assert shown and all(label + ":" in done.stdout for label in shown), done.stdout
        assert "numpy check:" in done.stdout and "OK" in done.stdout
    elif command.argv[1] == "run":
        assert (work / "logits.npy").exists() and np.load(work / "logits.npy").shape == (1, 10)
    elif command.argv[1] == "convert":
        assert (work / command.argv[command.argv.index("-o") + 1]).stat().st_size > 0


# -- links ----------------------------------------------------------------------------------------

LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchors(page: Path) -> set[str]:
    """GitHub's anchors of a page's headings: lower case, punctuation but `-` and `_` dropped,
    spaces to `-`."""
    found, fence = set(), False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            fence = not fence
        elif not fence and line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            found.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_links_resolve_inside_the_repository(page):
    text = page.read_text()
    assert "../shared" not in text and "/work/shared" not in text, \
        "a clone has no ../shared: say what the reference says, or copy it into the repository"
    broken = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists() or ROOT not in (linked, *linked.parents):
            broken.append(target)
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(target)
    assert broken == []


# -- configurations shown --------------------------------------------------------------------------


def shown_blocks(page: Path, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", page.read_text(), re.MULTILINE | re.DOTALL)


def test_the_configuration_shown_is_valid_and_not_passed_off_as_the_shipped_one():
    """The device manager's keys as docs/operations.md shows them load (driver options checked
    by nnrt-driver's parser), keep the defaults they claim, and the shipped file is not said to
    hold what it does not (the `flaky` example: no second driver, standby or fault there)."""
    from nnrt.devmgr.config import load_config, parse_config

    page = ROOT / "docs" / "operations.md"
    (shown,) = shown_blocks(page, "toml")
    config = parse_config(shown)
    shipped = load_config(ROOT / "deploy" / "devmgr.toml")
    assert config.settings == shipped.settings  # "every key, with its default"
    assert [d.name for d in config.drivers] == ["cpu", "flaky"]
    assert [d.name for d in shipped.drivers] == ["cpu"]
    said = page.read_text().split("### Configuration", 1)[1].split("```toml", 1)[0]
    said = " ".join(said.split())  # the words before the block, across line breaks
    assert "not a shipped driver" in said and "`deploy/devmgr.toml` is the shipped default" in said
