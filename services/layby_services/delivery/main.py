"""The delivery service: hands recorded questions to their channel. ``layby serve delivery``.

A question without a channel is delivered by being in the inbox (the projection and the
stream), which needs no push: it is only logged. A channel question is sent by its plugin
(``services/delivery/deliver.py``). Questions are handled concurrently and each is acknowledged
only after its outcome is settled — sent, or removed as ``delivery_failed`` — so a slow medium
holds back no other question, and a crash redelivers it (the person may then get the question
twice; ``interaction_id`` lets a medium de-duplicate).

A third consumer (``delivery-webhooks``) POSTs each resolved question's outcome to the
``notify_url`` its ask named, signed and retried from the log (``services/delivery/webhooks.py``,
docs/webhooks.md). It runs only where signing secrets are configured: without one no ask can
name a ``notify_url`` (docs/webhooks.md#secrets), and every question would pass through
it for nothing.

A second consumer posts conversation replies into the chats their messages came from
(``services/delivery/replies.py``); both run in one task group, so if one fails the service exits.
"""

from __future__ import annotations

import asyncio

from layby_contracts.events import (
    ConversationReplied,
    Event,
    InteractionAnswered,
    InteractionAsked,
    InteractionRemoved,
    InteractionRouted,
)
from layby_domain.clock import Clock
from layby_domain.interaction import of_caller_ask
from layby_domain.verifiers import parse_secrets
from layby_server.channels import close_channels, load_channels
from layby_server.observability.gauges import ConsumerGauges
from layby_server.observability.logs import get_logger
from layby_server.service import open_resources, run_main
from layby_server.settings import Settings, load_settings
from layby_server.store.consumer import Handler, Skipped, Traced, consume
from layby_server.store.eventstore import Stored
from layby_server.write.parked import Entries
from layby_server.write.visits import Visitor
from layby_services.delivery.deliver import Deliverer
from layby_services.delivery.replies import Replier

log = get_logger("layby.delivery")
CONCURRENCY = 256
"""Questions handed to their channels at once; each is acknowledged when its outcome is settled."""
REPLIES_CONCURRENCY = 64
"""Conversation replies posted at once (each acknowledged once posted, or refused for good)."""


async def serve(settings: Settings, stop: asyncio.Event, *, clock: Clock | None = None) -> None:
    channels = load_channels(settings.channels, parse_secrets(settings.webhook_secrets))
    async with open_resources(settings, name="delivery", clock=clock, database=False) as res:
        deliverer = Deliverer(res.store, settings, res.clock, channels, res.metrics)
        lag = ConsumerGauges(
            res.store,
            res.metrics.registry,
            res.clock,
            settings.metrics_interval_seconds,
            ("delivery", "delivery-replies"),
        )

        async def handle(batch: list[Stored]) -> None:
            for stored in batch:  # one message per call: the consumer runs them concurrently
                ev = stored.event
                if of_caller_ask(ev):
                    continue  # asks a run, not a person: never delivered, so never retracted either
                if isinstance(ev, InteractionAnswered | InteractionRemoved):
                    if ev.channels:
                        await deliverer.on_resolved(stored)
                    continue
                if isinstance(ev, InteractionRouted):
                    await deliverer.on_routed(stored)
                    continue
                if not isinstance(ev, InteractionAsked):
                    continue
                if ev.channel is None:
                    log.debug("delivery.inbox", interaction_id=ev.interaction_id, seq=stored.seq)
                else:
                    await deliverer.on_asked(stored)

        replier = Replier(
            res.store, channels, Visitor(res.store, Entries(res.store, res.clock.now), res.clock.now)
        )

        async def replies(batch: list[Stored]) -> None:
            for stored in batch:
                if isinstance(stored.event, ConversationReplied):
                    await replier.on_replied(stored)

        # Webhooks out, and the HTTP client they need, only where signing secrets are configured:
        # without one no ask can name a notify_url (docs/webhooks.md#secrets).
        webhooks = None
        if settings.webhooks_out_secrets:
            from layby_services.delivery.webhooks import Webhooks

            webhooks = Webhooks(res.store, settings, res.clock)
        log.info("delivery.ready", namespace=settings.namespace, channels=sorted(channels))
        try:
            async with asyncio.TaskGroup() as group:
                names = res.store.names
                # (role, handler, subjects, concurrency, which events get a span, which are skipped)
                loops: list[tuple[str, Handler, str, int, Traced | None, Skipped | None]] = [
                    ("delivery", handle, names.ix_all, CONCURRENCY, _sends, _nothing_to_send),
                    ("delivery-replies", replies, names.conversations_all, REPLIES_CONCURRENCY, None, None),
                ]
                if webhooks is not None:
                    loops.append(
                        ("delivery-webhooks", webhooks.handle, names.ix_all, webhooks.CONCURRENCY, None, None)
                    )
                group.create_task(lag.run(stop))
                for role, handler, subjects, concurrency, traced, skip in loops:
                    group.create_task(
                        consume(
                            res.store,
                            role=role,
                            handler=handler,
                            stop=stop,
                            filter_subject=subjects,
                            concurrency=concurrency,
                            traced=traced,
                            skip=skip,
                        )
                    )
        finally:
            if webhooks is not None:
                await webhooks.aclose()
            await close_channels(channels)


def _nothing_to_send(event: Event) -> bool:
    """An inbox question, a caller ask and their resolutions: acknowledged as they arrive, never
    handed to ``handle`` (docs/performance.md#consumers)."""
    return not _sends(event)


def _sends(event: Event) -> bool:
    """The events the delivery service acts on (a channel question asked or resolved): only those
    get a span; an inbox question needs nothing of it."""
    if of_caller_ask(event):
        return False
    if isinstance(event, InteractionAsked):
        return event.channel is not None
    if isinstance(event, InteractionRouted):
        return bool(event.targets)  # an escalation or reminder on a channel
    return isinstance(event, InteractionAnswered | InteractionRemoved) and bool(event.channels)


def main() -> None:
    run_main(serve, load_settings())


if __name__ == "__main__":
    main()
