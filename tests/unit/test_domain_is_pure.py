"""The domain draws no randomness and reads no clock: ids and tickets are minted outside it and
time is passed in (docs/engineering.md#a-pure-core)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit
DOMAIN = Path(__file__).resolve().parents[2] / "libs" / "layby" / "layby_domain"
IMPURE = {
    ("uuid", "uuid1"),
    ("uuid", "uuid4"),
    ("secrets", "token_urlsafe"),
    ("secrets", "token_bytes"),
    ("secrets", "token_hex"),
    ("secrets", "choice"),
    ("os", "urandom"),
    ("datetime", "now"),
    ("datetime", "utcnow"),
    ("time", "time"),
    ("time", "monotonic"),
}


def _calls(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            name = owner.id if isinstance(owner, ast.Name) else getattr(owner, "attr", "")
            if (name, node.func.attr) in IMPURE:
                found.append(f"{path.relative_to(DOMAIN)}:{node.lineno} {name}.{node.func.attr}()")
        if isinstance(node, ast.Import | ast.ImportFrom) and any(a.name == "random" for a in node.names):
            found.append(f"{path.relative_to(DOMAIN)}:{node.lineno} imports random")
    return found


def test_the_domain_mints_no_ids_and_reads_no_clock() -> None:
    """No module of ``layby_domain`` calls ``uuid4``, ``secrets``, ``random`` or the system clock,
    but the clock module, whose ``SystemClock`` is what the services inject."""
    modules = [path for path in sorted(DOMAIN.rglob("*.py")) if path.name != "clock.py"]
    assert [hit for path in modules for hit in _calls(path)] == []
