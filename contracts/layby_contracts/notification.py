"""The notification's fields, declared once (docs/notifications.md): the ``NotifyRequest`` body
of ``POST /api/notifications`` (and the MCP ``notify_user`` tool), the ``Notify`` command, the
``ChannelNotification`` a channel plugin receives and the domain's checked ``NotifySpec`` all
derive from ``NotificationFields``, so a new notification argument is one field here.

``sender_identity`` is refused on the way in (the sender is always the token's identity) and set
by the ask service on the way to a plugin. JSON key order follows the field order (base first)
and means nothing to a reader.
"""

from __future__ import annotations

from typing import Any

import msgspec

from layby_contracts.events import MediaItem


class ChannelTemplate(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True
):
    """A template the provider has approved (a WhatsApp message template): its ``name`` and
    ``language`` (both non-blank) and the values of its body's ``{{n}}`` placeholders, in order
    (docs/notifications.md#templates)."""

    name: str
    language: str
    parameters: list[str] = msgspec.field(default_factory=list)


class NotificationFields(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True
):
    """A one-way notification: ``message``, the ``channel`` that sends it and the ``recipient``
    there, the ``audience`` whose feed records it, what the channel renders beside the text
    (``media``, ``template``, ``options``, or an ask-less form: ``schema`` with ``data`` and
    ``pages``), and ``sender_identity``."""

    message: str
    channel: str | None = None
    recipient: str | None = None
    audience: str | None = None
    media: list[MediaItem] | None = None
    template: ChannelTemplate | None = None
    options: list[str] | None = None
    schema: dict[str, Any] | None = None
    data: dict[str, Any] | None = None
    pages: list[dict[str, Any]] | None = None
    sender_identity: str | None = None


def notification_fields(body: NotificationFields) -> dict[str, Any]:
    """The base's fields of a body carrying a notification, by name: what another body of it
    takes as it is (``Notify(**notification_fields(spec), ...)``)."""
    return {name: getattr(body, name) for name in NotificationFields.__struct_fields__}
