"""The SDK's checks of an ask_user call are the same before and after it connects
(docs/asking.md#channel-checks)."""

from __future__ import annotations

import pytest

import layby
from layby.sdk import validate_call
from layby_contracts.errors import BadInput

pytestmark = pytest.mark.unit


def _args(**fields: object) -> dict[str, object]:
    base: dict[str, object] = {"answer_format": "external", "channel": "ops"}
    base.update(fields)
    return base


def test_an_external_channel_question_needs_no_link() -> None:
    """A channel delivers the callback itself: no link, no complaint about one."""
    spec = validate_call("Sign the contract", _args(), None)
    assert (spec.answer_format, spec.channel) == ("external", "ops")


def test_a_verifier_on_a_channel_question_is_named_as_the_verifier() -> None:
    """The refusal names verifier, not link."""
    with pytest.raises(BadInput, match="verifier is not allowed with a channel") as caught:
        validate_call("Pay", _args(verifier={"name": "stripe", "config": {"secret": "s"}}), None)
    assert caught.value.field == "verifier"


async def test_the_module_level_ask_user_checks_exactly_as_the_client_does() -> None:
    """Before connecting, layby.ask_user refuses a verifier on a channel question naming verifier,
    and a link on one naming link (nothing is sent: no server is needed for these)."""
    with pytest.raises(BadInput) as verifier:
        await layby.ask_user("Pay", answer_format="external", channel="ops", verifier={"name": "stripe"})
    assert verifier.value.field == "verifier"
    with pytest.raises(BadInput) as link:
        await layby.ask_user("Pay", answer_format="external", channel="ops", link="https://x/{callback_url}")
    assert link.value.field == "link"
    with pytest.raises(BadInput, match="answer_format 'external' requires a link"):
        await layby.ask_user("Pay", answer_format="external")
