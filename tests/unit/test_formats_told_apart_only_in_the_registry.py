"""Formats are told apart in one place: the format registry (docs/asking.md#answer-formats).

No code outside ``layby_domain/formats`` (and the wire union in ``layby_contracts/formats.py``)
compares a value with a format's name or writes the list of names again: what a format needs of
the other layers is a property of its ``Format`` object, so a new format is one new module.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from layby_contracts.formats import FORMAT_NAMES

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [ROOT / "contracts", ROOT / "libs", ROOT / "services"]
REGISTRY = [
    ROOT / "libs" / "layby" / "layby_domain" / "formats",
    ROOT / "contracts" / "layby_contracts" / "formats.py",
]
NAMES = frozenset(FORMAT_NAMES)


def _is_name(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in NAMES


def _offences(tree: ast.AST) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            for operand in operands:
                if _is_name(operand):
                    found.append((node.lineno, f"compares with the format name {operand.value!r}"))  # type: ignore[attr-defined]
                elif isinstance(operand, ast.Tuple | ast.List | ast.Set) and any(
                    _is_name(e) for e in operand.elts
                ):
                    found.append((node.lineno, "compares with a collection of format names"))
        elif isinstance(node, ast.MatchValue) and _is_name(node.value):
            found.append((node.lineno, f"matches the format name {node.value.value!r}"))  # type: ignore[attr-defined]
        elif isinstance(node, ast.Tuple | ast.List | ast.Set):
            names = [e for e in node.elts if _is_name(e)]
            if len(names) >= 2:
                found.append((node.lineno, "writes the list of format names again"))
    return found


def _files() -> list[Path]:
    out = []
    for base in SOURCES:
        for path in sorted(base.rglob("*.py")):
            if any(path == r or r in path.parents for r in REGISTRY):
                continue
            out.append(path)
    return out


def test_no_code_outside_the_registry_tells_formats_apart_by_name() -> None:
    """Every comparison with a format name, and every list of them, lives in the registry."""
    offences = [
        f"{path.relative_to(ROOT)}:{line}: {what}"
        for path in _files()
        for line, what in _offences(ast.parse(path.read_text(), str(path)))
    ]
    assert offences == []


@pytest.mark.parametrize(
    "source",
    [
        "if fmt == 'external': pass",
        "ok = answer_format != 'form'",
        "ok = x in ('select', 'text')",
        "match f:\n    case 'confirm': pass",
        "CHOICES = ('text', 'confirm')",
    ],
)
def test_the_check_finds_each_way_of_telling_formats_apart(source: str) -> None:
    """The check is not vacuous: each of these is reported."""
    assert _offences(ast.parse(source))
