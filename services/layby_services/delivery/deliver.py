"""Hand a recorded channel question to its channel (docs/aggregates/interaction.md#channel-delivery).

For each ``interaction.asked`` with a channel, while the question is still pending and before its
deadline: mint a ticket (stored only as its hash, with the docs/aggregates/interaction.md#ticket-lifetime
TTL), build the delivery with
the callback URL, and make up to ``INTERACTIONS_DELIVERY_MAX_ATTEMPTS`` attempts. Only failures
the channel typed as retryable are retried, after ``max(retry_after, backoff * 2^(n-1))`` and only
when that pause fits in the remaining budget; a hung send is cut at the remaining budget and
counts as retryable; anything else fails on the first attempt. When delivery finally fails, the
question is removed (``delivery_failed``) by an append that expects the Asked event, so a reply
that won the race stands and the asker gets it; otherwise the asker's ask raises
``ChannelDeliveryError`` and the minted ticket answers the uniform 404.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import msgspec

from layby_contracts.channels import Channel, ChannelDelivery, ChannelDeliveryError
from layby_contracts.events import InteractionAsked
from layby_domain.clock import Clock
from layby_domain.formats import FORMATS
from layby_domain.interaction import Interaction, decide_remove, evolve
from layby_domain.tickets import callback_url, new_ticket, ticket_expires_at
from layby_server.eventstore import EventStore, Stored
from layby_server.logs import get_logger
from layby_server.settings import Settings

log = get_logger("layby.delivery")


def _redacted(error: ChannelDeliveryError, url: str) -> ChannelDeliveryError:
    """A plugin's message may quote the URL it was given: the ticket never reaches a log line,
    an event or the asker."""
    ticket = url.rsplit("/", 1)[-1]
    text = str(error).replace(url, "<callback_url>").replace(ticket, "<ticket>")
    if text == str(error):
        return error
    return ChannelDeliveryError(text, retryable=error.retryable, retry_after=error.retry_after)


RESOLVED = ChannelDeliveryError("resolved before it was delivered")
"""Returned by the attempts when the question resolved during a retry's pause (not a failure)."""


class Deliverer:
    def __init__(
        self, store: EventStore, settings: Settings, clock: Clock, channels: Mapping[str, Channel]
    ) -> None:
        self._store = store
        self._settings = settings
        self._clock = clock
        self._channels = channels

    async def on_asked(self, stored: Stored) -> None:
        ev = stored.event
        assert isinstance(ev, InteractionAsked)
        assert ev.channel is not None
        if not await self._pending(ev, stored.seq):
            return  # answered or removed already (a redelivery after the fact): nothing to send
        if ev.timeout_at <= self._clock.now():
            log.info("delivery.skipped_late", interaction_id=ev.interaction_id, channel=ev.channel)
            return  # already timed out: nothing is sent; the timeout path resolves it
        plugin = self._channels.get(ev.channel)
        if plugin is None or not self._settings.public_base_url:
            why = (
                f"channel {ev.channel!r} is not configured on this delivery service (LAYBY_CHANNELS)"
                if plugin is None
                else "INTERACTIONS_PUBLIC_BASE_URL is not set on the delivery service"
            )
            await self._fail(ev, stored.seq, ChannelDeliveryError(why), attempts=0)
            return
        ticket, digest = new_ticket()
        expires = ticket_expires_at(ev.created_at, ev.timeout_at, ev.mode)
        await self._store.put_ticket(digest, ev.interaction_id, expires, new=True)
        url = callback_url(self._settings.public_base_url, ticket)
        delivery = self._delivery(ev, url)
        attempts, error = await self._attempts(plugin, delivery, ev, stored.seq)
        if error is RESOLVED:
            return
        if error is None:
            log.info("delivery.sent", interaction_id=ev.interaction_id, channel=ev.channel, attempts=attempts)
            return
        await self._fail(ev, stored.seq, error, attempts=attempts)

    def _delivery(self, ev: InteractionAsked, url: str) -> ChannelDelivery:
        payload = ev.format_payload or {}
        base = (self._settings.public_base_url or "").rstrip("/")
        media = [
            msgspec.structs.replace(m, url=base + m.url) if m.url.startswith("/") else m
            for m in ev.media or []
        ]
        fmt = FORMATS[ev.answer_format]
        return ChannelDelivery(
            interaction_id=ev.interaction_id,
            question=ev.question,
            answer_format=ev.answer_format,
            callback_url=url,
            timeout_at=ev.timeout_at,
            recipient=ev.recipient,
            media=media or None,
            data=payload.get("data"),
            pages=payload.get("pages"),
            **fmt.delivery(fmt.typed(ev.format_payload)),
        )

    async def _pending(self, ev: InteractionAsked, asked_seq: int) -> bool:
        """The question is still waiting for its answer (read from the stream's leader: a lagging
        replica must never make a recorded question look resolved)."""
        last = await self._store.last(self._store.names.ix(ev.interaction_id), leader=True)
        return last is not None and last.seq == asked_seq

    async def _attempts(
        self, plugin: Channel, delivery: ChannelDelivery, ev: InteractionAsked, asked_seq: int
    ) -> tuple[int, ChannelDeliveryError | None]:
        limit = self._settings.delivery_max_attempts
        attempt = 0
        while True:
            attempt += 1
            remaining = (ev.timeout_at - self._clock.now()).total_seconds()
            if remaining <= 0:
                return attempt - 1, ChannelDeliveryError(
                    "the question's deadline passed before it was delivered"
                )
            try:
                async with asyncio.timeout(remaining):
                    await plugin.deliver(delivery)
                return attempt, None
            except ChannelDeliveryError as exc:
                error = exc
            except TimeoutError:
                error = ChannelDeliveryError(
                    f"channel {ev.channel!r} did not finish within the remaining {remaining:.1f}s",
                    retryable=True,
                )
            except Exception as exc:  # noqa: BLE001 - an untyped fault is final (docs/aggregates/interaction.md#delivery-attempts), never a crash
                error = ChannelDeliveryError(f"channel {ev.channel!r} failed: {type(exc).__name__}: {exc}")
            error = _redacted(error, delivery.callback_url)
            log.warning(
                "delivery.attempt_failed",
                interaction_id=ev.interaction_id,
                channel=ev.channel,
                attempt=attempt,
                retryable=error.retryable,
                error=str(error),
            )
            if not error.retryable or attempt >= limit:
                return attempt, error
            delay = max(
                error.retry_after or 0.0, self._settings.delivery_backoff_seconds * 2 ** (attempt - 1)
            )
            if delay >= (ev.timeout_at - self._clock.now()).total_seconds():
                return attempt, error
            await asyncio.sleep(delay)
            if not await self._pending(ev, asked_seq):
                # Answered, cancelled or pruned meanwhile: no more sends, and nothing to fail.
                log.info("delivery.resolved_before_retry", interaction_id=ev.interaction_id, attempts=attempt)
                return attempt, RESOLVED

    async def _fail(
        self, ev: InteractionAsked, asked_seq: int, error: ChannelDeliveryError, *, attempts: int
    ) -> None:
        resolved = await self._store.resolve(
            ev.interaction_id,
            lambda s: decide_remove(
                s, reason="delivery_failed", now=self._clock.now(), detail=str(error)[:1000]
            ),
            seed=evolve(Interaction(), ev, asked_seq),
            retry=False,
        )
        if resolved.appended is None:
            log.info("delivery.failed_after_answer", interaction_id=ev.interaction_id, channel=ev.channel)
            return  # a fast reply won: the recorded answer stands
        log.error(
            "delivery.failed",
            interaction_id=ev.interaction_id,
            channel=ev.channel,
            attempts=attempts,
            error=str(error),
        )
