"""The resume service: wakes blocked askers and resumes parked runs. ``layby serve resume``.

It consumes the event log through a durable consumer shared by its replicas.

- A sync question that resolves: a ``Wake`` to ``<ns>.wake[.<waiter>].<id>``. The asker
  subscribed before it recorded the question, so an instant answer is never missed;
  redelivery only repeats a wake, which the asker ignores once it has returned.
- A run that starts, parks, or has one of its parked questions resolve: the park is
  evaluated (services/resume/parks.py) and, when its last question has resolved, exactly one
  continuation is published (docs/aggregates/run.md#resumed-exactly-once).
"""

from __future__ import annotations

import asyncio

import msgspec
import nats.errors

from layby_contracts.commands import Wake
from layby_contracts.errors import Transient
from layby_contracts.events import Event, InteractionAnswered, InteractionAsked, InteractionRemoved
from layby_domain.clock import Clock
from layby_server.observability.gauges import ConsumerGauges
from layby_server.observability.logs import get_logger
from layby_server.service import open_resources, run_main
from layby_server.settings import Settings, load_settings
from layby_server.store.consumer import Flusher, consume_push
from layby_server.store.eventstore import EventStore, Stored
from layby_services.resume.parks import Resumer

log = get_logger("layby.resume")
_enc = msgspec.json.Encoder()
CONCURRENCY = 64
ACK_WAIT_SECONDS = 5.0
"""A resume or a wake takes milliseconds and may repeat (wakes are idempotent for the asker, a
resume is decided by the log): an event handed to a replica that died, or whose acknowledgement
was lost with its consumer's leader, goes to another replica after 5 s, not 30 s."""
WAKE_FLUSH_LINGER_SECONDS = 0.01
"""Wakes confirmed together: a round of the flush waits this long for more (the wakes went out
already; only the acknowledgement of their events waits)."""
WAKE_FLUSH_SECONDS = 2.0
"""How long the server may take to confirm it holds a batch's wakes before the batch is
redelivered (the wakes published again, by this replica or another)."""


async def wake_for(store: EventStore, stored: Stored) -> Wake | None:
    """The wake of a sync question's resolution, or None for events that wake nobody."""
    ev = stored.event
    if isinstance(ev, InteractionAnswered) and ev.run_id is None:
        answer = ev.answer
        if ev.sensitive:
            raw = await store.get_secret(ev.interaction_id, ev.secret_ref)
            answer = None if raw is None else msgspec.json.decode(raw)
        return Wake(
            interaction_id=ev.interaction_id,
            outcome="answered",
            answer=answer,
            answered_by=ev.answered_by,
            answered_at=ev.answered_at.isoformat(),
            params=ev.params,
        )
    if isinstance(ev, InteractionRemoved) and ev.run_id is None:
        return Wake(interaction_id=ev.interaction_id, outcome="removed", reason=ev.reason, detail=ev.detail)
    return None


async def serve(settings: Settings, stop: asyncio.Event, *, clock: Clock | None = None) -> None:
    async with open_resources(settings, name="resume", clock=clock, database=False, secrets=True) as res:
        store = res.store
        resumer = Resumer(store, res.clock)
        flusher = Flusher(res.nc, WAKE_FLUSH_SECONDS, linger=WAKE_FLUSH_LINGER_SECONDS)

        async def handle(batch: list[Stored]) -> None:
            woke = False
            for stored in batch:
                wake = await wake_for(store, stored)
                if wake is not None:
                    waiter = getattr(stored.event, "waiter", None)
                    await res.nc.publish(settings.names.wake(wake.interaction_id, waiter), _enc.encode(wake))
                    woke = True
                else:
                    await resumer.on_event(stored)
            if woke:
                # The batch is acknowledged only once the server has its wakes: a wake written
                # to a server that died or froze is published again by the redelivery
                # (docs/reliability.md#lost-wakes).
                try:
                    await flusher.flushed()
                except (nats.errors.Error, TimeoutError) as exc:
                    raise Transient(f"the wakes did not reach NATS: {type(exc).__name__}") from None

        lag = ConsumerGauges(
            store, res.metrics.registry, res.clock, settings.metrics_interval_seconds, ("resume",)
        )
        log.info("resume.ready", namespace=settings.namespace)
        async with asyncio.TaskGroup() as group:
            group.create_task(lag.run(stop))
            group.create_task(
                consume_push(
                    store,
                    role="resume",
                    handler=handle,
                    stop=stop,
                    concurrency=CONCURRENCY,
                    traced=_acts_on,
                    skip=_asked_of_a_person,
                    ack_wait=ACK_WAIT_SECONDS,
                )
            )


def _asked_of_a_person(event: Event) -> bool:
    """The ask of a person's question: nothing to resume or wake until it resolves, so it is
    acknowledged as it arrives, never handed to ``handle`` (docs/performance.md#consumers)."""
    return isinstance(event, InteractionAsked) and event.to != "caller"


def _acts_on(event: Event) -> bool:
    """Every event but the ask of a person's question: only those get a span."""
    return not _asked_of_a_person(event)


def main() -> None:
    run_main(serve, load_settings())


if __name__ == "__main__":
    main()
