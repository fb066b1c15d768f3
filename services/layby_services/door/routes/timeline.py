"""``GET /api/runs/{run_id}/timeline``: a run's story from the log (docs/doors/runs.md#the-timeline).

The run's events (its subject), its steps (its step stream subjects, every generation) and the
history of every question it parked on, arranged by ``layby_domain.timeline`` in time order with
the wait before each entry, then paged. Another identity's run is the same 404 as an unknown one.
"""

from __future__ import annotations

import asyncio

from litestar import get

from layby_contracts.errors import NotFound
from layby_contracts.http.timeline import TimelineBlock, TimelineView
from layby_contracts.limits import PAGE_SIZE_MAX
from layby_domain.timeline import asked_ids, timeline_of
from layby_domain.validation import is_interaction_id
from layby_server.write.runops import NOT_FOUND, load_run
from layby_services.door.deps import Door, Who
from layby_services.door.openapi import documented, refusal
from layby_services.door.openapi.components import UNAVAILABLE_503
from layby_services.door.query import DEFAULT_PAGE_SIZE, Page, PageSize
from layby_services.door.routes.inbox import PAGING_400, next_page
from layby_services.door.routes.runs import RUN_NOT_FOUND, RunId

RUN_EVENTS_MAX = 2000
"""How many of a run's own events, of its steps and of each question's events the door reads."""


@get(
    "/api/runs/{run_id:str}/timeline",
    operation_id="getRunTimeline",
    tags=["runs"],
    operation_class=documented(responses=UNAVAILABLE_503),
    summary="A run's timeline",
    description="Every recorded event of the run and of the questions it asked, oldest first, each "
    "with the milliseconds since the one before: started, each step (name, attempts, error), parked, "
    "asked (to whom, on which channels), the routing steps, answered (by whom, where), removed, "
    "resumed, retried, finished, failed, cancelled (docs/doors/runs.md#the-timeline). Paged.",
    responses={400: refusal(PAGING_400, field=True), 404: RUN_NOT_FOUND},
)
async def timeline_door(
    door: Door, who: Who, run_id: RunId, *, page: Page = 1, page_size: PageSize = DEFAULT_PAGE_SIZE
) -> TimelineView:
    if not is_interaction_id(run_id):
        raise NotFound(NOT_FOUND)
    started, _ = await load_run(door.store, run_id, who)
    store = door.store
    names = store.names
    run_events, steps = await asyncio.gather(
        store.events_on(names.run(run_id), limit=RUN_EVENTS_MAX),
        store.events_on(
            names.steps_of_run(run_id),
            limit=RUN_EVENTS_MAX,
            stream=names.steps_stream(names.step_shard(run_id)),
        ),
    )
    ids = asked_ids(s.event for s in run_events)
    histories = await asyncio.gather(*(store.events_on(names.ix(ix), limit=RUN_EVENTS_MAX) for ix in ids))
    questions = {ix: [(s.seq, s.event) for s in events] for ix, events in zip(ids, histories, strict=True)}
    entries = timeline_of((s.event for s in run_events), (s.event for s in steps), questions)
    size = min(page_size, PAGE_SIZE_MAX)
    shown = entries[(page - 1) * size : page * size]
    return TimelineView(
        data=TimelineBlock(
            run_id=run_id,
            flow=started.flow,
            entries=shown,
            total=len(entries),
            page=page,
            page_size=size,
            next_page=next_page(page, size, len(entries)),
        )
    )
