"""The HTTP ask door's own rules, without a running system (docs/doors/asks.md): the body becomes
the very ``Ask`` the SDK sends, a refusal names the field, and the door's NATS user may do what
the doors need and no more. End to end: tests/integration/test_http_asks.py."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import msgspec
import pytest

from layby_contracts.errors import BadInput
from layby_contracts.http import AskRequest
from layby_contracts.subjects import Names
from layby_server.operations.natsauth import service_permissions
from layby_server.settings import load_settings
from layby_services.door.routes.asks import command_of, parse_ask_body

pytestmark = pytest.mark.unit


def _state(**settings: Any) -> Any:
    return SimpleNamespace(settings=load_settings({}, **settings))


def test_an_http_ask_is_a_sync_ask_with_no_waiter_and_the_servers_default_deadline() -> None:
    cmd = command_of(
        AskRequest(question="Ship?", answer_format="confirm"), "tok", _state(answer_timeout_seconds=90)
    )
    assert cmd.mode == "sync" and cmd.waiter is None and cmd.timeout == 90
    assert cmd.run_id is None and cmd.to == "user" and cmd.token == "tok"


def test_an_external_http_ask_gets_a_ticket_and_its_link_built_around_the_callback_url() -> None:
    body = AskRequest(question="Pay", answer_format="external", link="https://pay.example/?cb={callback_url}")
    cmd = command_of(body, "tok", _state(public_base_url="https://layby.example"))
    assert cmd.ticket_hash is not None and len(cmd.ticket_hash) == 64
    url = msgspec.to_builtins(cmd.format)["url"]
    assert url.startswith("https://pay.example/?cb=https://layby.example/api/interactions/callback/")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (AskRequest(question="Pay", answer_format="external"), "link"),
        (AskRequest(question="Pay", answer_format="external", link="https://pay.example/"), "link"),
        (AskRequest(question="Hi", link="https://x.example/{callback_url}"), "link"),
        (AskRequest(question="Pick", answer_format="select"), "options"),
        (AskRequest(question="Soon", timeout=0), "timeout"),
    ],
)
def test_a_bad_ask_is_refused_naming_its_field(body: AskRequest, field: str) -> None:
    with pytest.raises(BadInput) as refused:
        command_of(body, "tok", _state(public_base_url="https://layby.example"))
    assert refused.value.field == field


def test_a_channel_or_external_ask_without_a_public_base_url_is_refused() -> None:
    for body, field in (
        (AskRequest(question="Where", channel="team"), "channel"),
        (
            AskRequest(question="Pay", answer_format="external", link="https://p.example/{callback_url}"),
            "link",
        ),
    ):
        with pytest.raises(BadInput) as refused:
            command_of(body, "tok", _state())
        assert refused.value.field == field


@pytest.mark.parametrize(
    ("raw", "field"),
    [(b'{"question": "x", "timout": 5}', "timout"), (b'{"question": 5}', "question"), (b"{}", "question")],
)
def test_an_ill_typed_body_is_refused_naming_the_key(raw: bytes, field: str) -> None:
    with pytest.raises(BadInput) as refused:
        parse_ask_body(raw)
    assert refused.value.field == field


def test_the_door_may_send_asks_prunes_and_starts_and_hear_wakes_but_never_publish_one() -> None:
    n = Names("layby")
    door = service_permissions("door", n)
    published = door["publish"]["allow"]  # type: ignore[index]
    assert {n.cmd_ask, n.cmd_prune, n.cmd_run} <= set(published)
    assert "layby.wake.>" in door["subscribe"]["allow"]  # type: ignore[index]
    assert "layby.wake.>" not in published
    assert not [s for s in published if "LAYBY_SECRETS" in s and "GET" in s]
