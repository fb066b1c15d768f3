"""One error vocabulary: each error class carries its wire kind, one converter each way (docs/errors.md)."""

from __future__ import annotations

import msgspec
import pytest

from layby_contracts.commands import PROTOCOL, REPLY_DECODER, Refused
from layby_contracts.errors import (
    BadInput,
    Conflict,
    CrossIdentityAudienceError,
    Forbidden,
    InteractionLimitError,
    LaybyError,
    ParkExpiryExceedsRetentionError,
    Transient,
    Unauthorized,
    Unavailable,
)
from layby_contracts.refusals import from_refused, to_refused

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("raised", "kind", "received"),
    [
        (BadInput("question must not be empty", field="question"), "invalid", BadInput),
        (InteractionLimitError("already at the max_concurrent limit (3)"), "limit", InteractionLimitError),
        (Forbidden("this run belongs to another identity"), "audience", CrossIdentityAudienceError),
        (
            CrossIdentityAudienceError("addressed to bob", field="audience"),
            "audience",
            CrossIdentityAudienceError,
        ),
        (Unauthorized("unknown token", field="token"), "unauthorized", Unauthorized),
        (ParkExpiryExceedsRetentionError("beyond the horizon"), "retention", ParkExpiryExceedsRetentionError),
        (Unavailable("the event log is unavailable"), "unavailable", Unavailable),
        (Transient("try again"), "unavailable", Unavailable),
        (Conflict("another execution of this run already moved it on"), "conflict", Conflict),
    ],
)
def test_a_refusal_crosses_the_wire_as_the_class_the_service_raised(
    raised: LaybyError, kind: str, received: type[LaybyError]
) -> None:
    """The service's error becomes a Refused of its class's kind, and the SDK raises that class
    again with the same message and field."""
    reply = REPLY_DECODER.decode(msgspec.json.encode(to_refused(raised)))
    assert isinstance(reply, Refused)
    assert (reply.kind, reply.field, reply.protocol) == (kind, raised.field, PROTOCOL)
    back = from_refused(reply, interaction_id="ix-1")
    assert type(back) is received
    assert back.field == raised.field
    assert raised.message in str(back)


def test_an_unauthorized_refusal_names_the_token_variable() -> None:
    """The SDK says which credential was refused."""
    back = from_refused(Refused(kind="unauthorized", message="unknown token", field="token"))
    assert str(back) == "LAYBY_TOKEN was refused: unknown token"


def test_a_retention_refusal_carries_the_interaction_and_the_field() -> None:
    """A park refused for retention names its interaction and the expiry_at field."""
    back = from_refused(Refused(kind="retention", message="beyond", field="expiry_at"), interaction_id="ix-9")
    assert isinstance(back, ParkExpiryExceedsRetentionError)
    assert (back.interaction_id, back.field) == ("ix-9", "expiry_at")


def test_a_reply_without_protocol_is_from_a_first_protocol_service() -> None:
    """Capabilities travel in the versioned protocol field: absent means protocol 1."""
    old = REPLY_DECODER.decode(b'{"type":"refused","kind":"invalid","message":"malformed command: x"}')
    assert isinstance(old, Refused)
    assert old.protocol == 1
    assert to_refused(BadInput("x")).protocol == PROTOCOL >= 2
