"""How the ``twilio`` channel shows things: a question as one text message (SMS or WhatsApp),
within Twilio's 1,600 characters, and the lines its follow-ups say. Pure, so every format's
shape is testable (docs/channels.md#twilio)."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import msgspec

from layby_contracts.channels import ChannelDelivery, Retraction
from layby_contracts.events import MediaItem
from layby_server.chat import common
from layby_server.chat.common import link_line

TEXT_LIMIT = 1600
"""Twilio refuses a ``Body`` over 1,600 characters (counted here in UTF-16 units, the stricter
reading); a longer question is cut with an ellipsis, keeping what follows it."""
NOT_OPEN = "This question is no longer open."
SUGGESTED = "Suggested replies (or answer in your own words):"
OPEN = "Open:"
QUOTE_LIMIT = 60
"""How much of the question a retraction's follow-up quotes."""
ATTACHED = frozenset({"image", "document", "video", "audio"})
"""The media kinds sent as attachments (``MediaUrl``) where the sender can attach them."""

# GSM 03.38: the default alphabet (one septet each) and its extension table (two septets each).
_GSM_BASIC = (
    "@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !\"#¤%&'()*+,-./0123456789:;<=>?"
    "¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà"
)
_GSM_EXTENDED = "^{}\\[~]|€\f"
_GSM = frozenset(_GSM_BASIC) | frozenset(_GSM_EXTENDED)
_SPACES = re.compile(r"\s+")


def segments(text: str) -> int:
    """How many SMS segments a text costs: 160 GSM-7 characters in one (153 each once split, an
    extension character counting two), else 70 UCS-2 units in one (67 each once split)."""
    if all(char in _GSM for char in text):
        septets = sum(2 if char in _GSM_EXTENDED else 1 for char in text)
        return 1 if septets <= 160 else math.ceil(septets / 153)
    size = units(text)
    return 1 if size <= 70 else math.ceil(size / 67)


@dataclass(frozen=True)
class Rendered:
    """A question as Twilio messages: ``media`` sent first (one attachment each), then ``text``."""

    text: str
    media: list[MediaItem] = field(default_factory=list)


def numbered(items: Sequence[str]) -> list[str]:
    return [f"{n}. {_SPACES.sub(' ', item).strip()}" for n, item in enumerate(items, 1)]


def render(delivery: ChannelDelivery, *, attach: bool, links: Sequence[MediaItem] = ()) -> Rendered:
    """How ``delivery`` reads as a text message. ``attach``: the sender can attach media (a
    WhatsApp sender, an MMS-capable number), so images, documents, video and audio go as
    attachments before the question; otherwise, and for ``links`` (attachments Twilio refused),
    they are lines under the question."""
    items = delivery.media or []
    media = [m for m in items if attach and m.kind in ATTACHED]
    lines = [link_line(m) for m in items if m not in media] + [link_line(m) for m in links]
    suffix = "\n\n" + "\n".join(lines) if lines else ""
    control = common.control_of(delivery)
    if control == "choice":
        suffix += common.numbered_prompt(msgspec.structs.replace(delivery, question=""))
    elif control == "yes_no":
        suffix += "\n\n" + common.YES_OR_NO
    elif control in ("link", "fields"):
        suffix += f"\n\n{OPEN} {delivery.callback_url}"
    elif delivery.suggested_replies:
        suffix += "\n\n" + "\n".join([SUGGESTED, *numbered(delivery.suggested_replies)])
    return Rendered(text=fit(delivery.question, suffix), media=media)


def retraction_text(retraction: Retraction) -> str:
    """The follow-up that stands for an edit (a delivered text message cannot be changed): the
    question, quoted short, and how it ended."""
    quoted = cut(_SPACES.sub(" ", retraction.question).strip(), QUOTE_LIMIT)
    return cut(f"“{quoted}”: {common.retraction_line(retraction)}")


units = common.utf16_units
"""Twilio's length of a text, counted in UTF-16 units (the stricter reading)."""


def cut(text: str, limit: int = TEXT_LIMIT) -> str:
    return common.cut(text, limit)


def fit(question: str, suffix: str, limit: int = TEXT_LIMIT) -> str:
    return common.fit(question, suffix, limit)
