"""The channel plugin contract: what a channel receives and the errors it raises.

A channel plugin (see docs/channels.md) implements ``Channel``; the delivery service hands it a
``ChannelDelivery`` and reads its ``ChannelDeliveryError``. The SDK raises the same
``ChannelDeliveryError`` to the asker when delivery finally fails, so it lives with the wire
contract rather than in the server.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol, runtime_checkable

import msgspec

from layby_contracts.events import MediaItem


class ChannelDeliveryError(RuntimeError):
    """A send failed. ``retryable`` says whether another attempt may succeed; ``retry_after`` is
    the medium's requested pause in seconds. Raised to the asker when delivery finally fails."""

    def __init__(self, message: str, *, retryable: bool = False, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.retry_after = retry_after


class ChannelInputError(ChannelDeliveryError):
    """The medium refuses the shape of this input for good (never retried)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=False)


class ChannelDelivery(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What a channel sends (docs/aggregates/interaction.md#channel-delivery): the question and the callback
    URL to answer through.

    ``options`` exactly when select; ``schema`` exactly when form; ``suggested_replies`` are a
    text question's tappable shortlist (they constrain nothing); ``media`` carry absolute URLs.
    ``timeout_at`` is the deadline (``expiry_at`` for a park). ``interaction_id`` is stable
    across retries and redeliveries, so a medium that de-duplicates can key on it.
    """

    interaction_id: str
    question: str
    answer_format: str
    callback_url: str
    timeout_at: datetime
    recipient: str | None = None
    options: list[str] | None = None
    schema: dict[str, Any] | None = None
    suggested_replies: list[str] | None = None
    media: list[MediaItem] | None = None
    data: dict[str, Any] | None = None
    pages: list[dict[str, Any]] | None = None


@runtime_checkable
class Channel(Protocol):
    async def deliver(self, delivery: ChannelDelivery) -> None: ...
