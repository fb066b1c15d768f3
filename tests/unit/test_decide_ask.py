"""Deciding an ask is one pure function of the command and the facts the ask service gathered
(docs/asking.md#validation-order): given the facts, when the ask is decided, then the event or
the refusal."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import msgspec
import pytest

from layby.ids import new_interaction_id
from layby.sdk import _before_typed_question, _flat_ask
from layby_contracts.commands import Ask, Refused
from layby_contracts.errors import (
    BadInput,
    CrossIdentityAudienceError,
    Forbidden,
    ParkExpiryExceedsRetentionError,
)
from layby_contracts.events import MediaItem, RunStarted
from layby_contracts.formats import ExternalPayload, FormPayload, SelectPayload, TextPayload
from layby_domain.ask import Asker, AskFacts, ChannelAbilities, decide_ask
from layby_domain.validation import call_interaction_id

pytestmark = pytest.mark.unit

NOW = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
ALICE = Asker("alice", "user")
OPS = Asker("ops", "operator")
PIXEL = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="


def facts(asker: Asker = ALICE, **kw: object) -> AskFacts:
    base: dict[str, object] = {
        "asker": asker,
        "now": NOW,
        "new_group_id": "g-fresh",
        "default_timeout": 3600.0,
        "token_key": "k1",
    }
    return AskFacts(**(base | kw))  # type: ignore[arg-type]


def ask(**kw: object) -> Ask:
    base: dict[str, object] = {"token": "t", "interaction_id": new_interaction_id(), "question": "Ship it?"}
    return Ask(**(base | kw))  # type: ignore[arg-type]


def test_a_typed_question_records_the_same_event_as_its_flat_fields() -> None:
    """The typed question and the flat fields an older SDK sends decide the same question."""
    ix = new_interaction_id()
    typed = decide_ask(
        ask(interaction_id=ix, answer_format="select", format=SelectPayload(options=["a", "b"])), facts()
    )
    flat = decide_ask(ask(interaction_id=ix, answer_format="select", options=["a", "b"]), facts())
    assert typed == flat
    assert typed.event.format_payload == {"options": ["a", "b"]}


def test_a_question_without_a_group_takes_the_fresh_group_the_service_drew() -> None:
    """Ids come from the caller: the domain draws no randomness."""
    decided = decide_ask(ask(), facts())
    assert decided.event.group_id == "g-fresh"
    assert decided.event.created_at == NOW
    assert decided.event.timeout_at == NOW + timedelta(hours=1)


def test_an_ask_carries_the_typed_question_or_the_flat_fields_never_both() -> None:
    """A flat argument beside ``format`` is refused naming it."""
    with pytest.raises(BadInput) as caught:
        decide_ask(ask(answer_format="select", format=SelectPayload(options=["a"]), options=["a"]), facts())
    assert caught.value.field == "options"


def test_answer_format_must_name_the_typed_questions_format() -> None:
    """``answer_format`` that disagrees with ``format`` is refused."""
    with pytest.raises(BadInput, match="does not match format 'form'") as caught:
        decide_ask(ask(format=FormPayload(schema={"type": "object"})), facts())
    assert caught.value.field == "answer_format"


def test_the_typed_questions_arguments_are_checked_by_the_formats_rules() -> None:
    """A typed question goes through the same checks, with the same messages, as flat fields."""
    with pytest.raises(BadInput, match=r"options\[1\] repeats 'a'"):
        decide_ask(ask(answer_format="select", format=SelectPayload(options=["a", "a"])), facts())


def test_a_restricted_asker_addressing_someone_else_is_refused_with_the_audience_field() -> None:
    """The audience clamp is a domain rule: CrossIdentityAudienceError naming ``audience``."""
    with pytest.raises(CrossIdentityAudienceError) as caught:
        decide_ask(ask(audience="bob"), facts())
    assert caught.value.field == "audience"
    assert decide_ask(ask(), facts()).event.audience == "alice"
    assert decide_ask(ask(audience="bob"), facts(OPS)).event.audience == "bob"


def _park(run_id: str, **kw: object) -> Ask:
    return ask(
        interaction_id=call_interaction_id(run_id, 0),
        mode="async",
        expiry_at=NOW + timedelta(hours=1),
        run_id=run_id,
        call=0,
        **kw,
    )


def test_a_park_asks_as_its_runs_identity_and_only_for_who_may_act_for_it() -> None:
    """An operator's worker parks as the run's identity; another user may not park a run."""
    run_id = str(uuid.uuid4())
    run = RunStarted(run_id=run_id, flow="f", identity="alice", role="user", started_at=NOW)
    decided = decide_ask(_park(run_id), facts(OPS, run=run))
    assert (decided.event.asked_by, decided.event.audience, decided.event.run_id) == (
        "alice",
        "alice",
        run_id,
    )
    with pytest.raises(Forbidden):
        decide_ask(_park(run_id), facts(Asker("bob", "user"), run=run))
    with pytest.raises(BadInput, match="does not exist") as caught:
        decide_ask(_park(run_id), facts(OPS, run=None))
    assert caught.value.field == "run_id"


def test_a_park_beyond_the_checkpoint_retention_is_refused_naming_the_interaction() -> None:
    """The retention horizon is a fact; the refusal names the interaction and ``expiry_at``."""
    run_id = str(uuid.uuid4())
    run = RunStarted(run_id=run_id, flow="f", identity="alice", role="user", started_at=NOW)
    with pytest.raises(ParkExpiryExceedsRetentionError) as caught:
        decide_ask(_park(run_id), facts(run=run, retention_seconds=60.0))
    assert caught.value.interaction_id == call_interaction_id(run_id, 0)
    assert caught.value.field == "expiry_at"


def test_a_channel_that_cannot_render_forms_refuses_a_form_question() -> None:
    """The channel's abilities are facts: a form to a channel without form delivery is refused."""
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
    form = {"format": FormPayload(schema=schema), "answer_format": "form", "channel": "chat"}
    with pytest.raises(BadInput, match="does not deliver form questions") as caught:
        decide_ask(ask(**form), facts(channels={"chat": ChannelAbilities()}, public_base_url=True))
    assert caught.value.field == "channel"
    decided = decide_ask(
        ask(**form), facts(channels={"chat": ChannelAbilities(forms=True)}, public_base_url=True)
    )
    assert decided.event.channel == "chat"
    assert not decided.binds_ticket  # the channel's delivery mints the ticket


def test_an_external_question_without_a_channel_binds_its_ticket() -> None:
    """A ticketed format no channel delivers needs its ticket's hash and binds it."""
    external = {"format": ExternalPayload(url="https://example.com/sign"), "answer_format": "external"}
    with pytest.raises(BadInput) as caught:
        decide_ask(ask(**external), facts())
    assert caught.value.field == "ticket_hash"
    decided = decide_ask(ask(**external, ticket_hash="a" * 64), facts())
    assert decided.binds_ticket


def test_an_inline_image_that_would_outlive_its_serving_is_refused() -> None:
    """Inline images are stored by reference for the media retention; a longer question is refused."""
    media = [MediaItem(kind="image", url=PIXEL)]
    with pytest.raises(BadInput, match="inline image") as caught:
        decide_ask(ask(media=media, timeout=7200.0), facts(media_retention_seconds=3600.0))
    assert caught.value.field == "media[0].url"
    assert decide_ask(ask(media=media, timeout=60.0), facts()).inline == (0,)


def test_an_older_ask_service_gets_the_flat_fields_and_no_format_field() -> None:
    """Facing an ask service from before the typed question, the SDK resends the ask flat."""
    cmd = ask(answer_format="text", format=TextPayload(options=["yes", "no"]))
    raw = msgspec.json.decode(_flat_ask(cmd))
    assert "format" not in raw
    assert (raw["answer_format"], raw["options"]) == ("text", ["yes", "no"])
    assert _before_typed_question(Refused(kind="invalid", message="malformed command: format", protocol=4))
    assert not _before_typed_question(Refused(kind="invalid", message="x", field="options", protocol=4))
    assert not _before_typed_question(Refused(kind="invalid", message="x", protocol=5))
