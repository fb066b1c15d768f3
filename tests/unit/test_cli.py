"""The ``layby`` command's own rules: its tables, and the server commands an SDK-only install
names (docs/cli.md)."""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Iterator

import httpx
import pytest
import structlog

from layby import cli
from layby.settings import load_client_settings
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


class _Dropped(httpx.SyncByteStream):
    """A stream body that breaks off after its chunks, as a connection cut mid-stream does."""

    def __init__(self, *chunks: bytes) -> None:
        self.chunks = chunks

    def __iter__(self) -> Iterator[bytes]:
        yield from self.chunks
        raise httpx.RemoteProtocolError("peer closed connection without sending complete message body")


def test_the_stream_skips_keepalives_and_resumes_after_the_last_frame(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``layby interactions stream`` prints each frame, not the keepalives; when the connection
    drops it reconnects with ``Last-Event-ID`` set to the last frame's id (docs/cli.md#following-the-stream)."""
    frame = {"interaction_id": "ix-1", "question": "Ship it?"}
    seen: list[str | None] = []

    def door(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("Last-Event-ID"))
        if len(seen) > 1:
            raise KeyboardInterrupt  # the person at the terminal stops it
        body = f": keepalive\n\nid: 7\nevent: interaction.add\ndata: {json.dumps(frame)}\n\n: keepalive\n\n"
        return httpx.Response(
            200, headers={"Content-Type": "text/event-stream"}, stream=_Dropped(body.encode())
        )

    def client(url: str, token: str, timeout: float | None) -> httpx.Client:
        assert (url, token, timeout) == ("http://layby.test", "tok", None)
        return httpx.Client(base_url=url, transport=httpx.MockTransport(door))

    monkeypatch.setenv("LAYBY_URL", "http://layby.test")
    monkeypatch.setenv("LAYBY_TOKEN", "tok")
    monkeypatch.setattr(cli, "_client", client)
    monkeypatch.setattr(cli.time, "sleep", lambda _seconds: None)
    args = argparse.Namespace(json=True)
    assert cli.cmd_stream(load_client_settings(), args) == 0
    assert seen == [None, "7"]
    out, err = capsys.readouterr()
    assert [json.loads(line) for line in out.splitlines()] == [
        {"id": "7", "event": "interaction.add", "data": frame}
    ]
    assert err == "stream interrupted; reconnecting...\n"


def test_ask_takes_one_channel_or_several_with_channel_equals_recipient_pairs() -> None:
    """`layby ask --channel` (repeatable): one channel and its recipient, or several channels
    with CHANNEL=RECIPIENT pairs; a malformed pair or a recipient without a channel is refused."""
    from layby.cli import _channel_options

    assert _channel_options(None, None) == (None, None)
    assert _channel_options(["slack"], ["C1"]) == ("slack", "C1")
    assert _channel_options(["slack", "tg"], ["slack=C1", "tg=42"]) == (
        ["slack", "tg"],
        {"slack": "C1", "tg": "42"},
    )
    assert _channel_options(["slack", "tg"], None) == (["slack", "tg"], None)
    for channels, recipients in ((None, ["x"]), (["slack", "tg"], ["C1"]), (["slack"], ["a", "b"])):
        with pytest.raises(ValueError):
            _channel_options(channels, recipients)


def test_layby_mcp_without_a_nats_url_says_so_and_serves_nothing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: object, capsys: pytest.CaptureFixture[str]
) -> None:
    """``layby mcp`` connects before it claims standard input and output: with no NATS URL it
    exits naming LAYBY_NATS_URL (docs/mcp.md#stdio-a-desktop-mcp-client)."""
    for var in ("LAYBY_NATS_URL", "LAYBY_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("LAYBY_DATA_DIR", str(tmp_path))
    saved = structlog.get_config()
    sdk_handlers = list(logging.getLogger("layby").handlers)
    try:
        assert cli.main(["mcp"]) == 1
    finally:  # the command configures this process's logging: leave it as the other tests found it
        structlog.configure(**saved)
        logging.getLogger("layby").handlers[:] = sdk_handlers
    assert "LAYBY_NATS_URL" in capsys.readouterr().err


def test_the_stream_resumes_from_an_eviction_frame_without_printing_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A ``stream.evicted`` frame is not printed; the stream that it ends is resumed with
    ``Last-Event-ID`` set to its id (docs/cli.md#following-the-stream, docs/doors/stream.md#slow-clients)."""
    frame = {"interaction_id": "ix-1", "question": "Ship it?"}
    seen: list[str | None] = []

    def door(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("Last-Event-ID"))
        if len(seen) > 1:
            raise KeyboardInterrupt
        body = f"id: 7\nevent: interaction.add\ndata: {json.dumps(frame)}\n\nid: 9\nevent: stream.evicted\ndata: {{}}\n\n"
        return httpx.Response(200, headers={"Content-Type": "text/event-stream"}, content=body.encode())

    monkeypatch.setenv("LAYBY_URL", "http://layby.test")
    monkeypatch.setenv("LAYBY_TOKEN", "tok")
    monkeypatch.setattr(
        cli,
        "_client",
        lambda url, token, timeout: httpx.Client(base_url=url, transport=httpx.MockTransport(door)),
    )
    assert cli.cmd_stream(load_client_settings(), argparse.Namespace(json=True)) == 0
    assert seen == [None, "9"]
    out, _ = capsys.readouterr()
    assert [json.loads(line)["event"] for line in out.splitlines()] == ["interaction.add"]
