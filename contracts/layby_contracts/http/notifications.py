"""The notification doors' bodies (docs/doors/notifications.md): what ``POST /api/notifications``
takes and answers, and the feed ``GET /api/notifications`` lists."""

from __future__ import annotations

from typing import Any

from msgspec import Struct

from layby_contracts.channels import ChannelTemplate
from layby_contracts.events import MediaItem


class NotifyRequest(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """A one-way notification (docs/notifications.md): ``message``, and optionally the
    ``channel`` that sends it, its ``recipient`` there, the ``audience`` whose feed records it,
    and what the channel renders beside the text (``media``, ``template``, ``options``, or an
    ask-less form: ``schema`` with ``data`` and ``pages``). ``sender_identity`` is always refused:
    the sender is the token's identity."""

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


class NotifyResult(Struct, frozen=True, kw_only=True):
    """What became of it: ``notification sent via '<channel>'`` or ``notification recorded to the
    internal sink``."""

    data: str


class Notification(Struct, frozen=True, kw_only=True):
    """One entry of the feed, newest first: minted by the server when it was recorded."""

    id: str
    message: str
    recipient: str | None
    audience: str | None
    created_at: str


class NotificationsData(Struct, frozen=True, kw_only=True):
    notifications: list[Notification]


class Notifications(Struct, frozen=True, kw_only=True):
    """The caller's feed: a restricted identity's own, an unrestricted identity's the shared one."""

    data: NotificationsData
