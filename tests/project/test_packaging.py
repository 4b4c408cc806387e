"""What `pip install .` (not editable) ships: every Python package of the tree is listed in
pyproject.toml, under the import name its folder maps to — a package left out is missing
from a wheel, where the editable install of the tests would never notice."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_package_folder_is_shipped():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    found = set()
    for name, folder in config["package-dir"].items():
        for init in (ROOT / folder).rglob("__init__.py"):
            relative = init.parent.relative_to(ROOT / folder)
            found.add(".".join([name, *relative.parts]))
    assert found - listed == set(), "packages missing from pyproject.toml [tool.setuptools]"
    assert listed - found == set(), "listed packages that do not exist"
