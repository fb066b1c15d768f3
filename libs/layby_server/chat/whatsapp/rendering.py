"""How the ``whatsapp`` channel shows things: a question as the bodies of Cloud API messages
(media first, then the question as text, reply buttons, a list, a Flow or a link button),
within WhatsApp's limits. Pure, so every format's shape is testable
(docs/channels.md#whatsapp)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from layby_contracts.channels import ChannelDelivery, ChannelNotification, ChannelTemplate
from layby_contracts.events import MediaItem
from layby_server.chat import common
from layby_server.chat.common import link_line

TEXT_LIMIT = 4096
BODY_LIMIT = 1024
"""An interactive message's body text (buttons, list, Flow, link button)."""
CAPTION_LIMIT = 1024
FILENAME_LIMIT = 240
"""A document's file name as the person's phone shows and saves it."""
MAX_BUTTONS = 3
BUTTON_TITLE = 20
BUTTON_ID = 256
MAX_ROWS = 10
"""Rows across all of a list's sections."""
ROW_TITLE = 24
ROW_ID = 200
LIST_BUTTON = 20
CTA_TEXT = 20
FLOW_TOKEN = 1000

YES, NO = "y", "n"
FORM_MARK = "form"
NOTIFICATION_MARK = "notification"
CHOOSE = "Choose"
OPEN = "Open"
OPEN_FORM = "Open the form"
FORM_RETRY = "Your last answer could not be accepted: {reason}"
FORM_GIVE_UP = "Sorry, your form could not be processed."
MAX_FORM_RESENDS = 5
"""A form the door refuses is sent again as a fresh Flow at most this many times."""
NOT_OPEN = "This question is no longer open."
# The media kinds WhatsApp sends as files (each its own message type), and which take a caption.
MEDIA = {"image", "document", "video", "audio"}
CAPTIONED = {"image", "document", "video"}


def yes_no_id(interaction_id: str, value: bool) -> str:
    return f"{interaction_id}{common.TAP_SEPARATOR}{YES if value else NO}"


def flow_token(interaction_id: str, resends: int) -> str:
    """The token a question's Flow carries: the question and how many times its form was sent
    again after a refusal (docs/channels.md#whatsapp-forms)."""
    return f"{interaction_id}{common.TAP_SEPARATOR}{FORM_MARK}{common.TAP_SEPARATOR}{resends}"


def notification_token(notification_id: str) -> str:
    return f"{NOTIFICATION_MARK}{common.TAP_SEPARATOR}{notification_id}"


def parse_flow_token(token: object) -> tuple[str, int] | tuple[None, str] | None:
    """``(interaction_id, resends)`` of a question's Flow, ``(None, notification_id)`` of a
    notification's, else None (a Flow Layby did not send)."""
    if not isinstance(token, str) or not token or len(token) > FLOW_TOKEN:
        return None
    mark, sep, notification = token.partition(common.TAP_SEPARATOR)
    if mark == NOTIFICATION_MARK and sep and notification:
        return None, notification
    head, sep, count = token.rpartition(common.TAP_SEPARATOR)
    interaction_id, sep2, mark = head.rpartition(common.TAP_SEPARATOR)
    if not sep or not sep2 or mark != FORM_MARK or not interaction_id:
        return None
    if not count.isdigit() or len(count) > 3:
        return None
    return interaction_id, int(count)


def text_message(text: str, *, preview: bool = False) -> dict[str, Any]:
    return {"type": "text", "text": {"body": cut(text, TEXT_LIMIT), "preview_url": preview}}


def media_message(item: MediaItem) -> dict[str, Any]:
    """One media item as its own message, by link."""
    media: dict[str, Any] = {"link": item.url}
    if item.caption and item.kind in CAPTIONED:
        media["caption"] = cut(item.caption, CAPTION_LIMIT)
    if item.filename and item.kind == "document":
        media["filename"] = cut(item.filename, FILENAME_LIMIT)
    return {"type": item.kind, item.kind: media}


def _interactive(body: str, interactive: dict[str, Any]) -> dict[str, Any]:
    return {"type": "interactive", "interactive": {**interactive, "body": {"text": body}}}


def _unique(titles: Sequence[str]) -> bool:
    return len(set(titles)) == len(titles)


def buttons_fit(ids: Sequence[str], titles: Sequence[str]) -> bool:
    """Reply buttons hold at most 3 unique, non-blank titles of at most 20 characters."""
    return (
        1 <= len(titles) <= MAX_BUTTONS
        and all(0 < len(t) <= BUTTON_TITLE and t.strip() for t in titles)
        and _unique(titles)
        and all(len(i) <= BUTTON_ID for i in ids)
    )


def list_fits(ids: Sequence[str], titles: Sequence[str]) -> bool:
    """A list holds at most 10 rows, unique non-blank titles of at most 24 characters."""
    return (
        1 <= len(titles) <= MAX_ROWS
        and all(0 < len(t) <= ROW_TITLE and t.strip() for t in titles)
        and _unique(titles)
        and all(len(i) <= ROW_ID for i in ids)
    )


def choices(body: str, ids: Sequence[str], titles: Sequence[str]) -> dict[str, Any] | None:
    """Reply buttons when they fit, else a list, else None (the caller falls back to text)."""
    if len(body) > BODY_LIMIT or not body:
        return None
    if buttons_fit(ids, titles):
        buttons = [
            {"type": "reply", "reply": {"id": i, "title": t}} for i, t in zip(ids, titles, strict=True)
        ]
        return _interactive(body, {"type": "button", "action": {"buttons": buttons}})
    if list_fits(ids, titles):
        rows = [{"id": i, "title": t} for i, t in zip(ids, titles, strict=True)]
        action = {"button": CHOOSE, "sections": [{"rows": rows}]}
        return _interactive(body, {"type": "list", "action": action})
    return None


def link_button(body: str, url: str, label: str = OPEN) -> dict[str, Any]:
    """A call-to-action button opening ``url`` (text with the link when the body is too long)."""
    if len(body) > BODY_LIMIT:
        return text_message(fit(body, f"\n\n{url}", TEXT_LIMIT))
    action = {"name": "cta_url", "parameters": {"display_text": label, "url": url}}
    return _interactive(body, {"type": "cta_url", "action": action})


def form_fields(schema: dict[str, Any] | None) -> list[dict[str, Any]]:
    """A form's properties as the Flow's screen shows them: name, label, kind, required,
    choices."""
    schema = schema or {}
    required = set(schema.get("required") or [])
    fields: list[dict[str, Any]] = []
    for name, raw in (schema.get("properties") or {}).items():
        prop = raw if isinstance(raw, dict) else {}
        item: dict[str, Any] = {
            "name": name,
            "label": str(prop.get("title") or name),
            "kind": str(prop.get("type") or "string"),
            "required": name in required,
        }
        if isinstance(prop.get("enum"), list):
            item["choices"] = [str(v) for v in prop["enum"]]
        fields.append(item)
    return fields


def flow_message(
    body: str,
    *,
    flow_id: str,
    screen: str,
    mode: str,
    token: str,
    schema: dict[str, Any] | None,
    data: dict[str, Any] | None,
    notice: str | None = None,
) -> dict[str, Any]:
    """A Flow opening on ``screen`` with the form's fields, its initial values and a notice (the
    door's reason for refusing the last answer)."""
    payload: dict[str, Any] = {"question": cut(body, BODY_LIMIT), "fields": form_fields(schema)}
    payload["values"] = data or {}
    if notice:
        payload["notice"] = notice
    text = fit(body, f"\n\n{notice}", BODY_LIMIT) if notice else cut(body, BODY_LIMIT)
    parameters: dict[str, Any] = {
        "flow_message_version": "3",
        "flow_id": flow_id,
        "flow_cta": OPEN_FORM,
        "flow_token": token,
        "mode": mode,
        "flow_action": "navigate",
        "flow_action_payload": {"screen": screen, "data": payload},
    }
    return _interactive(
        text or OPEN_FORM, {"type": "flow", "action": {"name": "flow", "parameters": parameters}}
    )


def question_message(
    delivery: ChannelDelivery,
    *,
    links: Sequence[MediaItem] = (),
    flow: tuple[str, str, str] | None = None,
    resends: int = 0,
    notice: str | None = None,
) -> dict[str, Any]:
    """The message that asks ``delivery``'s question. ``links`` are media items shown as lines
    (link media, and files WhatsApp could not fetch); ``flow`` is the configured
    ``(flow_id, screen, mode)`` a form opens, if any."""
    lines = [link_line(m) for m in [*(m for m in delivery.media or [] if m.kind not in MEDIA), *links]]
    suffix = "\n\n" + "\n".join(lines) if lines else ""
    iid, control = delivery.interaction_id, common.control_of(delivery)
    body = delivery.question + suffix
    if control == "choice":
        options = delivery.options or []
        ids = [common.tap_id(iid, i) for i in range(len(options))]
        found = choices(body, ids, options)
        if found is not None:
            return found
        blank = msgspec.structs.replace(delivery, question="")
        return text_message(fit(delivery.question, suffix + common.numbered_prompt(blank), TEXT_LIMIT))
    if control == "yes_no":
        found = choices(body, [yes_no_id(iid, True), yes_no_id(iid, False)], ["Yes", "No"])
        if found is not None:
            return found
        return text_message(fit(delivery.question, suffix + "\n\n" + common.YES_OR_NO, TEXT_LIMIT))
    if control == "fields":
        if flow is None:
            return link_button(body, delivery.callback_url, OPEN_FORM)
        flow_id, screen, mode = flow
        return flow_message(
            body,
            flow_id=flow_id,
            screen=screen,
            mode=mode,
            token=flow_token(iid, resends),
            schema=delivery.schema,
            data=delivery.data,
            notice=notice,
        )
    if control == "link":
        return link_button(body, delivery.callback_url)
    replies = delivery.suggested_replies or []
    if replies:
        found = choices(body, [common.tap_id(iid, i) for i in range(len(replies))], replies)
        if found is not None:
            return found
    return text_message(fit(delivery.question, suffix, TEXT_LIMIT))


def template_message(template: ChannelTemplate) -> dict[str, Any]:
    """An approved template by name and language, its body's ``{{n}}`` filled in order."""
    body: dict[str, Any] = {"name": template.name, "language": {"code": template.language}}
    if template.parameters:
        parameters = [{"type": "text", "text": p} for p in template.parameters]
        body["components"] = [{"type": "body", "parameters": parameters}]
    return {"type": "template", "template": body}


def notification_messages(
    notification: ChannelNotification, flow: tuple[str, str, str] | None
) -> list[dict[str, Any]]:
    """What ``notify`` sends, in order: a template alone; else each media item, then the text
    (with link media as lines), or a Flow when the notification carries a form."""
    if notification.template is not None:
        return [template_message(notification.template)]
    media = [m for m in notification.media or [] if m.kind in MEDIA]
    lines = [link_line(m) for m in notification.media or [] if m.kind not in MEDIA]
    text = fit(notification.message, "\n\n" + "\n".join(lines), TEXT_LIMIT) if lines else notification.message
    sent = [media_message(m) for m in media]
    if notification.schema is not None and flow is not None:
        flow_id, screen, mode = flow
        sent.append(
            flow_message(
                text,
                flow_id=flow_id,
                screen=screen,
                mode=mode,
                token=notification_token(notification.notification_id),
                schema=notification.schema,
                data=notification.data,
            )
        )
    else:
        sent.append(text_message(text))
    return sent


def cut(text: str, limit: int) -> str:
    """``text`` within ``limit`` characters (WhatsApp counts characters), an ellipsis marking a cut."""
    return common.cut(text, limit, len)


def fit(question: str, suffix: str, limit: int) -> str:
    return common.fit(question, suffix, limit, len)
