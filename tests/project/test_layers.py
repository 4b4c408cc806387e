"""The layers of the code, checked on every import of every module (ast, imports inside
functions included):

    protos ← common ← hdi ← drivers ← server (the host) ← devmgr
                             client ← common, hdi

- a driver (drivers/<kind>/, or a driver package such as examples/template-driver) imports
  the driver contract (nnrt.hdi), nnrt.common and nnrt.protos — never the host, the device
  manager, the client, or another driver (`nnrt.drivers` itself, the package, is shared);
- nnrt.hdi imports only nnrt.common, nnrt.protos and itself; nnrt.common only nnrt.protos
  and itself; the client never the host, the device manager or a driver;
- no relative import climbs more than one level (`..`);
- no module-level import cycle among the modules (hdi/ and drivers/ above all). An edge goes
  to the module whose code is needed: `from pkg import sub` → pkg.sub, `from pkg import
  name` → pkg (its __init__); imports inside functions and under TYPE_CHECKING run later
  or never, and are not edges.

Each offence is reported as file:line with the import and the rule it breaks.
"""

from __future__ import annotations

import ast
import functools
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "examples" / "template-driver" / "nnrt_template_driver"

# What each top-level package may import (its own modules always).
ALLOWED: dict[str, set[str]] = {
    "protos": set(),
    "common": {"protos"},
    "hdi": {"protos", "common"},
    "drivers": {"protos", "common", "hdi"},
    "server": {"protos", "common", "hdi", "drivers"},
    "devmgr": {"protos", "common", "hdi", "drivers", "server"},
    "client": {"protos", "common", "hdi"},
}
# The packages whose module-level imports must stay acyclic: every one (it holds today).
ACYCLIC = tuple(ALLOWED)


@dataclass(frozen=True)
class Import:
    module: str  # the importing module
    path: Path
    line: int
    target: str  # the absolute module imported (a submodule when `from X import submodule`)
    text: str
    level: int  # relative import dots
    top_level: bool  # executed when the module is imported (not inside a function)


def package_dirs() -> dict[str, Path]:
    """nnrt.<package> -> its folder, from pyproject.toml's package-dir mapping."""
    mapping = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-dir"]
    return {name: ROOT / folder for name, folder in mapping.items()}


def modules() -> dict[str, Path]:
    """Every module of the project (and of the template driver) by its dotted name."""
    found: dict[str, Path] = {}
    roots = [*package_dirs().items(), ("nnrt_template_driver", TEMPLATE)]
    for package, folder in roots:
        for path in sorted(folder.rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([package, *parts])] = path
    return found


def _top_level_nodes(tree: ast.Module) -> set[int]:
    """ids of the import nodes run at import time: not inside a function, nor under
    `if TYPE_CHECKING:`."""
    top: set[int] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                for sub in child.orelse:
                    visit_one(sub)
                continue
            visit_one(child)

    def visit_one(node: ast.AST) -> None:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            top.add(id(node))
        visit(node)

    visit(tree)
    return top


def imports(known: dict[str, Path], sources: dict[str, str] | None = None) -> Iterator[Import]:
    """Every import statement of the `known` modules (their text from `sources` when given)."""
    for module, path in known.items():
        text = sources[module] if sources is not None else path.read_text()
        tree = ast.parse(text, str(path))
        top = _top_level_nodes(tree)
        is_package = path.name == "__init__.py"
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    yield Import(module, path, node.lineno, alias.name,
                                 ast.unparse(node), 0, id(node) in top)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = module.split(".")
                    base = base[:len(base) - node.level + (1 if is_package else 0)]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                for alias in node.names:
                    submodule = f"{source}.{alias.name}"
                    target = submodule if submodule in known else source
                    yield Import(module, path, node.lineno, target, ast.unparse(node),
                                 node.level, id(node) in top)


@functools.cache
def project_imports() -> tuple[Import, ...]:
    """Every import of every module of the project, parsed once for all the tests."""
    return tuple(imports(modules()))


def layer(module: str) -> str | None:
    """The top-level package of a module of ours ("hdi"), "template" for the template
    driver, None for anything else (the standard library, numpy ...)."""
    parts = module.split(".")
    if parts[0] == "nnrt_template_driver":
        return "template"
    if parts[0] == "nnrt" and len(parts) > 1:
        return parts[1]
    return None


def driver_of(module: str) -> str | None:
    """`cpu` for nnrt.drivers.cpu.*, the template driver's package for its modules; None
    for nnrt.drivers itself and everything else."""
    parts = module.split(".")
    if parts[0] == "nnrt_template_driver":
        return "nnrt_template_driver"
    if parts[:2] == ["nnrt", "drivers"] and len(parts) > 2:
        return parts[2]
    return None


def offence(found: Import) -> str | None:
    """Why this import breaks the layers, or None."""
    if found.level > 2:
        return f"relative import {found.level} levels up (at most `..`; absolute across packages)"
    source, target = layer(found.module), layer(found.target)
    if target is None or source == target and source != "drivers":
        return None
    if source == "template":
        allowed = {"protos", "common", "hdi"}
        return None if target in allowed else \
            f"a driver imports only nnrt.hdi, nnrt.common, nnrt.protos (not nnrt.{target})"
    if source == "drivers":
        if target == "drivers":
            mine, theirs = driver_of(found.module), driver_of(found.target)
            if theirs is not None and mine != theirs:
                return f"a driver imports another driver (nnrt.drivers.{theirs})"
            return None
        if target not in ALLOWED["drivers"]:
            return f"a driver imports only nnrt.hdi, nnrt.common, nnrt.protos (not nnrt.{target})"
        return None
    if source not in ALLOWED:
        return f"nnrt.{source} is not in the layer table of tests/project/test_layers.py: add it"
    if target not in ALLOWED[source] | {source}:
        return (f"nnrt.{source} may import only "
                f"{', '.join(f'nnrt.{p}' for p in sorted(ALLOWED[source]))} and itself "
                f"(not nnrt.{target})")
    return None


def describe(found: Import) -> str:
    return f"{found.path.relative_to(ROOT)}:{found.line}: `{found.text}`"


def test_every_import_respects_the_layers():
    offences = [f"{describe(i)}: {why}" for i in project_imports()
                if (why := offence(i)) is not None]
    assert not offences, "imports across the layers:\n" + "\n".join(offences)


def test_the_checker_sees_what_it_must_refuse():
    def check(module: str, target: str, level: int = 0) -> str | None:
        return offence(Import(module, ROOT / "x.py", 1, target, "import", level, True))

    assert "another driver" in check("nnrt.drivers.cpu.device", "nnrt.drivers.gpu.opencl")
    assert check("nnrt.drivers.cpu.device", "nnrt.drivers") is None
    assert check("nnrt.drivers.cpu.device", "nnrt.drivers.cpu.ort.engine") is None
    assert "not nnrt.server" in check("nnrt.drivers.accel.device", "nnrt.server.host")
    assert "not nnrt.server" in check("nnrt.hdi.graph", "nnrt.server.main")
    assert "not nnrt.drivers" in check("nnrt.hdi.plugin", "nnrt.drivers.cpu.kind")
    assert "not nnrt.hdi" in check("nnrt.common.errors", "nnrt.hdi.graph")
    assert "not nnrt.drivers" in check("nnrt.client.cli", "nnrt.drivers.cpu.kind")
    assert "not nnrt.server" in check("nnrt.client.cli", "nnrt.server.main")
    assert "not nnrt.client" in check("nnrt_template_driver.device", "nnrt.client.api")
    assert "3 levels up" in check("nnrt.drivers.cpu.ort.ops.x", "nnrt.drivers.cpu.kind", 3)
    assert check("nnrt.server.main", "nnrt.hdi.plugin") is None
    assert check("nnrt.client.commands.devices", "nnrt.hdi.plugin") is None


def test_imports_inside_functions_are_seen_and_told_apart():
    found = {(i.module, i.target): i for i in project_imports()}
    lazy = found["nnrt.devmgr.config", "nnrt.server.main"]  # inside check_options
    assert not lazy.top_level and lazy.line > 1
    eager = found["nnrt.drivers.cpu.kind", "nnrt.hdi.plugin"]
    assert eager.top_level
    assert not found["nnrt.drivers.cpu.kind", "nnrt.drivers.cpu.device"].top_level  # create()
    relative = found["nnrt.drivers.accel.device", "nnrt.drivers"]  # `from .. import ...`
    assert relative.level == 2


def test_relative_imports_resolve_to_modules_of_ours():
    known = modules()
    unresolved = [describe(i) for i in project_imports() if i.level and i.target not in known]
    assert not unresolved, "relative imports of nothing:\n" + "\n".join(unresolved)


def import_cycles(known: dict[str, Path], within: tuple[str, ...],
                  sources: dict[str, str] | None = None) -> list[list[str]]:
    """The module-level import cycles among the modules of the packages `within` (strongly
    connected components of more than one module, or a module importing itself)."""
    prefixes = tuple(f"nnrt.{p}" for p in within)
    inside = {m for m in known if m.startswith(prefixes)}
    edges: dict[str, set[str]] = {m: set() for m in inside}
    for found in (imports(known, sources) if sources is not None else project_imports()):
        if found.top_level and found.module in inside and found.target in inside:
            edges[found.module].add(found.target)
    # Tarjan's strongly connected components, iteratively (no recursion limit to meet).
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    counter = 0
    for start in sorted(inside):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in edges[node]:
                    cycles.append(sorted(component))
    return cycles


def test_no_module_level_import_cycle():
    cycles = import_cycles(modules(), ACYCLIC)
    assert not cycles, "module-level import cycles:\n" + "\n".join(
        " <-> ".join(c) for c in cycles)


def test_the_cycle_finder_finds_one():
    known = {"nnrt.hdi.a": ROOT / "a.py", "nnrt.hdi.b": ROOT / "b.py",
             "nnrt.hdi.c": ROOT / "c.py"}
    sources = {"nnrt.hdi.a": "from nnrt.hdi import b\n",
               "nnrt.hdi.b": "import nnrt.hdi.a\ndef f():\n    from nnrt.hdi import c\n",
               "nnrt.hdi.c": "from . import b\n"}
    assert import_cycles(known, ("hdi",), sources) == [["nnrt.hdi.a", "nnrt.hdi.b"]]
    sources["nnrt.hdi.b"] = "def f():\n    from nnrt.hdi import a\n"  # inside a function
    assert import_cycles(known, ("hdi",), sources) == []
    sources["nnrt.hdi.b"] = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n" \
                            "    from . import a\n"  # never executed
    assert import_cycles(known, ("hdi",), sources) == []
