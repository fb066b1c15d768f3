"""How the ``telegram`` channel shows things: a question as one message's text and inline
keyboard, within Telegram's limits (counted in UTF-16 units), and the line a tap's answer shows.
Pure, so every format's shape is testable (docs/channels.md#telegram)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import msgspec
from telegram import InlineKeyboardButton, InlineKeyboardMarkup, ReplyParameters, WebAppInfo

from layby_contracts.channels import ChannelDelivery, ChannelNotification, ReplyOutcome
from layby_contracts.events import MediaItem
from layby_server.chat import common
from layby_server.chat.common import link_line

TEXT_LIMIT = 4096
CAPTION_LIMIT = 1024
CALLBACK_DATA_BYTES = 64
ANSWER_TEXT_LIMIT = 200
# Telegram refuses bigger inline keyboards; the numbers are observed, not documented.
MAX_BUTTONS = 100
BUTTON_LABEL_LIMIT = 64

YES, NO = "y", "n"
NOTE = "n"
"""The first part of a notification option's callback data: ``n:<notification id>:<index>``."""
ANSWERED = "Answered."
ALREADY = "This question was already answered."
NOT_OPEN = "This question is no longer open."
# The media kinds Telegram sends as files, each with the Bot method that sends it.
SEND = {"image": "send_photo", "document": "send_document", "video": "send_video", "audio": "send_audio"}


def yes_no_id(interaction_id: str, value: bool) -> str:
    return f"{interaction_id}{common.TAP_SEPARATOR}{YES if value else NO}"


def _fits(data: str) -> bool:
    return 1 <= len(data.encode()) <= CALLBACK_DATA_BYTES


def _label(text: str, index: int) -> str:
    shown = " ".join(text.split())
    return cut(shown, BUTTON_LABEL_LIMIT) if shown else str(index + 1)


def _choices(interaction_id: str, options: Sequence[str]) -> InlineKeyboardMarkup | None:
    """One button a row, each carrying its tap id; None when Telegram could not take them."""
    if not options or len(options) > MAX_BUTTONS:
        return None
    ids = [common.tap_id(interaction_id, i) for i in range(len(options))]
    if not all(_fits(data) for data in ids):
        return None
    return InlineKeyboardMarkup(
        [
            [InlineKeyboardButton(_label(option, i), callback_data=data)]
            for i, (option, data) in enumerate(zip(options, ids, strict=True))
        ]
    )


def is_private(chat_id: int | str) -> bool:
    """A private chat with a person has the person's (positive) id; groups and channels do not."""
    return isinstance(chat_id, int) and chat_id > 0


@dataclass(frozen=True)
class Rendered:
    """A question as one Telegram message: its text and its inline keyboard, if any."""

    text: str
    keyboard: InlineKeyboardMarkup | None = None
    media: list[MediaItem] = field(default_factory=list)


def render(delivery: ChannelDelivery, chat_id: int | str, links: Sequence[MediaItem] = ()) -> Rendered:
    """How ``delivery`` looks in chat ``chat_id``: pure, so every format's shape is testable.
    ``links`` are media items to show as lines (those Telegram could not send as files)."""
    media = [m for m in delivery.media or [] if m.kind in SEND]
    lines = [link_line(m) for m in [*(m for m in delivery.media or [] if m.kind == "link"), *links]]
    suffix = "\n\n" + "\n".join(lines) if lines else ""
    question, control = delivery.question, common.control_of(delivery)
    keyboard: InlineKeyboardMarkup | None = None
    if control == "choice":
        keyboard = _choices(delivery.interaction_id, delivery.options or [])
        if keyboard is None:
            blank = msgspec.structs.replace(delivery, question="")
            suffix += common.numbered_prompt(blank)
    elif control == "yes_no":
        yes, no = yes_no_id(delivery.interaction_id, True), yes_no_id(delivery.interaction_id, False)
        if _fits(yes) and _fits(no):
            yes_button = InlineKeyboardButton("Yes", callback_data=yes)
            keyboard = InlineKeyboardMarkup([[yes_button, InlineKeyboardButton("No", callback_data=no)]])
        else:
            suffix += "\n\n" + common.YES_OR_NO
    elif control == "fields":
        if is_private(chat_id) and delivery.callback_url.startswith("https://"):
            button = InlineKeyboardButton("Open the form", web_app=WebAppInfo(delivery.callback_url))
        else:
            button = InlineKeyboardButton("Open the form", url=delivery.callback_url)
        keyboard = InlineKeyboardMarkup([[button]])
    elif control == "link":
        keyboard = InlineKeyboardMarkup([[InlineKeyboardButton("Open", url=delivery.callback_url)]])
    elif delivery.suggested_replies:
        keyboard = _choices(delivery.interaction_id, delivery.suggested_replies)
    return Rendered(text=fit(question, suffix), keyboard=keyboard, media=media)


def note_id(notification_id: str, index: int) -> str:
    """The callback data of a notification's option ``index`` (docs/channels.md#notifications-on-telegram)."""
    return f"{NOTE}{common.TAP_SEPARATOR}{notification_id}{common.TAP_SEPARATOR}{index}"


def render_notification(notification: ChannelNotification, links: Sequence[MediaItem] = ()) -> Rendered:
    """How a notification looks: its text (cut to the limit, keeping its link lines) and one
    button per option, each naming the notification and the option's index; the options as
    numbered lines instead when their callback data could not fit (a very long notification id)."""
    media = [m for m in notification.media or [] if m.kind in SEND]
    lines = [link_line(m) for m in [*(m for m in notification.media or [] if m.kind == "link"), *links]]
    suffix = "\n\n" + "\n".join(lines) if lines else ""
    options = notification.options or []
    ids = [note_id(notification.notification_id, i) for i in range(len(options))]
    keyboard: InlineKeyboardMarkup | None = None
    if options and len(options) <= MAX_BUTTONS and all(_fits(data) for data in ids):
        keyboard = InlineKeyboardMarkup(
            [
                [InlineKeyboardButton(_label(option, i), callback_data=data)]
                for i, (option, data) in enumerate(zip(options, ids, strict=True))
            ]
        )
    elif options:
        suffix += "\n\n" + "\n".join(f"{n}. {option}" for n, option in enumerate(options, 1))
    return Rendered(text=fit(notification.message, suffix), keyboard=keyboard, media=media)


def tap_answer(outcome: ReplyOutcome) -> str:
    """The line a tapping person sees for what became of the tap."""
    match outcome.status:
        case "answered":
            return ANSWERED
        case "already":
            return ALREADY
        case "rejected":
            return outcome.reason or outcome.notice or "That answer was not accepted."
        case "form_opened":
            return ""
        case _:
            return NOT_OPEN


def chat_id_of(chat: str) -> int | str:
    """A chat as the Bot API takes it: a numeric id, or an ``@channel`` name."""
    try:
        return int(chat)
    except ValueError:
        return chat


def reply_parameters(message: object) -> ReplyParameters | None:
    """A reply to ``message`` (a message id), sent even when that message is gone; None when
    there is no message to reply to."""
    try:
        message_id = int(str(message))
    except ValueError:
        return None
    return ReplyParameters(message_id=message_id, allow_sending_without_reply=True)


units = common.utf16_units
"""Telegram's length of a text: UTF-16 code units."""


def cut(text: str, limit: int) -> str:
    return common.cut(text, limit)


def fit(question: str, suffix: str, limit: int = TEXT_LIMIT) -> str:
    return common.fit(question, suffix, limit)
