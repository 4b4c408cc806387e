"""The documented ONNX mapping table (docs/applications.md, "Bring your own model: ONNX")
against the importer and the expected-refusals table (client/onnx_refusals.py): an operator
the table says is mapped is one the importer maps and the refusal table does not refuse
wholesale, and every operator the importer maps is in the table."""

from __future__ import annotations

import re
from pathlib import Path

import onnx

from nnrt.client.onnx_import import SUPPORTED_OPERATORS
from nnrt.client.onnx_refusals import refused_operators

# The page that holds the ONNX section (the README links to it).
ONNX_PAGE = Path(__file__).resolve().parents[3] / "docs" / "applications.md"
# folded at import (no node of their own): the table's "Shape, Size, ... folded" row
FOLDED = {"Shape", "Size", "Constant", "ConstantOfShape", "Range"}


def mapped_in_readme() -> set[str]:
    text = ONNX_PAGE.read_text()
    section = text.split("## Bring your own model: ONNX", 1)[1].split("\n## ", 1)[0]
    names = {s.name for s in onnx.defs.get_all_schemas_with_history()}
    found: set[str] = set()
    for line in section.splitlines():
        if not line.startswith("| ") or line.startswith("| Mapped") or line.startswith("|---"):
            continue
        first = line.split("|")[1]
        first = re.sub(r"\([^)]*→[^)]*\)", "", first)  # "(→ Relu6 / Relu)": notes, not names
        for word, tail in re.findall(r"\b([A-Z][A-Za-z0-9]+)(?:\((\w+)\))?", first):
            for name in (word, word + tail if tail else None):
                if name in names:
                    found.add(name)
    return found


def test_readme_mapped_operators_are_mapped_and_not_refused():
    mapped = mapped_in_readme()
    assert mapped, "no operator found in the ONNX table of docs/applications.md"
    assert not mapped - set(SUPPORTED_OPERATORS), \
        f"docs/applications.md lists operators the importer does not map: {sorted(mapped - set(SUPPORTED_OPERATORS))}"
    refused = refused_operators()
    assert not mapped & refused, \
        f"docs/applications.md lists operators the refusal table refuses in every case: {sorted(mapped & refused)}"


def test_every_mapped_operator_is_in_the_readme():
    missing = set(SUPPORTED_OPERATORS) - mapped_in_readme() - FOLDED
    assert not missing, f"mapped but not in docs/applications.md's table: {sorted(missing)}"


def test_constant_only_operators_are_said_in_the_readme():
    from nnrt.client.onnx_refusals import CONSTANT_PARAMETERS

    section = ONNX_PAGE.read_text().split("## Bring your own model: ONNX", 1)[1].split("\n## ")[0]
    sentence = section.split("must\nbe constants", 1)[0].rsplit("`).", 1)[-1]
    named = {n for n in CONSTANT_PARAMETERS if n != "Constant"}
    unsaid = {n for n in named if n not in sentence and not (
        n in ("QuantizeLinear", "DequantizeLinear") and "QDQ parameters" in sentence)}
    assert not unsaid, f"docs/applications.md does not say these need constant parameters: {sorted(unsaid)}"
