"""Deciding a one-way notification (docs/notifications.md): pure rules, shared by the SDK (before
anything leaves the process) and the ask service (the authority, before anything is recorded or
sent).

``validate_notify`` checks the arguments alone (every error a ``BadInput`` naming the field);
``decide_notify`` adds what the ask service knows — who sends it, what each registered channel
can do, whether ``INTERACTIONS_PUBLIC_BASE_URL`` is set — and says what to do: send on the
channel, record to the feed, or both. Nothing here reads, writes or draws randomness.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

from layby_contracts.channels import NOTIFY_FLAGS
from layby_contracts.errors import BadInput, CrossIdentityAudienceError, UnsupportedError
from layby_contracts.notification import ChannelTemplate, NotificationFields
from layby_domain.ask import Asker
from layby_domain.formats.form import check_form_extras, check_form_subset, check_schema
from layby_domain.media import validate_media
from layby_domain.values import nul_path

MESSAGE_MAX_CHARS = 65536
"""A notification's text (docs/notifications.md#the-rules)."""
NAME_MAX_CHARS = 512
"""``recipient``, ``audience`` (and a ``sender_identity``, which is refused anyway)."""
OPTIONS_MAX_ITEMS = 10
OPTION_MAX_CHARS = 1000
TEMPLATE_PART_MAX_CHARS = 512
"""A template's ``name`` and ``language``, and each of its parameters (the message's own cap
bounds their total)."""

WHAT = {
    "media": "media notifications",
    "template": "template notifications",
    "options": "interactive notifications",
    "schema": "form notifications",
}
"""How a 501 names the capability a field needs (docs/notifications.md#what-a-channel-supports)."""


class NotifySpec(NotificationFields, frozen=True, kw_only=True):
    """A notification whose fields passed every rule that needs no registry (its
    ``sender_identity`` is always None: a sender is never taken from the arguments)."""


@dataclass(frozen=True, slots=True)
class NotifyAbilities:
    """What a registered channel can do with a notification: send one at all (it has
    ``notify``), which fields its capability flags allow, and its own check of a form."""

    notify: bool = False
    flags: frozenset[str] = frozenset()
    """The fields (``media``, ``template``, ``options``, ``schema``) whose flag it sets."""
    check_form: Callable[[Any, str], None] | None = None


def abilities_of(plugin: object) -> NotifyAbilities:
    """A loaded plugin's notification abilities: ``notify`` present, and each flag of
    ``NOTIFY_FLAGS`` that is truthy on it (an absent flag is False)."""
    return NotifyAbilities(
        notify=callable(getattr(plugin, "notify", None)),
        flags=frozenset(name for name, flag in NOTIFY_FLAGS.items() if getattr(plugin, flag, False)),
        check_form=getattr(plugin, "validate_form_schema", None),
    )


@dataclass(frozen=True, slots=True)
class NotifyFacts:
    """What the ask service knows when it decides a notification."""

    sender: Asker
    channels: Mapping[str, NotifyAbilities] = field(default_factory=dict)
    public_base_url: bool = False
    """Whether ``INTERACTIONS_PUBLIC_BASE_URL`` is set (an inline image sent on a channel needs it)."""


@dataclass(frozen=True, slots=True)
class NotifyDecision:
    """What to do: ``send`` on ``spec.channel``, ``record`` to the feed (the audience's own feed
    when ``spec.audience`` is set, always the shared one), and which media items are inline images
    to store by reference first."""

    spec: NotifySpec
    send: bool
    record: bool
    inline: tuple[int, ...]


def _text(value: object, name: str, limit: int) -> str:
    if not isinstance(value, str) or not value.strip():
        raise BadInput(f"{name} must be a non-blank string", field=name)
    if len(value) > limit:
        raise BadInput(f"{name} is {len(value)} characters; the limit is {limit}", field=name)
    if "\x00" in value:
        raise BadInput(f"{name} must not contain NUL characters", field=name)
    return value


def _optional(value: object, name: str, limit: int) -> str | None:
    return None if value is None else _text(value, name, limit)


def check_template(template: object) -> ChannelTemplate | None:
    """``{"name", "language", "parameters"?}``: both names non-blank, parameters a list of
    strings (docs/notifications.md#templates)."""
    if template is None:
        return None
    if isinstance(template, ChannelTemplate):
        raw: object = msgspec.to_builtins(template)
    else:
        raw = template
    if not isinstance(raw, dict):
        raise BadInput("template must be an object with name, language and parameters", field="template")
    for key in raw:
        if key not in ("name", "language", "parameters"):
            raise BadInput(f"template has an unknown field {key!r}", field=f"template.{key}")
    name = _text(raw.get("name"), "template.name", TEMPLATE_PART_MAX_CHARS)
    language = _text(raw.get("language"), "template.language", TEMPLATE_PART_MAX_CHARS)
    parameters = raw.get("parameters", [])
    if not isinstance(parameters, list):
        raise BadInput("template.parameters must be a list of strings", field="template.parameters")
    for index, value in enumerate(parameters):
        where = f"template.parameters[{index}]"
        if not isinstance(value, str):
            raise BadInput(f"{where} must be a string", field=where)
        if len(value) > TEMPLATE_PART_MAX_CHARS:
            raise BadInput(
                f"{where} is {len(value)} characters; the limit is {TEMPLATE_PART_MAX_CHARS}", field=where
            )
    return ChannelTemplate(name=name, language=language, parameters=list(parameters))


def check_notify_options(options: object) -> list[str] | None:
    """Quick replies: a non-empty list of at most 10 non-blank strings of at most 1000 characters."""
    if options is None:
        return None
    if not isinstance(options, list | tuple):
        raise BadInput("options must be a list of strings", field="options")
    if not options:
        raise BadInput("options must be a non-empty list when present", field="options")
    if len(options) > OPTIONS_MAX_ITEMS:
        raise BadInput(f"options has {len(options)} items; the limit is {OPTIONS_MAX_ITEMS}", field="options")
    return [_text(value, f"options[{index}]", OPTION_MAX_CHARS) for index, value in enumerate(options)]


def validate_notify(notification: NotificationFields) -> NotifySpec:
    """Every rule that needs no registry, in the documented order
    (docs/notifications.md#the-rules); raises ``BadInput`` naming the first bad field."""
    message: object = notification.message
    channel: object = notification.channel
    schema: object = notification.schema
    data: object = notification.data
    pages: object = notification.pages
    if notification.sender_identity is not None:
        raise BadInput(
            "sender_identity is not accepted: the sender is the identity of the caller's token",
            field="sender_identity",
        )
    text = _text(message, "message", MESSAGE_MAX_CHARS)
    if channel is not None and (not isinstance(channel, str) or not channel.strip()):
        raise BadInput("channel must name a registered channel", field="channel")
    to = _optional(notification.recipient, "recipient", NAME_MAX_CHARS)
    aud = _optional(notification.audience, "audience", NAME_MAX_CHARS)
    tmpl = check_template(notification.template)
    opts = check_notify_options(notification.options)
    items = validate_media(notification.media)
    form: dict[str, Any] | None = None
    extras: dict[str, Any] = {}
    if schema is not None:
        where = nul_path(schema)
        if where is not None:
            raise BadInput("schema must not contain NUL characters", field="schema")
        form = check_schema(schema)
        for name, value in (("data", data), ("pages", pages)):
            if nul_path(value) is not None:
                raise BadInput(f"{name} must not contain NUL characters", field=name)
        extras = check_form_extras(form, data, pages)
    else:
        for name, value in (("data", data), ("pages", pages)):
            if value is not None:
                raise BadInput(f"{name} belongs to a form notification: it needs a schema", field=name)
    if tmpl is not None and items is not None:
        raise BadInput("media and template are exclusive: send one or the other", field="template")
    if tmpl is not None and opts is not None:
        raise BadInput("options and template are exclusive: send one or the other", field="template")
    if channel is None:
        for name, value in (("media", items), ("template", tmpl), ("options", opts), ("schema", form)):
            if value is not None:
                raise BadInput(f"{name} needs a channel: the feed records the message only", field=name)
    return NotifySpec(
        message=text,
        channel=channel if isinstance(channel, str) else None,
        recipient=to,
        audience=aud,
        media=items,
        template=tmpl,
        options=opts,
        schema=form,
        data=extras.get("data"),
        pages=extras.get("pages"),
    )


def check_notify_channel(
    channels: Mapping[str, NotifyAbilities], spec: NotifySpec, *, public_base_url: bool
) -> None:
    """The registry's rules (docs/notifications.md#what-a-channel-supports): a known channel
    (400), one that can notify and has the flag of every field it is handed (501), a form in the
    renderable subset and accepted by the plugin (400), an inline image with a public origin to
    serve it from (400)."""
    name = spec.channel
    assert name is not None
    ability = channels.get(name)
    if ability is None:
        known = ", ".join(sorted(channels)) or "none are configured in LAYBY_CHANNELS"
        raise BadInput(f"unknown channel {name!r} (known: {known})", field="channel")
    if not ability.notify:
        raise UnsupportedError(f"channel {name!r} does not support notifications", field="channel")
    for key in ("media", "template", "options", "schema"):
        if getattr(spec, key) is not None and key not in ability.flags:
            raise UnsupportedError(f"channel {name!r} does not support {WHAT[key]}", field=key)
    if spec.schema is not None:
        check_form_subset(spec.schema)
        if ability.check_form is not None:
            try:
                ability.check_form(spec.schema, spec.message)
            except ValueError as exc:
                raise BadInput(f"channel {name!r} refuses this form: {exc}", field="schema") from None
    for index, item in enumerate(spec.media or []):
        if item.url.startswith("data:") and not public_base_url:
            where = f"media[{index}].url"
            raise BadInput(
                f"{where}: an inline image sent on a channel needs INTERACTIONS_PUBLIC_BASE_URL "
                "(an https:// origin) to be served from; link an https image instead",
                field=where,
            )


def clamp_notify_audience(sender: Asker, audience: str | None) -> str | None:
    """A restricted identity notifies only itself: its audience is its own id, whether it named
    it or not; naming another is refused (docs/notifications.md#audience)."""
    if not sender.restricted:
        return audience
    if audience is not None and audience != sender.identity:
        raise CrossIdentityAudienceError(
            f"identity {sender.identity!r} may address notifications only to itself", field="audience"
        )
    return sender.identity


def decide_notify(spec: NotifySpec, facts: NotifyFacts) -> NotifyDecision:
    """Every rule with what the ask service knows, before anything is stored or sent: the
    channel's rules, then the audience clamp. With no channel the feed records it; with one it is
    sent, and recorded as well when it has an audience (a restricted sender's always has one)."""
    if spec.channel is not None:
        check_notify_channel(facts.channels, spec, public_base_url=facts.public_base_url)
    audience = clamp_notify_audience(facts.sender, spec.audience)
    if audience != spec.audience:
        spec = msgspec.structs.replace(spec, audience=audience)
    send = spec.channel is not None
    inline = tuple(i for i, m in enumerate(spec.media or []) if m.url.startswith("data:"))
    return NotifyDecision(spec=spec, send=send, record=not send or audience is not None, inline=inline)


_PATH = re.compile(r" - at `\$\.?([^`]*)`$")
_MISSING = re.compile(r"missing required field `([^`]*)`")


def field_of(exc: Exception) -> str | None:
    """The field a msgspec decoding error names (``... - at `$.media[0].url```), as the doors and
    commands name fields (``media[0].url``), a missing field's own name included; None when it
    names none."""
    text = str(exc)
    match = _PATH.search(text)
    where = match.group(1) if match else ""
    missing = _MISSING.search(text)
    if missing is not None:
        where = f"{where}.{missing.group(1)}" if where else missing.group(1)
    return where or None
