"""One error vocabulary: each error class carries its wire kind, one converter each way (docs/errors.md)."""

from __future__ import annotations

import msgspec
import pytest

from layby_contracts.commands import PROTOCOL, REPLY_DECODER, Refused
from layby_contracts.errors import (
    BadInput,
    InteractionTimeoutError,
    LaybyError,
    ParkExpiryExceedsRetentionError,
    Permanent,
    Transient,
    Unavailable,
    known_kinds,
)
from layby_contracts.refusals import from_refused, to_refused

pytestmark = pytest.mark.unit


def _every_error_class() -> list[type[LaybyError]]:
    """Every concrete error class, the door's included (their wire kinds register on import)."""
    import layby_services.door.errors  # noqa: F401 - registers the door's own error classes

    return sorted(known_kinds().values(), key=lambda cls: cls.kind)


def _instance(cls: type[LaybyError]) -> LaybyError:
    if cls is InteractionTimeoutError:
        return InteractionTimeoutError("no answer within 5s", interaction_id="ix-1", field="timeout")
    if cls is ParkExpiryExceedsRetentionError:
        return ParkExpiryExceedsRetentionError("beyond the horizon", interaction_id="ix-1")
    if cls.__name__ == "Busy":
        return cls("too many streams", retry_after=5)  # type: ignore[call-arg]
    return cls(f"{cls.__name__} says why", field="question")


@pytest.mark.parametrize("cls", _every_error_class(), ids=lambda cls: cls.__name__)
def test_every_error_class_crosses_the_wire_as_itself(cls: type[LaybyError]) -> None:
    """Every error class has its own wire kind, and a refusal comes back as exactly the class the
    service raised, with its message, its field and (where it has one) its interaction."""
    raised = _instance(cls)
    reply = REPLY_DECODER.decode(msgspec.json.encode(to_refused(raised)))
    assert isinstance(reply, Refused)
    assert (reply.kind, reply.field, reply.protocol) == (cls.kind, raised.field, PROTOCOL)
    back = from_refused(reply, interaction_id="ix-1")
    assert type(back) is cls
    assert back.field == raised.field
    assert raised.message in str(back)
    if isinstance(raised, InteractionTimeoutError | ParkExpiryExceedsRetentionError):
        assert back.interaction_id == "ix-1"  # type: ignore[attr-defined]


def test_no_two_error_classes_share_a_wire_kind() -> None:
    """The kind -> class table is built from the classes; a class reusing a kind is refused."""
    classes = _every_error_class()
    assert len({cls.kind for cls in classes}) == len(classes)
    with pytest.raises(TypeError, match="reuses the wire kind"):

        class Again(LaybyError):
            kind = "invalid"

    with pytest.raises(TypeError, match="must declare its own wire kind"):

        class Unnamed(BadInput):
            pass


def test_a_permanent_refusal_is_never_retryable_on_the_other_side() -> None:
    """A permanent refusal is not ``Transient``/``Unavailable`` ("safe to retry") in the SDK."""
    back = from_refused(to_refused(Permanent("the sealing key cannot open this")))
    assert type(back) is Permanent
    assert not isinstance(back, Transient)
    assert not back.retryable
    assert from_refused(to_refused(Unavailable("no answer"))).retryable


def test_a_kind_from_a_newer_service_is_a_plain_layby_error() -> None:
    """An unknown kind decodes (the field is a string) and raises the base class, never a retry."""
    reply = REPLY_DECODER.decode(b'{"type":"refused","kind":"from_the_future","message":"m","protocol":9}')
    assert isinstance(reply, Refused)
    back = from_refused(reply)
    assert type(back) is LaybyError
    assert not back.retryable


@pytest.mark.parametrize("cls", _every_error_class(), ids=lambda cls: cls.__name__)
def test_every_error_class_has_its_own_http_status_and_body(cls: type[LaybyError]) -> None:
    """At the door each class answers its documented status; a 4xx names the error (and the
    field where one is to blame), a 5xx never carries the exception's text (a busy door says
    when to come back) — except a channel's refusal of a notification, whose text the ask service
    wrote to name the channel and never holds the medium's own (docs/notifications.md#statuses)."""
    from layby_services.door.errors import EXCEPTION_HANDLERS, STATUS, status_of

    raised = _instance(cls)
    assert cls in STATUS, f"{cls.__name__} has no HTTP status of its own"
    response = EXCEPTION_HANDLERS[LaybyError](None, raised)  # type: ignore[arg-type]
    assert response.status_code == status_of(raised) == STATUS[cls]
    body = msgspec.to_builtins(response.content)
    assert isinstance(body, dict)
    if cls.__name__ == "Busy":  # the door's own words: how long to wait
        assert response.headers["Retry-After"] == "5"
    elif cls.__name__ in {"UnsupportedError", "ChannelFailedError", "ChannelUnavailableError"}:
        assert (
            body == {"error": raised.message, "field": raised.field}
            if raised.field
            else {"error": raised.message}
        )
    elif response.status_code >= 500:
        assert raised.message not in body["error"]
    elif response.status_code == 413:
        assert body == {"error": "payload too large"}
    else:
        assert raised.message in body["error"]
    if response.status_code == 400:
        assert body.get("field") == raised.field
    assert response.headers["Cache-Control"] == "no-store"


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
