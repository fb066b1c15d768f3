"""How the ``telegram`` channel reads a webhook's Update: a tap's callback data (which question,
which option or yes/no; or which notification and option) and a typed message, into an
``InboundReply`` (docs/channels.md#replies, docs/channels.md#notifications-on-telegram)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec
from telegram import Update

from layby_contracts.channels import InboundMalformed, InboundReply
from layby_server.chat import common
from layby_server.chat.telegram.rendering import CALLBACK_DATA_BYTES, NO, NOTE, YES


@dataclass(frozen=True)
class Tap:
    """What a button's callback data says: ``index`` of an option, or ``value`` of a yes/no."""

    interaction_id: str
    index: int | None = None
    value: bool | None = None
    notification_id: str | None = None


def parse_callback(data: str | None) -> Tap | None:
    """The tap a callback's data encodes, else None (forged, stale or from another bot)."""
    if not data or len(data.encode()) > CALLBACK_DATA_BYTES:
        return None
    if data.startswith(NOTE + common.TAP_SEPARATOR):
        note = common.parse_tap_id(data[len(NOTE) + 1 :])
        return Tap(interaction_id="", notification_id=note[0], index=note[1]) if note else None
    parsed = common.parse_tap_id(data)
    if parsed is not None:
        return Tap(interaction_id=parsed[0], index=parsed[1])
    interaction_id, sep, flag = data.rpartition(common.TAP_SEPARATOR)
    if sep and interaction_id and flag in (YES, NO):
        return Tap(interaction_id=interaction_id, value=flag == YES)
    return None


def read_update(body: bytes) -> Update:
    """The Update a webhook's body holds; ``InboundMalformed`` for anything else."""
    try:
        data = msgspec.json.decode(body)
    except msgspec.DecodeError as exc:
        raise InboundMalformed(f"the body is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise InboundMalformed("the body is not a Telegram Update object")
    try:
        return Update.de_json(data, None)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise InboundMalformed(f"the body is not a Telegram Update: {exc!r}") from None


def reply_of(update: Update) -> InboundReply | None:
    """The reply an Update carries: a tap, or a typed message; None for what Layby ignores."""
    event_id = str(update.update_id)
    query = update.callback_query
    if query is not None:
        sender = query.from_user
        tap = parse_callback(query.data)
        chat = str(query.message.chat.id) if query.message is not None else str(sender.id)
        message = str(query.message.message_id) if query.message is not None else None
        common_fields: dict[str, Any] = {
            "sender": str(sender.id),
            "sender_name": sender.username or sender.first_name,
            "chat": chat,
            "message": message,
            "event_id": event_id,
            "context": {"callback_query_id": query.id},
        }
        if tap is not None and tap.notification_id is not None:
            # A notification's option: the person's message is the option as its button shows it
            # (docs/channels.md#notifications-on-telegram).
            label = _label_of(query.message, query.data)
            return InboundReply(
                kind="tap",
                notification_id=tap.notification_id,
                index=tap.index,
                value=label if label is not None else {"option": tap.index},
                **common_fields,
            )
        if tap is not None and tap.value is not None:
            return InboundReply(
                kind="yes_no", interaction_id=tap.interaction_id, value=tap.value, **common_fields
            )
        # A forged or stale tap carries no question: the door finds nothing to answer, and
        # the follow-up still acknowledges it (Telegram spins until a tap is answered).
        return InboundReply(
            kind="tap",
            interaction_id=tap.interaction_id if tap else None,
            index=tap.index if tap else None,
            **common_fields,
        )
    msg = update.message
    if msg is None or msg.text is None or msg.from_user is None or msg.from_user.is_bot:
        return None  # edits, channel posts, stickers, the bot's own: acknowledged, ignored
    replied = msg.reply_to_message
    return InboundReply(
        kind="typed",
        sender=str(msg.from_user.id),
        sender_name=msg.from_user.username or msg.from_user.first_name,
        chat=str(msg.chat.id),
        message=str(replied.message_id) if replied is not None else None,
        value=msg.text,
        event_id=event_id,
        context={"message_id": msg.message_id},
        direct=msg.chat.type == "private",
    )


def _label_of(message: Any, data: str | None) -> str | None:
    """The text of the button carrying ``data`` on the tapped message; None when Telegram no
    longer shows the message to the bot (older than 48 hours) or the button is gone."""
    markup = getattr(message, "reply_markup", None)
    for row in getattr(markup, "inline_keyboard", None) or ():
        for button in row:
            if button.callback_data == data and isinstance(button.text, str):
                return str(button.text)
    return None
