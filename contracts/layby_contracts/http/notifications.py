"""The notification doors' bodies (docs/doors/notifications.md): what ``POST /api/notifications``
takes and answers, and the feed ``GET /api/notifications`` lists."""

from __future__ import annotations

from msgspec import Struct

from layby_contracts.notification import NotificationFields


class NotifyRequest(NotificationFields, frozen=True, kw_only=True):
    """A one-way notification (docs/notifications.md): ``message``, and optionally the
    ``channel`` that sends it, its ``recipient`` there, the ``audience`` whose feed records it,
    and what the channel renders beside the text (``media``, ``template``, ``options``, or an
    ask-less form: ``schema`` with ``data`` and ``pages``). ``sender_identity`` is always refused:
    the sender is the token's identity."""


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
