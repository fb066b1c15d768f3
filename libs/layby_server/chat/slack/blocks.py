"""How the ``slack`` channel shows things in Block Kit: a question's message (its text, media
and controls), a notification's message, the form's modal, the lines an edited message keeps,
and Slack's limits on each (docs/channels.md#slack)."""

from __future__ import annotations

import base64
import binascii
import json
import re
import zlib
from collections.abc import Mapping
from typing import Any

from layby_contracts.channels import ChannelDelivery, ChannelNotification
from layby_contracts.events import MediaItem
from layby_server.chat import common

SECTION_TEXT = 3000
MESSAGE_TEXT = 40_000
MAX_SECTIONS = 10  # a question longer than 30,000 characters is cut (the `text` keeps more)
CONTROL_TEXT = 75  # a button's or an option's text
OPTION_VALUE = 150
MAX_ELEMENTS = 25  # elements in one actions block
MAX_BUTTONS = 5  # a select with more options gets a menu
MAX_MENU = 100
MODAL_BLOCKS = 100
MODAL_TITLE = 24
LABEL = 2000
BLOCK_ID = 255
BUTTON_VALUE = 2000
PRIVATE_METADATA = 3000
FORM_CALLBACK = "layby:form"
ANSWER_IN_THREAD = "Reply in this thread to answer."


def escape(text: str) -> str:
    """Slack's markup treats ``&``, ``<`` and ``>`` as control characters (mentions, links)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _plain(text: str, limit: int = SECTION_TEXT) -> dict[str, Any]:
    return {"type": "plain_text", "text": cut(text, limit) or " ", "emoji": True}


def question_sections(question: str) -> list[dict[str, Any]]:
    # plain_text, never mrkdwn: a question must not be able to mention @channel or hide a link.
    text = question.strip() or "(no text)"
    chunks = [text[i : i + SECTION_TEXT] for i in range(0, len(text), SECTION_TEXT)]
    if len(chunks) > MAX_SECTIONS:
        chunks = chunks[:MAX_SECTIONS]
        chunks[-1] = cut(chunks[-1], SECTION_TEXT)
    return [{"type": "section", "text": _plain(chunk)} for chunk in chunks]


def context_block(text: str) -> dict[str, Any]:
    return {"type": "context", "elements": [_plain(text)]}


def _button(text: str, action_id: str, value: str, *, style: str | None = None) -> dict[str, Any]:
    button: dict[str, Any] = {
        "type": "button",
        "text": _plain(text, CONTROL_TEXT),
        "action_id": action_id,
        "value": value,
    }
    if style:
        button["style"] = style
    return button


def _fits(labels: list[str], most: int) -> bool:
    return 0 < len(labels) <= most and all(0 < len(label) <= CONTROL_TEXT for label in labels)


def fallback_text(delivery: ChannelDelivery) -> str:
    if common.control_of(delivery) == "choice" and not _fits(delivery.options or [], MAX_MENU):
        return escape(cut(common.numbered_prompt(delivery), MESSAGE_TEXT))
    return escape(cut(delivery.question, MESSAGE_TEXT))


def message_blocks(delivery: ChannelDelivery) -> list[dict[str, Any]]:
    """The question as Block Kit: its text, its media, then the controls of its format."""
    iid = delivery.interaction_id
    options = delivery.options or []
    blocks: list[dict[str, Any]] = []
    control = common.control_of(delivery)
    numbered = control == "choice" and not _fits(options, MAX_MENU)
    blocks += question_sections(common.numbered_prompt(delivery) if numbered else delivery.question)
    blocks += _media_blocks(delivery.media)
    if control == "yes_no":
        yes = _button("Yes", f"layby:yes:{iid}", iid, style="primary")
        blocks.append(_actions(iid, [yes, _button("No", f"layby:no:{iid}", iid)]))
    elif control == "choice" and _fits(options, MAX_BUTTONS):
        blocks.append(_tap_buttons(iid, options))
    elif control == "choice" and not numbered:
        menu = {
            "type": "static_select",
            "action_id": f"layby:pick:{iid}",
            "placeholder": _plain("Choose an option", CONTROL_TEXT),
            "options": [
                {"text": _plain(option, CONTROL_TEXT), "value": common.tap_id(iid, n)}
                for n, option in enumerate(options)
            ],
        }
        blocks.append(_actions(iid, [menu]))
    elif control == "fields":
        blocks.append(_actions(iid, [_button("Open form", f"layby:open:{iid}", iid, style="primary")]))
    elif control == "link":
        link = _button("Open", f"layby:link:{iid}", iid, style="primary")
        link["url"] = delivery.callback_url
        blocks.append(_actions(iid, [link]))
    elif control == "free_text" and _fits(delivery.suggested_replies or [], MAX_ELEMENTS):
        blocks.append(_tap_buttons(iid, delivery.suggested_replies or []))
    if control == "free_text" or numbered:
        blocks.append(context_block(ANSWER_IN_THREAD))
    return blocks


def _tap_buttons(iid: str, labels: list[str]) -> dict[str, Any]:
    elements = [
        _button(label, f"layby:tap:{common.tap_id(iid, n)}", common.tap_id(iid, n))
        for n, label in enumerate(labels)
    ]
    return _actions(iid, elements)


def _actions(iid: str, elements: list[dict[str, Any]]) -> dict[str, Any]:
    """A question's row of controls; its block id names the question."""
    return {"type": "actions", "block_id": f"layby:{iid}", "elements": elements}


def _media_blocks(media: list[MediaItem] | None) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    links: list[str] = []
    for item in media or []:
        if item.kind == "image" and len(item.url) <= SECTION_TEXT:
            block: dict[str, Any] = {
                "type": "image",
                "image_url": item.url,
                "alt_text": cut(item.caption or "image", LABEL),
            }
            if item.caption:
                block["title"] = _plain(item.caption, LABEL)
            blocks.append(block)
        else:
            name = item.caption or item.filename or item.kind
            url = item.url.replace("|", "%7C").replace(">", "%3E")
            links.append(f"<{escape(url)}|{escape(name)}>")
    if links:
        # A context block holds at most 10 elements.
        blocks += [
            {"type": "context", "elements": [{"type": "mrkdwn", "text": cut(line, SECTION_TEXT)}]}
            for line in links[:10]
        ]
    return blocks


def field_label(name: str, prop: Mapping[str, Any]) -> str:
    title = prop.get("title")
    return title if isinstance(title, str) and title else name


def enum_labels(name: str, prop: Mapping[str, Any], data: Mapping[str, Any] | None) -> list[str]:
    enum = [str(v) for v in prop.get("enum") or []]
    labels = (data or {}).get("options")
    given = labels.get(name) if isinstance(labels, dict) else None
    if isinstance(given, list) and len(given) == len(enum) and all(isinstance(g, str) for g in given):
        return list(given)
    if isinstance(given, dict):
        return [str(given.get(v, v)) for v in enum]
    return enum


def modal_view(
    delivery: ChannelDelivery, chat: str | None = None, message: str | None = None
) -> dict[str, Any]:
    """A question's form as a modal: one input block per property, ``block_id`` = its name."""
    meta = {"interaction_id": delivery.interaction_id, "chat": chat, "message": message}
    return form_view(delivery.question, delivery.schema or {}, delivery.data, meta)


def form_view(
    question: str, schema: Mapping[str, Any], data: Mapping[str, Any] | None, meta: Mapping[str, Any]
) -> dict[str, Any]:
    """A form as a modal (a question's, or a notification's ask-less one): one input block per
    property, ``block_id`` = the property's name; ``meta`` (which question or notification, and
    where its message is) rides in ``private_metadata`` back to the submission."""
    required = set(schema.get("required") or [])
    prefill = (data or {}).get("values") or {}
    blocks: list[dict[str, Any]] = [{"type": "section", "text": _plain(question)}]
    for name, prop in (schema.get("properties") or {}).items():
        initial = prefill.get(name) if isinstance(prefill, dict) else None
        blocks.append(
            {
                "type": "input",
                "block_id": name,
                "label": _plain(field_label(name, prop), LABEL),
                # An unticked box is the answer "false", so the field can never be left unanswered.
                "optional": prop.get("type") == "boolean" or name not in required,
                "element": {"action_id": "value", **_form_element(name, prop, data, initial)},
            }
        )
    return {
        "type": "modal",
        "callback_id": FORM_CALLBACK,
        "private_metadata": json.dumps(dict(meta), separators=(",", ":")),
        "title": _plain(question.strip() or "Answer", MODAL_TITLE),
        "submit": _plain("Submit", MODAL_TITLE),
        "close": _plain("Cancel", MODAL_TITLE),
        "blocks": blocks,
    }


def _form_element(
    name: str, prop: Mapping[str, Any], data: Mapping[str, Any] | None, initial: Any
) -> dict[str, Any]:
    """The input element of one property, with the prefilled value it shows (``initial``)."""
    kind = prop.get("type")
    if kind == "boolean":
        return _checkbox(initial)
    if kind in ("integer", "number"):
        return _number_input(kind == "number", initial)
    if "enum" in prop:
        return _select(name, prop, data, initial)
    return _text_input(prop, initial)


def _checkbox(initial: Any) -> dict[str, Any]:
    options = [{"text": _plain("Yes", CONTROL_TEXT), "value": "true"}]
    element: dict[str, Any] = {"type": "checkboxes", "options": options}
    if initial is True:
        element["initial_options"] = options
    return element


def _number_input(decimal: bool, initial: Any) -> dict[str, Any]:
    element: dict[str, Any] = {"type": "number_input", "is_decimal_allowed": decimal}
    if isinstance(initial, int | float) and not isinstance(initial, bool):
        element["initial_value"] = str(initial)
    return element


def _select(
    name: str, prop: Mapping[str, Any], data: Mapping[str, Any] | None, initial: Any
) -> dict[str, Any]:
    options = [
        {"text": _plain(text, CONTROL_TEXT), "value": str(value)}
        for value, text in zip(prop["enum"], enum_labels(name, prop, data), strict=True)
    ]
    element: dict[str, Any] = {"type": "static_select", "options": options}
    chosen = [o for o in options if o["value"] == initial]
    if chosen:
        element["initial_option"] = chosen[0]
    return element


def _text_input(prop: Mapping[str, Any], initial: Any) -> dict[str, Any]:
    element: dict[str, Any] = {"type": "plain_text_input", "multiline": (prop.get("maxLength") or 0) > 150}
    if isinstance(initial, str) and initial:
        element["initial_value"] = initial
    return element


# -- notifications (docs/channels.md#notifications-on-slack) -------------------------------------


def notification_text(notification: ChannelNotification) -> str:
    """The message's ``text`` (notifications, a screen reader): escaped, within Slack's limit."""
    return escape(cut(notification.message, MESSAGE_TEXT))


def notification_blocks(notification: ChannelNotification, form: str | None = None) -> list[dict[str, Any]]:
    """A notification as Block Kit: its text as plain sections, its media, then one button per
    option (its value is the option's text: there is no question to check an index against)
    and, with a form, an *Open form* button carrying ``form`` (``pack_form``)."""
    nid = notification.notification_id
    blocks = question_sections(notification.message)
    blocks += _media_blocks(notification.media)
    elements = [
        _button(" ".join(option.split()) or str(n + 1), f"layby:say:{nid}:{n}", option)
        for n, option in enumerate(notification.options or [])
    ]
    if form is not None:
        elements.append(_button("Open form", f"layby:nform:{nid}", form, style="primary"))
    if elements:
        blocks.append({"type": "actions", "block_id": f"layby:n:{nid}", "elements": elements})
    return blocks


FORM_PREFIX = "f1."


def pack_form(schema: Mapping[str, Any], data: Mapping[str, Any] | None) -> str:
    """A notification's form as an *Open form* button's value: its schema and data, compressed
    (``FORM_PREFIX`` + URL-safe base64 of deflated JSON). Slack keeps nothing for Layby, and a
    notification has no record a tap could look up, so the button carries the form itself."""
    raw = json.dumps({"s": schema, "d": data}, separators=(",", ":")).encode()  # field order kept
    return FORM_PREFIX + base64.urlsafe_b64encode(zlib.compress(raw, 9)).decode()


def unpack_form(value: str) -> tuple[dict[str, Any], dict[str, Any] | None] | None:
    """The schema and data ``pack_form`` made, else None (not Layby's, or damaged)."""
    if not value.startswith(FORM_PREFIX) or len(value) > BUTTON_VALUE:
        return None
    try:
        raw = zlib.decompressobj().decompress(
            base64.urlsafe_b64decode(value[len(FORM_PREFIX) :]), 64 * BUTTON_VALUE
        )
        form = json.loads(raw)
    except (binascii.Error, zlib.error, ValueError):
        return None
    if not isinstance(form, dict):
        return None
    schema, data = form.get("s"), form.get("d")
    if not isinstance(schema, dict) or not isinstance(data, dict | None):
        return None
    return schema, data


def unescape(text: str) -> str:
    """``escape`` undone (a message's ``text`` as Slack hands it back)."""
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def field_named(reason: str, fields: list[str]) -> str:
    """The field a rejection's reason names (the longest that appears as a word), else the first."""
    named = [f for f in fields if re.search(rf"(?<![\w-]){re.escape(f)}(?![\w-])", reason)]
    return max(named, key=len) if named else fields[0]
