"""The delivery service: hands recorded questions to their channel. ``layby serve delivery``.

Channels (Slack, Telegram, WhatsApp/SMS) arrive in a later release. Today every question is
delivered to the inbox, which needs no push: this service consumes the asks through its
durable consumer, records one canonical log line per question, and acknowledges it, so the
consumer position is real and channel delivery can start from it.
"""

from __future__ import annotations

import asyncio

from contracts.events import InteractionAsked
from layby.clock import Clock
from layby.consumer import consume
from layby.eventstore import Stored
from layby.logs import get_logger
from layby.service import open_resources, run_main
from layby.settings import Settings, load_settings

log = get_logger("layby.delivery")


async def serve(settings: Settings, stop: asyncio.Event, *, clock: Clock | None = None) -> None:
    async with open_resources(settings, name="delivery", clock=clock, database=False) as res:

        async def handle(batch: list[Stored]) -> None:
            for stored in batch:
                ev = stored.event
                if isinstance(ev, InteractionAsked):
                    log.debug(
                        "delivery.inbox",
                        interaction_id=ev.interaction_id,
                        channel=ev.channel or "inbox",
                        seq=stored.seq,
                    )

        log.info("delivery.ready", namespace=settings.namespace)
        await consume(
            res.store,
            role="delivery",
            handler=handle,
            stop=stop,
            linger=0.02,
            filter_subject=res.store.names.ix_all,
        )


def main() -> None:
    run_main(serve, load_settings())


if __name__ == "__main__":
    main()
