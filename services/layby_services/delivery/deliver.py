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
import functools
from collections.abc import Mapping
from typing import Any

import msgspec

from layby.ids import new_ticket
from layby_contracts.channels import Channel, ChannelDelivery, ChannelDeliveryError, Posted, Retraction
from layby_contracts.events import (
    EXPIRY_ANSWERER,
    ChannelTarget,
    InteractionAnswered,
    InteractionAsked,
    InteractionRemoved,
    InteractionRouted,
)
from layby_domain.clock import Clock
from layby_domain.interaction import Interaction, decide_remove, evolve, targets_of
from layby_domain.tickets import callback_url, ticket_expires_at
from layby_server.channels import delivery_of
from layby_server.chat import correlation
from layby_server.observability.logs import get_logger
from layby_server.observability.metrics import ServiceMetrics
from layby_server.settings import Settings
from layby_server.store.eventstore import EventStore, Stored
from layby_server.write.resolve import resolve

log = get_logger("layby.delivery")


def _redacted(error: ChannelDeliveryError, url: str) -> ChannelDeliveryError:
    """A plugin's message may quote the URL it was given: the ticket never reaches a log line,
    an event or the asker."""
    ticket = url.rsplit("/", 1)[-1]
    text = str(error).replace(url, "<callback_url>").replace(ticket, "<ticket>")
    if text == str(error):
        return error
    return ChannelDeliveryError(text, retryable=error.retryable, retry_after=error.retry_after)


def retraction_of(resolution: InteractionAnswered | InteractionRemoved, question: str) -> Retraction:
    """How a resolved question's chat messages are told it is over."""
    retraction = functools.partial(Retraction, interaction_id=resolution.interaction_id, question=question)
    if isinstance(resolution, InteractionRemoved):
        if resolution.reason == "timeout":
            return retraction(outcome="expired")
        return retraction(outcome="removed", reason=resolution.reason)
    if resolution.answered_by == EXPIRY_ANSWERER:
        return retraction(outcome="expired")
    return retraction(outcome="answered", by=resolution.answered_by, via=resolution.via)


RESOLVED = ChannelDeliveryError("resolved before it was delivered")
"""Returned by the attempts when the question resolved during a retry's pause (not a failure)."""


class Deliverer:
    def __init__(
        self,
        store: EventStore,
        settings: Settings,
        clock: Clock,
        channels: Mapping[str, Channel],
        metrics: ServiceMetrics | None = None,
    ) -> None:
        self._metrics = metrics or ServiceMetrics()
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
        targets = targets_of(ev)
        why = self._unsendable(targets)
        if why is not None:
            await self._fail(ev, stored.seq, ChannelDeliveryError(why), attempts=0)
            return
        ticket, digest = new_ticket()
        expires = ticket_expires_at(ev.created_at, ev.timeout_at, ev.mode)
        await self._store.put_ticket(digest, ev.interaction_id, expires, new=True)
        url = callback_url(self._settings.public_base_url or "", ticket)
        # Every channel at once: the first reply on any of them wins (docs/channels.md#several-channels).
        results = await asyncio.gather(*(self._send(ev, stored.seq, target, url) for target in targets))
        if any(error is RESOLVED for _, error in results):
            return
        failed = [
            (target, attempts, error)
            for target, (attempts, error) in zip(targets, results, strict=True)
            if error
        ]
        if len(failed) < len(targets):
            _log_failed_channels(ev, failed)
            return  # delivered on at least one channel: the question stays open there
        await self._fail(ev, stored.seq, _all_failed(failed), attempts=sum(a for _, a, _ in failed))

    async def on_routed(self, stored: Stored) -> None:
        """A routed question's escalation or reminder names channels to deliver it on now
        (docs/routing.md#escalation): each gets the question again, with a fresh ticket, while it
        is still open. A reminder says so in its text. A channel that fails is logged; the
        question stays open on the others (and in the inbox)."""
        ev = stored.event
        assert isinstance(ev, InteractionRouted)
        if not ev.targets:
            return
        first = await self._store.first(self._store.names.ix(ev.interaction_id))
        if first is None or not isinstance(first.event, InteractionAsked):
            return
        asked = first.event
        if not await self._pending(asked, first.seq) or asked.timeout_at <= self._clock.now():
            return
        why = self._unsendable(ev.targets)
        if why is not None:
            log.error("delivery.routed_unsendable", interaction_id=ev.interaction_id, step=ev.step, error=why)
            return
        if ev.step == "reminded":
            asked = msgspec.structs.replace(asked, question=f"Reminder: {asked.question}")
        ticket, digest = new_ticket()
        expires = ticket_expires_at(asked.created_at, asked.timeout_at, asked.mode)
        await self._store.put_ticket(digest, asked.interaction_id, expires, new=True)
        url = callback_url(self._settings.public_base_url or "", ticket)
        results = await asyncio.gather(*(self._send(asked, first.seq, target, url) for target in ev.targets))
        failed = [(t, a, e) for t, (a, e) in zip(ev.targets, results, strict=True) if e and e is not RESOLVED]
        _log_failed_channels(asked, failed)
        log.info("delivery.routed", interaction_id=ev.interaction_id, step=ev.step, channels=len(ev.targets))

    def _unsendable(self, targets: list[ChannelTarget]) -> str | None:
        """Why this service cannot send to ``targets`` at all (None: it can try)."""
        missing = next((t.channel for t in targets if t.channel not in self._channels), None)
        if missing is not None:
            return f"channel {missing!r} is not configured on this delivery service (LAYBY_CHANNELS)"
        if not self._settings.public_base_url:
            return "INTERACTIONS_PUBLIC_BASE_URL is not set on the delivery service"
        return None

    async def _send(
        self, ev: InteractionAsked, asked_seq: int, target: ChannelTarget, url: str
    ) -> tuple[int, ChannelDeliveryError | None]:
        """Deliver to one channel; a chat channel's posted message is remembered, so replies
        to it are correlated and it can be retracted."""
        plugin = self._channels[target.channel]
        delivery = delivery_of(
            ev,
            callback_url=url,
            public_base_url=self._settings.public_base_url or "",
            recipient=target.recipient,
        )
        attempts, error, posted = await self._attempts(plugin, delivery, ev, asked_seq, target.channel)
        if error is None:
            log.info(
                "delivery.sent", interaction_id=ev.interaction_id, channel=target.channel, attempts=attempts
            )
            if posted is not None:
                await correlation.remember(
                    self._store, target.channel, posted, ev.interaction_id, ev.question
                )
                if not await self._pending(ev, asked_seq):
                    # Resolved while it was being sent: the resolution's retraction may have
                    # found nothing to retract yet, so retract it here. Both may find the message
                    # now; the claim in ``retract`` lets only one of them send.
                    await self.retract(ev.interaction_id, [target.channel])
        return attempts, error

    async def on_resolved(self, stored: Stored) -> None:
        """A delivered question was answered or removed: retract its chat messages
        (docs/channels.md#retraction)."""
        ev = stored.event
        assert isinstance(ev, InteractionAnswered | InteractionRemoved)
        if ev.channels:
            await self.retract(ev.interaction_id, ev.channels, ev)

    async def retract(
        self,
        interaction_id: str,
        channels: list[str],
        resolution: InteractionAnswered | InteractionRemoved | None = None,
    ) -> None:
        """Tell each channel's copy of a resolved question how it ended, once
        (docs/channels.md#retraction). On SMS and WhatsApp a retraction is a new message, so
        whoever meets the posted message (the resolution's handler, the sender that found the
        question resolved, a redelivery, another replica) first claims the retraction on the
        chat stream; only the claim's winner sends it. The claim is never given back: a process
        that dies between the claim and the send leaves that copy unretracted (at most once)."""
        if resolution is None:
            last = await self._store.last(self._store.names.ix(interaction_id), leader=True)
            if last is None or not isinstance(last.event, InteractionAnswered | InteractionRemoved):
                return
            resolution = last.event
        sent: list[tuple[str, Any, Posted]] = []
        question: str | None = None
        for name in channels:
            retract = getattr(self._channels.get(name), "retract", None)
            found = (
                None if retract is None else await correlation.posted_of(self._store, interaction_id, name)
            )
            if found is None:
                continue  # never posted there (a failed delivery, a bridge without messages)
            sent.append((name, retract, found[0]))
            question = question or found[1]
        if not sent:
            return
        if question is None:  # a record from before the question was kept with it
            first = await self._store.first(self._store.names.ix(interaction_id))
            asked = first.event if first is not None else None
            question = asked.question if isinstance(asked, InteractionAsked) else ""
        retraction = retraction_of(resolution, question)
        for name, retract, posted in sent:
            if not await self._store.claim_once(self._store.names.chat_retracted(interaction_id, name)):
                log.info("delivery.retracted_already", interaction_id=interaction_id, channel=name)
                continue
            for attempt in (1, 2):
                try:
                    await retract(posted, retraction)
                    log.info("delivery.retracted", interaction_id=interaction_id, channel=name)
                    break
                except ChannelDeliveryError as exc:
                    log.warning(
                        "delivery.retract_failed", interaction_id=interaction_id, channel=name, error=str(exc)
                    )
                    if not exc.retryable or attempt == 2:
                        break
                    await asyncio.sleep(min(exc.retry_after or self._settings.delivery_backoff_seconds, 30.0))
                except Exception as exc:  # noqa: BLE001 - an edit is best effort; the resolution stands
                    log.warning(
                        "delivery.retract_failed",
                        interaction_id=interaction_id,
                        channel=name,
                        error=repr(exc),
                    )
                    break

    async def _pending(self, ev: InteractionAsked, asked_seq: int) -> bool:
        """The question is still waiting for its answer (read from the stream's leader: a lagging
        replica must never make a recorded question look resolved)."""
        last = await self._store.last(self._store.names.ix(ev.interaction_id), leader=True)
        if last is None:
            return False
        # A routed question's steps (votes, escalations...) follow its asked event: still open.
        return last.seq == asked_seq or isinstance(last.event, InteractionRouted)

    async def _attempts(
        self, plugin: Channel, delivery: ChannelDelivery, ev: InteractionAsked, asked_seq: int, channel: str
    ) -> tuple[int, ChannelDeliveryError | None, Posted | None]:
        limit = self._settings.delivery_max_attempts
        attempt = 0
        while True:
            attempt += 1
            remaining = (ev.timeout_at - self._clock.now()).total_seconds()
            if remaining <= 0:
                return (
                    attempt - 1,
                    ChannelDeliveryError("the question's deadline passed before it was delivered"),
                    None,
                )
            try:
                async with asyncio.timeout(remaining):
                    posted = await plugin.deliver(delivery)
                self._metrics.delivery_attempt(channel, "sent")
                return attempt, None, posted if isinstance(posted, Posted) else None
            except ChannelDeliveryError as exc:
                error = exc
            except TimeoutError:
                error = ChannelDeliveryError(
                    f"channel {channel!r} did not finish within the remaining {remaining:.1f}s",
                    retryable=True,
                )
            except Exception as exc:  # noqa: BLE001 - an untyped fault is final (docs/aggregates/interaction.md#delivery-attempts), never a crash
                error = ChannelDeliveryError(f"channel {channel!r} failed: {type(exc).__name__}: {exc}")
            error = _redacted(error, delivery.callback_url)
            result = "retryable_error" if error.retryable else "permanent_error"
            self._metrics.delivery_attempt(channel, result)
            log.warning(
                "delivery.attempt_failed",
                interaction_id=ev.interaction_id,
                channel=channel,
                attempt=attempt,
                retryable=error.retryable,
                error=str(error),
            )
            if not error.retryable or attempt >= limit:
                return attempt, error, None
            delay = max(
                error.retry_after or 0.0, self._settings.delivery_backoff_seconds * 2 ** (attempt - 1)
            )
            if delay >= (ev.timeout_at - self._clock.now()).total_seconds():
                return attempt, error, None
            await asyncio.sleep(delay)
            if not await self._pending(ev, asked_seq):
                # Answered, cancelled or pruned meanwhile: no more sends, and nothing to fail.
                log.info("delivery.resolved_before_retry", interaction_id=ev.interaction_id, attempts=attempt)
                return attempt, RESOLVED, None

    async def _fail(
        self, ev: InteractionAsked, asked_seq: int, error: ChannelDeliveryError, *, attempts: int
    ) -> None:
        resolved = await resolve(
            self._store,
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


_Failed = tuple[ChannelTarget, int, ChannelDeliveryError]


def _log_failed_channels(ev: InteractionAsked, failed: list[_Failed]) -> None:
    for target, attempts, error in failed:
        log.error(
            "delivery.channel_failed",
            interaction_id=ev.interaction_id,
            channel=target.channel,
            attempts=attempts,
            error=str(error),
        )


def _all_failed(failed: list[_Failed]) -> ChannelDeliveryError:
    """The one error of a question no channel took: each channel's, when there were several."""
    if len(failed) > 1:
        return ChannelDeliveryError("; ".join(f"{t.channel}: {e}" for t, _, e in failed), retryable=False)
    return failed[0][2]
