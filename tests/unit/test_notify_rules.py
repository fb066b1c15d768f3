"""The rules of a notification, decided before anything is recorded or sent
(docs/notifications.md#the-rules, #what-a-channel-supports, #audience, #the-feed)."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest

from layby_contracts.channels import ChannelTemplate
from layby_contracts.commands import NOTIFY_DECODER, Notify, Refused
from layby_contracts.errors import (
    BadInput,
    ChannelFailedError,
    ChannelUnavailableError,
    CrossIdentityAudienceError,
    UnsupportedError,
)
from layby_contracts.limits import MEDIA_MAX_ITEMS
from layby_contracts.refusals import from_refused, to_refused
from layby_domain.ask import Asker
from layby_domain.notify import (
    NotifyAbilities,
    NotifyFacts,
    abilities_of,
    decide_notify,
    field_of,
)
from layby_server.observability.metrics import ServiceMetrics
from layby_server.write.feed import FeedEntry, live
from tests.unit.keywords import validate_notify

OPERATOR = Asker("ops", "operator")
ALICE = Asker("alice", "user")
PNG = "data:image/png;base64," + base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 8).decode()
ALL = frozenset({"media", "template", "options", "schema"})
CHANNELS = {
    "rich": NotifyAbilities(notify=True, flags=ALL),
    "plain": NotifyAbilities(notify=True),
    "asks-only": NotifyAbilities(),
}
FORM = {"type": "object", "properties": {"size": {"type": "string"}}}
IMAGE = {"kind": "image", "url": "https://example.com/a.png"}
TEMPLATE = {"name": "order_update", "language": "en"}


def refused(kwargs: dict[str, Any], message: str = "hello") -> BadInput:
    with pytest.raises(BadInput) as caught:
        validate_notify(message, **kwargs)
    return caught.value


# -- the arguments alone -------------------------------------------------------------------------------------


@pytest.mark.parametrize("message", ["", "   ", None, 7, "a" * 65537, "nul\x00"])
def test_the_message_must_be_non_blank_text_of_at_most_65536_characters(message: Any) -> None:
    """``message`` is non-blank text of at most 65536 characters (and no NUL)."""
    with pytest.raises(BadInput) as caught:
        validate_notify(message)
    assert caught.value.field == "message"


def test_a_message_of_exactly_65536_characters_is_accepted() -> None:
    """The cap is inclusive."""
    assert validate_notify("a" * 65536).message == "a" * 65536


@pytest.mark.parametrize("name", ["recipient", "audience"])
@pytest.mark.parametrize("value", ["", "  ", "x" * 513, 3])
def test_recipient_and_audience_are_non_blank_and_at_most_512_characters(name: str, value: Any) -> None:
    """``recipient`` and ``audience`` are non-blank strings of at most 512 characters."""
    assert refused({name: value}).field == name


def test_recipient_and_audience_of_512_characters_are_accepted() -> None:
    spec = validate_notify("hi", recipient="r" * 512, audience="a" * 512)
    assert (len(spec.recipient or ""), len(spec.audience or "")) == (512, 512)


def test_a_caller_supplied_sender_identity_is_refused() -> None:
    """The sender is the token's identity: a ``sender_identity`` is 400, even a well-formed one."""
    error = refused({"sender_identity": "ceo"})
    assert error.field == "sender_identity"
    assert str(error) == "sender_identity is not accepted: the sender is the identity of the caller's token"


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ([], "options"),
        ("Yes", "options"),
        ([f"o{i}" for i in range(11)], "options"),
        (["ok", " "], "options[1]"),
        (["x" * 1001], "options[0]"),
        ([3], "options[0]"),
    ],
)
def test_options_are_a_non_empty_list_of_at_most_10_non_blank_items_of_at_most_1000(
    options: Any, field: str
) -> None:
    """``options``: non-empty, at most 10 items, each non-blank and at most 1000 characters."""
    assert refused({"channel": "rich", "options": options}).field == field


def test_ten_options_of_1000_characters_are_accepted() -> None:
    options = ["x" * 1000] * 10
    assert validate_notify("hi", channel="rich", options=options).options == options


def test_media_uses_the_asks_checks_and_caps() -> None:
    """``media`` is checked as an ask's media: each item's fields, and the item cap."""
    assert (
        refused({"channel": "rich", "media": [{"kind": "gif", "url": "https://e.com/a"}]}).field
        == "media[0].kind"
    )
    assert refused({"channel": "rich", "media": [IMAGE] * (MEDIA_MAX_ITEMS + 1)}).field == "media"
    assert refused({"channel": "rich", "media": []}).field == "media"


@pytest.mark.parametrize(
    ("template", "field"),
    [
        ("order", "template"),
        ({"name": " ", "language": "en"}, "template.name"),
        ({"name": "order"}, "template.language"),
        ({"name": "order", "language": "en", "parameters": "42"}, "template.parameters"),
        ({"name": "order", "language": "en", "parameters": [42]}, "template.parameters[0]"),
        ({"name": "order", "language": "en", "colour": "red"}, "template.colour"),
    ],
)
def test_a_template_has_a_non_blank_name_and_language_and_string_parameters(
    template: Any, field: str
) -> None:
    assert refused({"channel": "rich", "template": template}).field == field


def test_a_template_may_be_given_as_the_contract_struct() -> None:
    template = ChannelTemplate(name="order", language="en", parameters=["1"])
    assert validate_notify("hi", channel="rich", template=template).template == template


@pytest.mark.parametrize("other", [{"media": [IMAGE]}, {"options": ["Yes"]}])
def test_a_template_excludes_media_and_options(other: dict[str, Any]) -> None:
    """``media``+``template`` and ``options``+``template`` are mutually exclusive."""
    error = refused({"channel": "rich", "template": TEMPLATE, **other})
    assert error.field == "template"
    assert "exclusive" in str(error)


def test_media_with_options_is_allowed() -> None:
    spec = validate_notify("hi", channel="rich", media=[IMAGE], options=["Yes"])
    assert spec.options == ["Yes"]
    assert spec.media is not None


@pytest.mark.parametrize(
    ("field", "value"),
    [("media", [IMAGE]), ("template", TEMPLATE), ("options", ["Yes"]), ("schema", FORM)],
)
def test_what_only_a_channel_renders_needs_a_channel(field: str, value: Any) -> None:
    """``media``, ``template``, ``options`` or ``schema`` with no channel is 400 naming the field."""
    error = refused({field: value})
    assert error.field == field
    assert str(error) == f"{field} needs a channel: the feed records the message only"


def test_a_form_schema_must_be_a_valid_json_schema_and_its_data_must_fit() -> None:
    """A ``schema`` is checked as a form ask's; ``data`` and ``pages`` belong to a form only."""
    assert refused({"channel": "rich", "schema": {"type": "nope"}}).field == "schema"
    assert refused({"channel": "rich", "data": {"values": {}}}).field == "data"
    assert refused({"channel": "rich", "pages": [{"title": "x", "fields": []}]}).field == "pages"
    spec = validate_notify("hi", channel="rich", schema=FORM, data={"values": {"size": "M"}})
    assert spec.data == {"values": {"size": "M"}}


def test_a_blank_channel_is_refused() -> None:
    assert refused({"channel": " "}).field == "channel"


# -- what the ask service knows: the channel, the audience -----------------------------------------------------


def decide(sender: Asker = OPERATOR, public_base_url: bool = True, **kwargs: Any) -> Any:
    spec = validate_notify(kwargs.pop("message", "hello"), **kwargs)
    return decide_notify(spec, NotifyFacts(sender=sender, channels=CHANNELS, public_base_url=public_base_url))


def test_an_unknown_channel_is_400_naming_the_known_ones() -> None:
    with pytest.raises(BadInput) as caught:
        decide(channel="nope")
    assert str(caught.value) == "unknown channel 'nope' (known: asks-only, plain, rich)"
    assert caught.value.field == "channel"


def test_a_channel_without_notify_is_501() -> None:
    """A channel whose plugin has no ``notify`` cannot send notifications: 501."""
    with pytest.raises(UnsupportedError) as caught:
        decide(channel="asks-only")
    assert str(caught.value) == "channel 'asks-only' does not support notifications"


@pytest.mark.parametrize(
    ("field", "value", "what"),
    [
        ("media", [IMAGE], "media notifications"),
        ("template", TEMPLATE, "template notifications"),
        ("options", ["Yes"], "interactive notifications"),
        ("schema", FORM, "form notifications"),
    ],
)
def test_a_field_without_its_capability_flag_is_501_naming_it(field: str, value: Any, what: str) -> None:
    """Each field needs its channel's flag; a missing one is 501 naming the capability and field."""
    with pytest.raises(UnsupportedError) as caught:
        decide(channel="plain", **{field: value})
    assert str(caught.value) == f"channel 'plain' does not support {what}"
    assert caught.value.field == field


def test_a_form_must_be_in_the_renderable_subset_and_pass_the_plugins_check() -> None:
    """A notification's form is checked as a channel form ask's: the renderable subset, then the
    plugin's ``validate_form_schema``."""
    with pytest.raises(BadInput) as caught:
        decide(channel="rich", schema={"type": "array"})
    assert caught.value.field == "schema"

    def too_many(schema: Any, question: str) -> None:
        raise ValueError("at most 0 fields")

    spec = validate_notify("hi", channel="picky", schema=FORM)
    picky = {"picky": NotifyAbilities(notify=True, flags=ALL, check_form=too_many)}
    with pytest.raises(BadInput) as plugin:
        decide_notify(spec, NotifyFacts(sender=OPERATOR, channels=picky))
    assert str(plugin.value) == "channel 'picky' refuses this form: at most 0 fields"


def test_an_inline_image_on_a_channel_needs_the_public_base_url() -> None:
    """A ``data:`` image sent on a channel is served from INTERACTIONS_PUBLIC_BASE_URL: without it, 400."""
    media = [{"kind": "image", "url": PNG}]
    with pytest.raises(BadInput) as caught:
        decide(channel="rich", media=media, public_base_url=False)
    assert caught.value.field == "media[0].url"
    assert "INTERACTIONS_PUBLIC_BASE_URL" in str(caught.value)
    assert decide(channel="rich", media=media).inline == (0,)


def test_no_channel_records_and_a_channel_sends_recording_only_with_an_audience() -> None:
    """No channel: recorded. A channel: sent, and recorded as well only with an audience."""
    feed_only = decide()
    assert (feed_only.send, feed_only.record) == (False, True)
    sent = decide(channel="plain")
    assert (sent.send, sent.record) == (True, False)
    both = decide(channel="plain", audience="bob")
    assert (both.send, both.record, both.spec.audience) == (True, True, "bob")


def test_a_restricted_callers_audience_is_clamped_to_itself() -> None:
    """A user's audience is its own id, named or not, so its channel sends are recorded too."""
    decision = decide(ALICE, channel="plain")
    assert (decision.spec.audience, decision.record) == ("alice", True)
    assert decide(ALICE, audience="alice").spec.audience == "alice"


def test_a_cross_identity_audience_is_403() -> None:
    with pytest.raises(CrossIdentityAudienceError) as caught:
        decide(ALICE, audience="bob")
    assert str(caught.value) == "identity 'alice' may address notifications only to itself"
    assert caught.value.field == "audience"


def test_the_channel_is_checked_before_the_audience() -> None:
    """Nothing about the audience is decided for a notification its channel cannot send."""
    with pytest.raises(UnsupportedError):
        decide(ALICE, channel="asks-only", audience="bob")


def test_a_plugins_abilities_are_read_from_notify_and_its_flags() -> None:
    """``notify`` present, and each flag set on the plugin (absent means False)."""

    class Plugin:
        supports_media_notifications = True
        supports_form_notifications = False

        async def deliver(self, delivery: Any) -> None: ...

        async def notify(self, notification: Any) -> list[str]:
            return []

    class AsksOnly:
        async def deliver(self, delivery: Any) -> None: ...

    assert abilities_of(Plugin()) == NotifyAbilities(notify=True, flags=frozenset({"media"}))
    assert abilities_of(AsksOnly()) == NotifyAbilities()


# -- the wire ------------------------------------------------------------------------------------------------


def test_a_malformed_command_names_the_field() -> None:
    cmd = Notify(token="t", notification_id="n", message="hi")
    raw = msgspec.json.encode(cmd).replace(b'"hi"', b"5")
    with pytest.raises(msgspec.ValidationError) as caught:
        NOTIFY_DECODER.decode(raw)
    assert field_of(caught.value) == "message"


def test_a_missing_field_is_named_with_its_path() -> None:
    """A body missing a required key names it, under the object that lacks it."""
    from layby_contracts.http import NotifyRequest

    for body, field in (({}, "message"), ({"message": "x", "template": {"name": "a"}}, "template.language")):
        with pytest.raises(msgspec.ValidationError) as caught:
            msgspec.convert(body, NotifyRequest)
        assert field_of(caught.value) == field


def test_a_channels_pause_crosses_the_wire_with_its_refusal() -> None:
    """A retryable send's ``retry_after`` travels in the refusal and comes back on the SDK's error;
    the 501 and 502 refusals keep their classes."""
    back = from_refused(to_refused(ChannelUnavailableError("busy", field="channel", retry_after=2.5)))
    assert isinstance(back, ChannelUnavailableError)
    assert (back.retry_after, back.field) == (2.5, "channel")
    for error in (UnsupportedError("no"), ChannelFailedError("no")):
        wire = msgspec.json.decode(msgspec.json.encode(to_refused(error)), type=Refused)
        assert type(from_refused(wire)) is type(error)


# -- the feed's rolling TTL ----------------------------------------------------------------------------------


def entry(at: datetime) -> FeedEntry:
    return FeedEntry(id=at.isoformat(), message="m", recipient=None, audience="alice", created_at=at)


def test_a_gap_of_a_ttl_or_more_is_where_an_identitys_feed_once_expired() -> None:
    """Each notification kept the feed alive for another TTL; behind a gap of a TTL the feed had
    expired whole, so only what came after the gap is read."""
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    ttl = timedelta(days=30)
    newest_first = [entry(t0 + timedelta(days=d)) for d in (70, 50, 31, 0)]
    assert [e.created_at for e in live(newest_first, ttl)] == [t0 + timedelta(days=d) for d in (70, 50, 31)]
    assert live(newest_first[:2], ttl) == newest_first[:2]


def test_notifications_are_counted_by_channel_and_result() -> None:
    """``layby_notifications_total`` counts each notification by channel and result."""
    metrics = ServiceMetrics()
    metrics.notification("none", "recorded")
    metrics.notification("sms", "unsupported")
    text = metrics.render().decode()
    assert 'layby_notifications_total{channel="none",result="recorded"} 1.0' in text
    assert 'layby_notifications_total{channel="sms",result="unsupported"} 1.0' in text


async def test_the_module_level_notify_user_checks_before_connecting() -> None:
    """``layby.notify_user`` refuses bad arguments before any connection is opened (no server is
    needed for these), naming the field."""
    import layby

    with pytest.raises(BadInput) as blank:
        await layby.notify_user(" ")
    assert blank.value.field == "message"
    with pytest.raises(BadInput) as orphan:
        await layby.notify_user("hi", options=["Yes"])
    assert orphan.value.field == "options"


def test_the_feed_settings_default_to_1000_and_30_days_and_must_be_positive() -> None:
    """INTERACTIONS_NOTIFICATIONS_FEED_MAX (1000) and INTERACTIONS_NOTIFICATIONS_FEED_TTL_SECONDS
    (30 days) are positive; anything else fails at load naming the variable."""
    from layby.settings import SettingsError
    from layby_server.settings import load_settings

    defaults = load_settings({})
    assert (defaults.notifications_feed_max, defaults.notifications_feed_ttl_seconds) == (1000, 2592000.0)
    tuned = load_settings(
        {"INTERACTIONS_NOTIFICATIONS_FEED_MAX": "50", "INTERACTIONS_NOTIFICATIONS_FEED_TTL_SECONDS": "60"}
    )
    assert (tuned.notifications_feed_max, tuned.notifications_feed_ttl_seconds) == (50, 60.0)
    for var in ("INTERACTIONS_NOTIFICATIONS_FEED_MAX", "INTERACTIONS_NOTIFICATIONS_FEED_TTL_SECONDS"):
        with pytest.raises(SettingsError, match=var):
            load_settings({var: "0"})
