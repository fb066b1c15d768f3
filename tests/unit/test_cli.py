"""The ``layby`` command's own rules: its tables, and the server commands an SDK-only install
names (docs/cli.md)."""

from __future__ import annotations

import argparse

import pytest

from layby import cli
from layby_server.cli import register

pytestmark = pytest.mark.unit


def test_a_table_pads_every_column_but_the_last() -> None:
    """Columns are as wide as their widest cell, two spaces apart; no line ends in spaces."""
    table = cli._table(("ID", "FORMAT", "QUESTION"), [("a1", "confirm", "Ship it?"), ("b", "text", "")])
    assert table.splitlines() == [
        "ID  FORMAT   QUESTION",
        "a1  confirm  Ship it?",
        "b   text",
    ]


def test_every_server_command_is_named_for_an_sdk_only_install() -> None:
    """``SERVER_COMMANDS`` lists exactly the commands the server distribution registers."""
    parser = argparse.ArgumentParser()
    registered = register(parser.add_subparsers(dest="command"))
    assert set(cli.SERVER_COMMANDS) == {name for name, _ in registered}


@pytest.mark.parametrize(
    "argv", [["up"], ["serve", "ask"], ["projections", "rebuild"], ["nats-config", "--keys", "k"]]
)
def test_a_server_command_without_the_server_says_so(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without the server distribution, a server command (with whatever options follow it) exits
    2 naming the command, instead of an argument error."""
    monkeypatch.setattr(cli, "_plugins", lambda _sub: {})
    assert cli.main(argv) == 2
    assert capsys.readouterr().err == (
        f"error: 'layby {argv[0]}' is a server command; this install has the SDK only "
        "(install the whole system from the repository: pip install -e .)\n"
    )
