"""Deciding an ask: one pure function from an ``Ask`` command and the facts the ask service
gathered to the ``InteractionAsked`` event it records, or the refusal
(docs/asking.md#asking-a-question).

The ask service gathers the facts — who asks (its token's identity and role), the run an async
ask parks (as the log has it), what each registered channel can render, the retention horizons,
the clock's now and a fresh group id — and ``decide_ask`` applies every rule in the documented
order (docs/asking.md#validation-order): the ask's own arguments, the channel, the acting
identity of a park, the checkpoint retention, the audience clamp, and the inline-image horizon.
Nothing here reads, writes or draws randomness; the service does what the decision says (bind
the ticket, admit, store inline images, append).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import msgspec

from layby_contracts.commands import Ask
from layby_contracts.errors import (
    BadInput,
    CrossIdentityAudienceError,
    Forbidden,
    ParkExpiryExceedsRetentionError,
)
from layby_contracts.events import InteractionAsked, RunStarted
from layby_domain.chat import check_chat
from layby_domain.formats import flat_fields, format_named
from layby_domain.formats.form import check_form_subset
from layby_domain.routing import clamp_routing
from layby_domain.validation import (
    AskSpec,
    call_interaction_id,
    check_channel,
    is_interaction_id,
    is_sha256_hex,
    is_waiter,
    validate_ask,
)
from layby_domain.webhooks import check_addresses, check_notify_url, check_secret, literal_address


@dataclass(frozen=True, slots=True)
class Asker:
    """An identity and its role: a ``user`` is restricted (it may address only itself and act
    only for its own runs); an ``operator`` is not."""

    identity: str
    role: str

    @property
    def restricted(self) -> bool:
        return self.role == "user"


@dataclass(frozen=True, slots=True)
class ChannelAbilities:
    """What a registered channel can deliver (docs/asking.md#channel-checks): forms or not, and
    its own check of a form it is asked to deliver (raises ``ValueError`` saying why not)."""

    forms: bool = False
    check_form: Callable[[Any, str], None] | None = None


@dataclass(frozen=True, slots=True)
class WebhookPolicy:
    """What the ask service knows for a ``notify_url``: the settings, the identities that have a
    signing secret, and the addresses the URL's host resolved to (None: not resolved)."""

    allow_http: bool = False
    allow_private: bool = False
    signers: frozenset[str] = frozenset()
    addresses: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class AskFacts:
    """What the ask service knows when it decides an ask."""

    asker: Asker
    now: datetime
    new_group_id: str
    """The group of a question that names none (the caller draws it)."""
    default_timeout: float
    token_key: str
    """The asking token's key id: a waiter's wakes are published under it (docs/security.md)."""
    run: RunStarted | None = None
    """The run an async ask parks, as its log has it (None: unknown, or not an async ask)."""
    channels: Mapping[str, ChannelAbilities] = field(default_factory=dict)
    public_base_url: bool = False
    """Whether ``INTERACTIONS_PUBLIC_BASE_URL`` is set (a channel question's callback URL needs it)."""
    retention_seconds: float | None = None
    """``LAYBY_CHECKPOINT_RETENTION``: no park may expire past now + this (None: no horizon)."""
    media_retention_seconds: float = 30 * 86400.0
    webhooks: WebhookPolicy = field(default_factory=WebhookPolicy)
    """The notify_url rules in force and what the ask's host resolved to (docs/webhooks.md)."""


@dataclass(frozen=True, slots=True)
class AskDecision:
    """The event to record, whether the ask's ticket must be bound first (a ticketed format no
    channel delivers), and which media items are inline images to store by reference."""

    event: InteractionAsked
    binds_ticket: bool
    inline: tuple[int, ...]


def decide_ask(cmd: Ask, facts: AskFacts) -> AskDecision:
    """Every rule of an ask, in the documented order; raises the first refusal."""
    spec = _validated(cmd, facts)
    fmt = format_named(spec.answer_format)
    acting = _acting(cmd, spec, facts)
    if cmd.notify_url is not None:
        _check_notify_url(cmd.notify_url, spec, acting.identity, facts.webhooks)
    audience = clamp_audience(acting, spec.audience)
    clamp_routing(spec.routing, asker=acting.identity, restricted=acting.restricted)
    now = facts.now
    parked = spec.mode == "async"
    event = InteractionAsked(
        interaction_id=cmd.interaction_id,
        group_id=spec.group_id or facts.new_group_id,
        question=spec.question,
        answer_format=spec.answer_format,
        format_payload=spec.format_payload,
        created_at=now,
        timeout_at=spec.expiry_at if spec.expiry_at is not None else now + timedelta(seconds=spec.timeout),
        sensitive=spec.sensitive,
        audience=audience,
        asked_by=acting.identity,
        # Only the asking token's holder may read wakes under its key id (docs/security.md).
        waiter=None if cmd.waiter is None else f"{facts.token_key}.{cmd.waiter}",
        mode="async" if parked else "sync",
        expiry_at=spec.expiry_at,
        run_id=cmd.run_id if parked else None,
        call=cmd.call if parked else None,
        media=spec.media,
        channel=spec.channel,
        recipient=spec.recipient,
        chat=cmd.chat,
        notify_url=cmd.notify_url,
        routing=spec.routing,
    )
    if spec.to == "caller":
        event = _caller_ask(event, spec, facts.run)
    return AskDecision(
        event=event,
        binds_ticket=fmt.needs_link(spec.channel),
        inline=inline_images(event, facts.media_retention_seconds),
    )


def _caller_ask(event: InteractionAsked, spec: AskSpec, run: RunStarted | None) -> InteractionAsked:
    """A caller ask parks on its run chain's subject (docs/caller-asks.md#parks-on-the-subject)."""
    if run is None:
        raise BadInput("to='caller' needs a run: ask inside a flow hosted by layby.Worker", field="to")
    return msgspec.structs.replace(
        event,
        to="caller",
        subject=run.subject or run.run_id,
        payload=spec.payload,
        on_expiry="resume" if spec.on_expiry == "resume" else "kill",
        chain=list(run.chain or [run.flow]),
        audience=None,
    )


def _validated(cmd: Ask, facts: AskFacts) -> AskSpec:
    """The ask's own rules (the same ``validate_ask`` the SDK ran), then the channel's."""
    if cmd.waiter is not None and not is_waiter(cmd.waiter):
        raise BadInput("waiter must be 8-64 of [A-Za-z0-9_-]", field="waiter")
    spec = validate_ask(
        msgspec.structs.replace(cmd, **_question_args(cmd)), default_timeout=facts.default_timeout
    )
    if spec.channel is not None:
        if not facts.public_base_url:
            raise BadInput(
                "channel questions need INTERACTIONS_PUBLIC_BASE_URL (an https:// origin) for their "
                "callback URL; it is not set on the ask service",
                field="channel",
            )
        schema = (spec.format_payload or {}).get("schema")
        check_channel_ask(facts.channels, spec.channel, spec.answer_format, spec.question, schema)
    _check_chat(cmd, spec, facts)
    _check_escalation_channels(spec, facts)
    if format_named(spec.answer_format).needs_link(spec.channel) and not is_sha256_hex(cmd.ticket_hash):
        raise BadInput("an external question needs its ticket's SHA-256 (64 hex)", field="ticket_hash")
    return spec


def _check_escalation_channels(spec: AskSpec, facts: AskFacts) -> None:
    """Each escalation step's channel is checked as an ask's own channel is, naming the step."""
    schema = (spec.format_payload or {}).get("schema")
    for index, step in enumerate(spec.routing.escalate or [] if spec.routing is not None else []):
        if step.channel is None:
            continue
        field = f"routing.escalate[{index}].channel"
        if not facts.public_base_url:
            raise BadInput(
                "channel questions need INTERACTIONS_PUBLIC_BASE_URL (an https:// origin) for their "
                "callback URL; it is not set on the ask service",
                field=field,
            )
        try:
            check_channel_ask(facts.channels, step.channel, spec.answer_format, spec.question, schema)
        except BadInput as exc:
            raise BadInput(exc.message, field=field if exc.field == "channel" else exc.field) from None


def _check_notify_url(url: str, spec: AskSpec, identity: str, policy: WebhookPolicy) -> None:
    """docs/webhooks.md#the-notify-url: the URL's shape, its host's addresses, and the asking
    identity's signing secret."""
    if spec.to == "caller":
        raise BadInput("notify_url belongs to questions for a person, not caller asks", field="notify_url")
    host = check_notify_url(url, allow_http=policy.allow_http)
    literal = literal_address(host)
    addresses = (literal,) if literal is not None else policy.addresses
    if addresses is None:
        raise BadInput(f"notify_url host {host!r} does not resolve", field="notify_url")
    check_addresses(host, addresses, allow_private=policy.allow_private)
    check_secret(identity, policy.signers)


def _check_chat(cmd: Ask, spec: AskSpec, facts: AskFacts) -> None:
    """The chat options (docs/channels.md#replies): their own rules, then every extra channel
    as the first was checked."""
    fmt = format_named(spec.answer_format)
    choices = fmt.choices(fmt.typed(spec.format_payload))
    if cmd.chat is not None and cmd.chat.reply_ids is not None and not choices:
        raise BadInput("reply_ids are only for questions with options", field="reply_ids")
    check_chat(cmd.chat, spec.channel, spec.recipient, len(choices) if choices else None)
    if cmd.chat is None or not cmd.chat.targets:
        return
    schema = (spec.format_payload or {}).get("schema")
    for target in cmd.chat.targets[1:]:
        check_channel(target.channel, target.recipient, None, None)
        check_channel_ask(facts.channels, target.channel, spec.answer_format, spec.question, schema)


_FLAT = ("options", "schema", "data", "pages", "link_url", "verifier", "action", "decisions")


def _question_args(cmd: Ask) -> dict[str, Any]:
    """The format and its arguments: from the typed question, or the flat fields an SDK older
    than it sends (never both)."""
    if cmd.format is None:
        return {"answer_format": cmd.answer_format, **{name: getattr(cmd, name) for name in _FLAT}}
    for name in _FLAT:
        if getattr(cmd, name) is not None:
            raise BadInput(f"{name} travels inside format when the ask carries format", field=name)
    args = flat_fields(cmd.format)
    if cmd.answer_format != args["answer_format"]:
        raise BadInput(
            f"answer_format {cmd.answer_format!r} does not match format {args['answer_format']!r}",
            field="answer_format",
        )
    return dict.fromkeys(_FLAT) | args


def check_channel_ask(
    channels: Mapping[str, ChannelAbilities], channel: str, answer_format: str, question: str, schema: Any
) -> None:
    """The registry-dependent ask-time rules (docs/asking.md#channel-checks), naming the field."""
    abilities = channels.get(channel)
    if abilities is None:
        known = ", ".join(sorted(channels)) or "none are configured in LAYBY_CHANNELS"
        raise BadInput(f"unknown channel {channel!r} (known: {known})", field="channel")
    if not format_named(answer_format).delivered_as_form:
        return
    if not abilities.forms:
        raise BadInput(f"channel {channel!r} does not deliver form questions", field="channel")
    check_form_subset(schema)
    if abilities.check_form is not None:
        try:
            abilities.check_form(schema, question)
        except ValueError as exc:
            raise BadInput(f"channel {channel!r} refuses this form: {exc}", field="schema") from None


def _acting(cmd: Ask, spec: AskSpec, facts: AskFacts) -> Asker:
    """Who the question is asked as: an async park asks as its run's identity."""
    if spec.mode == "async":
        assert spec.expiry_at is not None
        acting = park_identity(cmd.run_id, cmd.call, cmd.interaction_id, facts.asker, facts.run)
        check_retention(cmd.interaction_id, spec.expiry_at, facts.now, facts.retention_seconds)
        return acting
    if cmd.run_id is not None or cmd.call is not None:
        raise BadInput("run_id and call belong to async asks only", field="run_id")
    return facts.asker


def may_act_for(asker: Asker, run: RunStarted) -> bool:
    """A run is driven by its own identity, or by an unrestricted (operator) identity."""
    return not asker.restricted or asker.identity == run.identity


def park_identity(
    run_id: str | None, call: int | None, interaction_id: str, asker: Asker, run: RunStarted | None
) -> Asker:
    """For an async ask (or its ticket's reservation): the identity of the run it parks
    (docs/aggregates/run.md#identities), once the park is shown to belong to that run."""
    if run_id is None or call is None:
        raise BadInput(
            "mode='async' needs a resumable run: ask inside a flow hosted by layby.Worker", field="mode"
        )
    if not is_interaction_id(run_id):
        raise BadInput("run_id must be a uuid4 string", field="run_id")
    if call < 0 or interaction_id != call_interaction_id(run_id, call):
        raise BadInput("interaction_id does not belong to this run's call", field="interaction_id")
    if run is None:
        raise BadInput(f"run {run_id} does not exist", field="run_id")
    if not may_act_for(asker, run):
        raise Forbidden("this run belongs to another identity")
    return Asker(run.identity, run.role)


def check_retention(
    interaction_id: str, expiry_at: datetime, now: datetime, retention_seconds: float | None
) -> None:
    """A park that would outlive its checkpoint is refused
    (docs/aggregates/run.md#deadlines-and-checkpoint-retention)."""
    if retention_seconds is None:
        return
    horizon = now + timedelta(seconds=retention_seconds)
    if expiry_at <= horizon:
        return
    raise ParkExpiryExceedsRetentionError(
        f"park of interaction {interaction_id} refused: its expiry_at {expiry_at.isoformat()} "
        f"lies beyond the checkpoint retention horizon {horizon.isoformat()} "
        f"(LAYBY_CHECKPOINT_RETENTION={retention_seconds:g}s)",
        field="expiry_at",
        interaction_id=interaction_id,
    )


def clamp_audience(asker: Asker, audience: str | None) -> str | None:
    """Audience clamp on write (docs/asking.md#audience): a restricted identity asks only itself."""
    if audience is not None and (not isinstance(audience, str) or not audience.strip()):
        raise BadInput("audience must be a non-empty identity", field="audience")
    if not asker.restricted:
        return audience
    if audience is None:
        return asker.identity
    if audience != asker.identity:
        raise CrossIdentityAudienceError(
            f"identity {asker.identity!r} may address questions only to itself", field="audience"
        )
    return audience


def inline_images(event: InteractionAsked, media_retention_seconds: float) -> tuple[int, ...]:
    """Indexes of inline images; a question that would outlive their serving is refused."""
    inline = tuple(i for i, m in enumerate(event.media or []) if m.url.startswith("data:"))
    horizon = event.created_at + timedelta(seconds=media_retention_seconds)
    if inline and event.timeout_at > horizon:
        raise BadInput(
            f"media[{inline[0]}].url: an inline image is served for "
            f"LAYBY_MEDIA_RETENTION_SECONDS={media_retention_seconds:g}s, and this "
            "question would outlive it; link an https image instead",
            field=f"media[{inline[0]}].url",
        )
    return inline
