"""docs/errors.md#capabilities-travel-in-the-protocol-field names what every command protocol
adds: one row per protocol from 1 to the one this release speaks, so the table cannot fall behind
``layby_contracts.commands.PROTOCOL``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from layby_contracts.commands import PROTOCOL

pytestmark = pytest.mark.unit
ERRORS_DOC = Path(__file__).resolve().parents[2] / "docs" / "errors.md"


def test_the_protocol_table_has_one_row_per_protocol_up_to_the_current_one() -> None:
    text = ERRORS_DOC.read_text(encoding="utf-8")
    section = text.split("## Capabilities travel in the `protocol` field", 1)[1].split("\n## ", 1)[0]
    rows = [int(m.group(1)) for m in re.finditer(r"^\| (\d+) \|", section, flags=re.MULTILINE)]
    assert rows == list(range(1, PROTOCOL + 1))
