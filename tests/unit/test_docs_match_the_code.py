"""The docs name what the code has: every key a typed HTTP body carries is in its page's table,
and every ``layby`` command is in the command-line page (docs/engineering.md#docs-that-cannot-drift)."""

from __future__ import annotations

import argparse
import importlib
import re
from pathlib import Path

import msgspec
import pytest

from layby.cli import SERVER_COMMANDS, build_parser

pytestmark = pytest.mark.unit
DOCS = Path(__file__).resolve().parents[2] / "docs"

# (page, the line that opens the table) -> the Struct the table describes, and the keys the table
# may leave out or call "always" though the Struct has a default, each with why.
TABLES: dict[tuple[str, str], tuple[str, dict[str, str], dict[str, str]]] = {
    ("doors/asks.md", "| key | type | |"): ("layby_contracts.http.asks:AskRequest", {}, {}),
    ("doors/runs.md", "| key | type | |"): ("layby_contracts.http.asks:StartRunRequest", {}, {}),
    ("doors/runs.md", "| key | presence | value |"): ("layby_contracts.http.runs:RunDetail", {}, {}),
    ("doors/notifications.md", "| key | type | |"): (
        "layby_contracts.http.notifications:NotifyRequest",
        {},
        {},
    ),
    ("doors/list.md", "| key | presence | value |"): (
        "layby_contracts.http.interactions:PendingQuestion",
        {},
        {},
    ),
    ("doors/done.md", "| Key | When | Meaning |"): ("layby_contracts.http.interactions:DoneQuestion", {}, {}),
    ("doors/hooks.md", "| key | present | meaning |"): (
        "layby_contracts.doors:VisitResult",
        {"error": "a refused visit is answered with its error status, never in a 200"},
        {"door": "a visit over HTTP is always a door's; only a visit read on the bus may have none"},
    ),
}


def _table(page: str, header: str) -> dict[str, str]:
    """The table's keys (the backquoted names of its first column) and their second column."""
    lines = (DOCS / page).read_text(encoding="utf-8").splitlines()
    start = lines.index(header)
    keys: dict[str, str] = {}
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        for key in re.findall(r"`([a-z_]+)`", cells[0]):
            keys[key] = cells[1]
    return keys


@pytest.mark.parametrize(
    ("page", "header"), list(TABLES), ids=[f"{p}:{TABLES[(p, h)][0]}" for p, h in TABLES]
)
def test_a_documented_body_names_every_key_of_its_struct_and_no_other(page: str, header: str) -> None:
    """A body's table lists exactly the keys its Struct encodes, and says "always" only of keys
    that are always there."""
    target, left_out, always_anyway = TABLES[(page, header)]
    module, _, name = target.partition(":")
    struct = getattr(importlib.import_module(module), name)
    fields = {f.encode_name: f for f in msgspec.inspect.type_info(struct).fields}
    documented = _table(page, header)
    assert sorted(set(fields) - set(documented) - set(left_out)) == [], f"{page} leaves out keys of {name}"
    assert sorted(set(documented) - set(fields)) == [], f"{page} documents keys {name} does not have"
    if struct.__struct_config__.omit_defaults:
        sometimes = [
            key
            for key, presence in documented.items()
            if presence == "always" and not fields[key].required and key not in always_anyway
        ]
        assert sometimes == [], f"{page} says these are always present; {name} omits them at their default"


def test_every_layby_command_is_on_the_command_line_page() -> None:
    """Each command of the ``layby`` CLI, the SDK's and the server's, is documented."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    commands = sorted({*sub.choices, *SERVER_COMMANDS})
    text = (DOCS / "cli.md").read_text(encoding="utf-8")
    assert [c for c in commands if f"layby {c}" not in text] == []


def test_the_packages_decision_names_the_server_commands_there_are() -> None:
    """The decision that split the packages lists the commands the server distribution adds."""
    text = (DOCS / "decisions" / "0012-packages-layers-and-the-sdk-distribution.md").read_text(
        encoding="utf-8"
    )
    listed = re.search(r"The server adds its commands \(([^)]*)\)", text)
    assert listed is not None
    assert sorted(re.findall(r"`([a-z-]+)`", listed.group(1))) == sorted(SERVER_COMMANDS)
