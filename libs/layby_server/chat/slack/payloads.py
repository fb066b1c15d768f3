"""How the ``slack`` channel reads what Slack posts: taps and menu picks (interactivity
actions), a submitted modal and a message event, each into ``InboundReply``s
(docs/channels.md#slack). A notification's controls name the notification instead of a
question (docs/channels.md#notifications-on-slack)."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qs

from layby_contracts.channels import InboundMalformed, InboundReply
from layby_server.chat import common
from layby_server.chat.slack.blocks import FORM_CALLBACK


def form_payload(body: bytes) -> dict[str, Any] | None:
    """The interactivity payload; None for a form without one (a slash command: not ours)."""
    try:
        fields = parse_qs(body.decode(), keep_blank_values=True, strict_parsing=True)
        if "payload" not in fields:
            return None
        payload = json.loads(fields["payload"][0])
    except (UnicodeDecodeError, ValueError):
        raise InboundMalformed("an interactivity request must carry payload=<JSON>") from None
    if not isinstance(payload, dict):
        raise InboundMalformed("the interactivity payload is not a JSON object")
    return payload


def _obj(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InboundMalformed(f"{what} is missing")
    return value


def _str(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise InboundMalformed(f"{what} is missing")
    return value


def _tap(value: Any) -> tuple[str, int]:
    parsed = common.parse_tap_id(value) if isinstance(value, str) else None
    if parsed is None:
        raise InboundMalformed("the action's value is not a Layby option id")
    return parsed


def action_replies(payload: dict[str, Any]) -> list[InboundReply]:
    user = _obj(payload.get("user"), "user")
    sender = _str(user.get("id"), "user.id")
    name = user.get("username") or user.get("name")
    chat = _str(_obj(payload.get("channel"), "channel").get("id"), "channel.id")
    message = (payload.get("container") or {}).get("message_ts")
    trigger = payload.get("trigger_id")
    context = {"trigger_id": trigger, "response_url": payload.get("response_url")}
    actions = payload.get("actions")
    if not isinstance(actions, list):
        raise InboundMalformed("block_actions without actions")
    base: dict[str, Any] = {
        "sender": sender,
        "chat": chat,
        "sender_name": name if isinstance(name, str) else None,
        "message": message if isinstance(message, str) else None,
        "event_id": trigger if isinstance(trigger, str) else None,
        "context": context,
    }
    replies: list[InboundReply] = []
    for action in actions:
        action_id = _str(_obj(action, "action").get("action_id"), "action.action_id")
        verb, _, rest = action_id.removeprefix("layby:").partition(":")
        if not action_id.startswith("layby:") or verb == "link":
            continue  # not ours, or a link button (its page takes the answer)
        replies.append(_action_reply(payload, action, base, action_id=action_id, verb=verb, rest=rest))
    return replies


def _action_reply(
    payload: dict[str, Any],
    action: dict[str, Any],
    base: dict[str, Any],
    *,
    action_id: str,
    verb: str,
    rest: str,
) -> InboundReply:
    """The reply one of Layby's actions (``layby:<verb>:<rest>``) stands for."""
    match verb:
        case "tap":
            iid, index = _tap(action.get("value"))
            return InboundReply(kind="tap", interaction_id=iid, index=index, **base)
        case "pick":
            iid, index = _tap(_obj(action.get("selected_option"), "selected_option").get("value"))
            return InboundReply(kind="tap", interaction_id=iid, index=index, **base)
        case "yes" | "no" if rest:
            return InboundReply(kind="yes_no", interaction_id=rest, value=verb == "yes", **base)
        case "open" if rest:
            return InboundReply(kind="open_form", interaction_id=rest, **base)
        case "say" if rest:
            return _notification_option(rest, action, base)
        case "nform" if rest:
            return _notification_form(rest, payload, action, base)
        case _:
            raise InboundMalformed(f"unknown action {action_id[:80]!r}")


def _notification_option(rest: str, action: dict[str, Any], base: dict[str, Any]) -> InboundReply:
    """A notification's option: its text is the person's message
    (docs/channels.md#notifications-on-slack)."""
    nid, _, position = rest.rpartition(":")
    text = action.get("value")
    if not nid or not position.isdigit() or not isinstance(text, str) or not text:
        raise InboundMalformed("a notification's option must name the notification and carry its text")
    return InboundReply(kind="tap", notification_id=nid, index=int(position), value=text, **base)


def _notification_form(
    rest: str, payload: dict[str, Any], action: dict[str, Any], base: dict[str, Any]
) -> InboundReply:
    """A notification's form: the plugin opens the modal itself (there is no question)."""
    form = action.get("value")
    shown = (payload.get("message") or {}).get("text")
    extra = {
        "form": form if isinstance(form, str) else "",
        "text": shown if isinstance(shown, str) else "",
    }
    return InboundReply(
        kind="open_form", notification_id=rest, **(base | {"context": base["context"] | extra})
    )


def submission_reply(payload: dict[str, Any]) -> InboundReply:
    user = _obj(payload.get("user"), "user")
    view = _obj(payload.get("view"), "view")
    if view.get("callback_id") != FORM_CALLBACK:
        raise InboundMalformed("view_submission of a view Layby did not open")
    try:
        meta = json.loads(_str(view.get("private_metadata"), "view.private_metadata"))
        nid = meta.get("notification_id")
        iid = None if isinstance(nid, str) and nid else _str(meta["interaction_id"], "interaction_id")
    except (ValueError, KeyError, TypeError, AttributeError):
        raise InboundMalformed("view.private_metadata is not Layby's") from None
    values = _obj(_obj(view.get("state"), "view.state").get("values"), "view.state.values")
    elements = {b.get("block_id"): b.get("element") for b in view.get("blocks") or [] if isinstance(b, dict)}
    answer: dict[str, Any] = {}
    for field, actions in values.items():
        state = _obj(_obj(actions, f"view.state.values.{field}").get("value"), f"{field}.value")
        element = elements.get(field)
        decimal = isinstance(element, dict) and element.get("is_decimal_allowed") is True
        value = _state_value(field, state, decimal=decimal)
        if value is not None:
            answer[field] = value
    trigger = payload.get("trigger_id")
    name = user.get("username") or user.get("name")
    chat = meta.get("chat")
    message = meta.get("message")
    return InboundReply(
        kind="submitted",
        sender=_str(user.get("id"), "user.id"),
        sender_name=name if isinstance(name, str) else None,
        chat=chat if isinstance(chat, str) else "",
        message=message if isinstance(message, str) else None,
        interaction_id=iid,
        notification_id=nid if iid is None else None,
        value=answer,
        event_id=trigger if isinstance(trigger, str) else None,
        context={"trigger_id": trigger, "view_id": view.get("id"), "fields": list(values)},
    )


def _state_value(field: str, state: dict[str, Any], *, decimal: bool) -> Any:
    """One modal field's value, typed by the element Layby put there (blank → None)."""
    kind = state.get("type")
    if kind == "checkboxes":
        return bool(state.get("selected_options"))
    if kind == "static_select":
        option = state.get("selected_option")
        return option.get("value") if isinstance(option, dict) else None
    raw = state.get("value")
    if raw is None or raw == "":
        return None
    if not isinstance(raw, str):
        raise InboundMalformed(f"{field}: the value is not text")
    if kind == "number_input":
        try:
            return float(raw) if decimal else int(raw)
        except ValueError:
            return raw  # not a number of the field's kind: the question's schema refuses it, named
    return raw


def typed_reply(envelope: dict[str, Any]) -> InboundReply | None:
    event = envelope.get("event")
    if not isinstance(event, dict) or event.get("type") != "message":
        return None
    if event.get("subtype") or event.get("bot_id") or event.get("bot_profile"):
        return None  # edits, joins, deletions, bots (ourselves included)
    user, channel, text = event.get("user"), event.get("channel"), event.get("text")
    if not isinstance(user, str) or not isinstance(channel, str) or not isinstance(text, str):
        raise InboundMalformed("a message event needs user, channel and text")
    bots = {
        a.get("user_id")
        for a in envelope.get("authorizations") or []
        if isinstance(a, dict) and a.get("is_bot")
    }
    if user in bots:
        return None
    thread = event.get("thread_ts")
    threaded = isinstance(thread, str) and thread != event.get("ts")
    direct = event.get("channel_type") == "im" or channel.startswith("D")
    if not threaded and not direct:
        return None  # channel chatter outside a question's thread is not addressed to us
    event_id = envelope.get("event_id")
    return InboundReply(
        kind="typed",
        sender=user,
        chat=channel,
        message=thread if threaded else None,
        value=text,
        event_id=event_id if isinstance(event_id, str) else None,
        direct=direct,
    )
